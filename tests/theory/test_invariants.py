"""Conserved quantities come from the algorithms' declarations, never from a tolerance.

Ill-conditioned instances with commuting (diagonal) client Hessians have a
closed-form rate and fixed point per eigendirection; a slow mode (eigenvalue
1 - 1e-10 and closer) must never be taken for a conserved one.
"""

import inspect

import numpy as np
import pytest

from fltheory import optim
from fltheory.algorithms import (
    EFL,
    Algorithm,
    FedAvg,
    FedCurv,
    FedDyn,
    FedElasticNet,
    FedOpt,
    FedProx,
    Scaffold,
    run,
)
from fltheory.algorithms.invariants import LinearInvariant
from fltheory.errors import InvalidHyperparameterError, InvalidProblemError, UnclassifiedDirectionError
from fltheory.problems.generators import random_quadratic
from fltheory.problems.quadratic import QuadraticFederation
from fltheory.theory import affine
from fltheory.theory.affine import (
    affine_round_map,
    fixed_point,
    invariant_subspace,
    orbit_rate,
    spectral_rate,
)

from ._affine_makers import AFFINE_MAKERS

EPS = np.finfo(float).eps
N, D = 3, 4
LR, K = 0.5, 5


def commuting(cond: float, shared: bool = True, seed: int = 0):
    """Diagonal Hessians with spectrum geomspace(1, 1/cond); ``shared``: every client has
    the same Hessian (heterogeneity only in the minimisers x_i*)."""
    rng = np.random.default_rng(seed)
    lam = np.geomspace(1.0, 1.0 / cond, D)
    if shared:
        lams = np.broadcast_to(lam, (N, D)).copy()
    else:
        lams = lam * rng.uniform(0.5, 1.0, size=(N, D))
        lams[:, -1] = lam[-1] * np.array([1.0, 0.5, 0.75])
    H = np.einsum("ij,jk->ijk", lams, np.eye(D))
    xs = rng.standard_normal((N, D))
    return QuadraticFederation(H, xs * lams), lams, xs


def one_minus_power(lams: np.ndarray, lr: float, k: int) -> np.ndarray:
    """1 - (1 - lr lambda)^k to full relative precision."""
    return -np.expm1(k * np.log1p(-lr * lams))


# ---- closed forms per eigendirection (uniform weights p_i = 1/N) ---------------------------------

def fedavg_closed(lams, xs, server_lr=1.0):
    """x_j <- x_j - s sum_i p_i (1 - (1 - lr l_ij)^K)(x_j - x*_ij)."""
    g = one_minus_power(lams, LR, K)
    rate = np.abs(1 - server_lr * g.mean(axis=0)).max()
    x = (g * xs).sum(axis=0) / g.sum(axis=0)
    return rate, x


def fedprox_closed(lams, xs, mu, solver):
    """Local iterate y -> y - lr (l (y - x*_i) + mu (y - x)) converges to
    y_inf = (l x*_i + mu x)/(l + mu) with factor b = 1 - lr (l + mu); after K steps
    Delta_i = (1 - b^K) l (x*_i - x)/(l + mu); exact solver: b^K = 0."""
    frac = np.ones_like(lams) if solver == "exact" else one_minus_power(lams + mu, LR, K)
    w = frac * lams / (lams + mu)
    rate = np.abs(1 - w.mean(axis=0)).max()
    return rate, (w * xs).sum(axis=0) / w.sum(axis=0)


def scaffold_closed(lams, xs, option):
    """Shared Hessian l per direction, A = (1 - lr l)^K, beta = (1 - A)/(K lr l).
    On the subspace N c = sum c_i: x multiplier 1 - (1 - A) (FedAvg's); option II
    control deviations c_i - c multiply by 1 - beta (N - 1 of them), option I
    resets them (0); c itself is a function of x (0).  Fixed point: x* = mean x*_i."""
    lam = lams[0]
    g = one_minus_power(lam, LR, K)
    beta = g / (K * LR * lam)
    rate = max(np.abs(1 - g).max(), (1 - beta).max() if option == "II" else 0.0)
    return rate, xs.mean(axis=0)


