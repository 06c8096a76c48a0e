"""Restarted client AdaGrad with a zero initial accumulator: fixed points on sign-step layers.

The small instances are analysed exactly (docs/theory/fixed-points.md, "Restarted AdaGrad
with a zero accumulator") and the analysis is held against what the solvers do."""

import itertools

import numpy as np
import pytest
from scipy.optimize import brentq

from fltheory import optim
from fltheory.algorithms import FedOpt
from fltheory.errors import DivergenceError, InvalidHyperparameterError
from fltheory.problems.generators import random_quadratic
from fltheory.problems.quadratic import QuadraticFederation
from fltheory.theory import (
    DiscontinuityLayerError,
    NoFixedPointError,
    diagnosed_fixed_point,
    discontinuity_layers,
    fedopt_operator,
    newton_krylov_fixed_point,
)

LR, EPS = 0.05, 1e-8


def operator(fed, steps, v0=0.0):
    alg = FedOpt(client_optimizer=optim.adagrad(LR, eps=EPS, initial_accumulator=v0),
                 server_optimizer=optim.sgd(1.0), local_steps=np.asarray(steps))
    return fedopt_operator(alg, fed)


def scalar_federation(h, optima):
    h, optima = np.asarray(h, float), np.asarray(optima, float)
    return QuadraticFederation(h[:, None, None], (h * optima)[:, None])


H1, OPT1 = [1.0, 2.0, 3.0], [-1.0, 0.3, 2.0]       # d = 1, N = 3, equal weights: median client 1


def test_one_step_in_one_dimension_fixed_point_is_inside_the_median_layer():
    """tau = 1, d = 1: T(x) = x - lr sum_i p_i s(h_i (x - x_i)), s(g) = g / (|g| + eps).
    F = T - x is continuous and strictly decreasing, so it has exactly one zero; off the
    layers |F| = lr/3 (1 - O(eps)) (a sum of three signs is odd), so the zero lies in the
    layer of the median client (x_1 = 0.3, width eps / h_1): a fixed point exists, T jumps
    by 2 lr / 3 across it, and with eps -> 0 it is the fixed point of the set-valued
    closure, 0 in sum_i p_i Sign(x - x_i) (the weighted median)."""
    fed = scalar_federation(H1, OPT1)
    T = operator(fed, [1, 1, 1])
    F = lambda x: float(T(np.array([x]))[0] - x)
    width = EPS / H1[1]
    for x in (-2.0, -0.5, 0.0, 0.29, 0.31, 1.0, 3.0):            # off every layer
        assert abs(F(x)) == pytest.approx(LR / 3 if -1 < x < 2 else LR, rel=1e-6)
    lo, hi = OPT1[1] - 100 * width, OPT1[1] + 100 * width
    assert F(lo) > 0 > F(hi)
    root = brentq(F, lo, hi, xtol=1e-300, rtol=4 * np.finfo(float).eps)    # a bracketing solver finds it
    assert abs(root - OPT1[1]) <= width
    assert abs(F(root)) <= 1e-9                  # the slope is lr h_1 / (3 eps) ~ 3e6: one ulp moves F by ~1e-10
    # Newton-Krylov cannot: its difference step (1.5e-8) is wider than the layer; the failure names the layer
    with pytest.raises(DiscontinuityLayerError) as info:
        diagnosed_fixed_point(T, fed.optimum())
    err = info.value
    assert err.residual == pytest.approx(LR / 3, rel=1e-6)
    nearest = err.layers[0]
    assert (nearest.client, nearest.coordinate) == (1, 0)
    assert nearest.width == pytest.approx(width, rel=1e-6)
    # across +-100 widths the median client's first step goes from +100/101 to -100/101 of lr / 3
    # while x itself moves by 200 widths
    assert nearest.jump == pytest.approx(2 * LR / 3 * 100 / 101 - 200 * width, rel=1e-9)
    assert "client 1 coordinate 0" in str(err)


