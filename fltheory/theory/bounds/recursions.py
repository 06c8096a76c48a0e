"""Unrolling lemmas for one-step recursions, with explicit constants, and the rates they give.

Both seed proofs that end in a rate unroll a recursion of the form

    r_{t+1} <= (1 - a gamma_t) r_t - b gamma_t s_t + c gamma_t^2,   t = 0..T,      (R)

for non-negative sequences r_t, s_t, constants a > 0, b, c >= 0 and step sizes
gamma_t <= 1/d (d >= a).  With weights w_t >= 0, W_T = sum_t w_t, the lemmas bound

    Psi_T = (b / W_T) sum_{t=0}^T w_t s_t + a r_{T+1}.

* Decreasing steps: Stich, "Unified optimal analysis of the (stochastic)
  gradient method" (arXiv:1907.04232), Lemma 3, quoted as Lemma 3 of
  LocalAdaptivity (App. C, eqs. 62-63): with the step sizes and weights of
  :func:`stich_schedule`,

      Psi_T <= 32 d r_0 exp(-a T / (2 d)) + 36 c / (a T).

  Source status: the step sizes, weights and the constants 32 and 36 are as recalled; the printed
  statement of Stich's Lemma 3 was not available to us (the seed's text lost eqs. 62-63, and no copy
  of arXiv:1907.04232 beyond its abstract was found), so they are NOT verified against the source.
  The abstract's rate O(L R^2 exp(-mu T / (4 L)) + sigma^2 / (mu T)) is what this form gives with
  a = mu, d = 2 L (consistent, not a confirmation).  What IS verified here: with this schedule the
  inequality holds for the exact supremum of Psi_T over all admissible sequences (the tests compute
  it by a backward recursion, brute-forced for short runs); the worst ratios found over a/d in
  [1e-3, 1], T in 1..20000 are 0.016 for the r_0 term and 0.333 for the c term, so the constants
  are valid (with slack) whether or not they are the paper's.

* Constant step: Lemma 5 of SCAFFOLD-v1 (App. B; its printed inequality
  was lost in the text we have, we state and prove our own explicit form).
  With w_t = (1 - a gamma)^{-(t+1)} (the weights of the output average, eq. 8
  and eq. 13), multiplying (R) by w_t / gamma and summing telescopes
  [derived]: since w_t (1 - a gamma) = w_{t-1},

      (b / W_T) sum_t w_t s_t + (w_T / (gamma W_T)) r_{T+1} <= r_0 / (gamma W_T) + c gamma,

  and w_T / (gamma W_T) >= a, W_T >= w_T >= exp(a gamma (T + 1)) give

      Psi_T <= (r_0 / gamma) exp(-a gamma (T + 1)) + c gamma.                       (U)

  With gamma = min(1/d, ln(M) / (a T)), M = max(2, a^2 r_0 T^2 / c) (gamma = 1/d
  when c = 0) [derived, case by case]:

      Psi_T <= d r_0 exp(-a (T + 1) / d) + (c / (a T)) (ln M + 1 / ln 2),

  of the shape O~(d r_0 exp(-a T / d) + c / (a T)).  Review note: the seed's text of Lemma 5 keeps only
  "a telescoping sum", so which rate it prints cannot be checked here; the telescoping and the case
  analysis above were re-derived and hold.  W_T >= w_T is loose: W_T = (w_T - 1) / (a gamma) exactly
  (a geometric sum), so r_0 / (gamma W_T) = a r_0 / ((1 - a gamma)^{-(T+1)} - 1), of order
  a r_0 exp(-a gamma (T + 1)); (U) keeps the simpler, larger r_0 / gamma factor.

:func:`sgd_special_case_rate` is App. C's SGD special case with one local step (eq. 77): the
classical decaying-rate induction with explicit constants.

:func:`fedopt_theorem1_rate` applies Stich's lemma to the recursion of
LocalAdaptivity's Theorem 1 (App. C, eq. 61; b = 0, d = 1, a = 1 - rho_bar,
c = sum_i p_i^2 phi_i, gamma_t the server rate): the final rate of eq. 7 with
explicit constants.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from ..._validate import checked_arguments, finite_array, integer, positive
from ...errors import InvalidHyperparameterError
from ..result import Assumption, BoundResult, make_result

__all__ = ["constant_step_bound", "constant_step_choice", "constant_step_rate", "constant_step_weights",
           "fedopt_theorem1_rate", "psi", "sgd_special_case_rate", "stich_bound", "stich_schedule",
           "weighted_output"]

_STICH = ("Stich (arXiv:1907.04232) Lemma 3, as LocalAdaptivity App. C Lemma 3 (eqs. 62-63); constants as "
          "recalled, not verified against the source")
_EQ7 = ("LocalAdaptivity (arXiv:2106.02305) Theorem 1, eq. 7, from eq. 61 and Lemma 3 with Stich's constants "
        "(as recalled, not verified against the source)")


def _check_a_d(a: float, d: float) -> None:
    positive("a", a)
    positive("d", d)
    if a > d:
        raise InvalidHyperparameterError(f"the lemma needs d >= a (so a gamma <= 1 for gamma <= 1/d), got "
                                         f"a = {a!r}, d = {d!r}")


def _check_lemma(r0: float, c: float, T: int, a: float, d: float) -> None:
    """The arguments of the lemma's bound: T >= 1 rounds, 0 < a <= d, r_0 >= 0, c >= 0."""
    integer("T", T, minimum=1)
    _check_a_d(a, d)
    positive("r0", r0, allow_zero=True)
    positive("c", c, allow_zero=True)


