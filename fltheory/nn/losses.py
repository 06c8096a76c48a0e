"""Per-sample losses and their gradients with respect to the model output.

A loss maps outputs (m, n, K) and targets to per-sample values l_j (m, n)
and dl_j/dout_j (m, n, K); averaging over a client's samples is done by the
caller (sample weights), so the same functions give batch, per-sample and
Fisher quantities.
"""

from __future__ import annotations

from abc import ABC, abstractmethod

import numpy as np
from scipy.special import log_softmax

from ..errors import InvalidProblemError

__all__ = ["Loss", "SoftmaxCrossEntropy", "MSE"]


class Loss(ABC):
    """value_and_grad(out, targets) -> (l (m, n), dl/dout (m, n, K))."""

    classification: bool = False

    @abstractmethod
    def value_and_grad(self, out: np.ndarray, targets: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        ...

    def output_hvp(self, out: np.ndarray, targets: np.ndarray, rout: np.ndarray) -> np.ndarray:
        """R{dl/dout} = (d^2 l / dout^2) rout per sample -> (m, n, K); used by
        exact Hessian-vector products."""
        raise InvalidProblemError(f"{type(self).__name__} has no output Hessian: implement output_hvp")

    @abstractmethod
    def check_targets(self, targets: np.ndarray, out_shape: tuple[int, ...], where: str) -> np.ndarray:
        """Validate one client's targets (n, ...) against the per-sample output shape."""

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"


class SoftmaxCrossEntropy(Loss):
    """l_j = log sum_k exp(z_jk) - z_{j y_j}; dl_j/dz_j = softmax(z_j) - e_{y_j}.

    Targets are integer class labels in [0, K).  Evaluated through
    ``scipy.special.log_softmax`` (no overflow for large logits)."""

    classification = True

    def value_and_grad(self, out: np.ndarray, targets: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        logp = log_softmax(out, axis=-1)
        y = targets.astype(np.int64)[..., None]
        value = -np.take_along_axis(logp, y, axis=-1)[..., 0]
        grad = np.exp(logp)
        np.put_along_axis(grad, y, np.take_along_axis(grad, y, axis=-1) - 1.0, axis=-1)
        return value, grad

    def output_hvp(self, out: np.ndarray, targets: np.ndarray, rout: np.ndarray) -> np.ndarray:
        """(diag(p) - p p^T) rout = p (.) (rout - <p, rout>), p = softmax(out)."""
        p = np.exp(log_softmax(out, axis=-1))
        return p * (rout - np.einsum("...k,...k->...", p, rout)[..., None])

    def check_targets(self, targets: np.ndarray, out_shape: tuple[int, ...], where: str) -> np.ndarray:
        t = np.asarray(targets)
        if len(out_shape) != 1:
            raise InvalidProblemError(f"SoftmaxCrossEntropy needs flat logits (K,), model gives {out_shape}")
        if t.ndim != 1 or not (np.issubdtype(t.dtype, np.integer) or np.all(np.mod(t, 1) == 0)):
            raise InvalidProblemError(f"{where}: labels must be a 1-D integer array, got shape {t.shape} "
                                      f"dtype {t.dtype}")
        if t.size and (t.min() < 0 or t.max() >= out_shape[0]):
            raise InvalidProblemError(f"{where}: labels must lie in [0, {out_shape[0]}), got range "
                                      f"[{t.min()}, {t.max()}]")
        return t.astype(np.int64)


class MSE(Loss):
    """l_j = (1/2) ||out_j - t_j||^2; dl_j/dout_j = out_j - t_j."""

    def value_and_grad(self, out: np.ndarray, targets: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        r = out - targets
        return 0.5 * np.einsum("mnk,mnk->mn", r, r), r

    def output_hvp(self, out: np.ndarray, targets: np.ndarray, rout: np.ndarray) -> np.ndarray:
        """The output Hessian is the identity: R{out - t} = rout."""
        return rout

    def check_targets(self, targets: np.ndarray, out_shape: tuple[int, ...], where: str) -> np.ndarray:
        t = np.asarray(targets, dtype=np.float64)
        if len(out_shape) != 1:
            raise InvalidProblemError(f"MSE needs flat outputs (K,), model gives {out_shape}")
        if t.ndim == 1 and out_shape == (1,):
            t = t[:, None]
        if t.ndim != 2 or t.shape[1] != out_shape[0]:
            raise InvalidProblemError(f"{where}: targets must have shape (n, {out_shape[0]}), got {t.shape}")
        if not np.all(np.isfinite(t)):
            raise InvalidProblemError(f"{where}: targets contain non-finite values")
        return t
