"""The threaded local loop's block policy against other block sizes, in one run.

Usage::

    python benchmarks/block_sizes.py                        # the sizes below, 15 trials
    python benchmarks/block_sizes.py --sizes 400,50 10000,20 --trials 21
    python benchmarks/block_sizes.py --quick                # small sizes (smoke run)

For each quadratic federation (N clients, dimension d; H_i = B_i B_i^T / d + I/2,
built directly) and each algorithm (FedAvg, FedOpt-AdaGrad; tau = 10 local
steps, full participation, exact gradients, the library's two local-step
threads), the seconds per round of ``algorithm.round`` under several block
policies of ``fltheory.algorithms.local.blocking``, set by its module constants
for the candidate's trials only:

* ``policy``: the library's own (blocks of at most ``_BLOCK_BYTES`` = 16 MB of
  client data; a batch of at least ``_SPLIT_BYTES`` = 2.5 MB that fits one block
  is still cut into as many blocks as threads);
* ``8 MB``: blocks of at most 8 MB and no split (the policy before session 11);
* ``one block``: the whole batch as one block in the calling thread;
* ``2 blocks``: the batch cut into two equal blocks on the two threads.

Every candidate computes the same bits (rows are independent; checked after the
trials: the final models must be equal).  Trials are interleaved (trial 1 of every
candidate, then trial 2, ...; ``_timing.interleaved_samples``), the candidates in a
new seeded random order every trial: a two-thread candidate that runs right after a one-thread one was measured
up to 1.2-1.3x slower in wall time (same CPU time; the idle core wakes late), so a
fixed order would charge that to whichever candidate follows the one-thread one.
Each trial is a run of consecutive rounds of about 50 ms; the figures are medians
of wall and CPU seconds (all threads of this process) over the policy's, with the
load average before and after.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _timing import interleaved_samples
from blocked import quadratic_problem

from fltheory import optim
from fltheory._threads import single_threaded_blas
from fltheory.algorithms import FedAvg, FedOpt
from fltheory.algorithms.local import blocking
from fltheory.problems.quadratic import QuadraticFederation

SIZES = [(100, 50), (120, 50), (200, 50), (400, 50), (800, 50), (1000, 20), (3000, 20), (10000, 20), (1000, 100)]
QUICK_SIZES = [(60, 20), (400, 20)]
TAU = 10


def _load() -> str:
    return " ".join(f"{v:.2f}" for v in os.getloadavg())


def policies(data_bytes: int) -> dict[str, tuple[int, int]]:
    """Candidate -> (_BLOCK_BYTES, _SPLIT_BYTES) for a batch of ``data_bytes`` of client data."""
    never = 2 ** 62
    return {"policy": (blocking._BLOCK_BYTES, blocking._SPLIT_BYTES),
            "8 MB": (2 ** 23, never),
            "one block": (never, never),
            "2 blocks": (data_bytes // 2 + 1, never)}


@contextmanager
def blocks_of(block_bytes: int, split_bytes: int) -> Iterator[None]:
    saved = blocking._BLOCK_BYTES, blocking._SPLIT_BYTES
    blocking._BLOCK_BYTES, blocking._SPLIT_BYTES = block_bytes, split_bytes
    try:
        yield
    finally:
        blocking._BLOCK_BYTES, blocking._SPLIT_BYTES = saved


def rounds(alg: Any, fed: QuadraticFederation, count: int) -> tuple[Callable[[], None], list[Any]]:
    """A function running the next ``count`` rounds (state kept between calls), and its state box."""
    rng = np.random.default_rng(0)
    box = [alg.init(fed, np.zeros(fed.dim), rng)]

    def go() -> None:
        state = box[0]
        for _ in range(count):
            state, _ = alg.round(state, fed, None, rng)
        box[0] = state
    return go, box


def measure(N: int, d: int, trials: int, trial_seconds: float = 0.05) -> None:
    fed = quadratic_problem(N, d)
    data = N * fed.client_data_bytes()
    cands = policies(data)
    algs = {"FedAvg": FedAvg(lr=0.05, local_steps=TAU),
            "FedOpt-AdaGrad": FedOpt(client_optimizer=optim.adagrad(0.05), server_optimizer=optim.sgd(1.0),
                                     local_steps=TAU)}
    count = max(1, int(trial_seconds / (N * 2.0 * d * d * TAU / 5e9)))   # rounds at about 5 GFLOP/s
    print(f"\n(N, d) = ({N}, {d}): {data / 2 ** 20:.1f} MB of Hessians; {trials} interleaved trials of {count} "
          f"rounds; load before {_load()}")
    for name, alg in algs.items():
        runs: dict[str, Callable[[], None]] = {}
        boxes: dict[str, list[Any]] = {}
        n_blocks: dict[str, int] = {}
        for cand, (bb, sb) in cands.items():
            with blocks_of(bb, sb):
                runs[cand], boxes[cand] = rounds(alg, fed, count)
                n_blocks[cand] = len(blocking.row_blocks(fed, N, d))

        def within(cand: str) -> Callable[[], None]:
            def go() -> None:
                with blocks_of(*cands[cand]):
                    runs[cand]()
            return go
        # seconds per round, trials interleaved in a seeded random order (after one warm-up call each)
        wall, cpu = interleaved_samples({c: within(c) for c in cands}, trials, count)
        base_w, base_c = float(np.median(wall["policy"])), float(np.median(cpu["policy"]))
        xs = [boxes[c][0].x for c in cands]
        same = all(np.array_equal(xs[0], x) for x in xs[1:])
        cols = "  ".join(f"{c} ({n_blocks[c]} bl.) {np.median(wall[c]) / base_w:.3f} / {np.median(cpu[c]) / base_c:.3f}"
                         for c in cands)
        print(f"  {name:<15} policy {base_w * 1e3:.3f} ms/round; wall / CPU over the policy: {cols}; "
              f"same models: {same}")
    print(f"  load after {_load()}")


def size_pair(text: str) -> tuple[int, int]:
    try:
        N, d = (int(v) for v in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected N,d (two integers), got {text!r}") from None
    if N < 2 or d < 1:
        raise argparse.ArgumentTypeError(f"need N >= 2 and d >= 1, got {text!r}")
    return N, d


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="small sizes (smoke run)")
    parser.add_argument("--trials", type=int, default=15, help="interleaved trials (median kept)")
    parser.add_argument("--sizes", nargs="+", type=size_pair, default=None, metavar="N,d")
    args = parser.parse_args()
    if args.trials < 1:
        parser.error(f"--trials must be >= 1, got {args.trials}")
    sizes = args.sizes or (QUICK_SIZES if args.quick else SIZES)
    print(f"local-step threads: {blocking.num_threads()}; policy: blocks <= {blocking._BLOCK_BYTES / 2 ** 20:g} MB, "
          f"split from {blocking._SPLIT_BYTES / 2 ** 20:g} MB")
    with single_threaded_blas():
        for N, d in sizes:
            measure(N, d, args.trials)


if __name__ == "__main__":
    main()