@checked_arguments
def stich_schedule(T: int, a: float, d: float) -> tuple[np.ndarray, np.ndarray]:
    """Step sizes gamma_t and weights w_t, t = 0..T, of Stich's Lemma 3 (arXiv:1907.04232), as recalled
    (not verified against the printed lemma; see the module docstring).

    If T <= d/a: gamma_t = 1/d and w_t = (1 - a/d)^{-(t+1)} (for a = d, where these weights are
    undefined: w_T = 1 and the others 0).  Otherwise, with
    t_0 = ceil(T/2) and kappa = 2d/a: gamma_t = 1/d and w_t = 0 for t < t_0, and
    gamma_t = 2 / (a (kappa + t - t_0)), w_t = (kappa + t - t_0)^2 for t >= t_0.
    """
    integer("T", T, minimum=1)
    _check_a_d(a, d)
    t = np.arange(T + 1, dtype=np.float64)
    if T <= d / a:
        if a < d:
            return np.full(T + 1, 1.0 / d), (1.0 - a / d) ** (-(t + 1.0))
        # a = d: a gamma = 1 forgets r_t, and the last weight alone gives Psi_T <= c / d <= c / (a T)
        return np.full(T + 1, 1.0 / d), (t == T).astype(np.float64)
    t0 = math.ceil(T / 2)
    kappa = 2.0 * d / a
    late = t >= t0
    shifted = kappa + t[late] - t0
    gamma = np.full(T + 1, 1.0 / d)
    gamma[late] = 2.0 / (a * shifted)
    w = np.zeros(T + 1)
    w[late] = shifted ** 2
    return gamma, w


@checked_arguments
def stich_bound(r0: float, c: float, T: int, a: float, d: float) -> float:
    """32 d r_0 exp(-a T / (2 d)) + 36 c / (a T): Stich's Lemma 3 bound on Psi_T.

    Constants as recalled, not verified against the printed lemma (see the module docstring); they are
    verified to bound the exact worst case of the recursion under :func:`stich_schedule`.
    """
    _check_lemma(r0, c, T, a, d)
    return 32.0 * d * r0 * math.exp(-a * T / (2.0 * d)) + 36.0 * c / (a * T)


@checked_arguments
def constant_step_weights(T: int, a: float, gamma: float) -> np.ndarray:
    """w_t = (1 - a gamma)^{-(t+1)}, t = 0..T: the positive weights of the constant-step lemma and of
    SCAFFOLD-v1's output average (eq. 8, eq. 13).  Needs 0 < a gamma < 1."""
    integer("T", T, minimum=0)
    positive("a", a)
    positive("gamma", gamma)
    if a * gamma >= 1:
        raise InvalidHyperparameterError(f"weights need a gamma < 1, got a = {a!r}, gamma = {gamma!r}")
    return (1.0 - a * gamma) ** (-(np.arange(T + 1, dtype=np.float64) + 1.0))


