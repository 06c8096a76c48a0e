"""One progress display for every experiment's inner loop.

The framework passes each experiment's ``run`` a *progress callback*
(:class:`Progress`): ``progress(iterable, desc="", total=None)`` yields the
items of ``iterable`` unchanged and reports, as it goes, how many of ``total``
(default ``len(iterable)``) are done.  The reports travel as small
:class:`ProgressEvent` tuples to one :class:`ProgressDisplay` in the process
that runs ``fltheory reproduce``: directly when experiments run in that
process, through a queue when they run in worker processes.  So the inner
progress of every experiment appears in the same place whatever ``--jobs``.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator
from typing import Any, NamedTuple, Protocol, TypeVar

__all__ = ["Progress", "ProgressDisplay", "ProgressEvent", "reporting_progress", "silent_progress"]

T = TypeVar("T")

#: Minimum seconds between two step events of one loop (the last step is always sent).
MIN_INTERVAL = 0.2


class Progress(Protocol):
    """The callback an experiment's ``run`` receives."""

    def __call__(self, iterable: Iterable[T], desc: str = "", total: int | None = None) -> Iterator[T]:
        ...


class ProgressEvent(NamedTuple):
    """``kind`` is "start" / "end" (of an experiment) or "step" (of one of its loops)."""

    experiment: str
    kind: str
    desc: str = ""
    done: int = 0
    total: int | None = None


def silent_progress(iterable: Iterable[T], desc: str = "", total: int | None = None) -> Iterator[T]:
    """A :class:`Progress` that reports nothing: an iterator over ``iterable``.  The arguments are
    checked at the call (see :func:`reporting_progress`)."""
    _check_loop(iterable, desc, total)
    return iter(iterable)


def _check_loop(iterable: Any, desc: Any, total: Any) -> None:
    """The arguments of a :class:`Progress` call: an iterable, a str, None or an int >= 0."""
    from fltheory._validate import integer
    from fltheory.errors import InvalidProblemError
    try:
        iter(iterable)
    except TypeError:
        raise InvalidProblemError(f"iterable must be iterable, got {_short(iterable)} "
                                  f"({type(iterable).__name__})") from None
    if not isinstance(desc, str):
        raise InvalidProblemError(f"desc must be a str, got {_short(desc)} ({type(desc).__name__})")
    if total is not None:
        integer("total", total, minimum=0, maximum=None, error=InvalidProblemError)


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def reporting_progress(experiment: str, send: Callable[[ProgressEvent], Any]) -> Progress:
    """The :class:`Progress` of ``experiment``: every loop it wraps sends
    "step" events to ``send`` (at most one per :data:`MIN_INTERVAL` seconds,
    plus the first and the last).  ``experiment`` must be a str and ``send`` a callable."""
    from fltheory.errors import InvalidProblemError
    if not isinstance(experiment, str):
        raise InvalidProblemError(f"experiment must be a str, got {_short(experiment)}")
    if not callable(send):
        raise InvalidProblemError(f"send must be a callable taking a ProgressEvent, got {_short(send)}")

    def progress(iterable: Iterable[T], desc: str = "", total: int | None = None) -> Iterator[T]:
        _check_loop(iterable, desc, total)
        return _reporting(iterable, desc, total)

    def _reporting(iterable: Iterable[T], desc: str, total: int | None) -> Iterator[T]:
        items = iterable
        if total is None and hasattr(iterable, "__len__"):
            total = len(iterable)  # type: ignore[arg-type]
        label = desc or experiment
        send(ProgressEvent(experiment, "step", label, 0, total))
        last = time.monotonic()
        done = 0
        for item in items:
            yield item
            done += 1
            now = time.monotonic()
            if now - last >= MIN_INTERVAL or (total is not None and done >= total):
                send(ProgressEvent(experiment, "step", label, done, total))
                last = now
    return progress


class ProgressDisplay:
    """tqdm bars: one for the experiments, one per running experiment's loop.

    ``enabled=None`` shows bars only on a terminal (tqdm's rule); without bars,
    ``echo`` gets one line when an experiment starts, so a long run is never
    silent.
    """

    def __init__(self, n_experiments: int, *, enabled: bool | None = None,
                 echo: Callable[[str], Any] | None = None) -> None:
        from fltheory._validate import integer
        from fltheory.errors import InvalidProblemError
        integer("n_experiments", n_experiments, minimum=0, maximum=None, error=InvalidProblemError)
        if enabled is not None and not isinstance(enabled, bool):
            raise InvalidProblemError(f"enabled must be True, False or None, got {_short(enabled)}")
        if echo is not None and not callable(echo):
            raise InvalidProblemError(f"echo must be a callable taking a str or None, got {_short(echo)}")
        from tqdm.auto import tqdm
        self._tqdm = tqdm
        self._disable = None if enabled is None or enabled else True
        self._echo = echo
        self.overall = tqdm(total=n_experiments, desc="experiments", unit="exp",
                            disable=self._disable, dynamic_ncols=True)
        self._bars: dict[str, Any] = {}
        self._labels: dict[str, str] = {}

    @property
    def shows_bars(self) -> bool:
        return not self.overall.disable

    def __call__(self, event: ProgressEvent) -> None:
        """Apply one event."""
        if event.kind == "start":
            if not self.shows_bars and self._echo is not None:
                self._echo(f"{event.experiment}: started")
            self.overall.set_postfix_str(event.experiment)
            return
        if event.kind == "end":
            bar = self._bars.pop(event.experiment, None)
            if bar is not None:
                bar.close()
            self._labels.pop(event.experiment, None)
            self.overall.update(1)
            return
        bar = self._bars.get(event.experiment)
        if bar is None or self._labels.get(event.experiment) != event.desc:
            if bar is not None:
                bar.close()
            bar = self._tqdm(total=event.total, desc=event.desc, leave=False, disable=self._disable,
                             dynamic_ncols=True)
            self._bars[event.experiment] = bar
            self._labels[event.experiment] = event.desc
        bar.n = event.done
        bar.refresh()

    def close(self) -> None:
        for bar in self._bars.values():
            bar.close()
        self._bars.clear()
        self.overall.close()