def test_one_step_two_clients_in_one_dimension_a_flat_interval_and_one_fixed_point():
    """tau = 1, d = 1, N = 2 equal weights: the closure's fixed points are the whole interval
    [x_0, x_1] (0 in Sign(x - x_0) + Sign(x - x_1)).  T_eps has exactly one: inside the interval
    F = (lr / 2) (eps / (h_0 (x - x_0) + eps) - eps / (h_1 (x_1 - x) + eps)), zero iff
    h_1 (x_1 - x) = h_0 (x - x_0), i.e. at (h_0 x_0 + h_1 x_1) / (h_0 + h_1) = x*, the global
    minimiser.  Elsewhere in the interval |F| <= lr eps / (2 min_i h_i dist_i) is small (4e-11 to
    7.5e-10 at the points below) and so is its slope (1e-10 to 1e-9 for x in [-0.5, 1]): over the
    difference step 1.5e-8 of a Jacobian-vector product F changes by 2e-18 to 1.5e-17 there (1.3e-16
    at x = 1.9), below the rounding of T(x) - x (about 2e-16).  Newton cannot see the slope, and a
    stall there is not a fixed point."""
    h, optima = [1.0, 3.0], [-1.0, 2.0]
    fed = scalar_federation(h, optima)
    T = operator(fed, [1, 1])
    xstar = fed.optimum()
    assert xstar[0] == pytest.approx(1.25, abs=1e-15)
    assert np.abs(T(xstar) - xstar).max() <= 1e-16
    for x in (-0.5, 0.0, 1.0, 1.9):
        f = LR / 2 * (EPS / (h[0] * (x - optima[0]) + EPS) - EPS / (h[1] * (optima[1] - x) + EPS))
        assert T(np.array([x]))[0] - x == pytest.approx(f, rel=0, abs=1e-15)     # |x| ~ 1: rounding 2e-16
        # F' = -(lr eps / 2) (h_0 / (h_0 (x - x_0) + eps)^2 + h_1 / (h_1 (x_1 - x) + eps)^2)
        slope = LR * EPS / 2 * (h[0] / (h[0] * (x - optima[0]) + EPS) ** 2 + h[1] / (h[1] * (optima[1] - x) + EPS) ** 2)
        assert 4e-11 <= abs(f) <= 7.5e-10
        assert slope * 1.5e-8 <= (2e-17 if x <= 1.0 else 2e-16)     # vs rounding of T(x) - x: 2.2e-16
    # regression: the stall test used to accept x = 0.895 (residual 5.7e-11, 1e3 tol) as a fixed point
    with pytest.raises(NoFixedPointError) as info:
        newton_krylov_fixed_point(T, np.array([0.0]))
    assert info.value.residual < 1e-9 and abs(info.value.x[0] - 1.25) > 0.1


def adagrad_two_steps(x, optimum, h=1.0, eps=0.0):
    """Client map of two AdaGrad steps from a zero accumulator in d = 1, written out:
    g_0 = h u (u = x - x_i), y_1 = x - lr g_0 / (|g_0| + eps), g_1 = h (y_1 - x_i),
    y_2 = y_1 - lr g_1 / (sqrt(g_0^2 + g_1^2) + eps).  With eps = 0 (the limit; h cancels):
    y_2 = x - lr sgn(u) - lr (u - lr sgn u) / sqrt(u^2 + (u - lr sgn u)^2)."""
    g0 = h * (x - optimum)
    y1 = x - LR * g0 / (abs(g0) + eps)
    g1 = h * (y1 - optimum)
    return y1 - LR * g1 / (np.sqrt(g0 * g0 + g1 * g1) + eps)


