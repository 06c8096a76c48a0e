"""Speed of the numpy neural backend.

    python benchmarks/nn.py [--batch 64] [--repeats 20] [--clients 100] [--rounds 3] [--threads 1,2]
                            [--models MLP,CNN] [--no-federation]

Prints, for the seed-003 MLP (784-200-100-10) and the seed-002 Table 1 CNN on
MNIST-shaped inputs (1x28x28, random data: no download):

* forward+backward (batch gradient) time per batch of ``--batch`` samples;
* the exact Hessian-vector product (forward-over-reverse, ``Sequential.hvp``)
  per batch, and its cost in gradients;
* per-sample gradients (batch, d) and the empirical Fisher diagonal
  (squared per-sample gradients summed, Dense layers without forming them);
* examples/second of FedAvg rounds (``run``) on ``--clients`` clients holding
  the 8x8 digits (seed-003 MLP on 64 inputs, 5 local steps, minibatch 10;
  needs scikit-learn, otherwise random 8x8 data of the same size);
* the batched oracle (all clients in one pass) against a Python loop calling
  the oracle one client at a time;
* a torch comparison only when torch is importable (skipped otherwise).

``--threads`` lists BLAS thread counts run in turn through threadpoolctl
(0 = leave the BLAS default); above one, convolutional gradients also split
the batch over that many threads (``fltheory.nn.batch_threads``).  Times are
medians over ``--repeats``; against torch, trials are interleaved and the
ratio is the median of per-trial ratios (load from other jobs hits both).
"""

from __future__ import annotations

import argparse
import os
import time
from collections.abc import Callable
from contextlib import nullcontext

import numpy as np

from fltheory.algorithms import FedAvg, run
from fltheory.nn import NeuralFederation, Sequential, SoftmaxCrossEntropy, cnn, mlp


def median_time(fn: Callable[[], object], repeats: int) -> float:
    fn()
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return float(np.median(times))


def bench_model(name: str, net: Sequential, batch: int, repeats: int, rng: np.random.Generator,
                threads: int = 1) -> None:
    x = net.init(rng)[None]
    u = rng.random((1, batch, *net.input_shape))
    y = rng.integers(0, 10, size=(1, batch))
    loss = SoftmaxCrossEntropy()
    fwd = median_time(lambda: net.forward(x, u), repeats)
    fb = median_time(lambda: net.value_and_grad(x, u, y, loss), repeats)
    ps = median_time(lambda: net.value_and_grad(x, u, y, loss, mode="per_sample"), repeats)
    fi = median_time(lambda: net.value_and_grad(x, u, y, loss, mode="sq_sum"), repeats)
    v = rng.standard_normal(x.shape)
    hv = median_time(lambda: net.hvp(x, v, u, y, loss), repeats)
    print(f"{name:>4} d={net.dim:>7}  batch {batch}: forward {fwd * 1e3:7.2f} ms | forward+backward "
          f"{fb * 1e3:7.2f} ms | per-sample grads {ps * 1e3:7.2f} ms | Fisher diag {fi * 1e3:7.2f} ms | "
          f"exact HVP {hv * 1e3:7.2f} ms ({hv / fb:.2f} gradients)")
    try:
        import torch  # noqa: F401
    except ImportError:
        return
    bench_torch(name, net, batch, repeats, fb, threads, hv)


