"""check_algorithm / check_federation: pass on every built-in, catch each kind of broken contract."""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import pytest

from fltheory import algorithms, optim
from fltheory.algorithms import Algorithm, FedAvg
from fltheory.problems import QuadraticFederation, random_quadratic
from fltheory.testing import check_algorithm, check_federation

# Hyperparameters for each exported algorithm: a new export without an entry fails the test below,
# so every algorithm is held to the contract automatically.
HYPERPARAMETERS: dict[str, dict[str, Any]] = {
    "FedAvg": {"lr": 0.1, "local_steps": 3},
    "FedProx": {"lr": 0.1, "local_steps": 3, "mu": 0.5},
    "FedProxTE": {"lr": 0.1, "local_steps": 3, "mu": 0.5, "beta": 0.5},
    "FedCurv": {"lr": 0.1, "local_steps": 3},
    "FedCurvTE": {"lr": 0.1, "local_steps": 3, "beta": 0.5},
    "FedCL": {"lr": 0.1, "local_steps": 3,
              "proxy": random_quadratic(2, 3, L=2.0, mu=1.0, heterogeneity=0.0, seed=9)},
    "FedOpt": {"client_optimizer": optim.sgd(0.1), "server_optimizer": optim.sgd(1.0), "local_steps": 3},
    "Scaffold": {"lr": 0.1, "local_steps": 3},
    "FedDyn": {"alpha": 1.0},
    "FedElasticNet": {"base": "scaffold", "lambda1": 0.01, "lambda2": 0.1, "lr": 0.1, "local_steps": 3},
    "EFL": {"lr": 0.1, "local_steps": 3},
}
NOT_AN_ALGORITHM = {"Algorithm", "RoundInfo", "History", "run", "run_affine", "TemporalEnsemble"}


def exported_algorithms() -> list[str]:
    # every exported class (a new algorithm class must get an entry); functions are not algorithms
    return [n for n in algorithms.__all__
            if n not in NOT_AN_ALGORITHM and isinstance(getattr(algorithms, n), type)]


def test_every_exported_algorithm_has_a_contract_entry():
    missing = [n for n in exported_algorithms() if n not in HYPERPARAMETERS]
    assert not missing, f"add hyperparameters for {missing} to HYPERPARAMETERS"
    for n in exported_algorithms():
        assert isinstance(getattr(algorithms, n)(**HYPERPARAMETERS[n]), Algorithm)


@pytest.mark.parametrize("name", sorted(HYPERPARAMETERS))
def test_builtin_algorithms_meet_the_contract(name):
    report = check_algorithm(getattr(algorithms, name), hyperparameters=HYPERPARAMETERS[name])
    statuses = {check: status for check, status, _ in report.checks}
    assert statuses["same seed, same bits"] == statuses["state never mutated"] == "passed"
    assert statuses["typed errors on bad hyperparameters"] == "passed"


@dataclass(frozen=True, kw_only=True, eq=False)
class _WritesOldState(FedAvg):
    name: ClassVar[str] = "WritesOldState"

    def round(self, state, problem, participation, rng):
        new, info = super().round(state, problem, participation, rng)
        state.x[...] = 0.0                       # breaks "state never mutated"
        return new, info


@dataclass(frozen=True, kw_only=True, eq=False)
class _GlobalRandom(FedAvg):
    name: ClassVar[str] = "GlobalRandom"

    def round(self, state, problem, participation, rng):
        new, info = super().round(state, problem, participation, rng)
        jitter = np.random.default_rng().standard_normal(new.x.shape)   # not the passed generator
        return type(new)(**{**new.__dict__, "x": new.x + 1e-3 * jitter}), info


@dataclass(frozen=True, kw_only=True, eq=False)
class _AcceptsAnything(FedAvg):
    name: ClassVar[str] = "AcceptsAnything"

    def __post_init__(self) -> None:             # no validation at all
        pass


def _failed(exc: pytest.ExceptionInfo[AssertionError]) -> str:
    return str(exc.value)


def test_mutating_an_old_state_is_caught():
    with pytest.raises(AssertionError, match="state never mutated") as exc:
        check_algorithm(_WritesOldState, hyperparameters={"lr": 0.1, "local_steps": 2})
    assert "states of rounds [1, 2, 3]" in _failed(exc)


def test_unseeded_randomness_is_caught():
    with pytest.raises(AssertionError, match="same seed, same bits"):
        check_algorithm(_GlobalRandom, hyperparameters={"lr": 0.1, "local_steps": 2}, affine=False)


def test_unvalidated_hyperparameters_are_caught():
    with pytest.raises(AssertionError, match=r"lr=-1.0 accepted"):
        check_algorithm(_AcceptsAnything, hyperparameters={"lr": 0.1, "local_steps": 2})


def test_a_disagreeing_reference_loop_is_caught():
    def wrong_loop(alg, problem, rounds, participation, rng, x0):
        return np.zeros((rounds + 1, problem.dim))
    with pytest.raises(AssertionError, match="agrees with the reference loop"):
        check_algorithm(FedAvg, hyperparameters={"lr": 0.1, "local_steps": 2}, reference=wrong_loop)


