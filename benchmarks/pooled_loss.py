"""F and ||grad F||^2 of a neural federation: the pooled hook against the base-class route, in one process.

    OPENBLAS_NUM_THREADS=1 python benchmarks/pooled_loss.py [--trials 3]

``NeuralFederation.loss_and_grad_norm2`` (one chunked forward/backward pass over the pooled real samples)
against ``Federation.loss_and_grad_norm2`` (``loss`` then ``grad``) on the CNN of the neural experiments
(28x28 inputs, channels 16/32, kernel 5, 128 hidden units) with 10 clients of 200-599 random images,
one point; trials interleaved; prints seconds per trial, the ratio of medians, the relative agreement
of both values and the load average before and after.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

import numpy as np

from fltheory.nn import NeuralFederation, SoftmaxCrossEntropy, cnn
from fltheory.problems.base import Federation


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trials", type=int, default=3)
    args = ap.parse_args()
    rng = np.random.default_rng(0)
    sizes = rng.integers(200, 600, 10)
    model = cnn((1, 28, 28), 10, channels=(16, 32), kernel=5, fc=128)
    inputs = [rng.standard_normal((n, 1, 28, 28)) for n in sizes]
    targets = [rng.integers(0, 10, n) for n in sizes]
    fed = NeuralFederation(model, SoftmaxCrossEntropy(), inputs, targets)
    X = fed.init_params(rng)[None, :]
    print(f"load average before: {os.getloadavg()}; samples {int(sizes.sum())}, d = {fed.dim}")
    pooled, base = [], []
    for _ in range(args.trials):
        t0 = time.perf_counter()
        a = fed.loss_and_grad_norm2(X)
        pooled.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        b = Federation.loss_and_grad_norm2(fed, X)
        base.append(time.perf_counter() - t0)
    print(f"pooled s {[round(p, 2) for p in pooled]}; base-class s {[round(p, 2) for p in base]}; "
          f"ratio of medians {statistics.median(base) / statistics.median(pooled):.2f}x; relative agreement "
          f"F {abs(a[0][0] - b[0][0]) / abs(b[0][0]):.1e}, ||grad F||^2 {abs(a[1][0] - b[1][0]) / abs(b[1][0]):.1e}")
    print(f"load average after: {os.getloadavg()}")


if __name__ == "__main__":
    main()