def feddyn_closed(lams, xs, alpha):
    """Shared Hessian l: on N h = sum grad_k the (x, h) block has eigenvalues
    alpha/(l + alpha) and 0, the deviations grad_k - mean grad multiply by l/(l + alpha)."""
    lam = lams[0]
    rate = max((alpha / (lam + alpha)).max(), (lam / (lam + alpha)).max())
    return rate, xs.mean(axis=0)


def fedavgm_closed(lams, xs, server_lr, beta):
    """Server heavy ball on g = gamma (x - xhat): [x, b] -> [x - eta (beta b + g), beta b + g],
    eigenvalues z^2 - (1 + beta - eta gamma) z + beta = 0 per direction."""
    g = one_minus_power(lams, LR, K)
    gamma = g.mean(axis=0)
    rate = 0.0
    for gm in gamma:
        rate = max(rate, float(np.abs(np.roots([1.0, -(1 + beta - server_lr * gm), beta])).max()))
    return rate, (g * xs).sum(axis=0) / g.sum(axis=0)


P_DIAG = np.array([1.0, 0.5, 0.8, 0.25])   # fixed diagonal client preconditioner (seed 001 eq. 2)

CASES = {
    "fedavg": (lambda: FedAvg(lr=LR, local_steps=K), False, lambda lam, x: fedavg_closed(lam, x)),
    "fedavg server 0.5": (lambda: FedAvg(lr=LR, local_steps=K, server_lr=0.5), False,
                          lambda lam, x: fedavg_closed(lam, x, 0.5)),
    "fedprox gd": (lambda: FedProx(lr=LR, local_steps=K, mu=0.3), False,
                   lambda lam, x: fedprox_closed(lam, x, 0.3, "gd")),
    "fedprox exact": (lambda: FedProx(mu=0.3, solver="exact"), False,
                      lambda lam, x: fedprox_closed(lam, x, 0.3, "exact")),
    "scaffold II": (lambda: Scaffold(lr=LR, local_steps=K), True,
                    lambda lam, x: scaffold_closed(lam, x, "II")),
    "scaffold I": (lambda: Scaffold(lr=LR, local_steps=K, option="I"), True,
                   lambda lam, x: scaffold_closed(lam, x, "I")),
    "feddyn": (lambda: FedDyn(alpha=0.5), True, lambda lam, x: feddyn_closed(lam, x, 0.5)),
    "fedavgm": (lambda: FedOpt(client_optimizer=optim.sgd(LR), server_optimizer=optim.fedavgm(0.8, 0.5),
                               local_steps=K, aggregation="uniform"), False,
                lambda lam, x: fedavgm_closed(lam, x, 0.8, 0.5)),
    "fedopt preconditioned": (lambda: FedOpt(client_optimizer=optim.preconditioned(LR, P_DIAG),
                                             server_optimizer=optim.sgd(1.0), local_steps=K), False,
                              lambda lam, x: fedavg_closed(lam * P_DIAG, x)),
    "elasticnet fedprox": (lambda: FedElasticNet(base="fedprox", lambda1=0.0, lambda2=0.3), False,
                           lambda lam, x: fedprox_closed(lam, x, 0.3, "exact")),
    "elasticnet scaffold": (lambda: FedElasticNet(base="scaffold", lambda1=0.0, lambda2=0.0, lr=LR,
                                                  local_steps=K), True,
                            lambda lam, x: scaffold_closed(lam, x, "II")),
    "elasticnet feddyn": (lambda: FedElasticNet(base="feddyn", lambda1=0.0, lambda2=0.5), True,
                          lambda lam, x: feddyn_closed(lam, x, 0.5)),
}


