"""Numerical honesty of the problems at the edges (issue 16, items 0 and 5):
ill-conditioned generators, round-off in the constants, extreme logistic
margins, feature scales, optimum accuracy against 60-digit arithmetic, d = 1,
N = 1 and float32 inputs.  Each check is against mathematics (exact
invariances, closed forms, extended-precision references), never against a
past run."""

from __future__ import annotations

import mpmath
import numpy as np
import pytest

from fltheory.errors import NonFinitePointError, OutOfRangeError
from fltheory.problems import LogisticFederation, QuadraticFederation, random_quadratic


@pytest.mark.parametrize("constants", ["global", "clients"])
@pytest.mark.parametrize("log_condition", [2, 6, 8, 10, 12, 14])
def test_random_quadratic_reaches_condition_1e14(log_condition: int, constants: str) -> None:
    """Every draw is SPD client by client, with the requested global mu and L
    (to the documented float64 accuracy 1e-16 L / mu) and exact heterogeneity."""
    mu = 10.0 ** -log_condition
    for seed in range(5):
        fed = random_quadratic(4, 5, L=1.0, mu=mu, heterogeneity=1.0, seed=seed, constants=constants)
        assert np.all(np.linalg.eigvalsh(fed.H)[:, 0] > 0)
        lam = np.linalg.eigvalsh(np.einsum("i,ijk->jk", fed.weights, fed.H))
        if constants == "global":
            assert abs(lam[0] - mu) <= 1e-2 * mu + 64e-16
            assert abs(lam[-1] - 1.0) <= 1e-13
        else:
            assert mu * (1 - 1e-2) <= lam[0] and lam[-1] <= 1.0 + 1e-13


def test_random_quadratic_beyond_1e14_is_out_of_range() -> None:
    with pytest.raises(OutOfRangeError, match="condition number"):
        random_quadratic(4, 5, L=1.0, mu=1e-16, heterogeneity=1.0, seed=0)


@pytest.mark.parametrize("seed", range(20))
def test_identical_clients_have_zero_D_and_the_bound_accepts_it(seed: int) -> None:
    """heterogeneity = 0: every x_k* = x*, so D_k = 0 exactly; round-off below 0
    is clamped and EFL's Theorem 1 accepts the package's own constants."""
    from fltheory.theory.bounds import efl_theorem1_from_constants
    c = random_quadratic(4, 5, L=1.0, mu=0.5, heterogeneity=0.0, seed=seed).constants(radius=1.0)
    assert c.D >= 0 and np.all(c.D_k >= 0)
    assert c.D <= 1e-14
    efl_theorem1_from_constants(c, 2, E=2, theta=1.0, weights=np.full(4, 0.25), init_dist2=1.0)


def _binary_one_sample(a: float, y: float) -> LogisticFederation:
    return LogisticFederation([np.array([[a]])], [np.array([y])])


@pytest.mark.parametrize("margin", [1.0, 1e10, 1e100, 1e300])
def test_binary_loss_is_exact_at_huge_margins(margin: float) -> None:
    """l(x) = log(1 + exp(-y a x)): about 0 on the right side, y a x on the wrong one."""
    fed = _binary_one_sample(1.0, 1.0)
    assert fed.loss(np.array([margin])) == pytest.approx(np.log1p(np.exp(-margin)), abs=1e-300)
    assert fed.loss(np.array([-margin])) == pytest.approx(margin + np.log1p(np.exp(-margin)), rel=1e-15)
    assert np.all(np.isfinite(fed.grad(np.array([-margin]))))


@pytest.mark.parametrize("scale", [1.0, 1e10, 1e20, 1e300])
def test_multinomial_loss_is_exact_at_huge_logits(scale: float) -> None:
    """Equal logits z_c = s for every class give l = log C at any s."""
    C = 3
    fed = LogisticFederation([np.array([[1.0, 0.0]])], [np.array([1])], n_classes=C)
    W = np.zeros((2, C))
    W[0] = scale
    assert fed.loss(W.ravel()) == pytest.approx(np.log(C), rel=1e-15)
    W[0, 0] = 2 * scale if scale < 1e300 else scale   # class 0 wins by s: l = s + log(1 + 2 e^{-s})
    if scale < 1e300:
        assert fed.loss(W.ravel()) == pytest.approx(scale + np.log1p(2 * np.exp(-scale)), rel=1e-15)


def test_logistic_overflowing_margin_is_a_typed_error() -> None:
    fed = LogisticFederation([np.array([[1e300, 1e300]])], [np.array([1])], n_classes=2)
    with pytest.raises(OutOfRangeError, match="overflows"):
        fed.loss(np.array([1e300, -1e300, 0.0, 0.0]))
    with pytest.raises(OutOfRangeError, match="overflows"):          # true loss 1e600
        _binary_one_sample(1e300, 1.0).loss(np.array([-1e300]))
    # the gradient s(z) y a stays representable (1e300) and is returned exactly
    np.testing.assert_allclose(_binary_one_sample(1e300, 1.0).grad(np.array([-1e300])), [-1e300])


