"""Fuzz suite of the public API (issue 16, item 4).

Every public function and concrete class (read from the packages' ``__all__``
by ``tests/_fuzz_support.py``, so new public names are covered automatically)
is called with plausible arguments in which one parameter at a time is
replaced by a bad value: NaN, +-inf, negative, zero, huge, bool, string,
complex, object, empty, wrong rank, NaN/complex/bool/object arrays.  The
contract: a typed ``FLTheoryError`` or a finite result, within a time limit
(SIGALRM); never a raw exception, a NaN/inf result or a hang.

Callables that still break the contract are listed in ``KNOWN_VIOLATIONS``
with the count measured when the list was written; their tests are strict
xfails (FINDING), so fixing one makes its test XPASS and forces the entry out
of the list.  A property test then throws Hypothesis-generated bad arrays
(random shapes, NaN/inf placed at random, every dtype kind) at the callables
that honour the contract: the ``ci`` profile tries a few per run, ``thorough``
many more.

Public methods (no leading underscore) of the public classes of
``fltheory.problems`` and ``fltheory.algorithms`` get the same sweep, each call
on a fresh small valid instance (``instance_factories``), with their own list
of known violations (``KNOWN_METHOD_VIOLATIONS``).  The count of inputs tried and of each outcome is printed in the
terminal summary (``tests/conftest.py``).

Completeness: ``test_every_public_module_is_fuzzed_or_listed`` walks every
non-private fltheory module; each public entry point is reached by the
enumeration or its module is listed with a reason in ``INTERNAL_MODULES`` or
``NOT_YET_FUZZED`` (the visible gap: frozen packages, modules not yet enumerated).
"""

from __future__ import annotations

import functools

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests._fuzz_support import (
    BAD_VALUES,
    EXCLUDED_METHODS,
    FUNCTION_BASES,
    METHOD_TALLY,
    TIME_LIMIT,
    Outcome,
    base_arguments,
    fuzz_call,
    method_base,
    public_callables,
    public_methods,
    sweep,
    sweep_method,
    public_modules,
    time_limit,
    unfuzzed_public_classes,
    unreached_callables,
)
from tests._fuzz_support import _nonfinite as nonfinite

CALLABLES = dict(public_callables())

#: Public callables that still break the contract for some bad input, with the
#: number of violating inputs out of those tried (one parameter replaced at a
#: time by each of the BAD_VALUES) and the first example.
KNOWN_VIOLATIONS: dict[str, str] = {
    # empty: the moments, matrix_free and krylov entries found when the enumeration was widened are fixed, and
    # so are fltheory.testing's check_algorithm / check_federation (fltheory/contracts.py)
}

_VIOLATIONS = (Outcome.RAW, Outcome.NONFINITE, Outcome.HANG)

_ALGORITHM_INTERNALS = "round kernels and helpers of the algorithms, called by the checked Algorithm hooks (fuzzed " \
                       "as public methods)"
_NN_KERNELS = "numerical kernels called only behind the checked fltheory.nn layers and models (validated once there)"
_REFERENCE_LOOPS = "per-client reference loops for the tests (the vectorized algorithms are held to them)"
_CLI = "CLI plumbing (argparse wiring; exercised by the CLI tests)"
_SEARCH_ENGINE = "search engine internals behind the checked fltheory.search entries (search, evaluate_point)"
_SEARCH_TARGETS = "search target definitions, reached by name through fltheory.search.search / evaluate_point"
_THEORY_INTERNALS = "helpers of the theory routines, called only behind their checked public entries"
_FROZEN = "frozen this session"

