"""fltheory.theory.bounds.efl_corollaries: Corollary 1 (EFL eq. 8) with both bounds from Theorem 1,
checked by hand against efl_theorem1 / efl_abandonment and the closed forms of the step moments."""

from __future__ import annotations

import numpy as np
import pytest

from fltheory.errors import InvalidHyperparameterError
from fltheory.theory.bounds import (efl_abandonment, efl_abandonment_bounds, efl_departed_moments,
                                    efl_step_moments, efl_theorem1)

P = np.array([0.5, 0.3, 0.2])
KW = dict(E=3, mu=0.5, L=3.0, sigma2=[1.0, 0.5, 2.0], D=[0.4, 0.1, 0.9], G2=6.0, weights=P, init_dist2=2.0,
          mu_remaining=0.6, L_remaining=2.5, D_remaining=[0.2, 0.3], G2_remaining=5.0, init_dist2_remaining=0.7)


def test_departed_moments_by_hand():
    m = efl_departed_moments(P, 2, 3)
    # the remaining clients keep p^k: E[p s] = p^k E, E[p] = p^k, E[p^2 s] = (p^k)^2 E; ratio to p^_k = 1 - p^a
    np.testing.assert_allclose(m.ps, [[1.5, 0.9]], rtol=1e-15)
    np.testing.assert_allclose(m.p, [[0.5, 0.3]], rtol=1e-15)
    np.testing.assert_allclose(m.p2s, [[0.75, 0.27]], rtol=1e-15)
    assert m.max_ratio == pytest.approx(0.8, rel=1e-15)


def test_abandonment_bounds_are_the_two_theorem1_bounds_and_eq8():
    T, tau0, y = 20, 5, 0.4
    res = efl_abandonment_bounds(T, tau0, y_a=y, client=2, **KW)
    probs = np.zeros((3, 4))
    probs[:, 3] = 1.0
    probs[2, 0], probs[2, 3] = y, 1 - y
    keep = efl_theorem1(T, E=3, theta=1.0, mu=0.5, L=3.0, sigma2=[1.0, 0.5, 2.0], D=[0.4, 0.1, 0.9], G2=6.0,
                        weights=P, init_dist2=2.0, moments=efl_step_moments(P, probs, 3))
    remaining = efl_theorem1(T - tau0, E=3, theta=1.0, mu=0.6, L=2.5, sigma2=[1.0, 0.5], D=[0.2, 0.3], G2=5.0,
                             weights=[0.625, 0.375], init_dist2=0.7, moments=efl_departed_moments(P, 2, 3))
    assert res.measured == pytest.approx(keep.value, rel=1e-14)
    assert res.value == pytest.approx(remaining.value, rel=1e-14)
    assert res.terms["abandon"] == (keep.value > remaining.value)
    # keep: client 2's ratio E[p s]/p^k = (1 - y) E differs from the others' E, r_t = 1 every round;
    # remaining system: every ratio is (1 - p^a) E, r_t = 0 (H = 0)
    assert res.terms["keep"].terms["H"] == T
    assert res.terms["remaining"].terms["H"] == 0
    # eq. 8 with C = C_T / T: f_1(T) = T C / (E (T - tau0) + gamma)^2 = C_T / (E (T - tau0) + gamma)^2
    C_T, J, gamma = keep.terms["C"], keep.terms["J"], keep.terms["gamma"]
    assert res.terms["eq8"].value == pytest.approx(C_T / (3 * (T - tau0) + gamma) ** 2, rel=1e-13)
    assert res.terms["abandon_eq8"] == (y * J > C_T / (3 * (T - tau0) + gamma) ** 2)
    assert res.terms["abandon_eq9"] == (y > (C_T / T / J) / (T * 3))
    rule = efl_abandonment(y, J, C_T / T, T, 3, tau0, gamma)
    assert res.terms["eq8"].terms == rule.terms


@pytest.mark.parametrize("over", [dict(tau0=20), dict(y_a=1.0), dict(y_a=0.0), dict(client=3),
                                  dict(weights=[0.5, 0.6, -0.1]), dict(T=0)])
def test_abandonment_bounds_reject_bad_input(over):
    args = {"T": 20, "tau0": 5, "y_a": 0.4, "client": 2, **KW, **over}
    T, tau0 = args.pop("T"), args.pop("tau0")
    with pytest.raises(InvalidHyperparameterError):
        efl_abandonment_bounds(T, tau0, **args)
