"""``fltheory reproduce``: run experiments; write figures, JSON, macros and summary.

Per experiment NAME its results directory (:func:`~fltheory.reproduce.store.result_dir`:
``OUT`` for quick, ``OUT/full`` for full, ``OUT/seeds/S[/full]`` for a master
seed other than 0, ``OUT/custom/NAME-MODE-DIGEST`` with overrides) receives,
every file written atomically with the usual mode (0666 minus the umask):

* ``NAME.pdf``, ``NAME.png``: the figure, in the house style;
* ``NAME.json``, written last, marks the experiment done: ``data`` (what
  ``run`` returned), ``checks``, ``macros``, ``key`` (what makes the result
  fresh, :mod:`fltheory.reproduce.keys`), ``experiment`` (name, title,
  theorems), ``record`` (provenance: versions, commit, git_dirty not counting
  the output directory, data source, overrides, wall time) and ``timing``;
* ``NAME.error.log``: the traceback, only while the last attempt failed.

A result is *fresh* when its JSON has the current key and both figures exist;
fresh results are skipped unless ``force``.  Each experiment is computed
under its lock (:mod:`fltheory.reproduce.locks`), so several processes
sharing the directory compute it once; the lock holder first removes the
temporary files an interrupted run left.  Then ``macros.tex`` and
``SUMMARY.md`` are rebuilt (:func:`~fltheory.reproduce.summary.summarise`).
Worker processes (``jobs > 1``) exit when their parent dies.  With ``jobs = 1`` the
experiments run in this process, except one whose import closure this process
imported before a file of it changed on disk (:mod:`fltheory._import_stamps`): that
one runs in a new worker process, so that the code run is the code the key hashes.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import logging
import os
import threading
import time
import traceback
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from multiprocessing import get_context
from pathlib import Path
from typing import Any

import numpy as np

from fltheory._import_stamps import changed_since_import
from fltheory._threads import single_threaded_blas
from fltheory.errors import InvalidHyperparameterError, OutputDirectoryError, SourcesChangedError
from fltheory.results import RunRecord, atomic_write, save_results

from . import _arguments as arg
from .discovery import load_experiment
from .keys import closure_sources, result_key
from .locks import exclusive
from .overrides import apply_overrides
from .progress import ProgressDisplay, ProgressEvent, reporting_progress
from .protocol import Check, Experiment
from .seeding import experiment_rng
from .store import MODES, ensure_writable, is_disk_error, read_stored, remove_stale_temporaries, result_dir
from .summary import macro_prefix, overall_status, summarise

__all__ = ["Outcome", "is_fresh", "reproduce", "results_directory"]

logger = logging.getLogger(__name__)


def results_directory(out: str | os.PathLike[str], mode: str, seed: int = 0, name: str | None = None,
                      overrides: Mapping[str, Any] | None = None) -> Path:
    """Where ``reproduce`` puts results of this mode, master seed and overrides (arguments checked
    as in :func:`~fltheory.reproduce.store.result_dir`; ``seed`` an int in [0, 2**63))."""
    out = arg.path("out", out)
    seed = arg.seed(seed)
    root = Path(out) if seed == 0 else Path(out) / "seeds" / str(int(seed))
    return result_dir(root, mode, name, overrides)


def is_fresh(directory: Path, name: str, key: Mapping[str, Any]) -> bool:
    """The stored result of ``name`` has key ``key`` and both figures exist."""
    directory = arg.path("directory", directory)
    key = arg.mapping("key", key)
    stored = read_stored(directory, name)
    return (stored.doc is not None and stored.doc["key"] == key
            and (directory / f"{name}.pdf").exists() and (directory / f"{name}.png").exists())


@dataclasses.dataclass(frozen=True)
class _Job:
    name: str
    module_name: str
    sys_path_entry: str
    mode: str
    seed: int
    directory: str
    root: str
    key: dict[str, Any]
    config: dict[str, Any]
    overrides: dict[str, Any]


@dataclasses.dataclass(frozen=True)
class Outcome:
    """What happened to one experiment: action is "computed", "skipped" or "failed".
    ``disk_error`` marks a failure to write the outputs (full or read-only disk)."""

    name: str
    action: str
    status: str = ""
    seconds: float = 0.0
    error: str = ""
    disk_error: bool = False
    note: str = ""


def _sys_path_entry(experiment: Experiment) -> str:
    depth = len(experiment.module_name.split("."))
    return str(experiment.source_file.parents[depth - 1])


def _disk_error_in(exc: BaseException) -> BaseException | None:
    seen: BaseException | None = exc
    while seen is not None:
        if is_disk_error(seen):
            return seen
        seen = seen.__cause__ or seen.__context__
    return None


def _compute(job: _Job, send: Callable[[ProgressEvent], Any], start: float) -> Outcome:
    directory = Path(job.directory)
    send(ProgressEvent(job.name, "start"))
    exp = load_experiment(job.module_name, job.sys_path_entry)
    _require_keyed_sources(exp, job.key)                   # the files on disk are those the key hashed
    with single_threaded_blas():
        results = exp.run(job.config, experiment_rng(job.seed, exp.name), reporting_progress(job.name, send))
    checks: list[Check] = exp.checks(results)
    macros = exp.macros(results)
    from fltheory import plotting
    with plotting.style():
        fig = exp.plot(results)
        # and nothing changed while it ran: checked before anything is written, so that a refused
        # run leaves the stored result's figure in place
        _require_keyed_sources(exp, job.key)
        plotting.save_figure(fig, directory / exp.name)
    seconds = time.perf_counter() - start
    check_dicts = [c.to_dict() for c in checks]
    extra: dict[str, Any] = {
        "experiment": {"name": exp.name, "title": exp.title,
                       "theorems": [dataclasses.asdict(t) for t in exp.theorems],
                       "expected_axes": exp.expected_axes},
        "key": job.key,
        "checks": check_dicts,
        "macros": macros,
        "timing": {"seconds": round(seconds, 3)},
    }
    record = RunRecord.capture(job.config, job.seed, versions=job.key["versions"], overrides=job.overrides,
                               data_source=job.key["data_source"], wall_seconds=seconds,
                               exclude_from_dirty=[job.root])
    save_results(directory / f"{exp.name}.json", results, record, extra=extra)
    (directory / f"{exp.name}.error.log").unlink(missing_ok=True)
    return Outcome(job.name, "computed", overall_status(check_dicts), seconds)


def _require_keyed_sources(exp: Experiment, key: Mapping[str, Any]) -> None:
    """SourcesChangedError unless the experiment's import closure on disk still hashes to the
    ``sources`` of ``key`` (computed by the parent before the job started): a worker process
    imports the files as they are when it starts, and a result keyed by other sources than
    those that produced it would pass as fresh.  It also refuses when this process imported a
    module of the closure before its file changed (a long-lived process: ``reproduce(jobs=1)``
    called again after an edit, a notebook, a Dask worker): :mod:`fltheory._import_stamps`."""
    keyed: Mapping[str, str] = key["sources"]
    now = closure_sources(exp)
    if now != keyed:
        changed = sorted(k for k in set(now) | set(keyed) if now.get(k) != keyed.get(k))
        raise SourcesChangedError(
            f"{exp.name}: the source of {_listed(changed)} changed on disk after the result key was computed; "
            "the result is not stored (run reproduce again once the sources are settled)")
    stale = changed_since_import(keyed)
    if stale:
        raise SourcesChangedError(
            f"{exp.name}: this process imported {_listed(stale)} before the file changed on disk, so it would "
            "run other code than the key hashes; the result is not stored (run it from a process started after "
            "the edit: restart long-lived workers, e.g. a Dask cluster's; `reproduce` on this machine sends such "
            "a job to a new worker process by itself)")


def _listed(names: list[str]) -> str:
    return ", ".join(names[:6]) + (f" and {len(names) - 6} more" if len(names) > 6 else "")


def _execute(job: _Job, send: Callable[[ProgressEvent], Any]) -> Outcome:
    """Lock, run, check, plot and save one experiment; never raises (errors
    are returned with their traceback)."""
    start = time.perf_counter()
    directory = Path(job.directory)
    try:
        with exclusive(directory, job.name) as waited:
            remove_stale_temporaries(directory, job.name)
            if waited and is_fresh(directory, job.name, job.key):
                doc: dict[str, Any] = read_stored(directory, job.name).doc or {}
                return Outcome(job.name, "skipped", overall_status(doc.get("checks", [])),
                               note="computed meanwhile by another process")
            return _compute(job, send, start)
    except Exception as exc:
        text = traceback.format_exc()
        disk = _disk_error_in(exc)
        if disk is not None:
            return Outcome(job.name, "failed", "", time.perf_counter() - start,
                           f"{type(disk).__name__}: {disk}", disk_error=True)
        try:
            with atomic_write(directory / f"{job.name}.error.log", "w") as handle:
                handle.write(f"experiment {job.name} ({job.module_name}), mode {job.mode}, "
                             f"seed {job.seed}\n\n{text}")
        except OSError:
            logger.exception("could not write the error log of %s", job.name)
        return Outcome(job.name, "failed", "", time.perf_counter() - start, text)
    finally:
        send(ProgressEvent(job.name, "end"))


# --------------------------------------------------------------------------- worker processes

_QUEUE: Any = None


def _watch_parent(parent: int) -> None:
    """Exit the worker as soon as its parent is gone (even after ``kill -9``)."""
    while True:
        if os.getppid() != parent:
            os._exit(70)
        time.sleep(0.25)


def _init_worker(queue: Any, parent: int) -> None:
    """Off-screen drawing, progress through ``queue``, death with the parent."""
    global _QUEUE
    os.environ["MPLBACKEND"] = "Agg"
    import matplotlib
    matplotlib.use("Agg")
    _QUEUE = queue
    threading.Thread(target=_watch_parent, args=(parent,), daemon=True, name="watch-parent").start()


def _execute_in_worker(job: _Job) -> Outcome:
    return _execute(job, _QUEUE.put)


def _drain(queue: Any, display: ProgressDisplay) -> None:
    import queue as queue_module
    while True:
        try:
            event = queue.get_nowait()
        except (queue_module.Empty, OSError, ValueError):
            return
        display(ProgressEvent(*event))


def _run_pool(todo: list[_Job], jobs: int, display: ProgressDisplay,
              report: Callable[[Outcome], bool]) -> None:
    ctx = get_context("spawn")
    queue = ctx.Queue()
    pool = ProcessPoolExecutor(max_workers=min(jobs, len(todo)), mp_context=ctx,
                               initializer=_init_worker, initargs=(queue, os.getpid()))
    clean = False
    try:
        futures: dict[Future[Outcome], _Job] = {pool.submit(_execute_in_worker, job): job for job in todo}
        pending = set(futures)
        stop = False
        while pending and not stop:
            done, pending = wait(pending, timeout=0.1, return_when=FIRST_COMPLETED)
            _drain(queue, display)
            for fut in done:
                job = futures[fut]
                try:
                    outcome = fut.result()
                except Exception:
                    outcome = Outcome(job.name, "failed", "", 0.0, traceback.format_exc())
                    with contextlib.suppress(OSError), \
                            atomic_write(Path(job.directory) / f"{job.name}.error.log", "w") as handle:
                        handle.write(outcome.error)
                stop = report(outcome) or stop
        clean = not pending
    finally:
        if not clean:                   # interrupted or stopped: no worker outlives this call
            for process in list(getattr(pool, "_processes", {}).values()):
                with contextlib.suppress(Exception):
                    process.terminate()
        pool.shutdown(wait=True, cancel_futures=True)
        _drain(queue, display)
        queue.close()


def _run_here_or_fresh(job: _Job, display: ProgressDisplay, report: Callable[[Outcome], bool]) -> bool:
    """Run ``job`` in this process, unless this process imported a module of its closure before
    the module's file changed on disk (a notebook, a second ``reproduce`` call after an edit):
    then in a new worker process, which imports the files as they are.  Returns whether to stop."""
    if not changed_since_import(job.key["sources"]):
        return report(_execute(job, display))
    stop: list[bool] = []

    def reported(outcome: Outcome) -> bool:
        stop.append(report(outcome))
        return stop[-1]

    _run_pool([job], 1, display, reported)
    return any(stop)


# --------------------------------------------------------------------------- reproduce

#: ``run_remote(tasks, report)``: runs zero-argument tasks somewhere and calls ``report`` on each result.
RemoteRunner = Callable[[list[Callable[[], Outcome]], Callable[[Outcome], Any]], None]


def _execute_quietly(job: _Job) -> Outcome:
    """:func:`_execute` on a cluster worker (no progress channel back to the display)."""
    return _execute(job, lambda event: None)


def _check_arguments(mode: str, seed: Any, jobs: Any) -> None:
    if not isinstance(mode, str) or mode not in MODES:
        raise InvalidHyperparameterError(f"mode must be 'quick' or 'full', got {mode!r}")
    if isinstance(jobs, bool) or not isinstance(jobs, int) or jobs < 1:
        raise InvalidHyperparameterError(f"jobs must be an int >= 1, got {jobs!r}")
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise InvalidHyperparameterError(f"seed must be an int >= 0, got {seed!r}")


def _clean_leftovers(directory: Path, names: Sequence[str]) -> None:
    """Remove temporary files of interrupted runs for ``names`` (under their locks)."""
    for name in names:
        if any(directory.glob(f".{name}.*.tmp")):
            with exclusive(directory, name):
                remove_stale_temporaries(directory, name)


def reproduce(experiments: Sequence[Experiment], out: str | os.PathLike[str], *,
              mode: str = "quick", seed: int = 0, jobs: int = 1, force: bool = False,
              echo: Callable[[str], Any] = logger.info, show_progress: bool = True,
              registry: Sequence[Experiment] | None = None,
              overrides: Mapping[str, Any] | None = None, allow_mixed: bool = False,
              run_remote: RemoteRunner | None = None) -> list[Outcome]:
    """Bring the results of ``experiments`` under ``out`` up to date.

    Stale or missing results are recomputed (all of them with ``force``);
    ``jobs`` > 1 runs them in that many spawned processes.  ``overrides``
    (dotted config keys -> values, checked against the declared config; one
    experiment only) send the results to their own directory.  Then
    ``macros.tex`` and ``SUMMARY.md`` of the results directory are rebuilt
    over ``registry`` (default ``experiments``; the CLI passes every
    registered experiment, so running one keeps the others' lines).

    ``run_remote(tasks, report)`` runs the stale experiments elsewhere instead
    of local processes: ``tasks`` are picklable zero-argument callables (one per
    experiment, each locking, computing and writing its own results) and
    ``report`` is to be called with each returned outcome.  ``fltheory
    reproduce --scheduler ADDR`` passes ``fltheory.search.task_runner(ADDR)``,
    which runs them on a Dask cluster; its workers must see ``out`` at the same
    path (one machine or a shared file system).  The runner is passed in rather
    than imported here so that no experiment's cache key depends on the
    distributed engine's source.

    Returns one :class:`Outcome` per experiment, in the order given;
    experiment failures are returned, not raised.  Raises
    :class:`~fltheory.errors.OutputDirectoryError` when the directory cannot
    be written (nothing existing is touched) and
    :class:`~fltheory.errors.MixedResultsError` when the directory holds
    results computed with other sources or versions (unless ``allow_mixed``).
    """
    _check_arguments(mode, seed, jobs)
    experiments = arg.experiments("experiments", experiments)
    out = arg.path("out", out)
    force = arg.boolean("force", force)
    show_progress = arg.boolean("show_progress", show_progress)
    allow_mixed = arg.boolean("allow_mixed", allow_mixed)
    if not callable(echo):
        raise InvalidHyperparameterError(f"echo must be a callable taking a str, got {arg.short(echo)}")
    if run_remote is not None and not callable(run_remote):
        raise InvalidHyperparameterError(f"run_remote must be None or a callable (tasks, report), "
                                         f"got {arg.short(run_remote)}")
    if registry is not None:
        registry = arg.experiments("registry", registry)
    overrides = dict(arg.mapping("overrides", overrides, optional=True))
    if overrides and len(experiments) != 1:
        raise InvalidHyperparameterError(
            f"config overrides apply to one experiment; name exactly one, got {len(experiments)}")
    root = Path(out)
    if root.exists() and not root.is_dir():
        raise OutputDirectoryError(20, f"output directory {root} exists and is not a directory")
    name = experiments[0].name if overrides else None
    directory = results_directory(root, mode, int(seed), name, overrides)
    configs = {exp.name: (apply_overrides(exp.name, exp.config(mode), overrides) if overrides
                          else exp.config(mode)) for exp in experiments}
    keys = {exp.name: result_key(exp, mode, int(seed), configs[exp.name], overrides) for exp in experiments}
    outcomes: dict[str, Outcome] = {}
    todo: list[_Job] = []
    for exp in experiments:
        if not force and is_fresh(directory, exp.name, keys[exp.name]):
            # an error log left by a failed attempt at other sources no longer describes the
            # result (fltheory list would report "failed" beside an up-to-date result)
            (directory / f"{exp.name}.error.log").unlink(missing_ok=True)
            stored_doc: dict[str, Any] = read_stored(directory, exp.name).doc or {}
            outcomes[exp.name] = Outcome(exp.name, "skipped", overall_status(stored_doc.get("checks", [])))
            echo(f"{exp.name}: up to date ({outcomes[exp.name].status}), skipped")
            continue
        todo.append(_Job(exp.name, exp.module_name, _sys_path_entry(exp), mode, int(seed), str(directory),
                         str(root), keys[exp.name], configs[exp.name], overrides))
    disk_errors: list[Outcome] = []

    def report(o: Outcome) -> bool:
        outcomes[o.name] = o
        if o.disk_error:
            disk_errors.append(o)
            return True
        if o.action == "failed":
            last = o.error.strip().splitlines()[-1] if o.error.strip() else "error"
            echo(f"{o.name}: FAILED after {o.seconds:.1f} s: {last} "
                 f"(traceback in {directory / (o.name + '.error.log')})")
        elif o.action == "skipped":
            echo(f"{o.name}: up to date ({o.status}), {o.note or 'skipped'}")
        else:
            echo(f"{o.name}: {o.status} ({o.seconds:.1f} s)")
        return False

    if todo:
        ensure_writable(directory)
        display = ProgressDisplay(len(todo), enabled=None if show_progress else False, echo=echo)
        try:
            if run_remote is not None:
                run_remote([functools.partial(_execute_quietly, job) for job in todo], report)
            elif jobs <= 1 or len(todo) == 1:
                for job in todo:
                    if _run_here_or_fresh(job, display, report):
                        break
            else:
                _run_pool(todo, jobs, display, report)
        finally:
            display.close()
    if disk_errors:
        first = disk_errors[0]
        raise OutputDirectoryError(28, f"cannot write the results of {first.name} to {directory}: "
                                   f"{first.error}; existing files are unchanged")
    if directory.is_dir():
        _clean_leftovers(directory, [e.name for e in experiments])
    _summarise(directory, list(registry) if registry is not None and not overrides else list(experiments),
               keys, mode, int(seed), overrides, allow_mixed)
    for exp in experiments:      # an experiment not reached after a stop is reported as not run
        outcomes.setdefault(exp.name, Outcome(exp.name, "failed", "", 0.0, "not run"))
    return [outcomes[e.name] for e in experiments]


def _summarise(directory: Path, registered: list[Experiment], keys: dict[str, dict[str, Any]], mode: str,
               seed: int, overrides: Mapping[str, Any], allow_mixed: bool) -> None:
    if not directory.is_dir():
        return
    for exp in registered:
        if exp.name not in keys:
            keys[exp.name] = result_key(exp, mode, seed)
    heading = f"{mode} mode, master seed {seed}" + (
        f", overrides {dict(overrides)}" if overrides else "")
    prefix = macro_prefix(mode, bool(overrides)) if seed == 0 else (
        macro_prefix(mode, bool(overrides)) + f"Seed{seed}")
    try:
        lock = exclusive(directory, "summary")
        lock.__enter__()
    except OSError as exc:               # read-only directory: write nothing unless something changed
        if not is_disk_error(exc):
            raise
        lock = None
    try:
        if lock is not None:
            remove_stale_temporaries(directory, "macros.tex")
            remove_stale_temporaries(directory, "SUMMARY.md")
        summarise(directory, registered, keys, prefix=prefix, heading=heading, allow_mixed=allow_mixed)
    except OSError as exc:
        if is_disk_error(exc):
            raise OutputDirectoryError(exc.errno, f"cannot write the summary of {directory}: "
                                       f"{exc.strerror or exc}; existing files are unchanged") from exc
        raise
    finally:
        if lock is not None:
            lock.__exit__(None, None, None)
