"""Matrix-free exact theory agrees with the dense route on every affine algorithm."""

import numpy as np
import pytest

from fltheory import optim
from fltheory.algorithms import (
    FedAvg,
    FedOpt,
    FedProx,
    Scaffold,
)
from fltheory.errors import (
    InvalidHyperparameterError,
    InvalidProblemError,
    NotAffineError,
    UnclassifiedDirectionError,
)
from fltheory.problems.generators import random_quadratic
from fltheory.theory.affine import (
    AffineRoundMap,
    affine_round_map,
    contraction_factor,
    fixed_point,
    orbit_rate,
    spectral_rate,
)
from fltheory.theory import matrix_free as mf
from fltheory.theory.krylov import block_krylov
from fltheory.theory.matrix_free import MatrixFreeAffineMap, matrix_free_affine_map, rate_estimate

from ._affine_makers import AFFINE_MAKERS

N, D = 5, 12

MAKERS = {
    **AFFINE_MAKERS,
    "fedprox gd": lambda: FedProx(lr=0.1, local_steps=3, mu=0.4),
    "fedavgm": lambda: FedOpt(client_optimizer=optim.sgd(0.1), server_optimizer=optim.fedavgm(1.0, 0.5),
                              local_steps=3),
    "preconditioned joint": lambda: FedOpt(client_optimizer=optim.preconditioned(0.1, np.linspace(0.5, 2, D)),
                                           server_optimizer=optim.sgd(0.8), local_steps=3,
                                           correction="joint"),
}


@pytest.fixture(scope="module")
def fed():
    return random_quadratic(N, D, L=2.0, mu=0.3, heterogeneity=2.0, seed=4, constants="clients",
                            weights=np.arange(1.0, N + 1))


@pytest.mark.parametrize("name", list(MAKERS))
def test_matrix_free_equals_dense(fed, name):
    x0 = np.linspace(-1, 1, D)
    dense = affine_round_map(MAKERS[name](), fed, x0=x0, matrix_free=False)
    free = affine_round_map(MAKERS[name](), fed, x0=x0, matrix_free=True)
    assert isinstance(dense, AffineRoundMap) and isinstance(free, MatrixFreeAffineMap)
    S = np.random.default_rng(0).standard_normal(dense.dim) * ~dense.frozen + dense.base * dense.frozen
    np.testing.assert_allclose(free(S), dense(S), rtol=0, atol=1e-12)
    assert spectral_rate(free) == pytest.approx(spectral_rate(dense), abs=1e-10)
    fd, ff = fixed_point(dense), fixed_point(free)
    assert ff.method == "matrix-free affine" and ff.success
    np.testing.assert_allclose(ff.S, fd.S, rtol=0, atol=1e-10)
    assert ff.residual <= 1e-11
    assert ff.spectral_rate == pytest.approx(fd.spectral_rate, abs=1e-10)
    assert orbit_rate(free) == pytest.approx(orbit_rate(dense), abs=1e-9)