@pytest.mark.parametrize("cond", [1e2, 1e6, 1e10, 1e12, 1e14])
@pytest.mark.parametrize("case", list(CASES))
def test_ill_conditioned_rate_and_fixed_point_match_closed_forms(case, cond):
    make, shared, closed = CASES[case]
    fed, lams, xs = commuting(cond, shared=shared)
    true_rate, true_x = closed(lams, xs)
    amap = affine_round_map(make(), fed)
    try:
        rate = spectral_rate(amap)
    except UnclassifiedDirectionError:            # refused only where 1 - rate is at rounding level
        assert 1 - true_rate <= 1e-14
        return
    assert rate == pytest.approx(true_rate, abs=2e-14)
    try:
        fp = fixed_point(amap)
    except InvalidHyperparameterError as exc:      # refused, never wrong
        assert cond >= 1e14 and "max_condition" in str(exc)
        return
    assert fp.spectral_rate == pytest.approx(true_rate, abs=2e-14)
    err = np.abs(fp.x - true_x).max() / np.abs(true_x).max()
    assert err <= 10 * fp.condition * EPS + 1e-13, (err, fp.condition)


@pytest.mark.parametrize("cond", [1e15, 1e16])
@pytest.mark.parametrize("case", ["fedavg", "scaffold II", "feddyn"])
def test_unresolvable_slow_mode_is_a_typed_error(case, cond):
    make, shared, _ = CASES[case]
    fed, _, _ = commuting(cond, shared=shared)
    amap = affine_round_map(make(), fed)
    with pytest.raises(UnclassifiedDirectionError, match="does not declare conserved"):
        spectral_rate(amap)
    with pytest.raises(UnclassifiedDirectionError):
        fixed_point(amap)


@pytest.mark.parametrize("cond", [1e10, 1e12])
def test_issue_instance_is_not_taken_for_a_conserved_quantity(cond):
    """Issue 16: FedAvg, commuting Hessians, lr 0.5, 5 local steps: the old null_tol=1e-9
    rule returned rate 0.59049 (the fast modes only) and a fixed point 54-59% off."""
    fed, lams, xs = commuting(cond, shared=False)
    true_rate, true_x = fedavg_closed(lams, xs)
    for rtol in (1e-6, 1e-9, 1e-11):                 # recovery tolerance changes nothing
        amap = affine_round_map(FedAvg(lr=LR, local_steps=K), fed, rtol=rtol)
        sub = invariant_subspace(amap)
        assert sub.n_conserved == 0
        assert spectral_rate(amap) == pytest.approx(true_rate, abs=1e-15)
        assert spectral_rate(amap) > 1 - 1e-9
        fp = fixed_point(amap)
        assert np.abs(fp.x - true_x).max() <= 10 * fp.condition * EPS * np.abs(true_x).max()
    sc = affine_round_map(Scaffold(lr=LR, local_steps=K), commuting(cond)[0])
    assert invariant_subspace(sc).n_conserved == D       # exactly the declared N c - sum c_i


def test_no_tolerance_classifies_directions():
    """Guard against reintroducing a spectral null-space tolerance."""
    for fn in (affine.invariant_subspace, affine.spectral_rate, affine.fixed_point,
               affine.contraction_factor, affine.orbit_rate):
        assert not any("null" in p for p in inspect.signature(fn).parameters), fn.__name__


# ---- declarations: proved, verified, complete ------------------------------------------------------

def _fed():
    return random_quadratic(4, 3, L=2.0, mu=0.3, heterogeneity=2.0, seed=11, weights=[0.1, 0.2, 0.3, 0.4],
                            constants="clients")


