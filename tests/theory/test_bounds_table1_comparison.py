"""EFL's Table 1 row against SCAFFOLD's and MIME's: hand-computed values and the closed-form crossover."""

from __future__ import annotations

import math

import numpy as np
import pytest

from fltheory.errors import InvalidHyperparameterError
from fltheory.theory.bounds import table1_efl_comparison


def test_values_by_hand():
    # eps = 0.01, S = 4, G = 2, mu = 0.5, L = 3, delta = 1: statistical term 4/(0.5*4*0.01) = 200
    c = table1_efl_comparison(eps=0.01, S=4, G=2.0, mu=0.5, L=3.0, delta=1.0)
    assert c["SCAFFOLD"]["efl"] == pytest.approx(200 + 3 / (0.5 * 0.1))
    assert c["SCAFFOLD"]["other"] == pytest.approx(200 + 2 / (0.5 * 0.1) + 6)
    assert c["SCAFFOLD"]["optimization_ratio"] == pytest.approx(60 / 46)
    assert c["SCAFFOLD"]["threshold"] == pytest.approx(3 * 0.9)
    assert c["MIME"]["other"] == pytest.approx(202) and c["MIME"]["threshold"] == pytest.approx(30)
    assert not c["SCAFFOLD"]["efl_tighter"] and not c["MIME"]["efl_tighter"]


@pytest.mark.parametrize("eps", [0.25, 0.01, 1e-4])
def test_efl_is_tighter_than_scaffold_exactly_above_the_crossover(eps):
    L, mu = 10.0, 1.0
    g_star = L * (1 - math.sqrt(eps))
    for G in np.linspace(0.0, 2 * L, 41):
        if abs(G - g_star) < 1e-9:
            continue
        c = table1_efl_comparison(eps=eps, S=5, G=G, mu=mu, L=L)["SCAFFOLD"]
        assert c["efl_tighter"] == (G > g_star)
        # the gap is (L (1 - sqrt eps) - G) / (mu sqrt eps) in closed form
        assert c["efl"] - c["other"] == pytest.approx((L * (1 - math.sqrt(eps)) - G) / (mu * math.sqrt(eps)))


def test_efl_is_tighter_than_mime_exactly_when_delta_exceeds_L_over_sqrt_eps():
    for delta in (5.0, 99.0, 101.0, 400.0):
        c = table1_efl_comparison(eps=0.01, S=5, G=1.0, mu=1.0, L=10.0, delta=delta)["MIME"]
        assert c["efl_tighter"] == (delta > 100.0)


@pytest.mark.parametrize("kw", [{"eps": 0.0}, {"mu": -1.0}, {"G": -1.0}, {"L": float("nan")},
{"delta": -2.0}])
def test_bad_input_raises_a_typed_error(kw):
    args = {"eps": 0.01, "S": 4, "G": 1.0, "mu": 1.0, "L": 2.0, "delta": 1.0} | kw
    with pytest.raises(InvalidHyperparameterError):
        table1_efl_comparison(**args)