@checked_arguments
def constant_step_choice(r0: float, c: float, T: int, a: float, d: float) -> float:
    """gamma = min(1/d, ln(M) / (a T)), M = max(2, a^2 r_0 T^2 / c); 1/d when c = 0."""
    _check_lemma(r0, c, T, a, d)
    if c == 0:
        return 1.0 / d
    M = max(2.0, a * a * r0 * T * T / c)
    return min(1.0 / d, math.log(M) / (a * T))


@checked_arguments
def constant_step_bound(r0: float, c: float, T: int, a: float, gamma: float) -> float:
    """(r_0 / gamma) exp(-a gamma (T + 1)) + c gamma: the telescoped bound (U) on Psi_T for any constant
    step 0 < gamma with a gamma < 1."""
    integer("T", T, minimum=0)
    positive("a", a)
    positive("gamma", gamma)
    positive("r0", r0, allow_zero=True)
    positive("c", c, allow_zero=True)
    if a * gamma >= 1:
        raise InvalidHyperparameterError(f"needs a gamma < 1, got a = {a!r}, gamma = {gamma!r}")
    return r0 / gamma * math.exp(-a * gamma * (T + 1)) + c * gamma


@checked_arguments
def constant_step_rate(r0: float, c: float, T: int, a: float, d: float) -> float:
    """d r_0 exp(-a (T + 1) / d) + (c / (a T)) (ln M + 1 / ln 2): the bound on Psi_T with the step of
    :func:`constant_step_choice` (M as there; the second term is 0 when c = 0)."""
    _check_lemma(r0, c, T, a, d)
    first = d * r0 * math.exp(-a * (T + 1) / d)
    if c == 0:
        return first
    M = max(2.0, a * a * r0 * T * T / c)
    return first + c / (a * T) * (math.log(M) + 1.0 / math.log(2.0))


def psi(r: ArrayLike, s: ArrayLike, w: ArrayLike, a: float, b: float) -> float:
    """Psi_T = (b / W_T) sum_{t=0}^T w_t s_t + a r_{T+1} for r = (r_0..r_{T+1}), s, w = (.._0..T)."""
    r_a = finite_array("r", r, ndim=1)
    s_a = finite_array("s", s, ndim=1)
    w_a = finite_array("w", w, ndim=1)
    if r_a.shape[0] != s_a.shape[0] + 1 or s_a.shape != w_a.shape:
        raise InvalidHyperparameterError(f"psi: r needs one more entry than s and w, got shapes {r_a.shape}, "
                                         f"{s_a.shape}, {w_a.shape}")
    W = float(w_a.sum())
    if W <= 0 or np.any(w_a < 0):
        raise InvalidHyperparameterError("psi: weights must be non-negative with a positive sum")
    return b * float(w_a @ s_a) / W + a * float(r_a[-1])


def weighted_output(xs: ArrayLike, weights: ArrayLike) -> np.ndarray:
    """x_bar = sum_r w_r x_r / sum_r w_r (SCAFFOLD-v1 eq. 8 and eq. 13) for iterates xs (R, d) and
    positive weights (R,)."""
    X = finite_array("xs", xs, ndim=2)
    w = finite_array("weights", weights, ndim=1)
    if w.shape[0] != X.shape[0] or np.any(w <= 0):
        raise InvalidHyperparameterError(f"weighted_output: need one positive weight per iterate, got "
                                         f"{w.shape[0]} weights for {X.shape[0]} iterates")
    return (w / w.sum()) @ X