AFFINE = {
    **AFFINE_MAKERS,
    "efl consistent": lambda: EFL(lr=0.1, local_steps=3, lam=0.1, compression=None,
                                  server_update="consistent"),
    "fedavgm": lambda: FedOpt(client_optimizer=optim.sgd(0.1), server_optimizer=optim.fedavgm(1.0, 0.9),
                              local_steps=3),
    "client momentum synchronise": lambda: FedOpt(client_optimizer=optim.momentum(0.05, 0.5),
                                                  server_optimizer=optim.sgd(1.0), local_steps=3,
                                                  client_state="synchronise"),
}


@pytest.mark.parametrize("name", list(AFFINE))
def test_declared_invariants_are_complete_on_a_well_conditioned_problem(name):
    """The eigenvalues of M at 1 (well separated here: the rest lie below 0.96) are
    exactly the declared conserved directions."""
    amap = affine_round_map(AFFINE[name](), _fed())
    lam = np.linalg.eigvals(amap.M)
    at_one = int(np.count_nonzero(np.abs(lam - 1) < 1e-6))
    assert np.abs(lam[np.abs(lam - 1) >= 1e-6]).max() < 0.96
    sub = invariant_subspace(amap)
    assert sub.n_conserved == at_one
    assert spectral_rate(amap) < 0.96
    fp = fixed_point(amap)
    assert fp.residual <= 1e-12 and fp.success


CONSERVING = [n for n in AFFINE if n.startswith(("scaffold", "feddyn", "efl", "elastic"))]


@pytest.mark.parametrize("name", CONSERVING)
def test_declared_values_do_not_move_along_a_run(name):
    alg, fed = AFFINE[name](), _fed()
    invs = alg.linear_invariants(fed)
    assert invs
    rng = np.random.default_rng(3)
    state = alg.init(fed, rng.standard_normal(fed.dim), rng)
    state = type(state)(**{**state.__dict__, **{f: rng.standard_normal(np.shape(getattr(state, f)))
                                               for f in ("c", "c_clients", "h", "grads", "x_client")
                                               if hasattr(state, f)}})
    before = [inv.value(state) for inv in invs]
    from fltheory.participation import FullParticipation
    for _ in range(4):
        state, _ = alg.round(state, fed, FullParticipation(), rng)
    for inv, b in zip(invs, before, strict=True):
        np.testing.assert_allclose(inv.value(state), b, rtol=0, atol=1e-12)


class _ForgetfulScaffold(Scaffold):
    def linear_invariants(self, problem):            # drops SCAFFOLD's N c - sum c_i
        return ()


class _BoastfulFedAvg(FedAvg):
    def linear_invariants(self, problem):            # x is not conserved
        return (LinearInvariant("x", {"x": np.ones((1, 1))}),)


def test_an_undeclared_conserved_quantity_is_refused_not_guessed():
    amap = affine_round_map(_ForgetfulScaffold(lr=0.1, local_steps=4), _fed())
    with pytest.raises(UnclassifiedDirectionError, match="declared: none"):
        spectral_rate(amap)
    with pytest.raises(UnclassifiedDirectionError):
        fixed_point(amap)
    with pytest.raises(UnclassifiedDirectionError):
        orbit_rate(amap)


def test_a_wrong_declaration_is_caught():
    amap = affine_round_map(_BoastfulFedAvg(lr=0.1, local_steps=3), _fed())
    with pytest.raises(InvalidProblemError, match="'x' is not conserved"):
        spectral_rate(amap)


def test_drifting_conserved_quantity_has_no_fixed_point():
    """FedDyn's N h - sum grad_k is conserved; a federation whose declaration holds but
    whose c has a component along it would drift.  Build it by shifting the map's c."""
    amap = affine_round_map(FedDyn(alpha=1.0), _fed())
    sub = invariant_subspace(amap)
    import dataclasses
    shifted = dataclasses.replace(amap, c=amap.c + sub.W[:, 0])
    with pytest.raises(InvalidHyperparameterError, match="drifts"):
        fixed_point(shifted)


