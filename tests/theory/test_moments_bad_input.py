"""Bad input to the public entry points of fltheory.theory.moments (issue 16, item 3).

Each public callable gets one representative bad input whose typed error (an FLTheoryError that is
also the matching built-in) names the argument, the value given and what is expected.  Round counts
and sizes that would not finish or not fit are refused before any work, with the limit and the
reason; moments that leave float64 range raise OutOfRangeError instead of returning inf/NaN.

The public-API fuzz suite calls these functions with arguments chosen by parameter name, several of
which are not valid here (``template=1.0``, ``weights=None``, ``t=1.0``), so most of its calls stop
at the first bad base argument.  :func:`test_every_parameter_reaches_its_own_check` sweeps the same
bad values over working base arguments, so that each parameter's own check is what answers, and
asserts that the message names that parameter.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from fltheory.algorithms import EFL, FedAvg, Scaffold
from fltheory.errors import FLTheoryError, InvalidHyperparameterError, InvalidProblemError, OutOfRangeError
from fltheory.participation import IncompleteSteps, UniformSampling, UniformSteps
from fltheory.problems import random_quadratic
from fltheory.theory.moments import (
    AdditiveNoise,
    averaging_moments,
    conditional_round_map,
    efl_elastic_gradient_moments,
    efl_elastic_moments,
    elastic_anchor_laws,
    exact_moments,
    fedavg_client_maps,
    fedavg_sampling_moments,
    inclusion_probabilities,
    moment_operator,
    noise_of,
    participation_support,
    scaffold_rounds_to_accuracy,
    scaffold_sampling_moments,
)
from fltheory.theory.round_maps import state_layout
from tests._fuzz_support import INPUTS, TALLY, Outcome, sweep


def _fed() -> Any:
    return random_quadratic(3, 2, L=1.0, mu=0.5, heterogeneity=0.5, seed=0)


def _alg() -> FedAvg:
    return FedAvg(lr=0.1, local_steps=2)


def _template() -> dict[str, Any]:
    alg, fed = _alg(), _fed()
    state = alg.init(fed, np.zeros(2), np.random.default_rng(0))
    layout = state_layout(state)
    return {"algorithm": alg, "problem": fed, "template": state, "layout": layout, "clients": np.arange(3),
            "steps": np.array([2, 1, 2]), "frozen": np.zeros(layout.dim, dtype=bool)}


def _efl() -> EFL:
    return EFL(lr=0.1, local_steps=2, compression=None, lam=0.5)


def _incomplete() -> IncompleteSteps:
    return IncompleteSteps(UniformSampling(2), UniformSteps())


#: Working arguments of every public callable (the fuzz sweep replaces one at a time).
WORKING: dict[str, tuple[Callable[..., Any], Callable[[], dict[str, Any]]]] = {
    "AdditiveNoise": (AdditiveNoise, lambda: {"cov": 0.1, "n_clients": 3, "dim": 2}),
    "averaging_moments": (averaging_moments, lambda: {
        "problem": _fed(), "rounds": 2, "lr": 0.1, "local_steps": 2, "weights": np.full(3, 1 / 3), "sampled": 2}),
    "elastic_anchor_laws": (elastic_anchor_laws, lambda: {
        "moments": efl_elastic_moments(_efl(), _fed(), 2)}),
    "conditional_round_map": (conditional_round_map, _template),
    "exact_moments": (exact_moments, lambda: {"algorithm": _alg(), "problem": _fed(), "rounds": 2}),
    "fedavg_client_maps": (fedavg_client_maps, lambda: {
        "problem": _fed(), "lr": 0.1, "local_steps": 2, "cov": AdditiveNoise(0.1, 3, 2).cov}),
    "fedavg_sampling_moments": (fedavg_sampling_moments, lambda: {
        "algorithm": FedAvg(lr=0.1, local_steps=2, aggregation="uniform"), "problem": _fed(), "rounds": 2,
        "participation": UniformSampling(2)}),
    "inclusion_probabilities": (inclusion_probabilities, lambda: {
        "participation": _incomplete(), "n_clients": 3, "t": 0, "local_steps": np.array([1, 2, 1])}),
    "moment_operator": (moment_operator, lambda: {"algorithm": _alg(), "problem": _fed(), "noise": 0.1}),
    "noise_of": (noise_of, lambda: {"problem": _fed(), "noise": 0.1}),
    "participation_support": (participation_support, lambda: {
        "participation": _incomplete(), "t": 0, "local_steps": np.array([1, 2, 1])}),
    # the other public entries (the suite's by-name arguments give them a FedAvg, so it never gets past
    # their first check)
    "scaffold_sampling_moments": (scaffold_sampling_moments, lambda: {
        "algorithm": Scaffold(lr=0.1, local_steps=2), "problem": _fed(), "rounds": 2,
        "participation": UniformSampling(2)}),
    "scaffold_rounds_to_accuracy": (scaffold_rounds_to_accuracy, lambda: {
        "algorithm": Scaffold(lr=0.1, local_steps=2), "problem": _fed(), "eps": [1.0, 0.1], "max_rounds": 50}),
    "efl_elastic_moments": (efl_elastic_moments, lambda: {
        "algorithm": _efl(), "problem": _fed(), "rounds": 2, "participation": UniformSampling(2)}),
    "efl_elastic_gradient_moments": (efl_elastic_gradient_moments, lambda: {
        "algorithm": _efl(), "problem": _fed(), "moments": efl_elastic_moments(_efl(), _fed(), 2)}),
}



@pytest.mark.parametrize("name", sorted(WORKING))
def test_the_working_arguments_work(name: str) -> None:
    fn, base = WORKING[name]
    fn(**base())


@pytest.mark.parametrize("name", sorted(WORKING))
def test_every_parameter_reaches_its_own_check(name: str) -> None:
    """Every bad value of the fuzz suite, one parameter at a time over working arguments: a typed error
    naming that parameter, or a finite result; never a raw exception, NaN/inf or a hang."""
    fn, base = WORKING[name]
    saved = (TALLY.copy(), INPUTS.copy())
    try:
        calls = sweep(f"moments.{name}", fn, base=base)
    finally:                                   # the suite's printed tally counts the public-API fuzz only
        TALLY.clear()
        TALLY.update(saved[0])
        INPUTS.clear()
        INPUTS.update(saved[1])
    broken = [c for c in calls if c.outcome in (Outcome.RAW, Outcome.NONFINITE, Outcome.HANG)]
    assert not broken, "\n".join(f"{c.parameter}={c.kind}: {c.outcome.value}: {c.detail}" for c in broken[:10])
    unnamed = [c for c in calls if c.outcome is Outcome.TYPED
               and c.parameter not in c.detail]
    assert not unnamed, "\n".join(f"{c.parameter}={c.kind}: {c.detail}" for c in unnamed[:10])


def _raises(error: type[Exception], builtin: type[Exception], call: Callable[[], Any], *words: str) -> str:
    with pytest.raises(error) as info:
        call()
    assert isinstance(info.value, FLTheoryError) and isinstance(info.value, builtin)
    message = str(info.value)
    for word in words:
        assert word in message, f"{word!r} not in {message!r}"
    return message


# ------------------------------------------------- one representative per callable
def test_additive_noise_refuses_a_complex_covariance() -> None:
    _raises(InvalidProblemError, ValueError, lambda: AdditiveNoise(np.full(3, 0.1 + 1j), 3, 2),
            "cov", "complex", "numeric")


def test_averaging_moments_refuses_a_float_step_count() -> None:
    _raises(InvalidHyperparameterError, ValueError,
            lambda: averaging_moments(_fed(), 2, lr=0.1, local_steps=2.5,  # type: ignore[arg-type]
                                      weights=np.full(3, 1 / 3), sampled=2),
            "local_steps", "2.5", "integer")


def test_elastic_anchor_laws_refuses_what_is_not_exact_moments() -> None:
    _raises(InvalidHyperparameterError, ValueError, lambda: elastic_anchor_laws({"states": []}),  # type: ignore[arg-type]
            "moments", "ExactMoments", "dict")


def test_conditional_round_map_refuses_float_client_indices() -> None:
    args = _template() | {"clients": np.array([0.0, 1.0, 2.0])}
    _raises(InvalidHyperparameterError, ValueError, lambda: conditional_round_map(**args),
            "clients", "integer", "float64")


def test_conditional_round_map_refuses_a_client_outside_the_federation() -> None:
    args = _template() | {"clients": np.array([0, 5]), "steps": np.array([1, 1])}
    _raises(InvalidHyperparameterError, ValueError, lambda: conditional_round_map(**args), "clients", "[0, 3)", "5")


def test_exact_moments_refuses_a_nan_start() -> None:
    _raises(InvalidProblemError, ValueError, lambda: exact_moments(_alg(), _fed(), 2, x0=[0.0, np.nan]),
            "x0", "nan", "index (1,)")


def test_fedavg_client_maps_refuses_a_negative_rate() -> None:
    _raises(InvalidHyperparameterError, ValueError, lambda: fedavg_client_maps(_fed(), -0.1, 2, None),
            "lr", "-0.1", "> 0")


def test_fedavg_sampling_moments_refuses_a_wrong_length_start() -> None:
    _raises(InvalidProblemError, ValueError, lambda: fedavg_sampling_moments(_alg(), _fed(), 2, x0=np.zeros(3)),
            "x0", "(2,)", "(3,)")


def test_inclusion_probabilities_refuses_a_float_client_count() -> None:
    _raises(InvalidHyperparameterError, ValueError, lambda: inclusion_probabilities(None, 3.0),  # type: ignore[arg-type]
            "n_clients", "3.0", "integer")


def test_moment_operator_refuses_a_string_tolerance() -> None:
    _raises(InvalidHyperparameterError, ValueError, lambda: moment_operator(_alg(), _fed(), rtol="1e-8"),  # type: ignore[arg-type]
            "rtol", "'1e-8'", "real number")


def test_noise_of_refuses_what_is_not_a_federation() -> None:
    _raises(InvalidProblemError, ValueError, lambda: noise_of(np.eye(2), 0.1),  # type: ignore[arg-type]
            "problem", "Federation", "ndarray")


def test_participation_support_refuses_a_negative_round() -> None:
    _raises(InvalidHyperparameterError, ValueError, lambda: participation_support(None, -1, np.array([1, 2])),
            "t", "-1", ">= 0")


# ------------------------------------------------------ sizes refused before any work
@pytest.mark.parametrize("call", [
    lambda: exact_moments(_alg(), _fed(), 10**12),
    lambda: fedavg_sampling_moments(_alg(), _fed(), 10**12),
    lambda: averaging_moments(_fed(), 10**12, lr=0.1, local_steps=2, weights=np.full(3, 1 / 3), sampled=2),
    lambda: efl_elastic_moments(_efl(), _fed(), 10**12),
    lambda: scaffold_sampling_moments(Scaffold(lr=0.1, local_steps=2), _fed(), 10**12),
], ids=["exact_moments", "fedavg_sampling_moments", "averaging_moments", "efl_elastic_moments",
        "scaffold_sampling_moments"])
def test_a_huge_round_count_is_refused_at_once_with_the_limit_and_why(call: Callable[[], Any]) -> None:
    t0 = time.perf_counter()
    message = _raises(InvalidHyperparameterError, ValueError, call, "rounds", "1000000000000", "10000000",
                      "would not finish")
    assert "E[x_t x_t^T]" in message
    assert time.perf_counter() - t0 < 1.0


def test_a_round_count_within_the_limit_but_beyond_memory_is_refused_with_the_memory_it_needs() -> None:
    fed = random_quadratic(2, 200, L=1.0, mu=0.5, heterogeneity=0.5, seed=0)
    t0 = time.perf_counter()
    message = _raises(InvalidHyperparameterError, ValueError,
                      lambda: fedavg_sampling_moments(FedAvg(lr=0.1, local_steps=1), fed, 10**7), "GiB", "limit")
    need = (10**7 + 1) * (200**2 + 200) * 8 / 1024**3              # one (d, d) moment and a mean per round
    assert f"would take {need:.3g} GiB" in message
    assert time.perf_counter() - t0 < 1.0


@pytest.mark.parametrize("call, words", [
    (lambda: AdditiveNoise(0.1, 10**6, 10**3), ("GiB", "noise covariances")),
    (lambda: inclusion_probabilities(None, 10**6), ("GiB", "n_clients = 1000000")),
    (lambda: fedavg_client_maps(_fed(), 0.1, 10**12, None), ("local_steps", "10000000")),
    (lambda: averaging_moments(_fed(), 2, lr=0.1, local_steps=10**7, weights=np.full(3, 1 / 3), sampled=2),
     ("GiB", "local_steps = 10000000")),
], ids=["AdditiveNoise", "inclusion_probabilities", "fedavg_client_maps", "averaging_moments"])
def test_huge_sizes_are_refused_before_allocating(call: Callable[[], Any], words: tuple[str, ...]) -> None:
    t0 = time.perf_counter()
    _raises(InvalidHyperparameterError, ValueError, call, *words)
    assert time.perf_counter() - t0 < 1.0


# ---------------------------------------------------------- never inf or NaN returned
def test_diverging_moments_raise_out_of_range_instead_of_inf() -> None:
    """lr = 30 on curvatures in [0.5, 1]: |1 - 30 h|^5 >= 14^5 per round, so E||x_t||^2 passes 1e308
    within ~70 rounds; the exact value is finite but beyond float64: OutOfRangeError, naming the moment."""
    alg = FedAvg(lr=30.0, local_steps=5)
    for call in (lambda: fedavg_sampling_moments(alg, _fed(), 200, x0=np.ones(2)),
                 lambda: exact_moments(alg, _fed(), 200, x0=np.ones(2))):
        _raises(OutOfRangeError, ArithmeticError, call, "float64 range", "E[")


def test_client_maps_that_overflow_raise_out_of_range() -> None:
    _raises(OutOfRangeError, ArithmeticError, lambda: fedavg_client_maps(_fed(), 1e300, 2, None),
            "fedavg_client_maps", "float64 range")


def test_the_checks_do_not_change_a_valid_result() -> None:
    """The checked public entry and the engines' unchecked recovery give the same map, bit for bit."""
    from fltheory.theory.moments.conditional import recover_round_map
    args = _template()
    checked = conditional_round_map(**args)
    raw = recover_round_map(args["algorithm"], args["problem"], args["template"], args["layout"], args["clients"],
                            args["steps"], args["frozen"], 1e-8, None)
    for field in ("M", "c", "G", "P", "q", "R"):
        np.testing.assert_array_equal(getattr(checked, field), getattr(raw, field))