def fedopt_theorem1_rate(rounds: int, *, rho: Any, phi: Any, weights: ArrayLike, init_dist2: float,
                         strict: bool = False) -> BoundResult:
    """LocalAdaptivity Theorem 1, eq. 7 with explicit constants: a bound on E||x_R - x~||^2.

    The proof (App. C) reaches e_{t+1} <= (1 - eta_s (1 - rho_bar)) e_t + eta_s^2 sum_i p_i^2 phi_i
    (eq. 61, e_t = E||x_t - x~||^2) and applies Lemma 3 (Stich).  With a = 1 - rho_bar, d = 1,
    c = sum p_i^2 phi_i, b = 0, T = R - 1 and the server rates eta_s = gamma_t of
    :func:`stich_schedule`:

        E||x_R - x~||^2 <= (32 e_0 exp(-(1 - rho_bar)(R - 1)/2) + 36 c / ((1 - rho_bar)(R - 1))) / (1 - rho_bar),

    i.e. O(e_0 exp(-(1 - rho_bar) R / 2) + sum p_i^2 phi_i / ((1 - rho_bar)^2 R)) (the printed eq. 7 is
    lost in our text; this is its content with Stich's constants).  ``terms["server_lr"]`` holds the
    schedule for rounds 0..R-1.
    """
    R = integer("rounds", rounds, minimum=2)
    p = finite_array("weights", weights, ndim=1, error=InvalidHyperparameterError)
    try:
        rho_a = np.broadcast_to(finite_array("rho", rho, error=InvalidHyperparameterError), p.shape)
        phi_a = np.broadcast_to(finite_array("phi", phi, error=InvalidHyperparameterError), p.shape)
    except ValueError as exc:
        if isinstance(exc, InvalidHyperparameterError):
            raise
        raise InvalidHyperparameterError(
            f"rho and phi must be scalars or one value per client ({p.shape[0]} weights), got shapes "
            f"{np.shape(rho)} and {np.shape(phi)}") from exc
    e0 = positive("init_dist2", init_dist2, allow_zero=True)
    if np.any(p <= 0) or abs(p.sum() - 1) > 1e-9:
        raise InvalidHyperparameterError(f"weights must be positive and sum to 1, got {p.tolist()}")
    rho_bar = float(p @ rho_a)
    c = float(np.sum(p ** 2 * phi_a))
    assumptions = (
        Assumption("A1: rho_bar = sum p_i rho_i < 1", 0 <= rho_bar < 1, f"rho_bar = {rho_bar!r}"),
        Assumption("A2: phi_i >= 0", bool(np.all(phi_a >= 0)), f"phi = {phi_a.tolist()}"),
    )
    value = None
    terms: dict[str, Any] = {"rho_bar": rho_bar, "noise": c}
    if 0 <= rho_bar < 1 and np.all(phi_a >= 0):
        a = 1.0 - rho_bar
        T = R - 1
        gamma, _ = stich_schedule(T, a, 1.0)
        value = stich_bound(e0, c, T, a, 1.0) / a
        terms.update(server_lr=gamma, a=a, T=T)
    return make_result(value, assumptions, reference=_EQ7, variant="derived", terms=terms, strict=strict)


_EQ77 = ("LocalAdaptivity (arXiv:2106.02305) App. C, special case SGD, eqs. 67-68 and 77 (tau = 1), "
         "explicit constants derived")


@checked_arguments
def sgd_special_case_rate(rounds: int, *, mu: float, L: float, sigma2: float, n_clients: int,
                          init_dist2: float, strict: bool = False) -> BoundResult:
    """LocalAdaptivity App. C, SGD special case with one local step (eq. 77): identical clients, server
    rate 1, client rate eta_t = 2 / (mu (t + gamma)) with gamma = 2 L / mu (so eta_0 = 1/L).

    With equal weights the recursion eq. 67 reads e_{t+1} <= (1 - eta_t mu) e_t + eta_t^2 sigma^2 / N
    (rho = 1 - eta mu, phi = eta^2 sigma^2 for tau = 1).  The induction of eq. 68 [derived constants]
    gives, for every t,

        E||x_t - x*||^2 <= v / (t + gamma),   v = max(4 sigma^2 / (mu^2 N), gamma ||x_0 - x*||^2),

    the O(sigma^2 / (mu^2 N t)) rate of synchronous SGD with N workers (eq. 77).  ``terms["client_lr"]``
    holds eta_0..eta_{R-1}, ``terms["per_round"]`` the bound for t = 0..R.
    """
    R = integer("rounds", rounds, minimum=1)
    N = integer("n_clients", n_clients, minimum=1)
    e0 = positive("init_dist2", init_dist2, allow_zero=True)
    s2 = positive("sigma2", sigma2, allow_zero=True)
    assumptions = (Assumption("0 < mu <= L", 0 < mu <= L, f"mu = {mu!r}, L = {L!r}"),)
    value, terms = None, {}
    if 0 < mu <= L:
        gamma = 2.0 * L / mu
        t = np.arange(R + 1, dtype=np.float64)
        v = max(4.0 * s2 / (mu * mu * N), gamma * e0)
        per_round = v / (t + gamma)
        value = float(per_round[-1])
        terms = {"client_lr": 2.0 / (mu * (t[:-1] + gamma)), "per_round": per_round, "v": v, "gamma": gamma}
    return make_result(value, assumptions, reference=_EQ77, variant="derived", terms=terms, strict=strict)