#: Non-private modules whose public callables the enumeration does not reach on purpose: module -> reason.
INTERNAL_MODULES: dict[str, str] = {
    "fltheory.aliases": "type aliases for annotations, not functions",
    "fltheory.algorithms.base": _ALGORITHM_INTERNALS,
    "fltheory.algorithms.elasticnet": _ALGORITHM_INTERNALS,
    "fltheory.algorithms.fedavg": _ALGORITHM_INTERNALS,
    "fltheory.algorithms.fedcurv": _ALGORITHM_INTERNALS,
    "fltheory.algorithms.feddyn": _ALGORITHM_INTERNALS,
    "fltheory.algorithms.fedopt": _ALGORITHM_INTERNALS,
    "fltheory.algorithms.fedprox": _ALGORITHM_INTERNALS,
    "fltheory.algorithms.invariants": "declared-invariant records returned by Algorithm.linear_invariants",
    "fltheory.algorithms.local": "local-solver kernels called by the algorithms' checked rounds",
    "fltheory.algorithms.local.blocking": "local-solver kernels called by the algorithms' checked rounds",
    "fltheory.algorithms.local.exact": "local-solver kernels called by the algorithms' checked rounds",
    "fltheory.algorithms.local.steps": "local-solver kernels called by the algorithms' checked rounds",
    "fltheory.algorithms.reference": _REFERENCE_LOOPS,
    "fltheory.algorithms.reference.common": _REFERENCE_LOOPS,
    "fltheory.algorithms.reference.saga": _REFERENCE_LOOPS,
    "fltheory.algorithms.scaffold": _ALGORITHM_INTERNALS,
    "fltheory.algorithms.targets": _ALGORITHM_INTERNALS,
    "fltheory.cli": _CLI,
    "fltheory.cli_format": _CLI,
    "fltheory.contracts": "contract-check machinery behind fltheory.testing.check_algorithm / check_federation",
    "fltheory.nn.batch_threads": _NN_KERNELS,
    "fltheory.nn.kernels": _NN_KERNELS,
    "fltheory.nn.params": _NN_KERNELS,
    "fltheory.nn.recurrent_kernels": _NN_KERNELS,
    "fltheory.nn.rop_kernels": _NN_KERNELS,
    "fltheory.plotting_checks": "figure-layout checks used by the figure tests, not an analysis entry point",
    "fltheory.problems.base": "helpers of the Federation base class, called behind checked constructors",
    "fltheory.problems.lifted": "built only by Federation.lifted (fuzzed as a public method)",
    "fltheory.problems.newton": "Newton solvers behind the federations' checked optimum()",
    "fltheory.problems.structured_constants": "constants of structured federations behind their checked constants()",
    "fltheory.search.cli": _CLI,
    "fltheory.search.efl_target": _SEARCH_TARGETS,
    "fltheory.search.evaluate": _SEARCH_ENGINE,
    "fltheory.search.execution": _SEARCH_ENGINE,
    "fltheory.search.pep": _SEARCH_TARGETS,
    "fltheory.search.space": "base class of the fuzzed Real / Integer / Categorical parameters",
    "fltheory.search.store": _SEARCH_ENGINE,
    "fltheory.search.targets": _SEARCH_TARGETS,
    "fltheory.theory.affine_support": _THEORY_INTERNALS,
    "fltheory.theory.block_products": _THEORY_INTERNALS,
    "fltheory.theory.invariants": _THEORY_INTERNALS,
    "fltheory.theory.moments.conditional": _THEORY_INTERNALS,
    "fltheory.theory.registry.cli": _CLI,
    "fltheory.theory.round_maps": _THEORY_INTERNALS,
}

#: Public modules not yet fuzzed: module -> reason (a visible gap, not a hidden one).
NOT_YET_FUZZED: dict[str, str] = {
}


def _param(name: str) -> object:
    if name in KNOWN_VIOLATIONS:
        return pytest.param(name, marks=pytest.mark.xfail(
            strict=True, reason=f"FINDING: {name} breaks the bad-input contract: {KNOWN_VIOLATIONS[name]}"))
    return name


