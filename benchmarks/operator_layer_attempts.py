"""Attempts at a fixed point of FedOpt with zero-accumulator client AdaGrad at d = 100 (all fail).

    python benchmarks/operator_layer_attempts.py [--d 100]

The instance is the kinked setting of ``operator_fixed_points.py``:
``random_quadratic(100, d, L=4, mu=0.5, heterogeneity=1, seed=0)``, client
AdaGrad (lr 0.05, eps 1e-8, initial accumulator 0) restarted every round, local
steps alternating 2 and 10, server SGD(1).  Background and the small instances
that are decided exactly: docs/theory/fixed-points.md, "Restarted AdaGrad with
a zero accumulator".

The lifted operator T(x; s) is the round in which client i's first step is
-lr s_i instead of -lr g_i / (|g_i| + eps) (g_i its gradient at x).  It is
written out here for quadratic clients and checked against ``fedopt_operator``
(s = g / (|g| + eps) gives T(x) to 1e-15).  The attempts are:

1. **lifted Newton from the stall of Newton-Krylov.** The unknowns are x and
   s_A on a set A of (client, coordinate) pairs; the equations are
   T(x; s) = x and g_A (1 - |s_A|) = eps s_A (that is, s = g / (|g| + eps)).
   It uses dense forward-difference Jacobians and Armijo backtracking, with s
   kept in (-1, 1). A starts as the pairs with |g| < 1e-6, and every pair that
   a full step would cross, or bring within 1e-6 of its hyperplane, joins A.
   Reported: the lifted and real residuals, and the pairs pinned at s = +-1
   against the sign of their gradient coordinate.
2. **Krasnoselskii-Mann** x <- x + a_k (T(x) - x), a_k = 0.5 / (1 + k/50),
   4000 rounds. Reported: the pairs whose gradient sign flips over the last
   2000 rounds, their mean first step s, and the residuals. Then lifted Newton
   runs on those pairs from there.
3. **Continuation in eps** (1e-1, 3e-2, 1e-2, ...) with Newton-Krylov.
"""

from __future__ import annotations

import argparse
import os
import time
from collections.abc import Callable

import numpy as np

from fltheory import optim
from fltheory.algorithms import FedOpt
from fltheory.errors import DivergenceError
from fltheory.problems.generators import random_quadratic
from fltheory.problems.quadratic import QuadraticFederation
from fltheory.theory.operator_newton import DiscontinuityLayerError, diagnosed_fixed_point, newton_krylov_fixed_point
from fltheory.theory.operators import fedopt_operator

N, LR, EPS = 100, 0.05, 1e-8
STEPS = np.where(np.arange(N) % 2 == 0, 2, 10)


class Lifted:
    """T(x; S) for restarted AdaGrad clients (initial accumulator 0) on a quadratic federation."""

    def __init__(self, fed: QuadraticFederation, eps: float = EPS) -> None:
        self.fed, self.eps, self.d = fed, eps, fed.dim

    def grad0(self, x: np.ndarray) -> np.ndarray:
        return self.fed.client_grad(np.tile(x, (N, 1)))

    def T(self, x: np.ndarray, S: np.ndarray, G: np.ndarray) -> np.ndarray:
        Y = x - LR * S
        nu = G * G
        for k in range(1, int(STEPS.max())):
            active = (STEPS > k)[:, None]
            g = self.fed.client_grad(Y)
            nu = nu + np.where(active, g * g, 0.0)
            Y = Y - np.where(active, LR * g / (np.sqrt(nu) + self.eps), 0.0)
        return self.fed.weights @ Y

    def residual(self, x: np.ndarray, sig: np.ndarray, A: np.ndarray) -> np.ndarray:
        G = self.grad0(x)
        S = G / (np.abs(G) + self.eps)
        S[A] = sig
        return np.concatenate([self.T(x, S, G) - x, G[A] * (1 - np.abs(sig)) - self.eps * sig])


