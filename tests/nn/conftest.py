"""Neural tests run many small batched matmuls; a multi-threaded BLAS on a
shared 2-core machine makes them 10-50x slower (measured: 2 ms single-threaded
vs 20-150 ms with OpenBLAS threads under load for a (10, 144, 64) x (10, 64, 200)
matmul).  Limit BLAS to one thread for this directory when threadpoolctl is
available (it ships with scikit-learn); results do not depend on it."""

import pytest


@pytest.fixture(scope="package", autouse=True)
def _single_threaded_blas():
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:          # pragma: no cover - optional
        yield
        return
    with threadpool_limits(limits=1, user_api="blas"):
        yield
