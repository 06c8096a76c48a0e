"""Hypothesis profiles of fltheory, registered on import (a pytest plugin).

``ci``: derandomized, 15 examples, no deadline (the default of fltheory's own
suite); ``thorough``: 400 random examples.  Installing fltheory registers this
module as a pytest plugin (entry point ``pytest11``), so
``pytest --hypothesis-profile=thorough`` works in any project that uses
:mod:`fltheory.testing`.  Without Hypothesis the module does nothing.
"""

from __future__ import annotations

__all__ = ["PROFILES", "register_profiles"]

#: Settings of each profile (names of ``hypothesis.settings`` arguments).
PROFILES: dict[str, dict[str, object]] = {
    "ci": {"max_examples": 15, "derandomize": True, "deadline": None, "print_blob": True},
    "thorough": {"max_examples": 400, "deadline": None, "print_blob": True},
}


def register_profiles() -> bool:
    """Register ``ci`` and ``thorough`` with Hypothesis; False when it is not installed."""
    try:
        from hypothesis import HealthCheck, settings
    except ImportError:
        return False
    suppress = {"ci": [HealthCheck.too_slow, HealthCheck.data_too_large],
                "thorough": [HealthCheck.too_slow]}
    for name, kwargs in PROFILES.items():
        settings.register_profile(name, suppress_health_check=suppress[name], **kwargs)  # type: ignore[arg-type]
    return True


register_profiles()
