"""Closed-form linear parts (FedAvg dense M, SCAFFOLD block products) against probed maps,
single rounds and matrix powers."""

from dataclasses import dataclass

import numpy as np
import pytest

from fltheory.algorithms import FedAvg, FedProx, Scaffold
from fltheory.errors import InvalidHyperparameterError, InvalidProblemError
from fltheory.problems.generators import random_quadratic
from fltheory.theory.affine import (
    CLOSED_FORM_MIN_DIM,
    PROBE_MAX,
    PROBED,
    affine_round_map,
    contraction_factor,
    fixed_point,
    orbit_rate,
    spectral_rate,
)
from fltheory.theory.closed_form_maps import (
    ClosedFormBlock,
    _weighted_power_sum,
    closed_form_block,
    closed_form_linear_part,
    fedavg_linear_part,
)
from fltheory.theory.matrix_free import MatrixFreeAffineMap
from fltheory.theory.powered_krylov import (
    MIN_RATE,
    POWER,
    powered_applies,
    powered_fixed_point,
    powered_rate,
    uses_powered_krylov,
)
from fltheory.theory.round_maps import round_map


@pytest.fixture(scope="module")
def fed():
    return random_quadratic(6, 70, L=1.0, mu=0.1, heterogeneity=1.0, seed=3,
                            weights=np.array([0.3, 0.1, 0.2, 0.15, 0.05, 0.2]))


@pytest.mark.parametrize("e", range(1, 10))
def test_weighted_power_sum_is_the_sum_of_matrix_powers(e):
    rng = np.random.default_rng(e)
    B = rng.standard_normal((4, 7, 7)) / 3
    S = B + np.swapaxes(B, 1, 2)
    w = rng.random(4)
    want = sum(w[i] * np.linalg.matrix_power(S[i], e) for i in range(4))
    got = _weighted_power_sum(S.copy(), w, e)
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-13 * np.abs(want).max())


def test_fedavg_linear_part_bits_do_not_depend_on_the_workers(monkeypatch):
    import fltheory.theory.closed_form_maps as cfm
    fed = random_quadratic(9, 40, L=1.0, mu=0.1, heterogeneity=1.0, seed=2)
    alg = FedAvg(lr=0.3, local_steps=[3, 3, 5, 5, 5, 7, 7, 7, 7])
    monkeypatch.setattr(cfm, "CHUNK_BYTES", 3 * 8 * 40 * 40 * 2 * 2)      # two clients per chunk
    monkeypatch.setattr(cfm, "WORKERS", 2)
    two = fedavg_linear_part(alg, fed)
    monkeypatch.setattr(cfm, "WORKERS", 1)
    np.testing.assert_array_equal(fedavg_linear_part(alg, fed), two)
    monkeypatch.undo()
    np.testing.assert_allclose(fedavg_linear_part(alg, fed), two, rtol=0, atol=1e-15)


def test_fedavg_linear_part_is_the_formula(fed):
    lr = np.linspace(0.1, 0.4, 6)
    steps = np.array([1, 2, 3, 5, 5, 8])
    alg = FedAvg(lr=lr, local_steps=steps, server_lr=0.6)
    H = fed.client_hess(np.zeros((6, fed.dim)))
    eye = np.eye(fed.dim)
    want = 0.4 * eye + 0.6 * sum(fed.weights[i] * np.linalg.matrix_power(eye - lr[i] * H[i], steps[i])
                                 for i in range(6))
    got = fedavg_linear_part(alg, fed)
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-14)
    np.testing.assert_array_equal(got, got.T)


@pytest.mark.parametrize("alg", [
    FedAvg(lr=0.2, local_steps=5),
    FedAvg(lr=np.linspace(0.05, 0.3, 6), local_steps=[1, 2, 3, 4, 6, 9], server_lr=0.7),
    FedAvg(lr=0.15, local_steps=4, aggregation="uniform", server_lr=1.3),
])
def test_fedavg_closed_form_agrees_with_probing(fed, alg):
    closed = affine_round_map(alg, fed)                       # d = 70 >= CLOSED_FORM_MIN_DIM: automatic
    probed = affine_round_map(alg, fed, closed_form=False)
    assert fed.dim >= CLOSED_FORM_MIN_DIM
    assert closed.route.startswith("closed form") and closed.symmetric
    assert probed.route == PROBED and not probed.symmetric
    assert set(closed.residuals) == set(probed.residuals)
    np.testing.assert_allclose(closed.M, probed.M, rtol=0, atol=1e-12)
    np.testing.assert_allclose(closed.c, probed.c, rtol=0, atol=1e-12)
    assert spectral_rate(closed) == pytest.approx(spectral_rate(probed), rel=0, abs=1e-10)
    assert contraction_factor(closed) == pytest.approx(contraction_factor(probed), rel=0, abs=1e-10)
    fc, fp = fixed_point(closed), fixed_point(probed)
    np.testing.assert_allclose(fc.S, fp.S, rtol=0, atol=1e-10)
    assert fc.condition == pytest.approx(fp.condition, rel=1e-8)
    assert fc.spectral_rate == pytest.approx(fp.spectral_rate, abs=1e-10)
    assert "closed form" in fc.message
    assert orbit_rate(closed) == pytest.approx(orbit_rate(probed), abs=1e-10)


