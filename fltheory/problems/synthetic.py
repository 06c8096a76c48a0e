"""FedProx Synthetic(alpha, beta) data (docs/theory/problems.md).

Li et al., *Federated Optimization in Heterogeneous Networks*, as coded in
their repository (generate_synthetic): K devices, d features, C classes;

    n_k = floor(LogNormal(4, 2)) + 50,
    u_k ~ N(0, alpha^2), W_k ~ N(u_k, 1) in R^{d x C}, b_k ~ N(u_k, 1) in R^C,
    B_k ~ N(0, beta^2),  v_k ~ N(B_k, 1) in R^d,
    x ~ N(v_k, Sigma), Sigma = diag(j^{-1.2}), j = 1..d,
    y = argmax softmax(W_k^T x + b_k),

alpha and beta are *standard deviations* (numpy's ``normal(0, alpha)``), and
each device's samples are shuffled and split 90/10 into train
(int(0.9 n_k) rows) and test.  IID variant: one W, b ~ N(0, 1) for all
devices and v_k = 0 (docs/theory/index.md; their code uses v_k = B_k 1 and is called
with beta = 0, where the two agree; alpha and beta are unused here).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .._validate import flag, positive
from ..errors import InvalidHyperparameterError
from ._seeding import as_generator, count
from ..aliases import Seed
from .logistic import LogisticFederation

__all__ = ["SyntheticData", "synthetic_fedprox"]


@dataclass(frozen=True)
class SyntheticData:
    """Train and test federations of Synthetic(alpha, beta) plus the raw draws.

    ``train`` / ``test`` are multinomial :class:`LogisticFederation` objects
    (features with a trailing constant 1 when ``intercept``, so the parameter
    is W stacked over b: x.reshape(d + 1, C)).  Raw arrays are per device
    (lists) or stacked over devices: ``W`` (K, d, C), ``b`` (K, C), ``v``
    (K, d), ``sizes`` (K,) total samples n_k per device.
    """

    train: LogisticFederation
    test: LogisticFederation
    X_train: list[np.ndarray]
    y_train: list[np.ndarray]
    X_test: list[np.ndarray]
    y_test: list[np.ndarray]
    W: np.ndarray
    b: np.ndarray
    v: np.ndarray
    sizes: np.ndarray
    alpha: float
    beta: float
    iid: bool


def synthetic_fedprox(alpha: float, beta: float, *, iid: bool = False, seed: Seed,
                      n_devices: int = 30, dim: int = 60, n_classes: int = 10,
                      reg: float = 0.0, intercept: bool = True,
                      train_fraction: float = 0.9) -> SyntheticData:
    """Draw Synthetic(alpha, beta) (or the IID variant) as in the module docstring.

    Parameters
    ----------
    alpha, beta : float
        Standard deviations >= 0 of the model and feature-mean priors.
    iid : bool
        IID variant (alpha, beta unused).
    seed : int or numpy.random.Generator
    n_devices, dim, n_classes : int
        K = 30, d = 60, C = 10 in FedProx.
    reg : float
        Ridge of the returned federations.  With ``intercept`` each device's
        labels are an argmax of affine functions of x, so every device's data
        are linearly separable and with reg = 0 no client objective has a
        minimiser (``client_optima()`` raises); in the IID variant the pooled
        data share one labelling rule, so ``optimum()`` raises too.  The
        non-IID pooled data usually overlap (different W_k), so x* of F may
        exist with reg = 0.  Use reg > 0 whenever client optima are needed.
    intercept : bool
        Append a constant feature 1 (FedProx's model has a bias b).
    train_fraction : float
        Share of each device's samples in the training set (0.9).
    """
    alpha = positive("alpha", alpha, allow_zero=True)
    beta = positive("beta", beta, allow_zero=True)
    K = count("n_devices", n_devices)
    d = count("dim", dim)
    C = count("n_classes", n_classes, minimum=2)
    frac = positive("train_fraction", train_fraction)
    if frac >= 1:
        raise InvalidHyperparameterError(f"train_fraction must lie in (0, 1), got {train_fraction!r}")
    iid = flag("iid", iid)
    intercept = flag("intercept", intercept)
    rng = as_generator(seed)
    sizes = np.floor(rng.lognormal(4.0, 2.0, K)).astype(np.int64) + 50
    sd = np.arange(1, d + 1) ** -0.6                          # sqrt of Sigma_jj = j^-1.2
    if iid:
        W = np.broadcast_to(rng.normal(0.0, 1.0, (d, C)), (K, d, C)).copy()
        b = np.broadcast_to(rng.normal(0.0, 1.0, C), (K, C)).copy()
        v = np.zeros((K, d))
    else:
        u = rng.normal(0.0, alpha, K)
        Bk = rng.normal(0.0, beta, K)
        v = rng.normal(Bk[:, None], 1.0, (K, d))
        W = rng.normal(u[:, None, None], 1.0, (K, d, C))
        b = rng.normal(u[:, None], 1.0, (K, C))
    Xtr, ytr, Xte, yte = [], [], [], []
    for k in range(K):                                        # construction only
        x = v[k] + sd * rng.standard_normal((int(sizes[k]), d))
        y = np.argmax(x @ W[k] + b[k], axis=1)
        perm = rng.permutation(int(sizes[k]))
        n_tr = int(frac * sizes[k])
        Xtr.append(x[perm[:n_tr]])
        ytr.append(y[perm[:n_tr]])
        Xte.append(x[perm[n_tr:]])
        yte.append(y[perm[n_tr:]])
    feat = (lambda X: [np.hstack([x, np.ones((x.shape[0], 1))]) for x in X]) if intercept \
        else (lambda X: X)
    train = LogisticFederation(feat(Xtr), ytr, reg=reg, n_classes=C)
    test = LogisticFederation(feat(Xte), yte, reg=reg, n_classes=C)
    return SyntheticData(train, test, Xtr, ytr, Xte, yte, W, b, v, sizes, alpha, beta, bool(iid))