def test_orbit_rate_of_a_start_avoiding_the_slowest_mode(fed):
    """A start whose error lies in the fast eigenspace decays at the fast rate (dense check
    of the same instance)."""
    alg = FedAvg(lr=0.1, local_steps=3)
    dense = affine_round_map(alg, fed, matrix_free=False)
    free = affine_round_map(alg, fed, matrix_free=True)
    fp = fixed_point(dense)
    lam, V = np.linalg.eig(dense.M)
    fast = np.argsort(np.abs(lam))[: D // 2]
    start = fp.S + np.real(V[:, fast] @ np.ones(fast.size))
    want = orbit_rate(dense, initial=start)
    assert want < spectral_rate(dense) - 1e-3
    assert orbit_rate(free, initial=start) == pytest.approx(want, abs=1e-9)


def test_automatic_choice_and_limits(fed):
    alg = Scaffold(lr=0.1, local_steps=2)
    assert isinstance(affine_round_map(alg, fed), AffineRoundMap)             # n = 84 <= dense_max
    auto = affine_round_map(alg, fed, dense_max=50)
    assert isinstance(auto, MatrixFreeAffineMap)
    with pytest.warns(RuntimeWarning, match="contraction factor was refused"):    # needs M^T: answered densely
        assert contraction_factor(auto) == contraction_factor(affine_round_map(alg, fed))
    with pytest.raises(InvalidProblemError, match="M\\^T"):
        contraction_factor(affine_round_map(alg, fed, matrix_free=True))
    tiny = random_quadratic(2, 2, L=1.0, mu=0.5, heterogeneity=1.0, seed=0)
    with pytest.raises(InvalidProblemError, match="dense route"):
        spectral_rate(matrix_free_affine_map(FedAvg(lr=0.1, local_steps=2), tiny))


def test_matrix_free_refuses_non_affine_and_undeclared(fed):
    with pytest.raises(NotAffineError):
        matrix_free_affine_map(FedOpt(client_optimizer=optim.adagrad(0.1), server_optimizer=optim.sgd(1.0),
                                      local_steps=3), fed)

    class Forgetful(Scaffold):
        def linear_invariants(self, problem):
            return ()

    with pytest.raises(UnclassifiedDirectionError):
        spectral_rate(matrix_free_affine_map(Forgetful(lr=0.1, local_steps=2), fed))


# ------------------------------------------------ block rounds and symmetric linear parts
@pytest.mark.parametrize("name", ["fedavg", "fedprox gd", "fedprox exact", "scaffold II", "feddyn exact",
                                  "fedcurv", "preconditioned joint"])
def test_block_rounds_equal_dense(fed, name):
    """Block size 8 forced on a small model: where the lifted federation runs the algorithm
    (checked against single rounds) the answers equal the dense ones; where it cannot
    (a per-coordinate preconditioner of length d) single rounds are used and say so."""
    dense = affine_round_map(MAKERS[name](), fed, matrix_free=False)
    free = matrix_free_affine_map(MAKERS[name](), fed, block_size=8)
    if name == "preconditioned joint":
        assert free.block is None and "lifted federation failed" in free.block_note
    else:
        assert free.block is not None and free.block_size == 8
        V = np.random.default_rng(5).standard_normal((dense.dim, 11)) * ~dense.frozen[:, None]
        np.testing.assert_allclose(free.apply_linear(V), dense.M @ V, rtol=0, atol=1e-12)
    assert spectral_rate(free) == pytest.approx(spectral_rate(dense), abs=1e-10)
    np.testing.assert_allclose(fixed_point(free).S, fixed_point(dense).S, rtol=0, atol=1e-10)


def test_symmetric_declaration_gives_the_contraction_factor(fed):
    for name, symmetric in (("fedavg", True), ("fedprox exact", True), ("scaffold II", False)):
        free = matrix_free_affine_map(MAKERS[name](), fed)
        assert free.symmetric is symmetric
    for name in ("fedavg", "fedprox gd"):
        dense = affine_round_map(MAKERS[name](), fed, matrix_free=False)
        free = matrix_free_affine_map(MAKERS[name](), fed)
        assert contraction_factor(free) == pytest.approx(contraction_factor(dense), abs=1e-10)
        assert fixed_point(free).contraction_factor == pytest.approx(contraction_factor(dense), abs=1e-10)


def test_false_symmetry_declaration_is_refused(fed):
    class Lying(Scaffold):
        def linear_part_is_symmetric(self, problem):
            return True

    with pytest.raises(InvalidProblemError, match="symmetric"):
        matrix_free_affine_map(Lying(lr=0.1, local_steps=2), fed)


def test_rate_error_estimate_covers_the_dense_rate():
    """FedAvg's symmetric map in d = 120: Krylov spaces cut at 16, 32 and 48 vectors give
    rates within their reported error of the dense rate; the full estimate meets its
    tolerance and agrees with dense to 1e-10."""
    fed = random_quadratic(6, 120, L=1.0, mu=0.01, heterogeneity=1.0, seed=3)
    alg = FedAvg(lr=0.2, local_steps=3)
    dense = affine_round_map(alg, fed, matrix_free=False)
    want = spectral_rate(dense)
    free = matrix_free_affine_map(alg, fed)
    start = np.random.default_rng(0).standard_normal((free.dim, 2))
    for cap in (16, 32, 48):
        res = block_krylov(free.apply_linear, free.projector, start, symmetric=True, max_vectors=cap)
        assert res.dimension == cap
        assert abs(res.eig.rate - want) <= res.eig.error + 1e-15
    est = rate_estimate(free)
    assert est.symmetric and est.error <= 1e-12
    assert est.rate == pytest.approx(want, abs=1e-10)
    fp = fixed_point(free)
    assert fp.spectral_rate_error == est.error
    np.testing.assert_allclose(fp.S, fixed_point(dense).S, rtol=0, atol=1e-10)


# ------------------------------------------------ bad input: typed errors naming the argument
@pytest.fixture(scope="module")
def free_fedavg(fed):
    return matrix_free_affine_map(FedAvg(lr=0.1, local_steps=3), fed)


NOT_A_MAP = [float("nan"), None, "abc", np.zeros((3, 3))]


@pytest.mark.parametrize("routine", [mf.spectral_rate, mf.rate_estimate, mf.contraction_factor,
                                     mf.fixed_point, mf.orbit_rate])
@pytest.mark.parametrize("bad", NOT_A_MAP, ids=["nan", "none", "string", "matrix"])
def test_routines_refuse_what_is_not_a_matrix_free_map(routine, bad):
    with pytest.raises(InvalidHyperparameterError, match="amap must be a MatrixFreeAffineMap") as info:
        routine(bad)
    assert isinstance(info.value, ValueError) and repr(bad)[:10] in str(info.value)


def test_a_dense_map_is_refused_by_the_matrix_free_routines(fed):
    dense = affine_round_map(FedAvg(lr=0.1, local_steps=3), fed, matrix_free=False)
    with pytest.raises(InvalidHyperparameterError, match="AffineRoundMap"):
        mf.fixed_point(dense)


@pytest.mark.parametrize(("kwargs", "pattern"), [
    ({"max_condition": float("nan")}, "max_condition must be finite, got nan"),
    ({"max_condition": 0.5}, "max_condition must be a finite number > 1, got 0.5"),
    ({"gmres_rtol": "abc"}, "gmres_rtol must be a real number, got 'abc'"),
    ({"gmres_rtol": 0.0}, "gmres_rtol must be finite and > 0, got 0.0"),
    ({"gmres_rtol": 2.0}, "gmres_rtol must lie in \\(0, 1\\), got 2.0"),
    ({"maxiter": 1.5}, "maxiter must be an integer, got 1.5"),
    ({"maxiter": -1}, "maxiter must be an integer >= 0 and <= 1000000, got -1"),
    ({"maxiter": 10**12}, "maxiter must be an integer >= 0 and <= 1000000, got 1000000000000"),
    ({"initial": np.full(D, np.nan)}, "initial state must be finite; entry 0 is .*nan"),
    ({"initial": np.ones(3)}, f"initial state vector must have shape \\({D},\\), got \\(3,\\)"),
])
def test_fixed_point_names_the_bad_argument(free_fedavg, kwargs, pattern):
    with pytest.raises((InvalidHyperparameterError, InvalidProblemError), match=pattern) as info:
        mf.fixed_point(free_fedavg, **kwargs)
    assert isinstance(info.value, ValueError)


@pytest.mark.parametrize(("kwargs", "pattern"), [
    ({"tol": float("inf")}, "tol must be finite, got inf"),
    ({"tol": 1.0}, "tol must lie in \\(0, 1\\), got 1.0"),
    ({"converged": -1e-8}, "converged must be finite and > 0, got -1e-08"),
    ({"converged": True}, "converged must be a real number, got True"),
    ({"krylov_dim": 0}, "krylov_dim must be an integer >= 1 and <= 10000, got 0"),
    ({"krylov_dim": 10**12}, "krylov_dim must be an integer >= 1 and <= 10000, got 1000000000000"),
    ({"krylov_dim": 8.0}, "krylov_dim must be an integer, got 8.0"),
    ({"initial": "abc"}, "initial must be numeric, got the string 'abc'"),
])
def test_orbit_rate_names_the_bad_argument(free_fedavg, kwargs, pattern):
    with pytest.raises((InvalidHyperparameterError, InvalidProblemError), match=pattern):
        mf.orbit_rate(free_fedavg, **kwargs)


def test_orbit_rate_refuses_a_basis_beyond_the_memory_cap(free_fedavg, monkeypatch):
    monkeypatch.setattr(mf, "MAX_KRYLOV_BYTES", 8 * D * 5)
    with pytest.raises(InvalidHyperparameterError, match="krylov_dim=80 needs an Arnoldi basis of 12 x 13"):
        mf.orbit_rate(free_fedavg)


def test_block_size_is_checked_before_any_round(fed):
    class Counting(FedAvg):
        calls = 0

        def round(self, *args, **kwargs):
            Counting.calls += 1
            return super().round(*args, **kwargs)

    for bad in (0, 257, 2.0, True, "8"):
        with pytest.raises(InvalidHyperparameterError, match="block_size must be None or an integer in \\[1, 256\\]"):
            matrix_free_affine_map(Counting(lr=0.1, local_steps=2), fed, block_size=bad)
    assert Counting.calls == 0


def test_projector_checks_its_functionals(free_fedavg, fed):
    from fltheory.theory.invariants import ConservedFunctionals, conserved_functionals
    import scipy.sparse as sp

    with pytest.raises(InvalidProblemError, match=r"funcs must be a ConservedFunctionals .* got nan"):
        mf.Projector(float("nan"), "FedAvg")
    W = sp.csc_matrix(np.array([[1.0], [np.nan]]))
    with pytest.raises(InvalidProblemError, match=r"funcs\.W must hold finite real coefficients"):
        mf.Projector(ConservedFunctionals(W=W, names=("x",), families=(slice(0, 1),)), "FedAvg")
    with pytest.raises(InvalidProblemError, match=r"funcs\.W must be a 2-D scipy\.sparse matrix"):
        mf.Projector(ConservedFunctionals(W=np.ones((2, 1)), names=("x",), families=(slice(0, 1),)), "FedAvg")
    alg = Scaffold(lr=0.1, local_steps=2)
    rm_map = matrix_free_affine_map(alg, fed)
    funcs = conserved_functionals(alg, fed, rm_map.layout, rm_map.frozen)
    with pytest.raises(InvalidHyperparameterError, match="algorithm must be the algorithm's name \\(a str\\), got 3"):
        mf.Projector(funcs, 3)
    P = mf.Projector(funcs, "SCAFFOLD")
    v = np.random.default_rng(0).standard_normal(rm_map.dim)
    np.testing.assert_allclose(P.coefficients(P(v)), 0.0, atol=1e-12)     # P v lies in ker W^T
    np.testing.assert_allclose(P(P(v)), P(v), atol=1e-12)                 # a projector


# ------------------------------------------------ orbit rate from the fixed point's block Krylov space
@pytest.mark.parametrize("block_size", [None, 8])
@pytest.mark.parametrize("name", list(MAKERS))
def test_orbit_rate_equals_dense_on_every_affine_algorithm(fed, name, block_size):
    """Default start: read from the space the rate and fixed point were computed on (a few
    rounds for the fixed point's checks, no Arnoldi); a random start: the same, from its own
    space, or Arnoldi when the space cannot decide.  Both equal the dense orbit rate to 1e-10."""
    x0 = np.linspace(-1, 1, D)
    dense = affine_round_map(MAKERS[name](), fed, x0=x0, matrix_free=False)
    free = matrix_free_affine_map(MAKERS[name](), fed, x0=x0, block_size=block_size)
    spectral_rate(free)
    fixed_point(free)
    before = free.rounds
    assert mf.orbit_rate(free) == pytest.approx(orbit_rate(dense), abs=1e-10)
    assert free.cache["orbit_method"] == "fixed-point space"
    assert free.rounds - before <= 8                   # the fixed point's refinement and checks only
    start = dense.base + np.random.default_rng(2).standard_normal(dense.dim) * ~dense.frozen
    assert mf.orbit_rate(free, initial=start) == pytest.approx(orbit_rate(dense, initial=start), abs=1e-10)
    assert free.cache["orbit_method"] in ("fixed-point space", "arnoldi")


def _symmetric(lam, seed=0):
    Qr, _ = np.linalg.qr(np.random.default_rng(seed).standard_normal((lam.size, lam.size)))
    return (Qr * lam) @ Qr.T, Qr


@pytest.mark.parametrize("excited", [[0, 5, 9], [3, 7], [12], [1, 2]])
def test_ritz_orbit_rate_finds_the_largest_excited_eigenvalue(excited):
    """M = U diag(lam) U^T; e0 a combination of the chosen eigenvectors; a block space started
    at [e0, random] (so it holds unexcited modes too).  The answer is max lam[excited] or None."""
    from fltheory.theory.krylov import ritz_orbit_rate

    lam = np.linspace(0.95, 0.05, 40)
    A, U = _symmetric(lam)
    e0 = U[:, excited] @ np.linspace(1.0, 2.0, len(excited))
    start = np.column_stack([e0, np.random.default_rng(1).standard_normal((40, 3))])
    res = block_krylov(lambda V: A @ V, lambda v: v, start, symmetric=True, max_vectors=40)
    got = ritz_orbit_rate(res.space, e0, symmetric=True)
    assert got == pytest.approx(lam[excited].max(), abs=1e-12)
    general = ritz_orbit_rate(res.space, e0, symmetric=False)
    assert general is None or general == pytest.approx(lam[excited].max(), abs=1e-12)


def test_ritz_orbit_rate_does_not_guess_on_a_small_unresolved_space():
    """A space of 6 vectors of a 200-dimensional map with a dense spectrum: the top Ritz
    pairs have not converged, so no answer is read from them (None, never a wrong rate)."""
    from fltheory.theory.krylov import ritz_orbit_rate

    lam = np.linspace(0.99, 0.0, 200)
    A, U = _symmetric(lam, seed=3)
    e0 = U @ np.random.default_rng(4).standard_normal(200)
    res = block_krylov(lambda V: A @ V, lambda v: v, np.column_stack([e0, np.ones(200)]), symmetric=True,
                       max_vectors=6)
    assert ritz_orbit_rate(res.space, e0, symmetric=True) is None


@pytest.mark.parametrize(("kwargs", "pattern"), [
    ({"space": 1.0}, "space must be a KrylovSpace"),
    ({"e0": np.ones(3)}, r"e0 must be a vector of shape \(40,\), got \(3,\)"),
    ({"e0": np.full(40, np.nan)}, "e0 contains a non-finite value"),
    ({"symmetric": None}, "symmetric must be True or False, got None"),
    ({"tol": 1.5}, r"tol must lie in \(0, 1\), got 1.5"),
    ({"converged": "abc"}, "converged must be a real number, got 'abc'"),
])
def test_ritz_orbit_rate_names_the_bad_argument(kwargs, pattern):
    from fltheory.theory.krylov import ritz_orbit_rate

    A, _ = _symmetric(np.linspace(0.9, 0.1, 40))
    res = block_krylov(lambda V: A @ V, lambda v: v, np.ones((40, 1)), symmetric=True)
    args = {"space": res.space, "e0": np.ones(40), "symmetric": True, **kwargs}
    with pytest.raises(InvalidHyperparameterError, match=pattern):
        ritz_orbit_rate(**args)


# ------------------------------------------------ the public fuzz sweep with working arguments
def _sweep_bases():
    """Working arguments of every public callable of matrix_free and krylov (the public fuzz
    suite calls them with a dense map or 1.0, which the first check already refuses): each
    bad value then reaches the check of its own parameter."""
    from fltheory.theory import krylov
    from fltheory.theory.invariants import conserved_functionals

    small = random_quadratic(5, 12, L=2.0, mu=0.3, heterogeneity=2.0, seed=4)
    A = np.diag(np.linspace(0.1, 0.8, 20))
    start = np.random.default_rng(0).standard_normal((20, 2))

    def scaffold_map():
        return matrix_free_affine_map(Scaffold(lr=0.1, local_steps=2), small)

    def fedavg_map():
        return matrix_free_affine_map(FedAvg(lr=0.1, local_steps=2), small)

    def funcs():
        m = scaffold_map()
        return conserved_functionals(m.round_map.algorithm, small, m.layout, m.frozen)

    def space():
        return block_krylov(lambda V: A @ V, lambda v: v, start, symmetric=True).space

    return {
        "fixed_point": (mf.fixed_point, lambda: {"amap": scaffold_map()}),
        "orbit_rate": (mf.orbit_rate, lambda: {"amap": scaffold_map()}),
        "orbit_rate (symmetric)": (mf.orbit_rate, lambda: {"amap": fedavg_map()}),
        "spectral_rate": (mf.spectral_rate, lambda: {"amap": scaffold_map()}),
        "rate_estimate": (mf.rate_estimate, lambda: {"amap": scaffold_map()}),
        "contraction_factor": (mf.contraction_factor, lambda: {"amap": fedavg_map()}),
        "matrix_free_affine_map": (matrix_free_affine_map,
                                   lambda: {"algorithm": FedAvg(lr=0.1, local_steps=2), "problem": small}),
        "Projector": (mf.Projector, lambda: {"funcs": funcs(), "algorithm": "SCAFFOLD"}),
        "block_krylov": (block_krylov, lambda: {"apply": lambda V: A @ V, "project": lambda v: v, "start": start,
                                                "symmetric": True}),
        "KrylovSpace": (krylov.KrylovSpace, lambda: {"n": 5}),
        "ritz_orbit_rate": (krylov.ritz_orbit_rate, lambda: {"space": space(), "e0": np.ones(20),
                                                              "symmetric": True}),
    }


@pytest.mark.parametrize("name", list(_sweep_bases()))
def test_fuzz_sweep_with_working_arguments(name):
    from tests._fuzz_support import Outcome, sweep

    fn, base = _sweep_bases()[name]
    base()                                                    # the working arguments work
    calls = sweep(f"matrix_free/krylov {name}", fn, base=base)
    broken = [c for c in calls if c.outcome in (Outcome.RAW, Outcome.NONFINITE, Outcome.HANG)]
    assert not broken, "\n".join(f"{c.parameter}={c.kind}: {c.outcome.value}: {c.detail}" for c in broken[:10])
    assert sum(c.outcome is Outcome.TYPED for c in calls) >= len(calls) // 2


@pytest.mark.parametrize("block_size", [None, 8])
@pytest.mark.parametrize("name", ["fedavg", "scaffold II", "feddyn gd", "efl", "client momentum persist"])
def test_orbit_rate_from_a_start_that_avoids_the_slowest_modes(fed, name, block_size):
    """On the instance above every default or random start excites the slowest mode, so the orbit
    rate there equals the spectral rate and cannot tell the orbit route from ``spectral_rate``.
    Here the start is S~ + Re v_k + Re v_j / 2 for two eigenvectors of the dense M (eigenvalues
    off 1, so in V) with |lambda_j| < |lambda_k| < rho(M_V) - 0.05: the orbit decays like |lambda_k|^t,
    and the matrix-free orbit rate (from the fixed point's space or by Arnoldi) is |lambda_k| to 1e-12."""
    x0 = np.linspace(-1, 1, D)
    dense = affine_round_map(MAKERS[name](), fed, x0=x0, matrix_free=False)
    free = matrix_free_affine_map(MAKERS[name](), fed, x0=x0, block_size=block_size)
    lam, V = np.linalg.eig(dense.M)
    rho = spectral_rate(dense)
    slower = np.flatnonzero((np.abs(lam) < rho - 0.05) & (np.abs(lam) > 0.2) & (np.abs(lam - 1) > 1e-6))
    slower = slower[np.argsort(-np.abs(lam[slower]))]
    k, j = slower[len(slower) // 2], slower[-1]
    assert abs(lam[j]) < abs(lam[k]) < rho - 0.05
    start = fixed_point(dense).S + np.real(V[:, k]) + 0.5 * np.real(V[:, j])
    assert orbit_rate(dense, initial=start) == pytest.approx(abs(lam[k]), abs=1e-12)
    assert mf.orbit_rate(free, initial=start) == pytest.approx(abs(lam[k]), abs=1e-12)