def test_symmetric_spectrum_matches_the_general_eigensolver(fed):
    amap = affine_round_map(FedAvg(lr=0.3, local_steps=3), fed)
    assert amap.symmetric
    lam = np.linalg.eigvals(amap.M)
    assert spectral_rate(amap) == pytest.approx(float(np.abs(lam).max()), abs=1e-13)
    assert contraction_factor(amap) == pytest.approx(float(np.linalg.norm(amap.M, 2)), abs=1e-13)
    # the fixed point solves the map itself
    fp = fixed_point(amap)
    np.testing.assert_allclose(amap.M @ fp.S + amap.c, fp.S, rtol=0, atol=1e-13)


def test_small_states_are_probed_unless_asked(fed):
    small = random_quadratic(4, 6, L=1.0, mu=0.2, heterogeneity=0.5, seed=1)
    alg = FedAvg(lr=0.2, local_steps=3)
    assert affine_round_map(alg, small).route == PROBED
    forced = affine_round_map(alg, small, closed_form=True)
    assert forced.route.startswith("closed form")
    np.testing.assert_allclose(forced.M, affine_round_map(alg, small).M, rtol=0, atol=1e-14)
    with pytest.raises(InvalidHyperparameterError, match="closed_form"):
        affine_round_map(alg, small, closed_form="yes")


@dataclass(frozen=True, kw_only=True, eq=False)
class _TwoRoundFedAvg(FedAvg):
    """FedAvg running two rounds per call: affine, but not the closed form of one round."""

    def round(self, state, problem, participation, rng):
        state, _ = super().round(state, problem, participation, rng)
        return super().round(state, problem, participation, rng)


def test_a_wrong_closed_form_falls_back_to_probing(fed):
    alg = _TwoRoundFedAvg(lr=0.2, local_steps=2)
    amap = affine_round_map(alg, fed)
    assert amap.route == PROBED
    one = fedavg_linear_part(FedAvg(lr=0.2, local_steps=2), fed)
    np.testing.assert_allclose(amap.M, one @ one, rtol=0, atol=1e-12)


def test_no_closed_form_for_other_algorithms(fed):
    rm = round_map(FedProx(lr=0.1, local_steps=2, mu=0.3), fed)
    assert closed_form_linear_part(FedProx(lr=0.1, local_steps=2, mu=0.3), fed, rm.layout) is None
    noisy = fed.with_gradient_noise(0.1)
    rm2 = round_map(FedAvg(lr=0.1, local_steps=2), fed)
    assert closed_form_linear_part(FedAvg(lr=0.1, local_steps=2), noisy, rm2.layout) is None


@pytest.fixture(scope="module")
def scaffold_fed():
    return random_quadratic(40, 6, L=1.0, mu=0.1, heterogeneity=1.0, seed=5)


@pytest.mark.parametrize("alg", [
    Scaffold(lr=0.2, local_steps=5),
    Scaffold(lr=np.linspace(0.05, 0.25, 40), local_steps=np.arange(40) % 4 + 1, server_lr=0.8),
    Scaffold(lr=0.15, local_steps=3, option="I", server_lr=1.2),
])
def test_scaffold_block_product_is_the_round(scaffold_fed, alg):
    rm = round_map(alg, scaffold_fed)
    frozen = np.zeros(rm.dim, dtype=bool)
    block = closed_form_block(alg, scaffold_fed, rm.layout, frozen)
    assert isinstance(block, ClosedFormBlock)
    probed = affine_round_map(alg, scaffold_fed, closed_form=False)      # dense, one round per column
    V = np.random.default_rng(0).standard_normal((rm.dim, 2))
    np.testing.assert_allclose(block(V), probed.M @ V, rtol=0, atol=1e-12 * np.abs(probed.M @ V).max())
    with pytest.raises(ValueError, match="exceeds"):
        block(np.zeros((rm.dim, block.copies + 1)))