@pytest.mark.parametrize("scale", [1e-6, 1e4, 1e8])
def test_logistic_optimum_is_scale_equivariant(scale: float) -> None:
    """Features s A with ridge reg s^2 define F_s(x) = F(s x), so x_s* = x*/s
    exactly; the solver's tolerance is relative, so this holds at any s."""
    rng = np.random.default_rng(0)
    A = [rng.standard_normal((20, 3)) for _ in range(2)]
    y = [np.where(rng.random(20) < 0.5, -1.0, 1.0) for _ in range(2)]
    ref = LogisticFederation(A, y, reg=0.1).optimum()
    scaled = LogisticFederation([a * scale for a in A], y, reg=0.1 * scale**2).optimum()
    np.testing.assert_allclose(scaled * scale, ref, rtol=1e-8, atol=1e-12)


def _ill_conditioned(log_condition: int, rng: np.random.Generator) -> QuadraticFederation:
    d, N = 4, 3
    Q, _ = np.linalg.qr(rng.standard_normal((d, d)))
    H = np.stack([(Q * np.array([10.0**-log_condition * (1 + 0.5 * i), 0.3, 0.7, 1.0])) @ Q.T
                  for i in range(N)])
    return QuadraticFederation(0.5 * (H + np.swapaxes(H, 1, 2)), rng.standard_normal((N, d)))


def _optimum_60_digits(fed: QuadraticFederation) -> np.ndarray:
    mpmath.mp.dps = 60
    d = fed.dim
    Hb, b = mpmath.matrix(d, d), mpmath.matrix(d, 1)
    for i, p in enumerate(fed.weights):
        for r in range(d):
            b[r] += mpmath.mpf(p) * mpmath.mpf(fed.e[i, r])
            for c in range(d):
                Hb[r, c] += mpmath.mpf(p) * mpmath.mpf(fed.H[i, r, c])
    return np.array([float(v) for v in mpmath.lu_solve(Hb, b)])


@pytest.mark.parametrize("log_condition", [2, 8, 12, 14, 15])
def test_quadratic_optimum_is_accurate_when_ill_conditioned(log_condition: int) -> None:
    """Against 60-digit arithmetic: relative error <= 1e-15 + cond * 1e-18
    (a plain float64 solve is off by 3e-3 at 1e14)."""
    fed = _ill_conditioned(log_condition, np.random.default_rng(log_condition))
    exact = _optimum_60_digits(fed)
    err = np.linalg.norm(fed.optimum() - exact) / np.linalg.norm(exact)
    assert err <= 1e-15 + 10.0**log_condition * 1e-18


def test_quadratic_optimum_beyond_range_is_a_typed_error() -> None:
    fed = _ill_conditioned(16, np.random.default_rng(0))
    with pytest.raises(OutOfRangeError, match="condition number"):
        fed.optimum()


def test_quadratic_overflow_is_a_typed_error() -> None:
    fed = QuadraticFederation(np.eye(3)[None] * 1e308, np.zeros((1, 3)))
    assert fed.loss(np.array([1.0, 0.0, 0.0])) == pytest.approx(0.5e308)
    with pytest.raises(OutOfRangeError):
        fed.loss(np.full(3, 10.0))


def test_nonfinite_points_are_refused_by_the_oracles() -> None:
    fed = random_quadratic(3, 2, L=1.0, mu=0.5, heterogeneity=0.5, seed=0)
    X = np.zeros((3, 2))
    X[1, 0] = np.nan
    with pytest.raises(NonFinitePointError, match="non-finite"):
        fed.client_grad(X)
    with pytest.raises(NonFinitePointError):
        fed.loss(np.array([np.inf, 0.0]))


def test_d1_n1_and_float32_inputs() -> None:
    """d = 1, N = 1: f(x) = 1/2 h (x - x*)^2 with x* the drawn optimum; float32
    points give the float64 values of the same (exactly representable) points."""
    fed = random_quadratic(1, 1, L=2.0, mu=2.0, heterogeneity=0.0, seed=0, optimum=[0.25])
    np.testing.assert_allclose(fed.optimum(), [0.25], rtol=1e-15)
    x32 = np.array([0.75], dtype=np.float32)
    assert fed.loss(x32) == pytest.approx(0.5 * 2.0 * 0.5**2, rel=1e-15)
    np.testing.assert_allclose(fed.grad(x32), [2.0 * 0.5], rtol=1e-15)
