"""Independent references for the problem tests: per-sample Python loops of
the textbook formulas, central finite differences, and instance builders."""

from __future__ import annotations

import math

import numpy as np

from fltheory.problems import LogisticFederation


def make_logistic(seed: int, n_clients: int, n_feat: int, max_rows: int, *, n_classes=None,
                  reg=0.1, scale=1.0, weights=False) -> LogisticFederation:
    rng = np.random.default_rng(seed)
    rows = rng.integers(1, max_rows + 1, n_clients)
    feats = [scale * rng.standard_normal((int(n), n_feat)) for n in rows]
    if n_classes is None:
        labs = [np.where(rng.random(int(n)) < 0.5, -1.0, 1.0) for n in rows]
    else:
        labs = [rng.integers(0, n_classes, int(n)) for n in rows]
    w = rng.uniform(0.5, 2.0, n_clients) if weights else None
    return LogisticFederation(feats, labs, weights=w, reg=reg, n_classes=n_classes)


def ref_binary(a: np.ndarray, y: np.ndarray, x: np.ndarray, reg: float):
    """Loss, gradient, Hessian of one binary client by a loop over samples."""
    n, f = a.shape
    loss, g, H = 0.0, np.zeros(f), np.zeros((f, f))
    for j in range(n):
        z = y[j] * float(a[j] @ x)
        loss += math.log1p(math.exp(-z)) if z > -30 else -z + math.log1p(math.exp(z))
        s = 1.0 / (1.0 + math.exp(z))                      # sigmoid(-z)
        g += -y[j] * s * a[j]
        H += s * (1 - s) * np.outer(a[j], a[j])
    return loss / n + 0.5 * reg * x @ x, g / n + reg * x, H / n + reg * np.eye(f)


def ref_multi(a: np.ndarray, y: np.ndarray, x: np.ndarray, reg: float, C: int):
    """Loss, gradient, Hessian of one softmax client by loops (layout x[j*C+c] = W[j, c])."""
    n, f = a.shape
    W = x.reshape(f, C)
    loss, g, H = 0.0, np.zeros(f * C), np.zeros((f * C, f * C))
    for j in range(n):
        z = a[j] @ W
        zmax = max(z)
        lse = zmax + math.log(sum(math.exp(v - zmax) for v in z))
        loss += lse - z[int(y[j])]
        p = np.exp(z - lse)
        for k in range(f):
            for c in range(C):
                g[k * C + c] += a[j, k] * (p[c] - (c == int(y[j])))
                for k2 in range(f):
                    for c2 in range(C):
                        H[k * C + c, k2 * C + c2] += a[j, k] * a[j, k2] * (p[c] * (c == c2) - p[c] * p[c2])
    return loss / n + 0.5 * reg * x @ x, g / n + reg * x, H / n + reg * np.eye(f * C)


def fd_grad(fun, x: np.ndarray, h: float = 1e-6) -> np.ndarray:
    """Central differences of a scalar function."""
    E = np.eye(x.shape[0]) * h
    return np.array([(fun(x + e) - fun(x - e)) / (2 * h) for e in E])


def fd_jac(fun, x: np.ndarray, h: float = 1e-6) -> np.ndarray:
    """Central-difference Jacobian of a vector function (rows = outputs)."""
    E = np.eye(x.shape[0]) * h
    return np.stack([(fun(x + e) - fun(x - e)) / (2 * h) for e in E], axis=1)


def mc_interval(samples: np.ndarray, z: float = 5.0) -> tuple[float, float]:
    """Mean +- z standard errors (z = 5: false alarms ~ 6e-7 per check)."""
    m = samples.mean()
    se = samples.std(ddof=1) / math.sqrt(samples.shape[0])
    return m - z * se, m + z * se
