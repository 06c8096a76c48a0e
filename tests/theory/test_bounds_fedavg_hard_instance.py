"""The FedAvg hard instance (f_1 = mu x^2 + G x, f_2 = -G x): closed-form round map against a readable
FedAvg loop, the drift for K >= 2 and its absence for K = 1, and the best-step search."""

from __future__ import annotations

import numpy as np
import pytest

from fltheory.errors import InvalidHyperparameterError
from fltheory.theory.bounds.fedavg_hard_instance import (
    hard_instance_best_error,
    hard_instance_error,
    hard_instance_map,
)


def _fedavg_loop(x, eta, K, G, mu, R):
    for _ in range(R):
        y1, y2 = x, x
        for _ in range(K):
            y1 = y1 - eta * (2 * mu * y1 + G)
            y2 = y2 - eta * (-G)
        x = (y1 + y2) / 2
    return x


@pytest.mark.parametrize("K", [1, 2, 5])
@pytest.mark.parametrize("eta", [0.01, 0.2, 0.45])
def test_closed_form_is_the_readable_fedavg_loop(K, eta):
    G, mu, x0 = 1.5, 0.8, 2.0
    a, b = hard_instance_map(eta, G=G, mu=mu, K=K)
    assert a * x0 + b == pytest.approx(_fedavg_loop(x0, eta, K, G, mu, 1), rel=1e-13, abs=1e-15)
    xR = _fedavg_loop(x0, eta, K, G, mu, 7)
    assert hard_instance_error(eta, 7, G=G, mu=mu, K=K, x0=x0) == pytest.approx(mu * xR ** 2 / 2, rel=1e-10)


def test_drift_exists_exactly_for_two_or_more_local_steps():
    _, b1 = hard_instance_map(0.1, G=1.0, mu=1.0, K=1)
    assert b1 == pytest.approx(0.0, abs=1e-16)
    a2, b2 = hard_instance_map(0.1, G=1.0, mu=1.0, K=2)
    # K = 2: q = 0.8, b = (0.2 - 0.36/2)/2 = 0.01, fixed point b/(1 - a) = 0.01/0.18
    assert b2 == pytest.approx(0.01) and b2 / (1 - a2) == pytest.approx(0.01 / 0.18)


def test_best_step_beats_a_brute_force_grid_and_decays_no_faster_than_one_over_R_squared():
    G, mu = 1.0, 1.0
    for R in (10, 100):
        best, eta = hard_instance_best_error(R, G=G, mu=mu, K=2, x0=1.0, grid=500)
        brute = min(hard_instance_error(e, R, G=G, mu=mu, K=2, x0=1.0) for e in np.linspace(1e-4, 0.999,
        20000))
        assert best <= brute * (1 + 1e-9) and 0 < eta < 1
        assert best * mu * R ** 2 / G ** 2 > 0.5            # Omega(G^2/(mu R^2)) with a constant ~0.9


@pytest.mark.parametrize("kw", [{"eta": 0.0}, {"eta": 1.0}, {"mu": 0.0}, {"G": -1.0}, {"K": 0}])
def test_bad_input_raises_a_typed_error(kw):
    args = {"eta": 0.1, "G": 1.0, "mu": 1.0, "K": 2} | kw
    with pytest.raises(InvalidHyperparameterError):
        hard_instance_map(args.pop("eta"), **args)


def test_bad_arguments_are_typed_errors_and_overflow_is_out_of_range():
    """Each argument named in its error; an error that overflows float64 raises OutOfRangeError, never inf."""
    import pytest

    from fltheory.errors import InvalidHyperparameterError, OutOfRangeError

    kw = {"G": 1.0, "mu": 0.5, "K": 3, "x0": 1.0}
    for bad, message in [({"R": 1.5}, r"R must be an integer, got 1.5"), ({"x0": "a"}, r"x0"),
                         ({"grid": 10**9}, r"grid must be an integer >= 3 and <= 1000000"),
                         ({"mu": -1.0}, r"mu must be finite and > 0, got -1.0")]:
        args = {"R": 10, **kw, **bad}
        R = args.pop("R")
        with pytest.raises(InvalidHyperparameterError, match=message):
            hard_instance_best_error(R, **args)
    with pytest.raises(OutOfRangeError, match="overflows float64"):
        hard_instance_error(0.1, 0, G=1.0, mu=0.5, K=3, x0=1e300)