def test_two_steps_in_one_dimension_have_no_jump_and_newton_solves():
    """tau = 2, d = 1: from either side of x_i the first step (-+lr) is undone by the second
    (+-lr, since g_1 = h (u -+ lr) and v = g_0^2 + g_1^2 ~ g_1^2), so O_i(x) -> x_i from both
    sides: T has no jump (only a kink and, inside the eps-layer, a spike of height < lr).
    The fixed point of the eps = 0 closed form is off every layer and Newton-Krylov finds it."""
    fed = scalar_federation(H1, OPT1)
    T = operator(fed, [2, 2, 2])
    for i, xi in enumerate(OPT1):
        for delta in (1e-3, -1e-3):                    # outside the layer (eps / (h |u|) <= 1e-5)
            yi = T.client_maps(np.full((1, 1), xi + delta), clients=[i])[0, 0]
            assert abs(yi - xi) <= 2 * abs(delta)          # one step alone would leave |y - x_i| = lr - |delta|
            assert yi == pytest.approx(adagrad_two_steps(xi + delta, xi, H1[i], EPS), abs=1e-15)
            assert yi == pytest.approx(adagrad_two_steps(xi + delta, xi), abs=1e-6)     # the eps = 0 limit
    written_out = lambda x, eps: np.mean([adagrad_two_steps(x, xi, h, eps) for h, xi in zip(H1, OPT1)]) - x
    fp = newton_krylov_fixed_point(T, fed.optimum())
    # the residual tolerance 1e-12 over |F'| = 0.055 bounds the error by 2e-11
    assert abs(fp.x[0] - brentq(written_out, 0.301, 0.31, xtol=1e-15, args=(EPS,))) <= 2e-11
    # eps = 1e-8 against the limit: O(lr eps / (h |u|) / |F'|) = 6e-7 here (|F'| = 0.055 near x_1)
    assert abs(fp.x[0] - brentq(written_out, 0.301, 0.31, xtol=1e-15, args=(0.0,))) <= 1e-6
    assert min(abs(fp.x[0] - xi) for xi in OPT1) > 1e-3


def closure_fixed_points(fed):
    """Fixed points of the set-valued closure of T for tau = 1, N = 3 equal weights, d = 2:
    0 in sum_i Sign(H_i (x - x_i)) coordinate-wise.  Off the lines {(H_i (x - x_i))_j = 0} each
    coordinate is a sum of three signs (odd, never 0), so x lies on one line per coordinate:
    x solves (H_a (x - x_a))_0 = 0, (H_b (x - x_b))_1 = 0 for a pair (a, b); and the zero sum
    needs the other two clients' signs in each coordinate to be opposite (the on-line client
    then takes Sign = 0)."""
    H, optima = fed.H, fed.client_optima()
    found = []
    for a, b in itertools.product(range(3), repeat=2):
        A = np.array([H[a][0], H[b][1]])
        x = np.linalg.solve(A, np.array([H[a][0] @ optima[a], H[b][1] @ optima[b]]))
        G = np.einsum("ijk,ik->ij", H, x - optima)
        if all(sum(np.sign(G[i, j]) for i in range(3) if i != c) == 0 for j, c in ((0, a), (1, b))):
            found.append(((a, b), x))
    return found


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_one_step_in_two_dimensions_closure_fixed_point_by_enumeration(seed):
    fed = random_quadratic(3, 2, L=4.0, mu=0.5, heterogeneity=1.0, seed=seed)
    T = operator(fed, [1, 1, 1])
    found = closure_fixed_points(fed)
    assert len(found) == 1                        # for these instances: exactly one
    (a, b), xg = found[0]
    # the closure's fixed point is one of T_eps to O(lr eps / |g|) (its layer clients take s = 0)
    assert np.abs(T(xg) - xg).max() <= 1e-8
    # off the layers |F_j| >= lr / 3 (1 - O(eps)) in every coordinate
    rng = np.random.default_rng(seed)
    for x in rng.uniform(-2, 2, size=(20, 2)):
        assert np.abs(T(x) - x).min() >= LR / 3 * (1 - 1e-6)
    # Newton-Krylov stalls on one side of a layer with residual lr / 3 (half the jump) and says so
    with pytest.raises(DiscontinuityLayerError) as info:
        diagnosed_fixed_point(T, fed.optimum())
    assert info.value.residual == pytest.approx(LR / 3, rel=1e-6)
    assert all(c.jump == pytest.approx(2 * LR / 3 * 100 / 101, rel=1e-4) for c in info.value.layers)