def test_non_affine_algorithm_required_affine_fails():
    kwargs = {"client_optimizer": optim.adagrad(0.1), "server_optimizer": optim.sgd(1.0), "local_steps": 3}
    report = check_algorithm(algorithms.FedOpt, hyperparameters=kwargs)
    assert ("affine recovery on a quadratic", "skipped") == report.checks[3][:2]
    with pytest.raises(AssertionError, match="round map not affine"):
        check_algorithm(algorithms.FedOpt, hyperparameters=kwargs, affine=True)


class _WrongGradient(QuadraticFederation):
    def client_grad(self, X, clients=None):
        return 1.01 * super().client_grad(X, clients)


def test_check_federation_on_quadratic_and_logistic():
    fed = random_quadratic(4, 3, L=5.0, mu=0.2, heterogeneity=1.0, seed=3)
    names = [c[0] for c in check_federation(fed).checks]
    assert "gradients vs finite differences" in names and "constants: fed.mu <= eig(hess F) <= fed.L" in names
    from fltheory.problems import LogisticFederation
    rng = np.random.default_rng(0)
    feats = [rng.standard_normal((12, 2)) + i for i in range(3)]
    labels = [np.where(rng.random(12) < 0.5, 1.0, -1.0) for _ in range(3)]
    report = check_federation(LogisticFederation(feats, labels, reg=0.1))
    assert all(status == "passed" for _, status, _ in report.checks if not _.startswith("client optima"))


def test_check_federation_catches_a_wrong_gradient():
    good = random_quadratic(4, 3, L=5.0, mu=0.2, heterogeneity=1.0, seed=3)
    bad = _WrongGradient(good.H, good.e, weights=good.weights)
    with pytest.raises(AssertionError, match="gradients vs finite differences") as exc:
        check_federation(bad)
    assert "Hessians vs finite differences" in str(exc.value)


def test_testing_works_without_hypothesis():
    code = (
        "import sys; sys.modules['hypothesis'] = None\n"
        "import fltheory.testing as t\n"
        "assert t.HAVE_HYPOTHESIS is False\n"
        "from fltheory.theory import Assumption, bound_result\n"
        "t.check_bound(1.0, bound_result(2.0, [Assumption('a', True, '')], reference='r', variant='v'))\n"
        "from fltheory.errors import OptionalDependencyError\n"
        "try:\n    t.quadratic_federations()\nexcept OptionalDependencyError as e:\n    print(e)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert 'pip install "fltheory[test]"' in out.stdout


def test_importing_testing_registers_the_profiles():
    from hypothesis import settings

    import fltheory.testing  # noqa: F401
    assert settings.get_profile("thorough").max_examples == 400
    assert settings.get_profile("ci").derandomize is True


def test_thorough_profile_works_outside_the_repository(tmp_path):
    (tmp_path / "test_outside.py").write_text(
        "from hypothesis import settings\n\n"
        "def test_profile():\n    assert settings().max_examples == 400\n")
    root = str(Path(__file__).resolve().parents[1])
    env = {**os.environ, "PYTHONPATH": root}
    out = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                          "--hypothesis-profile=thorough", "test_outside.py"],
                         cwd=tmp_path, capture_output=True, text=True, env=env)
    assert out.returncode == 0, out.stdout + out.stderr   # loaded by the installed pytest11 entry point
    pyproject = (Path(root) / "pyproject.toml").read_text()
    assert 'fltheory = "fltheory.pytest_plugin"' in pyproject      # the pytest11 entry point loads it


def test_contract_checks_refuse_bad_arguments_with_typed_errors():
    """check_algorithm / check_federation name the argument, the value and the expectation (issue 16)."""
    import numpy as np

    from fltheory.algorithms import FedAvg
    from fltheory.errors import InvalidHyperparameterError
    from fltheory.problems import random_quadratic
    from fltheory.testing import check_algorithm, check_federation

    fed = random_quadratic(3, 2, L=1.0, mu=0.1, heterogeneity=1.0, seed=0)
    cases = [(lambda: check_algorithm(FedAvg, problem=np.nan), r"problem must be a Federation or None, got nan"),
             (lambda: check_algorithm(FedAvg, rounds=10**9), r"rounds must be an integer >= 1 and <= 1000"),
             (lambda: check_algorithm(FedAvg, noise=-1.0), r"noise must be finite and >= 0, got -1.0"),
             (lambda: check_algorithm(FedAvg, participation="x"), r"participation must be a Participation"),
             (lambda: check_federation(np.nan), r"federation must be a Federation, got nan"),
             (lambda: check_federation(fed, step=5.0), r"step must be in \(0, 0.1\].*got 5.0"),
             (lambda: check_federation(fed, fd_tol=float("nan")), r"fd_tol must be finite")]
    for call, message in cases:
        with pytest.raises(InvalidHyperparameterError, match=message):
            call()
