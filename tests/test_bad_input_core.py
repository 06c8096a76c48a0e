"""Bad input to the core public callables (problems, algorithms, theory, bounds)
gives a typed fltheory error naming the argument, the value given and what is
expected (issue 16, item 3).

One row per callable fixed for the fuzz suite (tests/test_fuzz_public_api.py):
a representative bad input, the error type it must raise and fragments the
message must contain.  The fuzz suite checks "typed or finite" for every bad
value; these rows pin down the *message*.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from tests._fuzz_support import Outcome, base_arguments, sweep

from fltheory import errors
from fltheory.algorithms import EFL, FedAvg, Scaffold, TemporalEnsemble, run, run_record
from fltheory.problems import (QuadraticFederation, problem_constants, random_least_squares, random_quadratic,
                               synthetic_fedprox)
from fltheory.theory import (anderson_fixed_point, bound_result, lipschitz_ratios, operator_fixed_point,
                             operator_jacobian, state_layout, state_to_vector)
from fltheory.theory.bounds import (efl_abandonment, efl_inactive_rate, efl_incomplete_rate, efl_step_moments,
                                    efl_theorem1, efl_theorem1_from_constants, elasticnet_C0, elasticnet_sign_term,
                                    elasticnet_theorem31, fedopt_theorem1,
                                    fedopt_theorem1_from_constants, fedopt_theorem1_quadratic,
                                    gd_contraction_factor, gd_rate_threshold, gd_step_factor,
                                    table1_efl_comparison, table1_rounds)
from fltheory.theory import (affine_round_map, client_contraction_matrices, contraction_factor,
                             fedopt_operator, fedopt_quadratic_fixed_point, fedopt_quadratic_round_map,
                             fedopt_small_rate_limit, fixed_point, invariant_subspace, matrix_free_affine_map,
                             minimizer_inconsistency, objective_shift, orbit_rate, round_map, run_affine,
                             spectral_rate, suboptimality_gaps, vector_to_state)


def _fed() -> Any:
    return random_quadratic(3, 2, L=1.0, mu=0.5, heterogeneity=0.5, seed=0)


def _alg() -> FedAvg:
    return FedAvg(lr=0.1, local_steps=2)


def _amap() -> Any:
    return affine_round_map(_alg(), _fed())


def _nan_state() -> Any:
    fed, alg = _fed(), _alg()
    state = alg.init(fed, np.zeros(fed.dim), np.random.default_rng(0))
    return dataclasses.replace(state, x=np.array([np.nan, 0.0]))


#: (id, call, expected error type, fragments of the message)
CASES: list[tuple[str, Callable[[], Any], type[Exception], tuple[str, ...]]] = [
    ("random_least_squares rows huge",
     lambda: random_least_squares(3, 2, rows=10**12, seed=0),
     errors.InvalidHyperparameterError, ("rows", "1000000000000", "at most")),
    ("random_least_squares total size",
     lambda: random_least_squares(3, 100, rows=10**6, seed=0),
     errors.InvalidHyperparameterError, ("sum(rows) * dim", "1e+08")),
    ("synthetic_fedprox intercept array",
     lambda: synthetic_fedprox(0.5, 0.5, seed=0, intercept=np.ones(3)),
     errors.InvalidHyperparameterError, ("intercept", "True or False")),
    ("problem_constants rng not a generator",
     lambda: problem_constants(_fed(), rng=5),
     errors.InvalidHyperparameterError, ("rng", "5", "numpy.random.Generator")),
    ("problem_constants radius overflows",
     lambda: problem_constants(_fed(), radius=1e300),
     errors.OutOfRangeError, ("radius=1e+300", "overflow")),
    ("run_record algorithm not an Algorithm",
     lambda: run_record("FedAvg", _fed(), rounds=2, completed_rounds=2, seed=0, participation=None,
                        seconds=0.1),
     errors.InvalidHyperparameterError, ("algorithm", "'FedAvg'", "Algorithm")),
    ("run_record completed_rounds above rounds",
     lambda: run_record(_alg(), _fed(), rounds=2, completed_rounds=3, seed=0, participation=None,
                        seconds=0.1),
     errors.InvalidHyperparameterError, ("completed_rounds", "<= 2", "3")),
    ("run_record seconds NaN",
     lambda: run_record(_alg(), _fed(), rounds=2, completed_rounds=2, seed=0, participation=None,
                        seconds=float("nan")),
     errors.InvalidHyperparameterError, ("seconds", "finite", "nan")),
    ("run metrics array",
     lambda: run(_alg(), _fed(), 2, metrics=np.ones((3, 2))),
     errors.InvalidHyperparameterError, ("metrics", "must be a collection of names", "array(")),
    ("round_map x0 string",
     lambda: round_map(_alg(), _fed(), x0="abc"),
     errors.InvalidProblemError, ("x0", "'abc'", "numeric")),
    ("round_map state of another kind",
     lambda: round_map(_alg(), _fed(), state=5),
     errors.InvalidProblemError, ("state", "5", "algorithm.init")),
    ("round_map max_warmup float",
     lambda: round_map(_alg(), _fed(), max_warmup=1.5),
     errors.InvalidHyperparameterError, ("max_warmup", "1.5", "integer")),
    ("vector_to_state layout string",
     lambda: vector_to_state(np.zeros(2), _amap().round_map.template, layout="abc"),
     errors.InvalidHyperparameterError, ("layout", "'abc'", "StateLayout")),
    ("affine_round_map rtol string",
     lambda: affine_round_map(_alg(), _fed(), rtol="abc"),
     errors.InvalidHyperparameterError, ("rtol", "'abc'", "real number")),
    ("affine_round_map rng int",
     lambda: affine_round_map(_alg(), _fed(), rng=3),
     errors.InvalidHyperparameterError, ("rng", "3", "numpy.random.Generator")),
    ("affine_round_map dense_max string",
     lambda: affine_round_map(_alg(), _fed(), dense_max="abc"),
     errors.InvalidHyperparameterError, ("dense_max", "'abc'", "integer")),
    ("invariant_subspace not a map",
     lambda: invariant_subspace(1.0),
     errors.InvalidHyperparameterError, ("amap", "1.0", "AffineRoundMap")),
    ("fixed_point max_condition below 1",
     lambda: fixed_point(_amap(), max_condition=0.5),
     errors.InvalidHyperparameterError, ("max_condition", "0.5", "> 1")),
    ("fixed_point initial string",
     lambda: fixed_point(_amap(), initial="abc"),
     errors.InvalidProblemError, ("initial", "'abc'", "numeric")),
    ("spectral_rate not a map",
     lambda: spectral_rate("abc"),
     errors.InvalidHyperparameterError, ("amap", "'abc'", "affine_round_map")),
    ("contraction_factor not a map",
     lambda: contraction_factor(np.eye(2)),
     errors.InvalidHyperparameterError, ("amap", "array", "AffineRoundMap")),
    ("orbit_rate tol above 1",
     lambda: orbit_rate(_amap(), tol=2.0),
     errors.InvalidHyperparameterError, ("tol", "2.0", "(0, 1)")),
    ("run_affine communication array",
     lambda: run_affine(_alg(), _fed(), 2, communication=np.ones(2)),
     errors.InvalidHyperparameterError, ("communication", "'copy'", "array")),
    ("run_affine map of another problem",
     lambda: run_affine(_alg(), random_quadratic(3, 2, L=1.0, mu=0.5, heterogeneity=0.5, seed=1), 2,
                        amap=_amap()),
     errors.InvalidHyperparameterError, ("amap was recovered for FedAvg",)),
    ("matrix_free_affine_map NaN state",
     lambda: matrix_free_affine_map(_alg(), _fed(), state=_nan_state()),
     errors.InvalidProblemError, ("state", "finite", "nan")),
    ("fedopt_operator x0 NaN",
     lambda: fedopt_operator(_alg(), _fed(), x0=np.array([np.nan, 0.0])),
     errors.InvalidProblemError, ("x0", "non-finite", "nan")),
    ("minimizer_inconsistency rates string",
     lambda: minimizer_inconsistency(lambda h: FedAvg(lr=h, local_steps=2), _fed(), "abc"),
     errors.InvalidHyperparameterError, ("rates", "'abc'", "numeric")),
    ("minimizer_inconsistency not a callable",
     lambda: minimizer_inconsistency(_alg(), _fed(), [0.1]),
     errors.InvalidHyperparameterError, ("make_algorithm", "callable")),
    ("client_contraction_matrices overflow",
     lambda: client_contraction_matrices(_fed(), 1e300, 2),
     errors.OutOfRangeError, ("overflows float64", "lr=1e+300", "local_steps=2")),
    ("fedopt_quadratic_round_map preconditioners string",
     lambda: fedopt_quadratic_round_map(_fed(), 0.1, 2, preconditioners="abc"),
     errors.InvalidHyperparameterError, ("preconditioners", "'abc'", "numeric")),
    ("fedopt_quadratic_fixed_point preconditioners complex",
     lambda: fedopt_quadratic_fixed_point(_fed(), 0.1, 2, preconditioners=np.ones(2) * 1j),
     errors.InvalidHyperparameterError, ("preconditioners", "complex")),
    ("fedopt_quadratic_fixed_point at lr=1e3, tau=200 (issue example)",
     lambda: fedopt_quadratic_fixed_point(_fed(), 1e3, 200),
     errors.OutOfRangeError, ("overflows float64", "local_steps=200")),
    ("fedopt_small_rate_limit preconditioners object",
     lambda: fedopt_small_rate_limit(_fed(), 1.0, 2, preconditioners=object()),
     errors.InvalidHyperparameterError, ("preconditioners", "object")),
    ("objective_shift client bool",
     lambda: objective_shift(_fed(), client=True),
     errors.InvalidProblemError, ("client", "True", "integer")),
    ("objective_shift client out of range",
     lambda: objective_shift(_fed(), client=3),
     errors.InvalidProblemError, ("client", "<= 2", "3")),
    ("suboptimality_gaps clients float",
     lambda: suboptimality_gaps(_fed(), np.zeros((3, 2)), clients=np.nan),
     errors.InvalidProblemError, ("clients", "nan", "integer")),
    ("suboptimality_gaps rows and clients disagree",
     lambda: suboptimality_gaps(_fed(), np.zeros((3, 2)), clients=[0, 1]),
     errors.InvalidProblemError, ("W has 3 rows", "2 clients")),
    ("bound_result assumptions string",
     lambda: bound_result(1.0, "abc", reference="ref", variant="as_printed"),
     errors.InvalidHyperparameterError, ("assumptions", "'abc'", "Assumption")),
    ("bound_result value string",
     lambda: bound_result("abc", (), reference="ref", variant="as_printed"),
     errors.InvalidHyperparameterError, ("value", "'abc'", "numeric")),
    ("bound_result measured NaN",
     lambda: bound_result(1.0, (), reference="ref", variant="as_printed", measured=float("nan")),
     errors.InvalidHyperparameterError, ("measured", "finite", "nan")),
    ("bound_result reference not a string",
     lambda: bound_result(1.0, (), reference=3, variant="as_printed"),
     errors.InvalidHyperparameterError, ("reference", "3", "string")),
    ("efl_step_moments weights string",
     lambda: efl_step_moments("abc", np.array([[0.0, 1.0]]), 1),
     errors.InvalidHyperparameterError, ("weights", "'abc'", "numeric")),
    ("efl_theorem1 weights None",
     lambda: efl_theorem1(2, E=1, theta=1.0, mu=0.5, L=1.0, sigma2=0.0, D=0.0, G2=1.0, weights=None,
                          init_dist2=1.0),
     errors.InvalidHyperparameterError, ("weights", "None", "numeric")),
    ("efl_theorem1 moments of another kind",
     lambda: efl_theorem1(2, E=1, theta=1.0, mu=0.5, L=1.0, sigma2=0.0, D=0.0, G2=1.0,
                          weights=np.ones(3) / 3, init_dist2=1.0, moments=(1, 2)),
     errors.InvalidHyperparameterError, ("moments", "StepMoments", "tuple")),
    ("efl_theorem1_from_constants weights complex",
     lambda: efl_theorem1_from_constants(_fed().constants(), 2, E=1, theta=1.0, weights=np.ones(3) * 1j,
                                         init_dist2=1.0, G2=1.0),
     errors.InvalidHyperparameterError, ("weights", "complex")),
    ("efl_inactive_rate inactive string",
     lambda: efl_inactive_rate(2, "ab", 1.0, 1),
     errors.InvalidHyperparameterError, ("inactive", "'ab'", "numeric")),
    ("efl_inactive_rate constant NaN (issue example)",
     lambda: efl_inactive_rate(2, [0.5, 0.5], 1.0, 1, constant=float("nan")),
     errors.InvalidHyperparameterError, ("constant", "nan")),
    ("efl_incomplete_rate inv_steps object",
     lambda: efl_incomplete_rate(2, 2, np.ones(3) / 3, 0.1, object()),
     errors.InvalidHyperparameterError, ("inv_steps", "object")),
    ("elasticnet_sign_term gammas string",
     lambda: elasticnet_sign_term("abc", np.zeros(2), np.zeros((3, 2)), lambda1=0.1, lambda2=0.1),
     errors.InvalidHyperparameterError, ("gammas", "'abc'", "numeric")),
    ("elasticnet_sign_term NaN signs",
     lambda: elasticnet_sign_term(np.zeros((3, 2)), np.zeros(2), np.full((3, 2), np.nan), lambda1=0.1,
                                  lambda2=0.1),
     errors.InvalidHyperparameterError, ("mean_signs", "non-finite", "nan")),
    ("fedopt_theorem1 weights None",
     lambda: fedopt_theorem1(3, rho=0.5, phi=0.1, weights=None, server_lr=1.0, init_dist2=1.0),
     errors.InvalidHyperparameterError, ("weights", "None", "numeric")),
    ("fedopt_theorem1 rho of the wrong length",
     lambda: fedopt_theorem1(3, rho=np.ones(2) / 2, phi=0.1, weights=np.ones(3) / 3, server_lr=1.0,
                             init_dist2=1.0),
     errors.InvalidHyperparameterError, ("rho", "(3,)", "(2,)")),
    ("fedopt_theorem1 extra_assumptions string",
     lambda: fedopt_theorem1(3, rho=0.5, phi=0.1, weights=np.ones(3) / 3, server_lr=1.0, init_dist2=1.0,
                             extra_assumptions="abc"),
     errors.InvalidHyperparameterError, ("extra_assumptions", "'abc'", "Assumption")),
    ("fedopt_theorem1_quadratic x0 string",
     lambda: fedopt_theorem1_quadratic(_fed(), 3, lr=0.1, local_steps=2, sigma2=0.1, server_lr=1.0, x0="abc"),
     errors.InvalidProblemError, ("x0", "'abc'", "numeric")),
    ("fedopt_theorem1_from_constants weights of another length",
     lambda: fedopt_theorem1_from_constants(_fed().constants(), 3, lr=0.1, local_steps=2, weights=[0.5, 0.5],
                                            server_lr=1.0, init_dist2=1.0),
     errors.InvalidHyperparameterError, ("weights has 2 entries", "3 clients")),
    ("table1_rounds algorithm array",
     lambda: table1_rounds(np.array(["EFL"]), eps=0.1, S=2, mu=0.5, L=1.0),
     errors.InvalidHyperparameterError, ("algorithm", "SCAFFOLD", "array")),
    ("gd_contraction_factor overflow",
     lambda: gd_contraction_factor(1e300, 2, 0.5, 1.0),
     errors.OutOfRangeError, ("q^tau", "lr=1e+300", "local_steps=2.0")),
    ("gd_step_factor lr string",
     lambda: gd_step_factor("abc", 0.5, 1.0),
     errors.InvalidHyperparameterError, ("lr", "'abc'", "numeric")),
    ("gd_rate_threshold L complex",
     lambda: gd_rate_threshold(0.5, 1j),
     errors.InvalidHyperparameterError, ("L", "complex")),
    ("table1_efl_comparison mu above L",
     lambda: table1_efl_comparison(eps=0.1, S=2, G=1.0, mu=2.0, L=1.0),
     errors.InvalidHyperparameterError, ("mu <= L", "mu = 2.0", "L = 1.0")),
    ("table1_efl_comparison S not an integer",
     lambda: table1_efl_comparison(eps=0.1, S=2.5, G=1.0, mu=0.5, L=1.0),
     errors.InvalidHyperparameterError, ("S", "2.5", "integer")),
    ("AffineRoundMap called on a NaN state vector",
     lambda: _amap()(np.array([np.nan, 0.0])),
     errors.InvalidProblemError, ("S", "non-finite", "nan")),
    ("AffineRoundMap.block of an unknown field",
     lambda: _amap().block("x", "abc"),
     errors.InvalidHyperparameterError, ("cols", "'abc'", "['x']")),
    ("RoundMap.step of another kind of state",
     lambda: round_map(_alg(), _fed()).step(5),
     errors.InvalidProblemError, ("state", "5", "FedAvg")),
    ("FedOptOperator called on a string",
     lambda: fedopt_operator(_alg(), _fed())("abc"),
     errors.InvalidProblemError, ("x", "'abc'", "numeric")),
    # public methods: federation hooks and algorithm methods (tests/test_fuzz_public_api.py sweeps them)
    ("shifted_solve D negative",
     lambda: _fed().shifted_solve(np.arange(3), -np.ones((3, 2)), np.zeros((3, 2)), np.zeros((3, 2))),
     errors.InvalidProblemError, ("D must be >= 0", "-1.")),
    ("shifted_solve b of the wrong shape",
     lambda: _fed().shifted_solve(np.arange(3), np.ones((3, 2)), np.zeros((2, 2)), np.zeros((3, 2))),
     errors.InvalidProblemError, ("b must have shape (3, 2)", "(2, 2)")),
    ("shifted_solve max_iter float",
     lambda: _fed().shifted_solve(np.arange(3), np.ones((3, 2)), np.zeros((3, 2)), np.zeros((3, 2)),
                                  max_iter=1.5),
     errors.InvalidHyperparameterError, ("max_iter", "1.5", "integer")),
    ("smoothness_bounds clients float",
     lambda: _fed().smoothness_bounds(np.nan, np.zeros((3, 2))),
     errors.InvalidProblemError, ("clients", "nan", "integer")),
    ("client_gaps W NaN",
     lambda: _fed().client_gaps(np.full((3, 2), np.nan), np.arange(3)),
     errors.NonFinitePointError, ("W must be finite", "nan")),
    ("client_block stop below start",
     lambda: _fed().client_block(2, 1),
     errors.InvalidProblemError, ("stop", ">= 2", "1")),
    ("cvxpy_client_loss y not a cvxpy expression",
     lambda: _fed().cvxpy_client_loss(0, np.zeros(2)),
     errors.InvalidHyperparameterError, ("y must be a cvxpy expression", "(2,)", "ndarray")),
    ("loss_and_grad_norm2 X of rank 1",
     lambda: _fed().loss_and_grad_norm2(np.zeros(2)),
     errors.InvalidProblemError, ("X must have shape (T, 2)", "(2,)")),
    ("from_least_squares A not a sequence",
     lambda: QuadraticFederation.from_least_squares(1.0, [np.ones(2)]),
     errors.InvalidProblemError, ("A must be a sequence", "1.0", "float")),
    ("with_client weight string",
     lambda: _fed().with_client(_fed(), weight="abc"),
     errors.InvalidProblemError, ("weight", "'abc'", "real number")),
    ("FedAvg.init problem not a federation",
     lambda: _alg().init(5, np.zeros(2), np.random.default_rng(0)),
     errors.InvalidProblemError, ("problem must be an fltheory Federation", "5", "int")),
    ("FedAvg.init x0 of another dimension",
     lambda: _alg().init(_fed(), np.zeros(3), np.random.default_rng(0)),
     errors.InvalidProblemError, ("x0 must have shape (2,)", "(3,)")),
    ("FedAvg.round state of another algorithm",
     lambda: _alg().round(Scaffold(lr=0.1, local_steps=2).init(_fed(), np.zeros(2), np.random.default_rng(0)),
                          _fed(), None, np.random.default_rng(0)),
     errors.InvalidProblemError, ("state must be a state of FedAvg", "FedAvgState", "ScaffoldState")),
    ("FedAvg.round rng not a generator",
     lambda: _alg().round(_state(), _fed(), None, 3),
     errors.InvalidHyperparameterError, ("rng", "3", "numpy.random.Generator")),
    ("FedAvg.round participation string",
     lambda: _alg().round(_state(), _fed(), "full", np.random.default_rng(0)),
     errors.InvalidHyperparameterError, ("participation", "'full'", "Participation")),
    ("FedAvg.participants t negative",
     lambda: _alg().participants(_fed(), None, np.random.default_rng(0), -1),
     errors.InvalidHyperparameterError, ("t must be an integer >= 0", "-1")),
    ("Scaffold.linear_invariants problem None",
     lambda: Scaffold(lr=0.1, local_steps=2).linear_invariants(None),
     errors.InvalidProblemError, ("problem", "None", "Federation")),
    ("TemporalEnsemble.update G of the wrong shape",
     lambda: TemporalEnsemble(beta=0.5).update(TemporalEnsemble(beta=0.5).init((2,)), np.zeros(3)),
     errors.InvalidHyperparameterError, ("G must have shape (2,)", "(3,)")),
    ("EFL.rate_factor tau float",
     lambda: EFL(lr=0.1, local_steps=2).rate_factor(1.5),
     errors.InvalidHyperparameterError, ("tau", "1.5", "integer")),
    ("QuadraticFederation.without_client(True)",
     lambda: _fed().without_client(True),
     errors.InvalidProblemError, ("client index", "True", "integer")),
]


def test_table1_rounds_reports_mu_above_L_as_a_violated_hypothesis() -> None:
    """Issue example: table1_rounds with mu > L returned a number; mu <= L is a hypothesis."""
    res = table1_rounds("SCAFFOLD", eps=0.1, S=2, G=1.0, mu=2.0, L=1.0)
    assert res.value is None
    assert [a.name for a in res.violated] == ["mu <= L"]
    with pytest.raises(errors.AssumptionError, match="mu <= L"):
        table1_rounds("EFL", eps=0.1, S=2, G=1.0, mu=2.0, L=1.0, strict=True)


@pytest.mark.parametrize("gamma", [-1e9, -32.0, 0.0])
def test_efl_abandonment_needs_a_positive_gamma(gamma: float) -> None:
    """Issue example: a negative gamma gave a number (or, where E (T - tau0) + gamma = 0, a
    ZeroDivisionError); gamma > 0 is a hypothesis of Corollary 1, reported as violated."""
    res = efl_abandonment(0.5, J=2.0, C=3.0, T=10, E=4, tau0=2, gamma=gamma)
    assert res.value is None and res.terms["f1"] is None and res.terms["abandon"] is None
    assert [a.name for a in res.violated] == ["E >= 1, C >= 0, gamma > 0 (Theorem 1's constants)"]


def test_table1_efl_comparison_with_a_zero_other_row_has_no_ratio() -> None:
    """MIME's row is 0 at G = delta = 0: the ratios are undefined (None), not inf."""
    row = table1_efl_comparison(eps=0.1, S=2, G=0.0, mu=1.0, L=2.0, delta=0.0)["MIME"]
    assert row["other"] == 0.0 and row["ratio"] is None and row["optimization_ratio"] is None
    assert row["efl_tighter"] is False