def test_the_public_surface_is_enumerated() -> None:
    """The enumeration reaches every layer, and the list of known violations
    names only public callables (a removed name must leave the list)."""
    packages = {name.rsplit(".", 1)[0] for name in CALLABLES}
    assert {"fltheory.problems", "fltheory.algorithms", "fltheory.theory", "fltheory.theory.bounds",
            "fltheory.nn", "fltheory.optim", "fltheory.compression", "fltheory.participation"} <= packages
    assert len(CALLABLES) >= 120
    assert set(KNOWN_VIOLATIONS) <= set(CALLABLES)
    assert set(FUNCTION_BASES) <= set(CALLABLES)


@pytest.mark.parametrize("name", sorted(FUNCTION_BASES))
def test_function_bases_work(name: str) -> None:
    """The working arguments of FUNCTION_BASES give a finite result without an exception, so
    that each fuzzed parameter's own check is what the sweep reaches."""
    fn = CALLABLES[name]
    kwargs = {**base_arguments(fn)[0], **FUNCTION_BASES[name]()}
    with time_limit(TIME_LIMIT):
        result = fn(**kwargs)
    assert not nonfinite(result), repr(result)[:200]


def test_every_public_module_is_fuzzed_or_listed() -> None:
    """Walk every non-private fltheory module: each entry-point callable of its ``__all__`` is
    reached by the enumeration (the same object), or its module is listed with a reason in
    INTERNAL_MODULES or NOT_YET_FUZZED.  Records, abstract bases and protocols are skipped by the
    enumeration's own rule (``not_an_entry_point``).  A listed module must exist and still have an
    unreached callable, so an entry cannot outlive its reason."""
    assert not set(INTERNAL_MODULES) & set(NOT_YET_FUZZED)
    unreached = unreached_callables()
    listed = set(INTERNAL_MODULES) | set(NOT_YET_FUZZED)
    missing = {module: names for module, names in unreached.items() if module not in listed}
    assert not missing, f"public callables neither fuzzed nor listed (add the module's package to " \
                        f"PUBLIC_PACKAGES, or list it with a reason): {missing}"
    modules = set(public_modules())
    assert listed <= modules, f"listed modules that do not exist: {sorted(listed - modules)}"
    stale = sorted(listed - set(unreached))
    assert not stale, f"listed modules whose callables are all reached now (remove them): {stale}"


@pytest.mark.parametrize("name", [_param(n) for n in CALLABLES])
def test_bad_input_gives_a_typed_error_or_a_finite_result(name: str) -> None:
    calls = sweep(name, CALLABLES[name], base=FUNCTION_BASES.get(name))
    broken = [c for c in calls if c.outcome in _VIOLATIONS]
    assert not broken, "\n".join(f"{c.parameter}={c.kind}: {c.outcome.value}: {c.detail}" for c in broken[:10])


#: A public callable that keeps the contract for every one of the BAD_VALUES but breaks it for an
#: array only the property test below generates goes here (name -> (parameter, array)), with a strict
#: xfail per entry like KNOWN_VIOLATIONS, and is kept out of that test's sample. None is open: the
#: five found in the previous session are the regression cases just below.
KNOWN_GENERATED_VIOLATIONS: dict[str, tuple[str, np.ndarray]] = {}

#: Generated arrays that once broke the contract (fixed; kept as regression cases of the same check).
FIXED_GENERATED_VIOLATIONS: dict[str, tuple[str, np.ndarray]] = {
    "fltheory.nn.cnn": ("input_shape", np.array(3)),              # 0-d array taken for a sequence (TypeError)
    "fltheory.nn.mlp": ("hidden", np.array(3)),                   # 0-d array taken for a sequence (TypeError)
    "fltheory.nn.synthetic_next_char": ("concentration", np.full(2, 1e300)),  # broadcast ValueError
    "fltheory.nn.trajectory_constants": ("points", np.full(2, 1e300)),        # inf returned
    "fltheory.algorithms.run": ("metrics", np.array(0.5)),        # 0-d array taken for a sequence (TypeError)
}


