"""Readable per-client loops used as oracles by the theory tests (not library code)."""

from __future__ import annotations

import numpy as np


def client_run(H: np.ndarray, e: np.ndarray, x: np.ndarray, lr: float, steps: int,
               P: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """tau steps y <- y - lr P (H y - e) from y = x; returns (y, G = sum of the P used)."""
    y = x.copy()
    G = np.zeros_like(P)
    for _ in range(steps):
        y = y - lr * P @ (H @ y - e)
        G = G + P
    return y, G


def fedopt_round(fed, x, lr, steps, P, *, server_lr=1.0, correction="none"):
    """One FedOpt round, client by client (LocalAdaptivity eq. 6; section 5's local correction
    normalises client i's change by its preconditioner sum, "dividing the client learning
    rate": G_i = s_i sum_k P_i with s_i = lr_i / max_j lr_j, FedOpt's client_lr_scale)."""
    N, d = fed.n_clients, fed.dim
    lr = np.broadcast_to(lr, (N,))
    steps = np.broadcast_to(steps, (N,))
    deltas, Ms = [], []
    for i in range(N):
        y, G = client_run(fed.H[i], fed.e[i], x, float(lr[i]), int(steps[i]), P[i])
        G = (float(lr[i]) / float(np.max(lr))) * G
        delta = y - x
        if correction == "none":
            deltas.append(delta)
            Ms.append(np.eye(d))
        else:
            deltas.append(np.linalg.solve(G, delta))
            Ms.append(np.linalg.inv(G))
    p = fed.weights
    g = -sum(p[i] * deltas[i] for i in range(N))
    if correction == "joint":
        g = np.linalg.solve(sum(p[i] * Ms[i] for i in range(N)), g)
    return x - server_lr * g


def fedprox_exact_round(fed, x, mu):
    """FedProx with the exact local minimiser of f_i(y) + mu/2 ||y - x||^2."""
    d = fed.dim
    ys = [np.linalg.solve(fed.H[i] + mu * np.eye(d), fed.e[i] + mu * x) for i in range(fed.n_clients)]
    return sum(fed.weights[i] * ys[i] for i in range(fed.n_clients))
