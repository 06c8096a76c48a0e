"""Hypothesis profiles: ``ci`` (default: derandomized, few examples, fast) and
``thorough`` (many examples, run on demand with
``pytest --hypothesis-profile=thorough``)."""

import os

from hypothesis import HealthCheck, settings

settings.register_profile(
    "ci", max_examples=15, derandomize=True, deadline=None, print_blob=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
settings.register_profile(
    "thorough", max_examples=400, deadline=None, print_blob=True,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))