@pytest.mark.parametrize("option", ["I", "II"])
def test_scaffold_matrix_free_closed_form_agrees_with_rounds_and_dense(scaffold_fed, option):
    alg = Scaffold(lr=0.2, local_steps=4, option=option)
    closed = affine_round_map(alg, scaffold_fed, matrix_free=True)
    rounds = affine_round_map(alg, scaffold_fed, matrix_free=True, closed_form=False)
    dense = affine_round_map(alg, scaffold_fed, matrix_free=False)
    assert isinstance(closed, MatrixFreeAffineMap) and isinstance(closed.block, ClosedFormBlock)
    assert "closed-form SCAFFOLD" in closed.block_note
    assert not isinstance(rounds.block, ClosedFormBlock)
    r_dense = spectral_rate(dense)
    assert spectral_rate(closed) == pytest.approx(r_dense, abs=1e-10)
    assert spectral_rate(rounds) == pytest.approx(r_dense, abs=1e-10)
    assert uses_powered_krylov(closed) and not uses_powered_krylov(rounds)
    est = powered_rate(closed)
    assert est.power == POWER and est.error <= 1e-10
    assert est.powered.rate == pytest.approx(r_dense ** POWER, abs=1e-10)
    S_dense = fixed_point(dense).S
    fc = fixed_point(closed)
    assert f"M^{POWER}" in fc.message
    np.testing.assert_allclose(fc.S, S_dense, rtol=0, atol=1e-10)
    np.testing.assert_allclose(fixed_point(rounds).S, S_dense, rtol=0, atol=1e-10)
    assert closed.block.products > 0 and closed.block.rounds == 0
    # another start: the fixed point depends on it only through the conserved quantities
    start = closed.base + np.random.default_rng(4).standard_normal(closed.dim)
    np.testing.assert_allclose(fixed_point(closed, initial=start).S, fixed_point(dense, initial=start).S,
                               rtol=0, atol=1e-10)


def test_automatic_route_prefers_krylov_over_probing_large_states():
    fed = random_quadratic(60, 10, L=1.0, mu=0.1, heterogeneity=1.0, seed=0)     # SCAFFOLD state 620
    alg = Scaffold(lr=0.2, local_steps=3)
    assert 620 > PROBE_MAX
    auto = affine_round_map(alg, fed)
    assert isinstance(auto, MatrixFreeAffineMap) and uses_powered_krylov(auto)
    small = random_quadratic(30, 10, L=1.0, mu=0.1, heterogeneity=1.0, seed=0)   # state 320: probed
    assert affine_round_map(alg, small).route == PROBED


def test_structured_clients_and_large_scaffold_states_get_no_closed_form(monkeypatch):
    import fltheory.theory.closed_form_maps as cfm
    from fltheory.problems import random_structured_quadratic
    structured = random_structured_quadratic(5, 80, rank=2, L=1.0, mu=0.1, heterogeneity=1.0, seed=0)
    alg = FedAvg(lr=0.2, local_steps=3)
    rm = round_map(alg, structured)
    assert closed_form_linear_part(alg, structured, rm.layout) is None       # cheap products: Krylov
    amap = affine_round_map(alg, structured)
    assert amap.route == PROBED                                               # 80 <= PROBE_MAX
    fed = random_quadratic(20, 5, L=1.0, mu=0.1, heterogeneity=1.0, seed=0)
    sc = Scaffold(lr=0.2, local_steps=2)
    rm2 = round_map(sc, fed)
    frozen = np.zeros(rm2.dim, dtype=bool)
    assert closed_form_block(sc, fed, rm2.layout, frozen) is not None
    monkeypatch.setattr(cfm, "SCAFFOLD_MAX_BYTES", 4 * 8 * 20 * 25 - 1)
    assert closed_form_block(sc, fed, rm2.layout, frozen) is None


@pytest.mark.parametrize("mu, steps", [(0.95, 1), (0.8, 1)])
def test_fast_contracting_scaffold_uses_the_space_of_m_itself(mu, steps):
    # client spectra in [mu, 1] and lr = 1: rates of a few hundredths, where the fourth root of a
    # powered estimate loses digits (at mu = 1 the true rate 0 came out as 1.6e-4)
    fed = random_quadratic(60, 10, L=1.0, mu=mu, heterogeneity=1.0, seed=0, constants="clients")
    alg = Scaffold(lr=1.0, local_steps=steps)
    auto = affine_round_map(alg, fed)
    dense = affine_round_map(alg, fed, matrix_free=False)
    assert uses_powered_krylov(auto) and not powered_applies(auto)
    assert powered_rate(auto).rate < MIN_RATE
    assert spectral_rate(auto) == pytest.approx(spectral_rate(dense), abs=1e-10)
    fc = fixed_point(auto)
    assert f"M^{POWER}" not in fc.message
    np.testing.assert_allclose(fc.S, fixed_point(dense).S, rtol=0, atol=1e-10)


