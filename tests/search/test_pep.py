"""PEPit certified worst cases against closed forms."""

import pytest

pytest.importorskip("PEPit")

from fltheory.errors import InvalidHyperparameterError
from fltheory.search.pep import pep_gradient_steps, pep_objective_shift


@pytest.mark.parametrize("share", [0.25, 1.0, 9.0, 100.0])
def test_join_as_printed_certified_worst_is_one_over_four_one_minus_q_squared(share):
    """The scalar family f = x^2/2, f_a = (x - 1)^2/2 attains 1/(4 (1 - q)^2),
    q = n_a/(n + n_a) (tests/properties/test_objective_shift_properties.py); the SDP
    certifies that nothing in S(mu, L) does worse: the bound fails iff n_a > n."""
    q = share / (1 + share)
    res = pep_objective_shift("join", share, L=1.0, mu=0.5)
    assert res.ratio == pytest.approx(1 / (4 * (1 - q) ** 2), rel=1e-5)


def test_depart_certified_worst_is_below_a_quarter_and_the_derived_reading_below_one():
    """The proof's constant is 2, the printed one 8: with the class constants both
    readings share D^_a, so the printed ratio is exactly a quarter of the derived."""
    for share in (0.05, 0.5, 0.95):
        printed = pep_objective_shift("depart", share, L=4.0, mu=1.0)
        derived = pep_objective_shift("depart", share, L=4.0, mu=1.0, variant="derived")
        assert derived.ratio <= 1 + 1e-6
        assert printed.ratio == pytest.approx(derived.ratio / 4, rel=1e-5)


@pytest.mark.parametrize("kind", ["depart", "join"])
def test_sampled_instances_of_the_class_never_exceed_the_certified_worst(kind):
    """Quadratic federations with every client spectrum in [mu, L]: the other
    clients' aggregate and the moving client lie in the class, so the exact
    ||w* - w^*||^2 / D^_a of each is at most the SDP value."""
    import numpy as np

    from fltheory.search.targets import build_shift_instance
    from fltheory.theory import objective_shift
    L, mu = 4.0, 1.0
    for share in (0.3, 0.9) if kind == "depart" else (0.5, 20.0):
        pep_share = share / (1 + share) if kind == "depart" else share     # pep: n_a/n of all (depart)
        worst = pep_objective_shift(kind, pep_share, L=L, mu=mu).worst
        for seed in range(20):
            point = {"N": 3, "d": 2, "share": share, "L": L, "mu": mu, "heterogeneity": 3.0}
            fed, new = build_shift_instance(point, seed, kind)
            res = (objective_shift(fed, 0, kind="depart") if kind == "depart"
                   else objective_shift(fed, kind="join", other=new))
            p_a = res.terms["share"]
            target = share / (1 + share)                      # n_a / n of all data, or of the new total
            assert p_a == pytest.approx(target, rel=0.02)     # sample counts are rounded
            if abs(p_a - target) < 1e-12:
                assert res.measured / res.terms["D_hat"] <= worst * (1 + 1e-6)
            assert np.isfinite(res.measured)


def test_gradient_steps_certified_contraction_is_the_squared_rate():
    for lr, steps in [(0.1, 1), (0.3, 3), (0.45, 2)]:
        res = pep_gradient_steps(L=4.0, mu=0.5, lr=lr, steps=steps)
        assert res.worst == pytest.approx(max(abs(1 - lr * 0.5), abs(1 - lr * 4.0)) ** (2 * steps), rel=1e-5)


def test_bad_input():
    with pytest.raises(InvalidHyperparameterError, match="mu < L"):
        pep_objective_shift("join", 1.0, L=1.0, mu=1.0)
    with pytest.raises(InvalidHyperparameterError, match="share"):
        pep_objective_shift("depart", 1.5, L=2.0, mu=1.0)
    with pytest.raises(InvalidHyperparameterError, match="steps"):
        pep_gradient_steps(2.0, 1.0, 0.1, 0)
