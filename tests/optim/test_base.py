"""take_rows / put_rows / mean_rows: exact results on valid states, and a typed
error naming the argument for every malformed state, row index or weight."""

from __future__ import annotations

import numpy as np
import pytest

from fltheory import optim
from fltheory.errors import InvalidHyperparameterError


def _state() -> tuple:
    opt = optim.adam(0.1)
    s = opt.init(np.arange(12.0).reshape(4, 3))
    _, s = opt.update(np.arange(12.0).reshape(4, 3) - 5.0, s, None)
    return s


def test_rows_round_trip_and_weighted_mean_are_exact() -> None:
    s = _state()
    part = optim.take_rows(s, np.array([3, 1]))
    for full_field, part_field in zip(s, part, strict=True):
        np.testing.assert_array_equal(part_field, np.asarray(full_field)[[3, 1]])
    back = optim.put_rows(s, np.array([3, 1]), part)
    for a, b in zip(back, s, strict=True):
        np.testing.assert_array_equal(a, b)
    mask = np.array([True, False, True, False])
    np.testing.assert_array_equal(optim.take_rows(s, mask).count, s.count[mask])
    w = np.array([1.0, 0.0, 3.0, 0.0])
    avg = optim.mean_rows(s, w)
    float_fields = [i for i, f in enumerate(s) if np.issubdtype(np.asarray(f).dtype, np.floating)]
    for i in float_fields:
        expected = (np.asarray(s[i])[0] + 3.0 * np.asarray(s[i])[2]) / 4.0
        np.testing.assert_allclose(avg[i], np.broadcast_to(expected, np.asarray(s[i]).shape), rtol=1e-15)
    np.testing.assert_array_equal(avg.count, s.count)          # integer counters kept


BAD_STATES = [float("nan"), 3, True, "abc", 1j, object(), np.array([]), (np.ones(2),), np.float32("nan")]


@pytest.mark.parametrize("state", BAD_STATES)
def test_take_and_mean_refuse_what_is_not_a_state(state: object) -> None:
    with pytest.raises(InvalidHyperparameterError, match="state must be an optimizer state"):
        optim.take_rows(state, np.array([0]))  # type: ignore[type-var]
    with pytest.raises(InvalidHyperparameterError, match="state must be an optimizer state"):
        optim.mean_rows(state)  # type: ignore[type-var]


def test_state_fields_must_be_real_arrays_with_one_row_count() -> None:
    s = _state()
    with pytest.raises(InvalidHyperparameterError, match=r"state\.mu has 2 rows"):
        optim.take_rows(s._replace(mu=np.zeros((2, 3))), np.array([0]))
    with pytest.raises(InvalidHyperparameterError, match=r"state\.mu must be a real numeric array"):
        optim.take_rows(s._replace(mu=np.zeros((4, 3), dtype=complex)), np.array([0]))
    with pytest.raises(InvalidHyperparameterError, match=r"state\.count must have a leading row axis"):
        optim.mean_rows(s._replace(count=np.int64(3)))
    with pytest.raises(InvalidHyperparameterError, match="no rows"):
        optim.mean_rows(optim.take_rows(s, np.array([], dtype=np.int64)))


@pytest.mark.parametrize("rows", [float("nan"), "ab", np.array([0.5]), np.array([[0, 1]]), np.array([4]),
                                  np.array([-5]), np.array([True, False]), object()])
def test_row_indices_must_address_the_state(rows: object) -> None:
    s = _state()
    with pytest.raises(InvalidHyperparameterError, match="rows must"):
        optim.take_rows(s, rows)  # type: ignore[arg-type]
    with pytest.raises(InvalidHyperparameterError, match="rows must"):
        optim.put_rows(s, rows, optim.take_rows(s, np.array([0])))  # type: ignore[arg-type]


def test_put_rows_checks_the_part() -> None:
    s = _state()
    with pytest.raises(InvalidHyperparameterError, match="part must be an optimizer state"):
        optim.put_rows(s, np.array([0]), np.zeros(3))  # type: ignore[type-var]
    with pytest.raises(InvalidHyperparameterError, match=r"part\.count has shape \(2,\)"):
        optim.put_rows(s, np.array([0]), optim.take_rows(s, np.array([0, 1])))
    other = optim.sgd(0.1).init(np.zeros((1, 3)))
    with pytest.raises(InvalidHyperparameterError, match="same type as full"):
        optim.put_rows(s, np.array([0]), other)


@pytest.mark.parametrize("weights", [np.array([1.0, np.nan, 1.0, 1.0]), np.zeros(4), np.ones(3),
                                     np.array([1.0, -1.0, 1.0, 1.0]), "abc", np.ones(4, dtype=complex),
                                     float("nan")])
def test_mean_rows_weights(weights: object) -> None:
    with pytest.raises(InvalidHyperparameterError, match="weights"):
        optim.mean_rows(_state(), weights)  # type: ignore[arg-type]


def test_kernel_steps_is_an_abstract_base_with_step_as_its_default_kernel() -> None:
    """``KernelSteps`` declares the fused-steps interface: a subclass without ``step`` or
    ``state`` cannot be made; the default ``kernel()`` is the bound ``step`` (same effect)."""
    from fltheory.optim.base import KernelSteps

    class NoStep(KernelSteps):
        def state(self) -> None:
            return None

    with pytest.raises(TypeError, match="abstract"):
        NoStep()  # type: ignore[abstract]

    class Halving(KernelSteps):
        def step(self, grads, params, rate):
            params -= rate * (0.5 * grads)

        def state(self) -> str:
            return "s"

    steps = Halving()
    kernel = steps.kernel()
    assert kernel == steps.step and steps.state() == "s"
    y = np.ones(3)
    kernel(np.full(3, 2.0), y, 0.25)
    np.testing.assert_array_equal(y, np.full(3, 0.75))


def test_library_adaptive_fused_steps_are_kernel_steps() -> None:
    from fltheory.optim.base import KernelSteps

    opt = optim.adagrad(0.1)
    fused = opt.fused(opt.init(np.zeros((2, 3))))
    assert isinstance(fused, KernelSteps)


def test_kernel_steps_default_run_takes_its_kernel_steps_with_the_oracle() -> None:
    """``KernelSteps.run(grad, buf, y, rate, K)``: K times step(grad(y, buf), y, rate)."""
    from fltheory.optim.base import KernelSteps

    class Halving(KernelSteps):
        def __init__(self) -> None:
            self.calls = 0

        def step(self, grads, params, rate):
            params -= rate * (0.5 * grads)
            self.calls += 1

        def state(self) -> int:
            return self.calls

    def grad(y, out):
        np.subtract(y, 1.0, out=out)                # f(y) = |y - 1|^2 / 2
        return out

    steps = Halving()
    y = np.full(3, 3.0)
    steps.run(grad, np.empty(3), y, 1.0, 4)
    assert steps.state() == 4
    np.testing.assert_array_equal(y, np.full(3, 1.0 + 2.0 * 0.5 ** 4))
