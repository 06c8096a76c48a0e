"""FedAvg rounds on softmax-regression clients against a plain per-client numpy loop.

Usage::

    python benchmarks/logistic_rounds.py               # Synthetic(1,1): N = 30, d = 610, tau = 10
    python benchmarks/logistic_rounds.py --trials 15 --rounds 3

Problem: FedProx's Synthetic(1,1) softmax data (30 devices, 60 features plus
bias, 10 classes, lognormal device sizes), ridge 1e-3, FedAvg with tau = 10
gradient steps of rate 0.05 (the configuration of issue 17).

Candidates, each timed as ``--rounds`` consecutive rounds per trial, trials
interleaved (trial 1 of every candidate, then trial 2, ...) in this one process
so that load from other processes hits all alike; medians of wall and CPU time
(``time.process_time``: all threads of the process) per round:

* ``per-client numpy loop``: ``per_client_logistic_round`` of
  ``benchmarks/blocked.py`` (the reference of issue 17: for every client, tau
  steps W <- W - lr (A_i^T (softmax(A_i W) - onehot) / n_i + reg W) on its own
  rows, which stay in cache for its tau steps);
* ``FedAvg.round, 1 thread`` / ``FedAvg.round, 2 threads``: ``alg.round`` on
  ``fed.with_threads(t)`` (1 is the default);
* ``FedAvg.round, 2 processes``: ``alg.round`` on ``fed.with_processes(2)`` (the
  caller's thread and one worker process, started before the trials);
* ``run() default``: ``run(FedAvg, fed, rounds)`` with the default per-round metrics
  (one thread), and the same on ``fed.with_processes(2)``;
* ``products only, 1 thread``: the loop's two products per client and step, nothing else;
* ``batched floor (GEMMs+exp)``: ``batched_floor``, the products of the bound
  gradient's size groups plus one exp over all logits per step: what a one-thread
  ``FedAvg.round`` cannot go below without fewer flops or a faster exp.

Then ``step_phases`` times one bound-gradient step phase by phase (gather,
products, each softmax pass, ridge, scatter; thread-CPU minima) and prints the
speed-up over the loop that each set of phases alone would allow;
``concurrent_shares`` times the two shares of a two-thread step alone and at
once (thread CPU and wall), and ``core_sharing`` the CPU of a one-thread GEMM
job alone and paired in two processes, to tell a hardware slow-down of a second
thread from waiting.

Besides the speed-ups the script prints the arithmetic: useful flops per round
(4 f C sum_i n_i per step: two products), the flops the batched path actually
does (its size groups are padded), the feature bytes read per step, and the
achieved GFLOP/s of each candidate against the rate of the two products
alone (the same per-client matmuls in a loop, no softmax): the ceiling of
one core for these shapes, and twice it the ceiling of two.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _timing import interleaved_samples, load, rounds_of
from blocked import per_client_logistic_round

from fltheory._threads import single_threaded_blas
from fltheory.algorithms import FedAvg, run
from fltheory.problems.synthetic import synthetic_fedprox





def products_only(A: np.ndarray, rows: np.ndarray, C: int, x: np.ndarray, tau: int) -> None:
    """The two products of every local step of every client, nothing else (the BLAS floor)."""
    f = A.shape[2]
    W = x.reshape(f, C)
    for i in range(A.shape[0]):
        Ai = A[i, : rows[i]]
        for _ in range(tau):
            Ai.T @ (Ai @ W)


def batched_floor(fed: Any, tau: int) -> Callable[[], None]:
    """The arithmetic no batched round can skip, in the layout of the bound gradient
    (``SoftmaxGroupsGrad`` over the size groups): per step the two products of every
    group and one exp over all logits, nothing else (no max, sums, scaling, labels,
    ridge, gathers or step updates).  Its time per round is the floor of
    ``FedAvg.round`` at one thread; the loop pays the same float64 exp."""
    from fltheory.problems import _logistic_oracles as lo
    m = fed.n_clients
    plan = fed._plan(np.arange(m))
    groups = [(b.A, b.y, b.rw) for b in plan] if plan else [(fed._A, fed._y, fed._rw)]
    order = np.concatenate([b.pos for b in plan]) if plan else np.arange(m)
    fused = lo.SoftmaxGroupsGrad(groups, fed.n_classes, order, m)
    fused.X[...] = 0.01 * np.random.default_rng(0).standard_normal(fused.X.shape)
    products = fused.products

    def floor() -> None:
        for _ in range(tau):
            for Wt, At_first, _, V, _, _ in products:
                np.matmul(Wt, At_first, out=V)
            np.exp(fused.Z, out=fused.Z)
            for _, _, At, _, Vt, G in products:
                np.matmul(At, Vt, out=G)
    return floor


def step_phases(fed: Any, tau: int, lr: float, calls: int) -> None:
    """Where one bound-gradient step goes, phase by phase, against the loop.

    Replays the operations of ``SoftmaxGroupsGrad.__call__`` (one thread, all size
    groups fused, no losses) on its own buffers, timing each phase with this
    thread's CPU clock (``time.thread_time``: waiting for a core does not count)
    over ``calls`` calls, minimum per phase (the quiet-machine estimate, as in
    ``thread_cpu``: other processes inflate CPU time too, through shared caches
    and cores).  The replay is checked against the
    real call (same gradient bits).  Then the round's own cost outside the
    gradient (round minus tau gradient steps) and the loop's cost per step give
    the speed-up each set of phases alone would allow: the two products (at the
    core's BLAS rate for these shapes), products plus exp, and the whole step."""
    from fltheory.problems import _logistic_oracles as lo
    m, C = fed.n_clients, fed.n_classes
    plan = fed._plan(np.arange(m))
    S = lo.SoftmaxGroupsGrad([(b.A, b.y, b.rw) for b in plan], C, np.concatenate([b.pos for b in plan]), m)
    X = 0.01 * np.random.default_rng(0).standard_normal((m, fed.dim))
    out, ref = np.empty_like(X), np.empty_like(X)
    reg, Z, clock = fed.reg, S.Z, time.thread_time
    names = ["gather X", "logit products", "max over classes", "subtract max", "exp", "sum over classes",
             "scale rw/sum", "minus rw at label", "gradient products", "ridge", "scatter G"]

    def replay() -> list[float]:
        t = [clock()]
        np.take(X, S.order, axis=0, out=S.X, mode="clip")
        t.append(clock())
        for Wt, At_first, _, V, _, _ in S.products:
            np.matmul(Wt, At_first, out=V)
        t.append(clock())
        top, total = S.top, S.total
        np.maximum.reduce(Z, axis=0, out=top)
        t.append(clock())
        Z.__isub__(top)
        t.append(clock())
        np.exp(Z, out=Z)
        t.append(clock())
        np.add.reduce(Z, axis=0, out=total)
        t.append(clock())
        Z.__imul__(np.divide(S.rw, total, out=total))
        t.append(clock())
        Z.reshape(-1)[S.at] -= S.rw
        t.append(clock())
        for _, _, At, _, Vt, G in S.products:
            np.matmul(At, Vt, out=G)
        t.append(clock())
        S.G.__iadd__(np.multiply(S.X, reg, out=S.ridge))
        t.append(clock())
        out[S.order] = S.G
        t.append(clock())
        return list(np.diff(t))

    assert not S.alone, "every size group has more than one row here"
    replay()
    S(X, reg, ref)
    same = np.array_equal(out, ref)
    phases = np.min(np.array([replay() for _ in range(calls)]), axis=0)
    whole = []
    for _ in range(calls):
        c = clock()
        S(X, reg, ref)
        whole.append(clock() - c)
    step = float(np.min(whole))
    alg = FedAvg(lr=lr, local_steps=tau)
    rng = np.random.default_rng(0)
    box = [alg.init(fed, np.zeros(fed.dim), rng)]

    def one_round() -> None:
        box[0], _ = alg.round(box[0], fed, None, rng)
    rnd = thread_cpu(one_round, max(9, calls // 20))
    A, y, rows = fed._A, fed._y, fed._rows
    loop = thread_cpu(lambda: per_client_logistic_round(A, y, rows, fed.weights, reg, C, np.zeros(fed.dim), lr, tau),
                      max(9, calls // 20)) / tau
    outside = rnd / tau - step
    print(f"one gradient step, phase by phase (thread CPU, minima over {calls} calls; replay gives the call's bits: "
          f"{same}; load {load()}):")
    for name, v in zip(names, phases, strict=True):
        print(f"  {name:<20} {1e6 * v:7.1f} us")
    products = phases[1] + phases[8]
    rest = float(phases.sum()) - products - phases[4]
    print(f"  phases sum {1e6 * phases.sum():.1f} us, whole call {1e6 * step:.1f} us; round outside the gradient "
          f"{1e6 * outside:.1f} us per step; loop {1e6 * loop:.1f} us per step")
    print(f"  speed-up over the loop if a step cost only: the products {loop / products:.2f}x; products + exp "
          f"{loop / (products + phases[4]):.2f}x; + the other softmax/gather/ridge passes ({1e6 * rest:.1f} us) "
          f"{loop / (products + phases[4] + rest):.2f}x; + the round's own work {loop / (rnd / tau):.2f}x "
          f"(3x needs {1e6 * loop / 3:.1f} us per step in all)")


_GEMM_CHILD = """
import time, numpy as np
from threadpoolctl import threadpool_limits
a = np.random.default_rng(0).standard_normal((300, 300))
with threadpool_limits(1):
    a @ a
    c = time.thread_time()
    for _ in range({reps}):
        a @ a
    print(time.thread_time() - c)
"""


def core_sharing(reps: int = 300) -> tuple[float, float]:
    """CPU seconds of a fixed compute-bound job (one-thread 300 x 300 GEMMs) in a child
    process alone, and the mean of two such children started together.  On two
    independent cores the two figures agree; if the two vCPUs share one physical core
    (SMT siblings on the host) or the host is overcommitted, each child's CPU time
    grows (up to 2x): then a second thread cannot speed a round up, whatever the code."""
    import subprocess
    code = _GEMM_CHILD.format(reps=reps)

    def children(k: int) -> list[float]:
        procs = [subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True) for _ in range(k)]
        return [float(p.communicate()[0]) for p in procs]
    alone = children(1)[0]
    together = children(2)
    return alone, float(np.mean(together))


def concurrent_shares(fed: Any, calls: int) -> tuple[list[float], list[float], float, float]:
    """Thread-CPU seconds per call of each two-thread share of the bound gradient,
    run alone and both at once on two threads (``calls`` calls each, minima of 5
    batches), and the wall time per concurrent call pair.  CPU time spent waiting
    for the GIL or a core does not count, so a share whose CPU time grows when the
    other runs is slowed by the hardware (shared core, caches, memory), not by the GIL;
    a wall time well above the larger share's CPU time with flat CPU times points
    at waiting (GIL, scheduling)."""
    import threading
    from fltheory.problems import _logistic_oracles as lo
    from fltheory.problems._logistic_buckets import Part, thread_shares
    m, C = fed.n_clients, fed.n_classes
    plan = fed._plan(np.arange(m))
    parts = [Part(b.pos, b.A, b.y, b.rw) for b in plan]
    halves = [lo.SoftmaxGroupsGrad([(p.A, p.y, p.rw) for p in share], C,
                                   np.concatenate([np.arange(m)[p.pos] for p in share]), m)
              for share in thread_shares(parts, m, 2, 4.0 * fed.n_features * C)]
    X = 0.01 * np.random.default_rng(0).standard_normal((m, fed.dim))
    outs = [np.empty_like(X) for _ in halves]

    def batch(j: int, res: list[float]) -> None:
        c = time.thread_time()
        for _ in range(calls):
            halves[j](X, fed.reg, outs[j])
        res[j] = min(res[j], (time.thread_time() - c) / calls)
    alone = [np.inf, np.inf]
    together = [np.inf, np.inf]
    wall = np.inf
    for _ in range(5):
        batch(0, alone)
        batch(1, alone)
        t = time.perf_counter()
        other = threading.Thread(target=batch, args=(1, together))
        other.start()
        batch(0, together)
        other.join()
        wall = min(wall, (time.perf_counter() - t) / calls)
    return alone, together, float(wall), float(max(alone))


def thread_cpu(fn: Callable[[], Any], trials: int, reps: int = 1) -> float:
    """Minimum over trials of the CPU time of this thread (``time.thread_time``) per
    call, each trial ``reps`` calls: unaffected by time spent waiting for a core,
    so it estimates the quiet-machine cost (cache sharing with other processes
    still counts)."""
    fn()
    best = np.inf
    for _ in range(trials):
        c = time.thread_time()
        for _ in range(reps):
            fn()
        best = min(best, (time.thread_time() - c) / reps)
    return float(best)


def handoff_seconds(trials: int) -> float:
    """Minimum wall time of submitting a trivial task to a one-worker pool and
    waiting for it (what a two-thread step adds to its larger share)."""
    from concurrent.futures import ThreadPoolExecutor
    best = np.inf
    with ThreadPoolExecutor(1) as pool:
        pool.submit(int).result()
        for _ in range(20 * trials):
            t = time.perf_counter()
            pool.submit(int).result()
            best = min(best, time.perf_counter() - t)
    return float(best)


def critical_path(fed: Any, tau: int, lr: float, trials: int) -> None:
    """Quiet-machine estimate of a two-thread round from per-thread CPU times.

    A two-thread step lasts as long as its larger share (each share's own thread
    CPU time) plus a hand-off, so the round costs about the one-thread round
    minus tau * (one-share step - larger share).  All times are thread CPU
    minima, which other processes on the machine do not inflate."""
    from fltheory.problems import _logistic_oracles as lo
    from fltheory.problems._logistic_buckets import Part, thread_shares
    A, y, rows = fed._A, fed._y, fed._rows
    C, m = fed.n_classes, fed.n_clients
    x0 = np.zeros(fed.dim)
    X = np.random.default_rng(0).standard_normal((m, fed.dim)) * 0.01
    out = np.empty_like(X)
    plan = fed._plan(np.arange(m))
    parts = [Part(b.pos, b.A, b.y, b.rw) for b in plan]

    def fused(shares: list[list[Part]]) -> list[Any]:
        return [lo.SoftmaxGroupsGrad([(p.A, p.y, p.rw) for p in share], C,
                                     np.concatenate([np.arange(m)[p.pos] for p in share]), m) for share in shares]

    whole = fused([parts])[0]
    halves = fused(thread_shares(parts, m, 2, 4.0 * fed.n_features * C))
    step1 = thread_cpu(lambda: whole(X, fed.reg, out), trials, reps=tau)
    step2 = []
    for half in halves:
        def share(h: Any = half) -> None:
            h(X, fed.reg, out)
        step2.append(thread_cpu(share, trials, reps=tau))
    handoff = handoff_seconds(trials)
    alg = FedAvg(lr=lr, local_steps=tau)
    one = fed.with_threads(1)
    rng = np.random.default_rng(0)
    box = [alg.init(one, x0, rng)]

    def one_round() -> None:
        box[0], _ = alg.round(box[0], one, None, rng)
    round1 = thread_cpu(one_round, trials)
    loop = thread_cpu(lambda: per_client_logistic_round(A, y, rows, fed.weights, fed.reg, C, x0, lr, tau), trials)
    round2 = round1 - tau * (step1 - max(step2))
    with_handoffs = round2 + tau * handoff
    print(f"thread-CPU minima ({trials} trials): loop {1e3 * loop:.2f} ms/round; FedAvg.round 1 thread "
          f"{1e3 * round1:.2f} ms ({loop / round1:.2f}x); gradient step {1e6 * step1:.0f} us, its two shares "
          f"{', '.join(f'{1e6 * t:.0f}' for t in step2)} us; estimated quiet 2-thread round "
          f"{1e3 * round2:.2f} ms + {tau} hand-offs of {1e6 * handoff:.0f} us (pool round trip, minimum wall) = "
          f"{1e3 * with_handoffs:.2f} ms: {loop / with_handoffs:.2f}x the loop")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trials", type=int, default=9, help="interleaved trials (median kept)")
    parser.add_argument("--rounds", type=int, default=3, help="rounds per trial")
    args = parser.parse_args()
    fed = synthetic_fedprox(1.0, 1.0, seed=0, reg=1e-3).train
    tau, lr, R = 10, 0.05, args.rounds
    A, y, rows = fed._A, fed._y, fed._rows
    C = fed.n_classes
    assert C is not None                                   # softmax clients
    f = fed.n_features
    x0 = np.zeros(fed.dim)
    alg = FedAvg(lr=lr, local_steps=tau)

    def loop() -> None:
        x = x0
        for _ in range(R):
            x = per_client_logistic_round(A, y, rows, fed.weights, fed.reg, C, x, lr, tau)

    def threaded_rounds(threads: int) -> Callable[[], None]:
        return rounds_of(alg, fed.with_threads(threads), x0, R)

    floor = batched_floor(fed, tau)
    two_processes = fed.with_processes(2)
    rounds_of(alg, two_processes, x0, 1)()                # starts the worker and registers its share

    def products() -> None:
        for _ in range(R):
            products_only(A, rows, C, x0, tau)

    runs: dict[str, Callable[[], Any]] = {
        "per-client numpy loop": loop,
        "FedAvg.round, 1 thread": threaded_rounds(1),
        "FedAvg.round, 2 threads": threaded_rounds(2),
        "FedAvg.round, 2 processes": rounds_of(alg, two_processes, x0, R),
        "run() default": lambda: run(alg, fed, R),
        "run() default, 2 processes": lambda: run(alg, two_processes, R),
        "products only, 1 thread": products,
        "batched floor (GEMMs+exp)": lambda: [floor() for _ in range(R)],
    }
    with single_threaded_blas():
        before = load()
        wall, cpus = interleaved_samples(runs, args.trials, R)
        med = {k: float(np.median(v)) for k, v in wall.items()}
        best = {k: float(np.min(v)) for k, v in wall.items()}
        cpu = {k: float(np.median(v)) for k, v in cpus.items()}
        after = load()
        x_loop = per_client_logistic_round(A, y, rows, fed.weights, fed.reg, C, x0, lr, tau)
        xs = {t: run(alg, fed.with_threads(t), 1, metrics=()).x[-1] for t in (1, 2)}
        x_processes = run(alg, two_processes, 1, metrics=()).x[-1]
    plan = fed._plan(np.arange(fed.n_clients))
    padded = sum(b.A.shape[0] * b.A.shape[1] for b in plan) if plan else A.shape[0] * A.shape[1]
    useful = 4.0 * f * C * float(rows.sum()) * tau
    done = 4.0 * f * C * padded * tau
    print(f"Synthetic(1,1) softmax clients: N = {fed.n_clients}, d = {fed.dim} (f = {f}, C = {C}), tau = {tau}, "
          f"sum n_i = {int(rows.sum())} rows (padded in size groups: {padded}); {args.trials} interleaved trials "
          f"of {R} rounds; load average before {before}, after {after}")
    print(f"max |x_loop - x_FedAvg| after 1 round = {np.abs(x_loop - xs[1]).max():.1e} "
          f"(|x| max {np.abs(x_loop).max():.1e}); 1 vs 2 threads identical: {np.array_equal(xs[1], xs[2])}; "
          f"1 thread vs 2 processes identical: {np.array_equal(xs[1], x_processes)}")
    print(f"flops per round: useful {useful / 1e6:.1f} M, done by the batched path {done / 1e6:.1f} M; "
          f"feature bytes read per step {8 * f * padded / 1e6:.2f} MB (twice: two products)")
    ref, ref_cpu, ref_best = med["per-client numpy loop"], cpu["per-client numpy loop"], best["per-client numpy loop"]
    critical_path(fed, tau, lr, max(5, args.trials))
    with single_threaded_blas():
        step_phases(fed, tau, lr, 40 * args.trials)
        alone, together, pair_wall, larger = concurrent_shares(fed, 20 * args.trials)
    print(f"two-thread shares of a gradient step (thread-CPU minima): alone {1e6 * alone[0]:.0f}, {1e6 * alone[1]:.0f} "
          f"us; both at once {1e6 * together[0]:.0f}, {1e6 * together[1]:.0f} us (CPU x{together[0] / alone[0]:.2f}, "
          f"x{together[1] / alone[1]:.2f}); wall per concurrent step {1e6 * pair_wall:.0f} us against the larger share "
          f"alone {1e6 * larger:.0f} us")
    gemm_alone, gemm_pair = core_sharing()
    print(f"core sharing: CPU of a one-thread GEMM job alone {gemm_alone:.3f} s, two at once {gemm_pair:.3f} s each "
          f"(x{gemm_pair / gemm_alone:.2f}; 1.0 = two independent cores); load {load()}")
    print(f"  {'candidate':<25} {'median ms/round':>15} {'speed-up':>9} {'min ms':>8} {'speed-up':>9} "
          f"{'CPU ms':>8} {'CPU speed-up':>13} {'GFLOP/s (min)':>14}")
    for k in runs:
        print(f"  {k:<25} {1e3 * med[k]:>15.3f} {ref / med[k]:>9.2f} {1e3 * best[k]:>8.3f} "
              f"{ref_best / best[k]:>9.2f} {1e3 * cpu[k]:>8.3f} {ref_cpu / cpu[k]:>13.2f} "
              f"{useful / best[k] / 1e9:>14.1f}")
    print("  (CPU: this process only; the candidates with 2 processes also use a worker process's core)")


if __name__ == "__main__":
    main()
