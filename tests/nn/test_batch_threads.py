"""The threaded sample split of convolutional gradients (fltheory.nn.batch_threads):
used only when the BLAS thread count is above one, equal to the single-thread
gradient to rounding, and equal to a hand-written chunk sum."""

from __future__ import annotations

import numpy as np
import pytest

from fltheory._threads import blas_threads
from fltheory.nn import MSE, AvgPool2D, Conv2D, Dense, Flatten, ReLU, Sequential, SoftmaxCrossEntropy, cnn
from fltheory.nn import batch_threads as BT

threadpoolctl = pytest.importorskip("threadpoolctl")


def _case(n: int = 40, m: int = 2):
    rng = np.random.default_rng(3)
    net = cnn((1, 8, 8), 10, channels=(3, 4), kernel=3, fc=6)
    X = np.stack([net.init(rng) for _ in range(m)])
    u = rng.random((m, n, 1, 8, 8))
    y = rng.integers(0, 10, (m, n))
    w = rng.random((m, n))
    return net, X, u, y, w


def test_pinned_blas_uses_one_chunk() -> None:
    assert blas_threads() == 1            # importing fltheory pins BLAS (fltheory._threads)
    assert BT.chunk_count(10_000) == 1


def test_chunk_count_follows_the_blas_thread_count() -> None:
    with threadpoolctl.threadpool_limits(limits=2, user_api="blas"):
        if blas_threads() < 2:
            pytest.skip("the BLAS here cannot run two threads")
        assert BT.chunk_count(64) == 2
        assert BT.chunk_count(2 * BT.MIN_CHUNK - 1) == 1        # too few samples to split
    assert BT.chunk_count(64) == 1


@pytest.mark.parametrize("mode", ["sum", "sq_sum"])
@pytest.mark.parametrize("weighted", [False, True])
def test_threaded_split_equals_the_single_thread_gradient(mode: str, weighted: bool) -> None:
    net, X, u, y, w = _case()
    loss = SoftmaxCrossEntropy()
    sw = w if weighted else None
    v1, g1 = net.value_and_grad(X, u, y, loss, sw, mode)
    with threadpoolctl.threadpool_limits(limits=2, user_api="blas"):
        if blas_threads() < 2:
            pytest.skip("the BLAS here cannot run two threads")
        v2, g2 = net.value_and_grad(X, u, y, loss, sw, mode)
    np.testing.assert_allclose(v2, v1, rtol=1e-13)
    np.testing.assert_allclose(g2, g1, rtol=1e-11, atol=1e-14 * np.abs(g1).max())


def test_split_is_the_sum_of_the_chunks_gradients() -> None:
    """Against chunk gradients computed one by one, with MSE (targets with a class axis)."""
    rng = np.random.default_rng(0)
    net = Sequential([Conv2D(2, 3, padding=1), ReLU(), AvgPool2D(2), Flatten(), Dense(3)], (1, 6, 6))
    X = net.init(rng)[None]
    u = rng.random((1, 30, 1, 6, 6))
    t = rng.random((1, 30, 3))
    w = np.full((1, 30), 1 / 30)
    loss = MSE()
    v, g = BT.split_value_and_grad(30, 3, lambda s: net.value_and_grad(X, u[:, s], t[:, s], loss, w[:, s]))
    parts = [net.value_and_grad(X, u[:, a:a + 10], t[:, a:a + 10], loss, w[:, a:a + 10]) for a in (0, 10, 20)]
    np.testing.assert_array_equal(v, parts[0][0] + parts[1][0] + parts[2][0])
    np.testing.assert_array_equal(g, parts[0][1] + parts[1][1] + parts[2][1])
    full_v, full_g = net.value_and_grad(X, u, t, loss, w)
    np.testing.assert_allclose(g, full_g, rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(v, full_v, rtol=1e-13)