# ----------------------------------------------------------- bad input (issue 16, item 3)
def _small_scaffold():
    from fltheory.theory.round_maps import state_layout
    problem = random_quadratic(4, 2, L=1.0, mu=0.5, heterogeneity=0.5, seed=0)
    algorithm = Scaffold(lr=0.1, local_steps=2)
    layout = state_layout(algorithm.init(problem, np.zeros(2), np.random.default_rng(0)))
    return algorithm, problem, layout


@pytest.mark.parametrize("bad", [None, 1.0, "FedAvg", np.zeros(3)])
def test_fedavg_linear_part_refuses_arguments_of_the_wrong_kind(fed, bad):
    with pytest.raises(InvalidHyperparameterError, match=r"fedavg_linear_part: algorithm must be a FedAvg"):
        fedavg_linear_part(bad, fed)
    with pytest.raises(InvalidProblemError, match=r"fedavg_linear_part: problem must be a Federation"):
        fedavg_linear_part(FedAvg(lr=0.1, local_steps=2), bad)


def test_fedavg_linear_part_refuses_a_federation_without_exact_hessians(fed):
    stochastic = fed.with_minibatch(2) if hasattr(fed, "with_minibatch") else None
    if stochastic is None or not stochastic.is_stochastic:
        pytest.skip("no stochastic variant of this federation")
    with pytest.raises(InvalidProblemError, match="constant exact Hessians"):
        fedavg_linear_part(FedAvg(lr=0.1, local_steps=2), stochastic)


def test_closed_form_entries_name_the_bad_argument_and_its_value():
    algorithm, problem, layout = _small_scaffold()
    frozen = np.zeros(layout.dim, dtype=bool)
    with pytest.raises(InvalidProblemError, match=r"closed_form_linear_part: layout must be a StateLayout.*'x'"):
        closed_form_linear_part(algorithm, problem, "x")
    with pytest.raises(InvalidHyperparameterError, match=r"closed_form_block: algorithm must be .*Algorithm.*nan"):
        closed_form_block(float("nan"), problem, layout, frozen)
    with pytest.raises(InvalidProblemError, match=r"frozen must be a boolean numpy array of shape \(12,\).*\(3,\)"):
        closed_form_block(algorithm, problem, layout, np.zeros(3, dtype=bool))
    with pytest.raises(InvalidProblemError, match=r"frozen must be a boolean.*float64"):
        closed_form_block(algorithm, problem, layout, np.zeros(12))
    with pytest.raises(InvalidHyperparameterError,
                       match=r"closed_form_block: copies must be an integer >= 1 and <= 10000000, got 0"):
        closed_form_block(algorithm, problem, layout, frozen, copies=0)
    with pytest.raises(InvalidHyperparameterError, match=r"copies must be an integer, got 1.5"):
        closed_form_block(algorithm, problem, layout, frozen, copies=1.5)
    # the valid call still gives the block product, and it is the round's linear part
    block = closed_form_block(algorithm, problem, layout, frozen)
    assert isinstance(block, ClosedFormBlock)
    amap = affine_round_map(algorithm, problem, matrix_free=False, closed_form=False)
    V = np.random.default_rng(5).standard_normal((layout.dim, 2))
    np.testing.assert_allclose(block(V), amap.M @ V, rtol=1e-12, atol=1e-13)


@pytest.mark.parametrize("bad", [None, 0.5, "amap", np.eye(3)])
def test_powered_entries_refuse_anything_but_a_closed_form_matrix_free_map(fed, bad):
    with pytest.raises(InvalidProblemError, match=r"powered_rate: amap must be a matrix-free affine map"):
        powered_rate(bad)
    with pytest.raises(InvalidProblemError, match=r"powered_fixed_point: amap must be a matrix-free affine map"):
        powered_fixed_point(bad)


def test_powered_entries_refuse_a_dense_map_and_agree_with_it_on_a_valid_one():
    algorithm, problem, _ = _small_scaffold()
    dense = affine_round_map(algorithm, problem, matrix_free=False)
    with pytest.raises(InvalidProblemError, match=r"got AffineRoundMap"):
        powered_rate(dense)
    amap = affine_round_map(algorithm, problem, matrix_free=True)
    assert uses_powered_krylov(amap)
    assert powered_rate(amap).rate == pytest.approx(spectral_rate(dense), abs=1e-12)
    fp = powered_fixed_point(amap)
    np.testing.assert_allclose(fp.x, fixed_point(dense).x, rtol=1e-10, atol=1e-12)
