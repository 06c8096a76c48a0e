"""The enumerated participation laws (fltheory.theory.moments.support) against the real draws.

For every participation model the exact moments support, 5,000 draws of the model's own ``draw``
give outcome frequencies within 5 binomial standard errors of the enumerated probabilities, and
no draw falls outside the enumerated support.
"""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest

from fltheory.participation import (
    Bernoulli,
    BinomialSteps,
    FixedSteps,
    FullParticipation,
    IncompleteSteps,
    Schedule,
    TimeVarying,
    UniformSampling,
    UniformSteps,
)
from fltheory.theory.moments import participation_support

MODELS = {
    "uniform": lambda: UniformSampling(2),
    "bernoulli": lambda: Bernoulli([0.2, 0.7, 0.5, 0.9]),
    "uniform-steps": lambda: IncompleteSteps(FullParticipation(), UniformSteps(), inactive_prob=[0.1, 0.0, 0.3, 0.5]),
    "binomial-steps": lambda: IncompleteSteps(UniformSampling(3), BinomialSteps(0.4)),
    "fixed-steps": lambda: IncompleteSteps(Bernoulli(0.5), FixedSteps([1, 2, 0, 2]), inactive_prob=0.25),
    "time-varying": lambda: IncompleteSteps(FullParticipation(),
                                            TimeVarying(lambda t: UniformSteps() if t % 2 else BinomialSteps(0.3))),
    "schedule": lambda: Schedule(Bernoulli(0.6), departures={0: 2}, arrivals={3: 1}),
}


@pytest.mark.parametrize("t", [0, 3])
@pytest.mark.parametrize("name", list(MODELS))
def test_enumerated_support_matches_real_draw_frequencies(name, t):
    part = MODELS[name]()
    E = np.array([2, 2, 1, 2])
    support = {o.key: o.prob for o in participation_support(part, t, E)}
    assert sum(support.values()) == pytest.approx(1.0, abs=1e-12)
    rng = np.random.default_rng(sum(map(ord, name)) + 1000 * t)
    n = 5_000
    counts = Counter()
    for _ in range(n):
        d = part.draw(rng, t, E)
        counts[(tuple(d.clients.tolist()), tuple(d.steps.tolist()))] += 1
    outside = set(counts) - set(support)
    assert not outside, f"draws outside the enumerated support: {sorted(outside)[:3]}"
    for key, p in support.items():
        se = np.sqrt(p * (1 - p) / n)
        assert abs(counts[key] / n - p) <= 5 * se + 1e-12, (key, counts[key] / n, p)