@pytest.mark.parametrize(("call", "error", "fragments"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_bad_input_raises_a_typed_error_naming_it(call: Callable[[], Any], error: type[Exception],
                                                   fragments: tuple[str, ...]) -> None:
    with pytest.raises(error) as info:
        call()
    assert isinstance(info.value, errors.FLTheoryError)
    message = str(info.value)
    for fragment in fragments:
        assert fragment in message, f"{fragment!r} not in {message!r}"


# ------------------------------------------------------------------ deeper sweeps
# The fuzz suite picks base arguments by parameter name; for these callables the
# name-based values are themselves invalid (weights=None, amap=1.0, T=2, ...), so
# every fuzzed call stops at the first check and the other parameters are never
# reached.  Here each gets working base arguments and the full sweep of bad values.

def _state() -> Any:
    return _alg().init(_fed(), np.zeros(2), np.random.default_rng(0))


def _operator() -> Any:
    return fedopt_operator(_alg(), _fed())


_THIRDS = np.ones(3) / 3
DEEP: dict[str, tuple[Callable[..., Any], Callable[[], dict[str, Any]]]] = {
    "state_to_vector": (state_to_vector, lambda: {"state": _state()}),
    "vector_to_state": (vector_to_state, lambda: {"S": np.zeros(2), "template": _state()}),
    "state_layout": (state_layout, lambda: {"state": _state()}),
    "operator_fixed_point": (operator_fixed_point, lambda: {"T": _operator()}),
    "anderson_fixed_point": (anderson_fixed_point, lambda: {"T": _operator(), "x0": np.zeros(2)}),
    "operator_jacobian": (operator_jacobian, lambda: {"T": _operator(), "x": np.zeros(2)}),
    "lipschitz_ratios": (lipschitz_ratios, lambda: {"T": _operator()}),
    "minimizer_inconsistency": (minimizer_inconsistency, lambda: {
        "make_algorithm": lambda h: FedAvg(lr=h, local_steps=2), "rates": [0.1, 0.05]}),
    "objective_shift": (objective_shift, lambda: {"client": 0}),
    "run_record": (run_record, lambda: {"completed_rounds": 2, "participation": None, "seconds": 0.1}),
    "bound_result": (bound_result, lambda: {"assumptions": (), "reference": "r", "variant": "v"}),
    "efl_step_moments": (efl_step_moments, lambda: {"weights": _THIRDS, "step_probs": np.array([[0, 0, 1.0]] * 3)}),
    "efl_theorem1": (efl_theorem1, lambda: {"weights": _THIRDS, "sigma2": 0.1, "D": 0.1}),
    "efl_theorem1_from_constants": (efl_theorem1_from_constants, lambda: {"weights": _THIRDS, "G2": 1.0}),
    "efl_incomplete_rate": (efl_incomplete_rate, lambda: {"weights": _THIRDS, "sigma2": 0.1, "inv_steps": 0.75}),
    "efl_inactive_rate": (efl_inactive_rate, lambda: {"inactive": np.array([0.5, 0.5]), "tau": 2}),
    "efl_abandonment": (efl_abandonment, lambda: {"tau0": 1, "T": 10, "E": 2}),
    "elasticnet_sign_term": (elasticnet_sign_term, lambda: {
        "gammas": np.zeros((3, 2)), "mean_signs": np.zeros((3, 2)), "theta_star": np.zeros(2),
        "lambda1": 0.1, "lambda2": 0.1}),
    "elasticnet_C0": (elasticnet_C0, lambda: {"grads_init": np.ones((3, 2)), "grads_opt": np.zeros((3, 2))}),
    "elasticnet_theorem31": (elasticnet_theorem31, lambda: {"m": 2, "P": 3, "d": 2}),
    "fedopt_theorem1": (fedopt_theorem1, lambda: {"weights": _THIRDS, "rho": 0.5, "phi": 0.1}),
    "fedopt_theorem1_from_constants": (fedopt_theorem1_from_constants, lambda: {"weights": _THIRDS}),
    "table1_rounds": (table1_rounds, lambda: {"algorithm": "SCAFFOLD", "mu": 0.5, "L": 1.0}),
}


@pytest.mark.parametrize("name", sorted(DEEP))
def test_bad_input_with_working_base_arguments(name: str) -> None:
    fn, base = DEEP[name]
    kwargs = base_arguments(fn)[0]
    kwargs.update(base())
    fn(**kwargs)                    # the base itself is valid: the sweep reaches every parameter's check
    calls = sweep(f"{fn.__module__}.{fn.__name__} (working base)", fn, base=base)
    broken = [c for c in calls if c.outcome in (Outcome.RAW, Outcome.NONFINITE, Outcome.HANG)]
    assert not broken, "\n".join(f"{c.parameter}={c.kind}: {c.outcome.value}: {c.detail}" for c in broken[:10])