def test_known_generated_violations_name_public_callables() -> None:
    assert set(KNOWN_GENERATED_VIOLATIONS) <= set(CALLABLES)
    assert not set(KNOWN_GENERATED_VIOLATIONS) & set(KNOWN_VIOLATIONS)
    for name, (parameter, value) in KNOWN_GENERATED_VIOLATIONS.items():
        call = fuzz_call(name, CALLABLES[name], parameter, f"generated {value.dtype} {value.shape}", value,
                         FUNCTION_BASES.get(name))
        assert call.outcome in _VIOLATIONS, f"{name}: fixed; move its entry to FIXED_GENERATED_VIOLATIONS"


@pytest.mark.parametrize("name", sorted(FIXED_GENERATED_VIOLATIONS))
def test_fixed_generated_violation(name: str) -> None:
    parameter, value = FIXED_GENERATED_VIOLATIONS[name]
    call = fuzz_call(name, CALLABLES[name], parameter, f"generated {value.dtype} {value.shape}", value,
                     FUNCTION_BASES.get(name))
    assert call.outcome is Outcome.TYPED, f"{parameter}={value!r}: {call.outcome.value}: {call.detail}"
    assert parameter in call.detail, call.detail


_CLEAN = sorted(n for n in CALLABLES if n not in KNOWN_VIOLATIONS and n not in KNOWN_GENERATED_VIOLATIONS
                and base_arguments(CALLABLES[n])[1])


@st.composite
def bad_arrays(draw: st.DrawFn) -> np.ndarray:
    """Arrays of random shape and dtype kind with NaN/inf (or nothing) planted at random places."""
    shape = tuple(draw(st.lists(st.integers(0, 4), min_size=0, max_size=4)))
    kind = draw(st.sampled_from(["float", "float32", "complex", "bool", "int", "object"]))
    size = int(np.prod(shape)) if shape else 1
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    base = rng.standard_normal(size) * 10.0 ** draw(st.integers(-300, 300))
    if kind in ("float", "float32") and size:
        where = rng.random(size) < draw(st.floats(0.0, 1.0))
        base[where] = draw(st.sampled_from([np.nan, np.inf, -np.inf]))
    arr = {"float": lambda: base, "float32": lambda: base.astype(np.float32),
           "complex": lambda: base + 1j, "bool": lambda: base > 0,
           "int": lambda: np.nan_to_num(base).astype(np.int64) if size else base.astype(np.int64),
           "object": lambda: base.astype(object)}[kind]()
    return np.asarray(arr).reshape(shape)


@given(name=st.sampled_from(_CLEAN), data=st.data(), value=bad_arrays())
def test_generated_bad_arrays_keep_the_contract(name: str, data: st.DataObject, value: np.ndarray) -> None:
    fn = CALLABLES[name]
    parameter = data.draw(st.sampled_from(base_arguments(fn)[1]))
    call = fuzz_call(name, fn, parameter, f"generated {value.dtype} {value.shape} {value.tobytes()[:32]!r}",
                     value, FUNCTION_BASES.get(name))
    assert call.outcome not in _VIOLATIONS, f"{parameter}={value!r}: {call.outcome.value}: {call.detail}"


def test_enough_distinct_inputs_are_tried() -> None:
    """Item 4 asks for at least 500 distinct inputs; the sweep alone gives far more."""
    total = sum(len(base_arguments(fn)[1]) for fn in CALLABLES.values()) * len(BAD_VALUES)
    assert total >= 500


# ------------------------------------------------------------- public methods
METHODS = {name: (factory, method) for name, factory, method in public_methods()}

#: Public methods that still break the contract (same format as KNOWN_VIOLATIONS).
KNOWN_METHOD_VIOLATIONS: dict[str, str] = {}


