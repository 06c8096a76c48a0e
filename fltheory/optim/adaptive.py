"""AdaGrad, Adam and Yogi as pure optimizers sharing one moment recursion.

All three keep a first moment mu and a second moment nu per coordinate (the
update is elementwise, so the preconditioner is diagonal):

    mu_k = b1 mu_{k-1} + (1 - b1) g_k                      (mu_0 = 0)
    AdaGrad: nu_k = nu_{k-1} + g_k^2
    Adam:    nu_k = b2 nu_{k-1} + (1 - b2) g_k^2
    Yogi:    nu_k = nu_{k-1} - (1 - b2) g_k^2 sign(nu_{k-1} - g_k^2)
    u_k = -lr mu_hat_k / (sqrt(nu_hat_k) + eps)

with nu_0 = ``initial_accumulator`` and, when ``bias_correction`` is on,
mu_hat = mu / (1 - b1^k), nu_hat = nu / (1 - b2^k), k the optimizer's own
step counter ``count`` (never the round number); without it mu_hat = mu,
nu_hat = nu.  (Reddi et al. 2021, "Adaptive Federated Optimization",
Algorithm 2; Kingma and Ba 2015, Algorithm 1; Zaheer et al. 2018, Yogi,
Algorithm 2; LocalAdaptivity section 3 for their use as client optimizers.)

Local-correction weight (LocalAdaptivity section 5: "if the client optimizer is Adam
then [the matrix] is a weighted summation of local pre-conditioners").  With
D_k = s_k / (sqrt(nu_hat_k) + eps), s_k = 1/(1 - b1^k) (bias correction) or 1,
a gradient g_j enters every later step through mu, so over K restarted steps
Delta = -lr sum_j A^(j) g_j with A^(j) = sum_{k>=j} (1 - b1) b1^(k-j) D_k and

    sum_j A^(j) = sum_k D_k (1 - b1^k)   =: sum_k m_k.

``precond`` therefore returns the effective diagonal
m_k = (1 - b1^k) s_k / (sqrt(nu_hat_k) + eps), i.e. 1/(sqrt(nu_hat)+eps) with
bias correction and (1 - b1^k)/(sqrt(nu)+eps) without; for AdaGrad (b1 = 0)
m_k = 1/(sqrt(nu_k)+eps).  Before any update it is 0.  The factor
(1 - b1^k) is the EMA, with coefficient b1, of a unit weight started at 0.
k is the optimizer's own counter, so the identity also holds for a state
persisted across rounds (the sum then weights every gradient still held in
mu, earlier rounds' included); after :func:`mean_rows` of rows with different
counters it is approximate.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np

from .._validate import flag
from . import _checks
from .base import KernelSteps, Optimizer, rebuildable

__all__ = ["AdaptiveState", "adagrad", "adam", "yogi"]



def _read_only_number(value: float) -> np.ndarray:
    """A read-only one-element float64 buffer (views of it can never be made writable)."""
    buf = np.array([value], dtype=np.float64)
    buf.flags.writeable = False
    return buf


_ZERO = _read_only_number(0.0)
#: Shapes whose constant start views an optimizer keeps (a round uses one or two).
_START_SHAPES = 8


def _constant(buf: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    """``np.broadcast_to(buf[0], shape)`` built directly (a third of its cost): a read-only
    view whose every entry is the one number of ``buf``."""
    return np.ndarray(shape, dtype=np.float64, buffer=buf, strides=(0,) * len(shape))


class AdaptiveState(NamedTuple):
    """count: (m,) steps taken; mu: (m, d) first moment; nu: (m, d) second moment.

    With b1 = 0 (AdaGrad, FedAdagrad's default) the first moment is the current
    gradient itself and is not stored: ``mu`` stays at its initial 0.  ``init``
    returns mu and nu as read-only broadcast views of their constant start values
    (a state is a value: nothing writes into it)."""

    count: np.ndarray  # type: ignore[assignment]  # the step counter; shadows tuple.count on purpose
    mu: np.ndarray
    nu: np.ndarray


def _second_moment(rule: str, nu: np.ndarray, g2: np.ndarray, b2: float) -> np.ndarray:
    if rule == "adagrad":
        return nu + g2
    if rule == "adam":
        return b2 * nu + (1.0 - b2) * g2
    return nu - (1.0 - b2) * g2 * np.sign(nu - g2)  # yogi


def adaptive(rule: str, lr: float, b1: float, b2: float, eps: float,
             initial_accumulator: float, bias_correction: bool, name: str) -> Optimizer:
    """The shared recursion of the module docstring; ``rule`` is
    "adagrad", "adam" or "yogi".  Use :func:`adagrad`, :func:`adam`,
    :func:`yogi` or the server helpers instead of calling this directly."""
    lr = _checks.learning_rate(f"{name}: lr", lr)
    bias_correction = flag(f"{name}: bias_correction", bias_correction)
    b1 = _checks.decay(f"{name}: b1", b1)
    b2 = _checks.decay(f"{name}: b2", b2)
    eps = _checks.stability(f"{name}: eps", eps)
    nu0 = _checks.accumulator(f"{name}: initial_accumulator", initial_accumulator)
    bias_correction = bool(bias_correction)
    nu0_buf = _read_only_number(nu0)
    # (shape -> (mu, nu) start views): read-only views of constant buffers, so one pair per
    # shape serves every init (a state is a value; these views can never be written)
    starts: dict[tuple[int, ...], tuple[np.ndarray, np.ndarray]] = {}

    def init(params: Any, clients: Any = None) -> AdaptiveState:
        x = _checks.rows(params, f"{name}.init")
        m = x.shape[0]
        # the indices are only checked here (the moments do not depend on them)
        _checks.client_rows(clients, m, f"{name}.init")
        # The moments start constant (mu = +0.0, nu = nu_0 entrywise): read-only broadcast
        # views of one number (no memory; the same values, sign of a zero included, as
        # np.zeros_like / np.full_like).  States are values: update and the fused steps
        # write new or owned arrays, take_rows / put_rows / mean_rows copy; a fused copy
        # then reads one number instead of faulting in fresh zero pages of an (m, d) array.
        pair = starts.get(x.shape)
        if pair is None:
            if len(starts) >= _START_SHAPES:
                starts.clear()
            pair = starts[x.shape] = (_constant(_ZERO, x.shape), _constant(nu0_buf, x.shape))
        return AdaptiveState(np.zeros(m, dtype=np.int64), *pair)

    def _scales(count: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        k = count.astype(np.float64)[:, None]
        if not bias_correction:
            return np.ones_like(k), np.ones_like(k)
        with np.errstate(divide="ignore"):
            return 1.0 / (1.0 - b1 ** k), 1.0 / (1.0 - b2 ** k)

    def update(grads: Any, state: AdaptiveState, params: Any = None
               ) -> tuple[np.ndarray, AdaptiveState]:
        g = _checks.grads_like(grads, state.count.shape[0], f"{name}.update")
        if b1 == 0.0:
            # b1 mu + (1 - b1) g = 0 mu + 1 g = g exactly (for finite mu): use g and
            # leave mu at its initial 0 instead of computing it
            mu, first = state.mu, g
        else:
            mu = b1 * state.mu + (1.0 - b1) * g
            first = mu
        count = state.count + 1
        if rule == "adagrad":
            nu = np.square(g)
            nu += state.nu                            # nu + g^2 (one temporary)
        else:
            nu = _second_moment(rule, state.nu, np.square(g), b2)
        # the same operations as -lr * ((s1 first) / (sqrt(s2 nu) + eps)), in place
        if bias_correction:
            s1, s2 = _scales(count)
            den = s2 * nu
            np.sqrt(den, out=den)
            den += eps
            step = s1 * first
            step /= den
        else:
            # s1 = s2 = 1: 1 * first and 1 * nu are exact, so they are skipped
            den = np.sqrt(nu)
            den += eps
            step = np.divide(first, den, out=den)
        step *= -lr
        return step, AdaptiveState(count, mu, nu)

    def precond(state: AdaptiveState) -> np.ndarray:
        # weight / (sqrt(s2 nu) + eps) where count > 0, else 0, in one buffer
        count = np.asarray(state.count)
        k = np.maximum(count, 1)
        s1, s2 = _scales(k)
        weight = (1.0 - b1 ** k.astype(np.float64))[:, None] * s1
        nu = np.asarray(state.nu, dtype=np.float64)
        # s2 = 1 without bias correction: 1 * nu == nu exactly, so it is not multiplied
        den = np.multiply(s2, nu) if bias_correction else np.sqrt(nu)
        if bias_correction:
            np.sqrt(den, out=den)
        den += eps
        out = np.divide(weight, den, out=den)
        idle = count <= 0
        if idle.any():
            out[idle] = 0.0
        return out

    def fused(state: AdaptiveState) -> _FusedAdaptive:
        return _FusedAdaptive(rule, lr, b1, b2, eps, _scales if bias_correction else None, state)

    return Optimizer(init, update, precond, name, fused)


class _FusedAdaptive(KernelSteps):
    """The steps of ``update`` in place over an owned copy of the state
    (:class:`fltheory.optim.base.FusedSteps`): the same floating-point
    operations in the same order, written into the moments and up to three
    scratch arrays, so one step is a handful of passes over (m, d) arrays that
    stay in cache and allocates nothing of that size.  Per step:

        AdaGrad: T = g*g; nu += T
        Adam:    T = g*g; T *= (1 - b2); nu *= b2; nu += T
        Yogi:    T = g*g; S = sign(nu - T); T *= (1 - b2); T *= S; nu -= T
        mu (b1 > 0): mu *= b1; U = g * (1 - b1); mu += U
        then T = sqrt(s2 nu) + eps, U = s1 mu / T (or g / T), U *= -lr,
        U *= rate (unless rate is the float 1.0), y += U

    (b * x + c * z and c * z + b * x round alike: addition and multiplication
    are commutative in IEEE arithmetic, so these equal ``update``'s results
    bit for bit).  Plain AdaGrad started from ``init``'s constant nu_0 (a
    restart) does not copy nu_0: its first step writes nu = nu_0 + g*g into a
    fresh array, or nu = g*g when nu_0 = +-0 (the same numbers: a square is
    never -0.0).  Squares are taken with ``np.square`` (the same product g*g,
    about twice as fast as ``np.multiply(g, g)`` on one (2500, 20) block here)."""

    def __init__(self, rule: str, lr: float, b1: float, b2: float, eps: float,
                 scales: Any, state: AdaptiveState) -> None:
        self.rule, self.lr, self.b1, self.b2, self.eps, self.scales = rule, lr, b1, b2, eps, scales
        self.count = np.array(state.count, dtype=np.int64, copy=True)
        self.pending = 0            # steps not yet added to count (only bias correction reads it per step)
        # b1 = 0: mu is never read or written (``update`` keeps it too)
        self.mu = state.mu if b1 == 0.0 else np.array(state.mu, dtype=np.float64, copy=True, order="C")
        # AdaGrad without bias correction: one flag test per step instead of the rule tests
        # (a flag, not ``self.step = self._adagrad_step``: that bound method would make a
        # reference cycle, keeping the buffers alive until the garbage collector runs)
        self.plain_adagrad = rule == "adagrad" and b1 == 0.0 and scales is None
        nu = state.nu
        # plain AdaGrad from a constant start (a restart: ``init``'s read-only view of nu_0):
        # the first step writes nu_0 + g*g into a fresh array instead of copying nu_0 first
        # (the same sums, one pass fewer); ``start`` holds that view until then
        self.start: np.ndarray | None = None
        if self.plain_adagrad and type(nu) is np.ndarray and nu.dtype == np.float64 and nu.ndim == 2 \
                and nu.strides == (0, 0) and isinstance(nu.base, np.ndarray) and not nu.base.flags.writeable:
            # (a constant view of a read-only buffer: nothing can change it before the first step)
            self.start = nu
            self.nu = np.empty(nu.shape)
        else:
            self.nu = np.array(nu, dtype=np.float64, copy=True, order="C")
        self.T = np.empty_like(self.nu)
        self.U = np.empty_like(self.nu) if (b1 != 0.0 or scales is not None) else self.T
        self.S = np.empty_like(self.nu) if rule == "yogi" else self.T
        self.neg_lr = -lr

    def _adagrad_step(self, grads: np.ndarray, params: np.ndarray, rate: float | np.ndarray) -> None:
        """:meth:`step` for AdaGrad without bias correction (b1 = 0, U is T), with the rule
        tests done once: T = g*g; nu += T; T = sqrt(nu); T += eps; T = g / T; T *= -lr;
        T *= rate (unless rate is the float 1.0); y += T (the first step from a constant
        start: nu = g*g for nu_0 = +-0, else T = g*g; nu = nu_0 + T)."""
        T, nu, start = self.T, self.nu, self.start
        if start is None:
            np.square(grads, out=T)
            nu += T
        elif start.size and start[0, 0] == 0.0:
            # the first step from nu_0 = 0 (either sign): nu = nu_0 + g*g is g*g exactly (a square
            # is never -0.0, and +-0.0 + y == y for every other y, NaN included): written directly
            np.square(grads, out=nu)
            self.start = None
        else:                                    # the first step from a constant start: nu = nu_0 + g*g
            np.square(grads, out=T)
            np.add(start, T, out=nu)
            self.start = None
        np.sqrt(nu, out=T)
        T += self.eps
        np.divide(grads, T, out=T)
        T *= self.neg_lr
        if not (isinstance(rate, float) and rate == 1.0):
            T *= rate
        params += T
        self.pending += 1

    def kernel(self) -> Any:
        """The step function: :meth:`step`, or directly the AdaGrad kernel it would call (for a
        caller's local variable only: stored on the instance it would make a reference cycle)."""
        return self._adagrad_step if self.plain_adagrad else self.step

    def run(self, grad: Any, buf: np.ndarray, params: np.ndarray, rate: float | np.ndarray, steps: int) -> None:
        """``steps`` steps with the oracle ``grad`` (:meth:`KernelSteps.run`); plain AdaGrad runs
        the operations of :meth:`_adagrad_step` in this loop (the same numbers, one Python call
        per step: the oracle's)."""
        if not self.plain_adagrad or steps <= 0:
            super().run(grad, buf, params, rate, steps)
            return
        T, nu, eps, neg_lr = self.T, self.nu, self.eps, self.neg_lr
        scaled = not (isinstance(rate, float) and rate == 1.0)
        square, sqrt, divide = np.square, np.sqrt, np.divide
        k = 0
        if self.start is not None:               # the first step from a constant start
            self._adagrad_step(grad(params, buf), params, rate)
            k = 1
        for _ in range(k, steps):
            g = grad(params, buf)
            square(g, out=T)
            nu += T
            sqrt(nu, out=T)
            T += eps
            divide(g, T, out=T)
            T *= neg_lr
            if scaled:
                T *= rate
            params += T
        self.pending += steps - k

    def step(self, grads: np.ndarray, params: np.ndarray, rate: float | np.ndarray) -> None:
        if self.plain_adagrad:
            self._adagrad_step(grads, params, rate)
            return
        g, T, U, nu = grads, self.T, self.U, self.nu
        np.square(g, out=T)                                        # g^2
        if self.rule == "adagrad":
            nu += T
        elif self.rule == "adam":
            T *= 1.0 - self.b2
            nu *= self.b2
            nu += T
        else:                                                      # yogi
            S = np.subtract(nu, T, out=self.S)
            np.sign(S, out=S)
            T *= 1.0 - self.b2
            T *= S
            nu -= T
        first = g
        if self.b1 != 0.0:
            mu = self.mu
            mu *= self.b1
            np.multiply(g, 1.0 - self.b1, out=U)
            mu += U
            first = mu
        if self.scales is not None:
            self.count += 1
            s1, s2 = self.scales(self.count)
            np.multiply(s2, nu, out=T)
            np.sqrt(T, out=T)
            T += self.eps
            np.multiply(s1, first, out=U)
            U /= T
        else:
            np.sqrt(nu, out=T)
            T += self.eps
            np.divide(first, T, out=U)
            self.pending += 1
        U *= -self.lr
        if not (isinstance(rate, float) and rate == 1.0):
            U *= rate
        params += U

    def state(self) -> AdaptiveState:
        if self.pending:
            self.count += self.pending
            self.pending = 0
        # no step yet from a constant start: nu is still that start (a read-only view)
        return AdaptiveState(self.count, self.mu, self.nu if self.start is None else self.start)


@rebuildable
def adagrad(lr: float, eps: float = 1e-8, initial_accumulator: float = 0.0) -> Optimizer:
    r"""AdaGrad: nu <- nu + g*g, u = -lr g / (sqrt(nu) + eps).

    LocalAdaptivity section 3 (client AdaGrad, P = diag(1/(sqrt(v)+eps)),
    docs/theory/index.md#algorithms); Duchi et al. 2011 (diagonal version).

    Parameters
    ----------
    lr : float
        Learning rate > 0.
    eps : float
        Added to sqrt(nu) in the denominator, > 0 (default 1e-8).
    initial_accumulator : float
        nu_0 >= 0, the value restarted every round (default 0).

    Notes
    -----
    ``precond``: 1/(sqrt(nu_k)+eps) of the last update (0 before any update).
    No bias correction and no first moment (b1 = 0); for Reddi et al.'s
    FedAdagrad with momentum use :func:`fltheory.optim.fedadagrad`.
    """
    return adaptive("adagrad", lr, 0.0, 0.0, eps, initial_accumulator, False,
                    f"adagrad(lr={lr}, eps={eps}, initial_accumulator={initial_accumulator})")


@rebuildable
def adam(lr: float, b1: float = 0.9, b2: float = 0.999, eps: float = 1e-8,
         bias_correction: bool = True, initial_accumulator: float = 0.0) -> Optimizer:
    r"""Adam: EMA moments, u = -lr mu_hat / (sqrt(nu_hat) + eps).

    mu_k = b1 mu + (1-b1) g, nu_k = b2 nu + (1-b2) g^2; with
    ``bias_correction`` (default True, Kingma and Ba 2015, Algorithm 1)
    mu_hat = mu/(1-b1^k), nu_hat = nu/(1-b2^k), k = own step counter.

    Parameters
    ----------
    lr : float
        Learning rate > 0.
    b1, b2 : float
        Moment decays in [0, 1) (defaults 0.9, 0.999).
    eps : float
        > 0, added to sqrt(nu_hat) (default 1e-8).
    bias_correction : bool
        Divide the moments by (1 - b^k) (default True).
    initial_accumulator : float
        nu_0 >= 0 (default 0).

    Notes
    -----
    ``precond``: the effective diagonal of the module docstring,
    (1-b1^k) s_k / (sqrt(nu_hat_k)+eps).
    """
    return adaptive("adam", lr, b1, b2, eps, initial_accumulator, bias_correction,
                    f"adam(lr={lr}, b1={b1}, b2={b2}, eps={eps}, bias_correction={bias_correction})")


@rebuildable
def yogi(lr: float, b1: float = 0.9, b2: float = 0.999, eps: float = 1e-3,
         initial_accumulator: float = 1e-6, bias_correction: bool = False) -> Optimizer:
    r"""Yogi: nu <- nu - (1-b2) g^2 sign(nu - g^2); u = -lr mu_hat/(sqrt(nu_hat)+eps).

    Zaheer et al. 2018, Algorithm 2 (no bias correction there: default False,
    also Reddi et al. 2021 Algorithm 2 which has none).  nu stays >= 0 when
    nu_0 >= 0: if nu > g^2 it decreases by (1-b2) g^2 < nu; otherwise it grows.

    Parameters
    ----------
    lr : float
        Learning rate > 0.
    b1, b2 : float
        Decays in [0, 1) (defaults 0.9, 0.999).
    eps : float
        > 0 (default 1e-3, Zaheer et al.'s recommended value).
    initial_accumulator : float
        nu_0 >= 0 (default 1e-6, Zaheer et al.).
    bias_correction : bool
        Optional Adam-style division by (1 - b^k), counted by the optimizer's
        own step counter (default False).
    """
    return adaptive("yogi", lr, b1, b2, eps, initial_accumulator, bias_correction,
                    f"yogi(lr={lr}, b1={b1}, b2={b2}, eps={eps}, bias_correction={bias_correction})")