def bench_torch(name: str, net: Sequential, batch: int, repeats: int, ours: float,
                threads: int, ours_hvp: float) -> None:  # pragma: no cover - optional
    """The same network in torch (float64, same thread count): forward+backward
    timed in interleaved trials (ours, torch, ours, torch, ...) so that load
    from other jobs hits both alike; the ratio is the median of the per-trial
    ratios.  Also the HVP (reverse-over-reverse in torch)."""
    import torch
    from torch import nn
    torch.set_num_threads(threads)
    rng = np.random.default_rng(1)
    if name == "MLP":
        model = nn.Sequential(nn.Linear(784, 200), nn.ReLU(), nn.Linear(200, 100), nn.ReLU(),
                              nn.Linear(100, 10)).double()
        u = torch.rand(batch, 784, dtype=torch.float64)
    else:
        model = nn.Sequential(nn.Conv2d(1, 16, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2),
                              nn.Conv2d(16, 32, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(),
                              nn.Linear(32 * 7 * 7, 512), nn.ReLU(), nn.Linear(512, 10)).double()
        u = torch.rand(batch, 1, 28, 28, dtype=torch.float64)
    y = torch.randint(0, 10, (batch,))

    def step() -> None:
        model.zero_grad()
        nn.functional.cross_entropy(model(u), y).backward()

    x = net.init(rng)[None]
    uu = u.numpy().reshape(1, batch, *net.input_shape)
    yy = y.numpy()[None]
    loss = SoftmaxCrossEntropy()

    def ours_step():
        net.value_and_grad(x, uu, yy, loss)

    ours_step()
    step()
    t_ours, t_ref, ratios, cpu_ours = [], [], [], []
    for _ in range(repeats):
        a, pa = time.perf_counter(), time.process_time()
        ours_step()
        b, pb = time.perf_counter(), time.process_time()
        step()
        c = time.perf_counter()
        t_ours.append(b - a)
        t_ref.append(c - b)
        ratios.append((b - a) / (c - b))
        cpu_ours.append((pb - pa) / (b - a))
    ref = float(np.median(t_ref))
    params = list(model.parameters())
    vecs = [torch.randn_like(p) for p in params]

    def hvp_step() -> None:     # reverse-over-reverse: grad of <grad L, v>
        g = torch.autograd.grad(nn.functional.cross_entropy(model(u), y), params, create_graph=True)
        inner = sum(((a * b).sum() for a, b in zip(g, vecs, strict=True)), torch.zeros((), dtype=torch.float64))
        torch.autograd.grad(inner, params)

    ref_hvp = median_time(hvp_step, repeats)
    print(f"{'':>4} torch {torch.__version__} (float64, {threads} thread(s)) forward+backward "
          f"{ref * 1e3:7.2f} ms, ours {float(np.median(t_ours)) * 1e3:7.2f} ms interleaved; "
          f"fltheory.nn / torch = {float(np.median(ratios)):.2f}x (median of {repeats} per-trial ratios; "
          f"quartiles {np.percentile(ratios, 25):.2f}-{np.percentile(ratios, 75):.2f}); our CPU time / wall "
          f"time {float(np.median(cpu_ours)):.2f} (cores in use) | "
          f"HVP {ref_hvp * 1e3:7.2f} ms; fltheory.nn / torch = {ours_hvp / ref_hvp:.2f}x")


def digits_like(n_clients: int, rng: np.random.Generator) -> NeuralFederation:
    try:
        from fltheory.nn import digits_federation
        return digits_federation(mlp(64, 10), n_clients, rng)
    except ImportError:
        n = 1797 // n_clients
        U = [rng.random((n, 64)) for _ in range(n_clients)]
        return NeuralFederation(mlp(64, 10), SoftmaxCrossEntropy(), U,
                                [rng.integers(0, 10, n) for _ in range(n_clients)])


def bench_federation(n_clients: int, rounds: int, repeats: int, rng: np.random.Generator) -> None:
    fed = digits_like(n_clients, rng)
    steps, b = 5, 10
    mb = fed.with_minibatch(b)
    x0 = fed.init_params(rng)
    alg = FedAvg(lr=0.1, local_steps=steps)
    t = time.perf_counter()
    run(alg, mb, rounds, seed=0, x0=x0)
    per_round = (time.perf_counter() - t) / rounds
    examples = n_clients * steps * b
    samples = "?" if fed.n_samples is None else int(fed.n_samples.sum())
    print(f"FedAvg on {n_clients} digits clients (MLP 64-200-100-10, {steps} local steps, minibatch {b}): "
          f"{per_round * 1e3:.1f} ms/round incl. run()'s per-round F and grad F over "
          f"{samples} samples; {examples / per_round:,.0f} local examples/s")
    X = np.tile(x0, (n_clients, 1))
    batched = median_time(lambda: fed.client_grad(X), repeats)
    looped = median_time(lambda: [fed.client_grad(X[i][None], [i]) for i in range(n_clients)],
                         max(3, repeats // 4))
    print(f"client_grad of all {n_clients} clients (full batch): batched {batched * 1e3:.1f} ms, "
          f"one client at a time {looped * 1e3:.1f} ms ({looped / batched:.1f}x)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--repeats", type=int, default=20)
    ap.add_argument("--clients", type=int, default=100)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--threads", default="1",
                    help="comma-separated BLAS thread counts to run in turn, e.g. 1,2 (0 = BLAS default)")
    ap.add_argument("--models", default="MLP,CNN", help="comma-separated subset of MLP,CNN")
    ap.add_argument("--no-federation", action="store_true", help="skip the FedAvg rounds benchmark")
    args = ap.parse_args()
    rng = np.random.default_rng(0)
    print(f"load average (1, 5, 15 min): {os.getloadavg()}")
    models = {"MLP": lambda: mlp(784, 10), "CNN": lambda: cnn((1, 28, 28), 10)}
    for threads in (int(t) for t in args.threads.split(",")):
        limit = nullcontext()
        if threads > 0:
            try:
                from threadpoolctl import threadpool_limits
                limit = threadpool_limits(limits=threads, user_api="blas")
            except ImportError:
                print("threadpoolctl not installed: BLAS threads left at their default")
        with limit:
            print(f"BLAS threads: {threads if threads > 0 else 'default'} (convolutional gradients split the "
                  f"batch over {threads if threads > 0 else 'the BLAS'} thread(s), fltheory.nn.batch_threads)")
            torch_threads = threads if threads > 0 else 2
            for name in args.models.split(","):
                bench_model(name, models[name](), args.batch, args.repeats, rng, torch_threads)
    try:
        import torch  # noqa: F401
    except ImportError:
        print("torch not importable: comparison skipped")
    if not args.no_federation:
        bench_federation(args.clients, args.rounds, args.repeats, rng)
    print(f"load average after (1, 5, 15 min): {os.getloadavg()}")


if __name__ == "__main__":
    main()