def test_moment_operator_methods_check_their_arguments() -> None:
    op = moment_operator(_alg(), _fed(), participation=UniformSampling(2), noise=0.1)
    t0 = time.perf_counter()
    _raises(InvalidHyperparameterError, ValueError, lambda: op.iterate(10**12), "rounds", "1000000000000",
            "would not finish")
    _raises(InvalidHyperparameterError, ValueError, lambda: op.stationary(max_rounds=10**12), "max_rounds",
            "10000000")
    assert time.perf_counter() - t0 < 1.0
    _raises(InvalidHyperparameterError, ValueError, lambda: op.stationary(rtol=float("nan")), "rtol", "nan")
    _raises(InvalidHyperparameterError, ValueError, lambda: op.running_mean(np.full((1, 2), np.nan), 3),
            "readout", "nan")
    _raises(InvalidHyperparameterError, ValueError, lambda: op.running_mean(np.eye(2), 2.0),  # type: ignore[arg-type]
            "rounds", "2.0", "integer")


def test_diverging_moment_operator_raises_out_of_range() -> None:
    op = moment_operator(FedAvg(lr=30.0, local_steps=5), _fed(), x0=np.ones(2))
    _raises(OutOfRangeError, ArithmeticError, lambda: op.iterate(200), "MomentOperator.iterate", "float64 range")


