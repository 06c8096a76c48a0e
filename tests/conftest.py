"""Suite-wide settings.

* BLAS runs single-threaded: the package's hot paths are many small batched
  products, for which OpenBLAS threads cost 10-50x on a loaded 2-core machine,
  and one thread keeps floating-point reductions in a fixed order (same seed,
  same bits).  Set before numpy is imported by any test module.
* Hypothesis profiles: ``ci`` (default: derandomized, few examples, fast) and
  ``thorough`` (many examples, on demand:
  ``pytest --hypothesis-profile=thorough``).
"""

import os

for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

from hypothesis import HealthCheck, settings  # noqa: E402

settings.register_profile(
    "ci", max_examples=15, derandomize=True, deadline=None, print_blob=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
settings.register_profile(
    "thorough", max_examples=400, deadline=None, print_blob=True,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))


def pytest_terminal_summary(terminalreporter, exitstatus, config):  # type: ignore[no-untyped-def]
    """Print the fuzz suite's tally (tests/test_fuzz_public_api.py) when it ran."""
    import sys
    support = sys.modules.get("tests._fuzz_support")
    if support is None or not support.TALLY:
        return
    terminalreporter.section("fuzz suite of the public API")
    terminalreporter.write_line(f"distinct inputs tried: {len(support.INPUTS)}")
    for outcome, count in sorted(support.TALLY.items(), key=lambda kv: -kv[1]):
        terminalreporter.write_line(f"  {outcome}: {count}")
    if support.METHOD_TALLY:
        terminalreporter.write_line(f"of which public methods of public classes: {len(support.METHODS_SWEPT)} "
                                    f"methods, {sum(support.METHOD_TALLY.values())} calls")
        for outcome, count in sorted(support.METHOD_TALLY.items(), key=lambda kv: -kv[1]):
            terminalreporter.write_line(f"  {outcome}: {count}")