def lifted_newton(L: Lifted, T: Callable[[np.ndarray], np.ndarray], x: np.ndarray, A: np.ndarray,
                  sig: np.ndarray, band: float = 1e-6, iterations: int = 40) -> None:
    d = L.d
    for it in range(iterations):
        k = int(A.sum())
        r = L.residual(x, sig, A)
        nr = float(np.linalg.norm(r))
        if np.abs(r).max() < 1e-14:
            break
        J = np.empty((d + k, d + k))
        for m in range(d + k):
            xe, se = x.copy(), sig.copy()
            if m < d:
                xe[m] += 1e-7
            else:
                se[m - d] += 1e-7
            J[:, m] = (L.residual(xe, se, A) - r) / 1e-7
        dz = np.linalg.lstsq(J, -r, rcond=None)[0]
        G, Gn = L.grad0(x), L.grad0(x + dz[:d])
        crossed = ~A & ((np.sign(Gn) != np.sign(G)) | (np.abs(Gn) < band))
        if crossed.any():                         # crossed pairs join A, then the step is recomputed
            full = np.zeros_like(G)
            full[A] = sig
            full[crossed] = (G / (np.abs(G) + EPS))[crossed]
            A = A | crossed
            sig = full[A]
            continue
        a = 1.0
        while a > 1e-4:
            xn, sn = x + a * dz[:d], np.clip(sig + a * dz[d:], -1 + 1e-15, 1 - 1e-15)
            if np.linalg.norm(L.residual(xn, sn, A)) < (1 - 1e-4 * a) * nr:
                break
            a /= 2
        else:
            print(f"    iteration {it}: no decrease of the lifted residual", flush=True)
            break
        x, sig = xn, sn
    r = L.residual(x, sig, A)
    gA = L.grad0(x)[A]
    wrong = (np.abs(sig) > 0.999) & (np.sign(sig) != np.sign(gA))
    print(f"    {int(A.sum())} lifted pairs; lifted residual ||R||_2 {np.linalg.norm(r):.2e}; real "
          f"||T(x) - x||_inf {np.abs(T(x) - x).max():.2e}; inside a layer (|s| <= 0.999): "
          f"{int((np.abs(sig) <= 0.999).sum())}, s = {np.round(sig[np.abs(sig) <= 0.999], 3)}; pinned at s = +-1 "
          f"against the sign of g: {int(wrong.sum())} (|g| {np.abs(gA[wrong])})", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--d", type=int, default=100)
    args = ap.parse_args()
    print(f"load average before: {os.getloadavg()}", flush=True)
    d = args.d
    fed = random_quadratic(N, d, L=4.0, mu=0.5, heterogeneity=1.0, seed=0)
    make = lambda eps: fedopt_operator(FedOpt(client_optimizer=optim.adagrad(LR, eps=eps),
                                              server_optimizer=optim.sgd(1.0), local_steps=STEPS), fed)
    T = make(EPS)
    L = Lifted(fed)
    x0 = fed.optimum()
    G = L.grad0(x0)
    check = float(np.abs(L.T(x0, G / (np.abs(G) + EPS), G) - T(x0)).max())
    print(f"lifted operator against fedopt_operator at x*: {check:.1e}", flush=True)
    assert check <= 1e-14

    t0 = time.perf_counter()
    print("1. lifted Newton from the stall of Newton-Krylov", flush=True)
    try:
        diagnosed_fixed_point(T, x0, dense_jacobian_max=0)
        print("    Newton-Krylov converged (not expected)")
        return
    except DiscontinuityLayerError as exc:
        assert exc.x is not None
        x = exc.x
        print(f"    stall: residual {exc.residual:.2e}", flush=True)
    G = L.grad0(x)
    A = np.abs(G) < 1e-6
    lifted_newton(L, T, x, A, (G / (np.abs(G) + EPS))[A])
    print(f"    {time.perf_counter() - t0:.0f} s", flush=True)

    t0 = time.perf_counter()
    print("2. Krasnoselskii-Mann with diminishing steps, then lifted Newton on the chattering pairs", flush=True)
    x = x0.copy()
    rounds = 4000
    mean_s, flips, prev, xs = np.zeros((N, d)), np.zeros((N, d), dtype=bool), None, np.zeros(d)
    residuals = []
    for k in range(rounds):
        G = L.grad0(x)
        f = T(x) - x
        if k >= rounds // 2:
            mean_s += G / (np.abs(G) + EPS)
            xs += x
            residuals.append(float(np.abs(f).max()))
            if prev is not None:
                flips |= np.sign(G) != prev
            prev = np.sign(G)
        x = x + 0.5 / (1 + k / 50) * f
    mean_s /= rounds - rounds // 2
    xs /= rounds - rounds // 2
    print(f"    residual over the last {rounds // 2} rounds {min(residuals):.1e} to {max(residuals):.1e}; at the "
          f"averaged iterate {np.abs(T(xs) - xs).max():.2e}; pairs whose sign flips: {int(flips.sum())}, mean s "
          f"{np.round(mean_s[flips], 3)}", flush=True)
    lifted_newton(L, T, x, flips, mean_s[flips])
    print(f"    {time.perf_counter() - t0:.0f} s", flush=True)

    t0 = time.perf_counter()
    print("3. continuation in eps with Newton-Krylov", flush=True)
    x = x0.copy()
    for eps in (1e-1, 3e-2, 1e-2, 3e-3, 1e-3, 1e-4, 1e-5, 1e-6, 1e-7, 1e-8):
        try:
            x = newton_krylov_fixed_point(make(eps), x, dense_jacobian_max=0, max_evaluations=3000).x
            print(f"    eps {eps:.0e}: solved", flush=True)
        except DivergenceError as exc:
            print(f"    eps {eps:.0e}: FAILED: {' '.join(str(exc).split())[:160]}", flush=True)
            break
    print(f"    {time.perf_counter() - t0:.0f} s", flush=True)
    print(f"load average after: {os.getloadavg()}")


if __name__ == "__main__":
    main()