def test_linear_invariant_validation():
    with pytest.raises(InvalidHyperparameterError):
        LinearInvariant("empty", {})
    with pytest.raises(InvalidHyperparameterError):
        LinearInvariant("nan", {"x": np.array([[np.nan]])})
    with pytest.raises(InvalidHyperparameterError, match="same k"):
        LinearInvariant("k", {"x": np.ones((1, 1)), "c": np.ones((2, 1))})
    assert Algorithm.linear_invariants(FedAvg(), _fed()) == ()


def test_run_is_unaffected():
    """The declarations are metadata: run() does not consult them."""
    fed = _fed()
    h = run(Scaffold(lr=0.1, local_steps=2), fed, 3, seed=0)
    assert np.all(np.isfinite(h.x[-1]))


DECOUPLED = {
    "fedcurv": lambda: FedCurv(lr=LR, local_steps=K, alpha=0.2),
    "efl": lambda: EFL(lr=LR, local_steps=K, lam=0.1, compression=None),
    "efl consistent no ef": lambda: EFL(lr=LR, local_steps=K, lam=0.1, compression=None,
                                        error_feedback=False, server_update="consistent"),
    "feddyn gd": lambda: FedDyn(alpha=0.5, solver="gd", lr=0.4, local_steps=K),
    "client momentum persist": lambda: FedOpt(client_optimizer=optim.momentum(0.3, 0.5),
                                              server_optimizer=optim.sgd(1.0), local_steps=K,
                                              client_state="persist"),
    "client momentum synchronise": lambda: FedOpt(
        client_optimizer=optim.momentum(0.3, 0.5), server_optimizer=optim.sgd(1.0),
        local_steps=K, client_state="synchronise"),
    "client momentum local correction, server momentum": lambda: FedOpt(
        client_optimizer=optim.momentum(0.3, 0.5), server_optimizer=optim.fedavgm(0.8, 0.3),
        local_steps=K, correction="local"),
}


@pytest.mark.parametrize("cond", [1e6, 1e10, 1e12])
@pytest.mark.parametrize("name", list(DECOUPLED))
def test_ill_conditioned_map_equals_its_decoupled_coordinates(name, cond):
    """With diagonal Hessians every operation of these algorithms acts coordinate by
    coordinate, so the round map is block diagonal over coordinates: its rate is the
    largest rate of the D one-dimensional federations and its fixed point their
    concatenation.  Each one-dimensional map has a single client curvature scale, so it
    is recovered without the mixing of 1 and 1/cond; a slow coordinate taken for a
    conserved one in the full map would show here."""
    fed, _, _ = commuting(cond, shared=False)
    amap = affine_round_map(DECOUPLED[name](), fed)
    rates, xs = [], []
    for j in range(D):
        sub = QuadraticFederation(fed.H[:, j:j + 1, j:j + 1], fed.e[:, j:j + 1])
        one = affine_round_map(DECOUPLED[name](), sub)
        rates.append(spectral_rate(one))
        xs.append(fixed_point(one).x[0])
    assert spectral_rate(amap) == pytest.approx(max(rates), abs=2e-14)
    assert max(rates) > 1 - 1e3 / cond                     # the slow coordinate is the rate
    fp = fixed_point(amap)
    scale = np.abs(xs).max()
    assert np.abs(fp.x - np.array(xs)).max() <= 20 * fp.condition * EPS * scale + 1e-13 * scale


def test_a_field_moving_by_1e_10_is_not_frozen():
    """EFL's v = u * w with client curvature u = 1e-10 changes by 1e-10 per unit change of
    the state: a tolerance-based frozen test took it for a constant and zeroed its columns."""
    fed = QuadraticFederation(np.full((3, 1, 1), 1e-10), np.array([[1e-10], [2e-10], [-1e-10]]))
    amap = affine_round_map(EFL(lr=LR, local_steps=K, lam=0.1, compression=None), fed)
    assert "v" not in amap.frozen_fields
    assert set(amap.frozen_fields) == {"residual_global", "residuals", "u"}