def test_binomial_step_law_beyond_a_thousand_steps_is_exact_not_an_overflow() -> None:
    """C(E, j) leaves float64 range beyond E ~ 1030 (a raw OverflowError before); the law is then taken
    from scipy's binomial pmf: probabilities sum to 1 and the mean number of steps is E p."""
    from fltheory.participation import BinomialSteps, FullParticipation
    E, p = 2000, 0.3
    support = participation_support(IncompleteSteps(FullParticipation(), BinomialSteps(p)), 0, np.array([E]))
    probs = np.array([o.prob for o in support])
    steps = np.array([int(o.steps[0]) for o in support])
    assert abs(probs.sum() - 1.0) < 1e-12
    assert abs(probs @ steps - E * p) < 1e-9 * E
    assert abs(probs @ (steps - E * p) ** 2 - E * p * (1 - p)) < 1e-8 * E


def test_a_start_whose_moments_overflow_raises_out_of_range_on_every_block_path() -> None:
    """x0 = 1e300: E[x_0 x_0^T] = 1e600 is beyond float64 from the start (NaN was returned by the EFL path
    and by scaffold_rounds_to_accuracy before)."""
    x0 = np.full(2, 1e300)
    scaffold = Scaffold(lr=0.1, local_steps=2)
    for call in (lambda: efl_elastic_moments(_efl(), _fed(), 2, x0=x0),
                 lambda: scaffold_sampling_moments(scaffold, _fed(), 2, x0=x0),
                 lambda: scaffold_rounds_to_accuracy(scaffold, _fed(), [0.1], x0=x0, max_rounds=5),
                 lambda: fedavg_sampling_moments(_alg(), _fed(), 2, x0=x0)):
        _raises(OutOfRangeError, ArithmeticError, call, "float64 range")


def test_an_affinity_tolerance_below_rounding_is_refused() -> None:
    """rtol = 1e-300 used to end in a NotAffineError that called FedAvg non-affine."""
    _raises(InvalidHyperparameterError, ValueError, lambda: exact_moments(_alg(), _fed(), 2, rtol=1e-300),
            "rtol", "1e-300", "rounding")