def _method_param(name: str) -> object:
    if name in KNOWN_METHOD_VIOLATIONS:
        return pytest.param(name, marks=pytest.mark.xfail(
            strict=True, reason=f"FINDING: {name} breaks the bad-input contract: {KNOWN_METHOD_VIOLATIONS[name]}"))
    return name


def test_every_public_method_is_enumerated() -> None:
    """Every public class of fltheory.problems / fltheory.algorithms with public methods
    has an instance to call them on; the hooks named in the issue are all reached; the
    hot-path kernel row_gradient is left out on purpose and only it."""
    assert unfuzzed_public_classes() == []
    owners = {name.rsplit(".", 2)[1] for name in METHODS}
    assert {"QuadraticFederation", "LogisticFederation", "StructuredQuadraticFederation", "FedAvg", "FedProx",
            "FedCurv", "FedOpt", "Scaffold", "FedDyn", "FedElasticNet", "EFL", "TemporalEnsemble"} <= owners
    hooks = ("shifted_solve", "smoothness_bounds", "client_gaps", "client_block", "cvxpy_client_loss",
             "loss_and_grad_norm2")
    for owner in ("QuadraticFederation", "LogisticFederation", "StructuredQuadraticFederation"):
        assert {f"fltheory.problems.{owner}.{h}" for h in hooks} <= set(METHODS)
    assert "fltheory.problems.QuadraticFederation.from_least_squares" in METHODS
    assert {f"fltheory.algorithms.FedAvg.{h}" for h in ("init", "round", "participants", "nominal_steps",
                                                        "linear_invariants")} <= set(METHODS)
    assert not any(name.endswith(".row_gradient") for name in METHODS)
    assert set(EXCLUDED_METHODS) == {"row_gradient"}
    assert len(METHODS) >= 150
    assert set(KNOWN_METHOD_VIOLATIONS) <= set(METHODS)


@pytest.mark.parametrize("name", sorted(METHODS))
def test_method_base_arguments_work(name: str) -> None:
    """The working arguments of every method give a finite result (no NaN/inf, no
    exception), so that each fuzzed parameter's own check is what the sweep reaches."""
    factory, method = METHODS[name]
    bound, kwargs, _ = method_base(factory, method)
    if name.endswith(".to_frame"):      # its lazy pandas import (seconds on a loaded machine) is not the call's cost
        pytest.importorskip("pandas")
    with time_limit(TIME_LIMIT):
        result = bound(**kwargs)
    assert not nonfinite(result), repr(result)[:200]


@pytest.mark.parametrize("name", [_method_param(n) for n in sorted(METHODS)])
def test_bad_input_to_public_methods_gives_a_typed_error_or_a_finite_result(name: str) -> None:
    factory, method = METHODS[name]
    calls = sweep_method(name, factory, method)
    broken = [c for c in calls if c.outcome in _VIOLATIONS]
    assert not broken, "\n".join(f"{c.parameter}={c.kind}: {c.outcome.value}: {c.detail}" for c in broken[:10])


@functools.cache
def _fuzzable_methods() -> list[str]:
    return sorted(n for n in METHODS if n not in KNOWN_METHOD_VIOLATIONS and method_base(*METHODS[n])[2])


@given(data=st.data(), value=bad_arrays())
def test_generated_bad_arrays_keep_the_contract_for_methods(data: st.DataObject, value: np.ndarray) -> None:
    """The Hypothesis arrays of the functions' property test, thrown at one parameter of a public method."""
    name = data.draw(st.sampled_from(_fuzzable_methods()))
    factory, method = METHODS[name]
    bound, kwargs, names = method_base(factory, method)
    parameter = data.draw(st.sampled_from(names))
    call = fuzz_call(name, bound, parameter, f"generated {value.dtype} {value.shape} {value.tobytes()[:32]!r}",
                     value, base=lambda: kwargs)
    METHOD_TALLY[call.outcome.value] += 1
    assert call.outcome not in _VIOLATIONS, f"{parameter}={value!r}: {call.outcome.value}: {call.detail}"