def test_divergent_newton_iterates_are_a_failure_not_a_fixed_point():
    """Regression: on a piecewise-constant F (seed 3 above) Newton steps ran to ||x|| = 3e19,
    where T(x) - x rounds to 0 and the relative test accepted x as a fixed point."""
    fed = random_quadratic(3, 2, L=4.0, mu=0.5, heterogeneity=1.0, seed=3)
    T = operator(fed, [1, 1, 1])
    with pytest.raises(NoFixedPointError) as info:
        newton_krylov_fixed_point(T, fed.optimum())
    assert np.abs(info.value.x).max() <= 1e6
    with pytest.raises(NoFixedPointError, match="diverge"):
        newton_krylov_fixed_point(lambda x: 2.0 * x + 1.0 + 0.1 * np.sin(x), np.array([1.0]), max_norm=0.5)
    with pytest.raises(InvalidHyperparameterError, match="max_norm"):
        newton_krylov_fixed_point(lambda x: x, np.zeros(2), max_norm=-1.0)


def test_smooth_settings_are_not_reported_as_layers():
    """Restarted AdaGrad with v0 = 0, N = 6, d = 8, tau in {2, 3, 5, 10}: the fixed point lies
    off every layer (smallest |gradient coordinate| 0.02) and Newton-Krylov finds it."""
    fed = random_quadratic(6, 8, L=4.0, mu=0.5, heterogeneity=1.0, seed=7)
    T = operator(fed, [2, 10, 2, 10, 5, 3])
    fp = diagnosed_fixed_point(T, fed.optimum())
    assert np.abs(T(fp.x) - fp.x).max() <= 1e-12
    assert discontinuity_layers(T, fp.x) == []
    G = fed.client_grad(np.tile(fp.x, (6, 1)))
    assert np.abs(G).min() > 1e-2


def test_layer_diagnosis_rejects_bad_input():
    fed = scalar_federation(H1, OPT1)
    T = operator(fed, [1, 1, 1])
    with pytest.raises(InvalidHyperparameterError, match="FedOptOperator"):
        discontinuity_layers(lambda x: x, np.zeros(1))
    with pytest.raises(InvalidHyperparameterError, match=r"x must be a finite vector of shape \(1,\), got shape \(2"):
        discontinuity_layers(T, np.zeros(2))
    # every bad x is a typed error naming x and the value (a string or complex entry used to escape as
    # a plain ValueError / TypeError, and NaN was reported as a shape mismatch "(1,), got (1,)")
    with pytest.raises(InvalidHyperparameterError, match="x must be numeric, got the string 'abc'"):
        discontinuity_layers(T, "abc")
    with pytest.raises(InvalidHyperparameterError, match="x must be numeric"):
        discontinuity_layers(T, [1j])
    with pytest.raises(InvalidHyperparameterError, match=r"x contains a non-finite value .*nan.* at index \(0,\)"):
        discontinuity_layers(T, [np.nan])
    with pytest.raises(InvalidHyperparameterError, match="eps"):
        discontinuity_layers(T, np.zeros(1), eps=0.0)
    with pytest.raises(InvalidHyperparameterError, match="max_layers"):
        diagnosed_fixed_point(T, np.zeros(1), max_layers=0)
    # an option newton_krylov_fixed_point does not take is a typed error (was a plain TypeError)
    with pytest.raises(InvalidHyperparameterError,
                       match=r"diagnosed_fixed_point got options \['bogus'\] that newton_krylov_fixed_point does not"):
        diagnosed_fixed_point(T, np.zeros(1), bogus=1)


def test_continuation_passes_max_norm_on():
    """max_norm is an option of newton_krylov_fixed_point, so continuation_fixed_point takes it
    (it was refused as an option 'newton_krylov_fixed_point does not take') and applies it to every solve."""
    from fltheory.theory import continuation_fixed_point

    fp, solved = continuation_fixed_point(lambda s: (lambda x: 0.5 * x + s), [0.5, 1.0], np.zeros(2), max_norm=10.0)
    assert solved == [0.5, 1.0] and np.abs(fp.x - 2.0).max() <= 1e-12
    with pytest.raises(DivergenceError, match=r"continuation stopped at .* diverge .* > max_norm 1\.5e\+00"):
        continuation_fixed_point(lambda s: (lambda x: 0.5 * x + s), [0.5, 1.0], np.zeros(2), max_norm=1.5)
