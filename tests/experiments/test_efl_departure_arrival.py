"""experiments/efl_departure_arrival.py: trajectories against a readable EFL loop with the schedule,
and the decay schedule with and without restart."""

from __future__ import annotations

import copy

import numpy as np
import pytest

from experiments import efl_departure_arrival as exp
from fltheory.participation import FullParticipation, Schedule
from fltheory.problems.generators import random_quadratic


def test_decay_schedule_restarts_at_the_shift():
    s = exp.DecaySchedule(4.0, restart_at=10)
    assert s(0) == 1.0 and s(8) == pytest.approx(1 / 3) and s(10) == 1.0 and s(14) == pytest.approx(0.5)
    assert exp.DecaySchedule(4.0)(10) == pytest.approx(1 / 3.5)


@pytest.mark.parametrize("case", ["departure", "arrival"])
@pytest.mark.parametrize("restart", [True, False])
def test_trajectory_is_the_readable_efl_loop(case, restart):
    # lambda = 0, exact transmission, deterministic GD: x <- x + sum_{k present} p^k (y_k - x), y_k after
    # E steps at eta_0 * schedule(tau); p^k the federation weights, not renormalised (seed 000 eq. 6)
    fed = random_quadratic(4, 3, L=3.0, mu=0.5, heterogeneity=1.0, seed=2, constants="clients")
    cfg = dict(exp.QUICK, local_steps=2, shift_round=3, rounds=7, decay_rounds=2.0, lr0_factor=0.5)
    x0 = fed.optimum() + np.array([1.0, -2.0, 0.5])
    a = 3
    timing = {"departures": {a: 3}} if case == "departure" else {"arrivals": {a: 3}}
    sched = Schedule(FullParticipation(), **timing)
    target = np.zeros(3)
    got = exp.trajectory(fed, cfg, x0, sched, target, restart)
    eta0 = 0.5 / (2 * fed.client_L.max())
    factor = exp.DecaySchedule(2.0, 3 if restart else None)
    x, ref = x0.copy(), [float(x0 @ x0)]
    for tau in range(7):
        present = [k for k in range(4) if k != a or (tau < 3) == (case == "departure")]
        step = np.zeros(3)
        for k in present:
            y = x.copy()
            for _ in range(2):
                y = y - eta0 * factor(tau) * (fed.H[k] @ y - fed.e[k])
            step += fed.weights[k] * (y - x)
        x = x + step
        ref.append(float(x @ x))
    np.testing.assert_allclose(got, ref, rtol=1e-12, atol=1e-14)


def test_checks_compare_restart_with_continued_decay():
    r = {"seed": 1, "N": 3, "d": 2, "local_steps": 2, "shift_round": 1, "rounds": 2,
         "departure": {"restart": [1.0, 0.5, 0.1], "no_restart": [1.0, 0.5, 0.4], "shift": 0.2},
         "arrival": {"restart": [1.0, 0.5, 0.3], "no_restart": [1.0, 0.5, 0.2], "shift": 0.2}}
    c = {x.theorem: x for x in exp.checks(r)}
    assert c["restart-departure"].status == "holds" and c["restart-departure"].ratio == pytest.approx(0.25)
    assert c["restart-arrival"].status == "violated" and c["restart-arrival"].ratio == pytest.approx(1.5)
    bad = copy.deepcopy(r)
    bad["arrival"]["no_restart"][-1] = 0.0
    assert {x.theorem: x.status for x in exp.checks(bad)}["restart-arrival"] == "not checkable"
