"""`fltheory reproduce`: run experiments, write figures, JSON, macros and summary.

Per experiment NAME the output directory receives (all writes atomic):

* ``NAME.pdf``, ``NAME.png`` -- the figure, in the house style;
* ``NAME.json`` -- written last, it marks the experiment done:
  ``data`` (what ``run`` returned), ``checks``, ``macros``, ``key`` (mode,
  seed, config, code hash: what makes the result fresh), ``experiment``
  (name, title, theorems), ``record`` (RunRecord provenance) and ``timing``.
  Only ``record`` and ``timing`` differ between two runs with the same key;
* ``NAME.error.log`` -- the traceback, only while the last attempt failed.

After every reproduce, ``macros.tex`` and ``SUMMARY.md`` are rebuilt from the
JSON files of all registered experiments present in the directory.

A result is *fresh* when its JSON exists with the same key and both figure
files exist; fresh experiments are skipped unless ``force``.  The code hash
covers the experiment module's source, every ``.py`` file of the fltheory
package, and the framework files (``experiments/_*.py``).
"""

from __future__ import annotations

import dataclasses
import hashlib
import logging
import os
import time
import traceback
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from multiprocessing import get_context
from pathlib import Path
from typing import Any

import numpy as np

import fltheory
from fltheory.errors import InvalidHyperparameterError
from fltheory.results import RunRecord, atomic_write, load_json, save_results, to_jsonable

from ._framework import (Check, Experiment, ExperimentDefinitionError, experiment_rng,
                         load_experiment, set_progress)

__all__ = ["reproduce", "Outcome", "code_hash", "result_key", "read_result", "experiment_status",
           "write_macros", "write_summary", "macro_name", "format_macro_value"]

logger = logging.getLogger(__name__)
_FLTHEORY_ROOT = Path(fltheory.__file__).resolve().parent
_FRAMEWORK_DIR = Path(__file__).resolve().parent


# --------------------------------------------------------------------------- freshness

def _sources_digest(files: Sequence[Path]) -> str:
    h = hashlib.sha256()
    for f in files:
        h.update(str(f.name).encode())
        h.update(b"\0")
        h.update(f.read_bytes())
        h.update(b"\0")
    return h.hexdigest()


def code_hash(experiment: Experiment) -> str:
    """sha256 over the experiment source, the fltheory package sources and the
    framework sources (files sorted by path, names included)."""
    package = sorted(p for p in _FLTHEORY_ROOT.rglob("*.py") if "__pycache__" not in p.parts)
    framework = sorted(_FRAMEWORK_DIR.glob("_*.py"))
    return _sources_digest([experiment.source_file, *package, *framework])


def result_key(experiment: Experiment, mode: str, seed: int, digest: str | None = None) -> dict[str, Any]:
    """What a stored result must match to be fresh."""
    return {"mode": mode, "seed": int(seed),
            "config": to_jsonable(experiment.config(mode), where=f"{experiment.name} config"),
            "code_hash": digest if digest is not None else code_hash(experiment)}


def read_result(out: Path, name: str) -> dict[str, Any] | None:
    """The stored JSON document of ``name`` in ``out`` (None if absent or unreadable)."""
    path = Path(out) / f"{name}.json"
    if not path.exists():
        return None
    try:
        doc = load_json(path)
    except (OSError, ValueError) as exc:
        logger.warning("ignoring unreadable %s: %s", path, exc)
        return None
    return doc if isinstance(doc, dict) else None


def _is_fresh(out: Path, name: str, key: dict[str, Any]) -> bool:
    doc = read_result(out, name)
    return (doc is not None and doc.get("key") == key
            and (out / f"{name}.pdf").exists() and (out / f"{name}.png").exists())


def overall_status(checks: Sequence[dict[str, Any]]) -> str:
    """violated if any check is violated; holds if all hold; else not checkable
    (or 'holds (partly)' when some hold and the rest are not checkable)."""
    statuses = [c["status"] for c in checks]
    if "violated" in statuses:
        return "violated"
    if statuses and all(s == "holds" for s in statuses):
        return "holds"
    if "holds" in statuses:
        return "holds (partly not checkable)"
    return "not checkable"


def experiment_status(out: Path, experiment: Experiment) -> str:
    """For ``fltheory list``: holds / violated / not checkable / not run /
    failed (an error log is present); " (stale)" is appended when the stored
    result no longer matches the experiment's config or code."""
    out = Path(out)
    if (out / f"{experiment.name}.error.log").exists():
        return f"failed (see {experiment.name}.error.log)"
    doc = read_result(out, experiment.name)
    if doc is None:
        return "not run"
    status = overall_status(doc.get("checks", []))
    key = doc.get("key", {})
    try:
        fresh = key == result_key(experiment, key.get("mode", "quick"), key.get("seed", 0))
    except (ExperimentDefinitionError, TypeError, ValueError):
        fresh = False
    return status if fresh else f"{status} (stale)"


# --------------------------------------------------------------------------- one experiment

@dataclasses.dataclass(frozen=True)
class _Job:
    name: str
    module_name: str
    sys_path_entry: str
    mode: str
    seed: int
    out: str
    key: dict[str, Any]


@dataclasses.dataclass(frozen=True)
class Outcome:
    """What happened to one experiment: action is "computed", "skipped" or "failed"."""

    name: str
    action: str
    status: str = ""
    seconds: float = 0.0
    error: str = ""


def _sys_path_entry(experiment: Experiment) -> str:
    depth = len(experiment.module_name.split("."))
    return str(experiment.source_file.parents[depth - 1])


def _execute(job: _Job) -> Outcome:
    """Run, check, plot and save one experiment; never raises (errors are
    returned with their traceback)."""
    start = time.perf_counter()
    out = Path(job.out)
    try:
        exp = load_experiment(job.module_name, job.sys_path_entry)
        config = exp.config(job.mode)
        results = exp.run(config, experiment_rng(job.seed, exp.name))
        checks: list[Check] = exp.checks(results)
        macros = exp.macros(results)
        from fltheory import plotting
        with plotting.style():
            fig = exp.plot(results)
            plotting.save_figure(fig, out / exp.name)
        seconds = time.perf_counter() - start
        extra: dict[str, Any] = {
            "experiment": {"name": exp.name, "title": exp.title,
                           "theorems": [dataclasses.asdict(t) for t in exp.theorems],
                           "expected_axes": exp.expected_axes},
            "key": job.key,
            "checks": [c.to_dict() for c in checks],
            "macros": macros,
            "timing": {"seconds": round(seconds, 3)},
        }
        save_results(out / f"{exp.name}.json", results, RunRecord.capture(config, job.seed),
                     extra=extra)
        (out / f"{exp.name}.error.log").unlink(missing_ok=True)
        return Outcome(job.name, "computed", overall_status(extra["checks"]), seconds)
    except Exception:  # one experiment's failure must not stop the others
        text = traceback.format_exc()
        try:
            with atomic_write(out / f"{job.name}.error.log", "w") as handle:
                handle.write(f"experiment {job.name} ({job.module_name}), mode {job.mode}, "
                             f"seed {job.seed}\n\n{text}")
        except OSError:
            logger.exception("could not write the error log of %s", job.name)
        return Outcome(job.name, "failed", "", time.perf_counter() - start, text)


def _init_worker() -> None:
    """Worker processes draw off-screen and show no per-experiment bars."""
    os.environ["MPLBACKEND"] = "Agg"
    import matplotlib
    matplotlib.use("Agg")
    set_progress(False)


# --------------------------------------------------------------------------- reproduce

def reproduce(experiments: Sequence[Experiment], out: str | os.PathLike[str], *,
              mode: str = "quick", seed: int = 0, jobs: int = 1, force: bool = False,
              echo: Callable[[str], None] = logger.info, show_progress: bool = True,
              registry: Sequence[Experiment] | None = None) -> list[Outcome]:
    """Bring the results of ``experiments`` in ``out`` up to date.

    Stale or missing results are recomputed (all of them with ``force``),
    ``jobs`` > 1 runs them in that many spawned processes; then
    ``macros.tex`` and ``SUMMARY.md`` are rebuilt over ``registry`` (default:
    ``experiments``; the CLI passes every registered experiment, so running
    one experiment keeps the others' lines).  Returns one
    :class:`Outcome` per experiment, in the order given.  Experiment failures
    are returned, not raised.
    """
    if mode not in ("quick", "full"):
        raise InvalidHyperparameterError(f"mode must be 'quick' or 'full', got {mode!r}")
    if isinstance(jobs, bool) or not isinstance(jobs, int) or jobs < 1:
        raise InvalidHyperparameterError(f"jobs must be an int >= 1, got {jobs!r}")
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise InvalidHyperparameterError(f"seed must be an int >= 0, got {seed!r}")
    out_dir = Path(out)
    out_dir.mkdir(parents=True, exist_ok=True)
    os.environ.setdefault("MPLBACKEND", "Agg")
    outcomes: dict[str, Outcome] = {}
    todo: list[_Job] = []
    for exp in experiments:
        key = result_key(exp, mode, seed)
        if not force and _is_fresh(out_dir, exp.name, key):
            doc = read_result(out_dir, exp.name) or {}
            outcomes[exp.name] = Outcome(exp.name, "skipped", overall_status(doc.get("checks", [])))
            echo(f"{exp.name}: up to date ({outcomes[exp.name].status}), skipped")
            continue
        todo.append(_Job(exp.name, exp.module_name, _sys_path_entry(exp), mode, int(seed),
                         str(out_dir), key))

    def report(o: Outcome) -> None:
        outcomes[o.name] = o
        if o.action == "failed":
            last = o.error.strip().splitlines()[-1] if o.error.strip() else "error"
            echo(f"{o.name}: FAILED after {o.seconds:.1f} s: {last} "
                 f"(traceback in {out_dir / (o.name + '.error.log')})")
        else:
            echo(f"{o.name}: {o.status} ({o.seconds:.1f} s)")

    if todo:
        from tqdm.auto import tqdm
        bar = tqdm(total=len(todo), desc="experiments", unit="exp", disable=None if show_progress else True)
        try:
            if jobs <= 1 or len(todo) == 1:
                set_progress(show_progress)
                for job in todo:
                    bar.set_postfix_str(job.name)
                    report(_execute(job))
                    bar.update(1)
            else:
                with ProcessPoolExecutor(max_workers=min(jobs, len(todo)), mp_context=get_context("spawn"),
                                         initializer=_init_worker) as pool:
                    futures = {pool.submit(_execute, job): job for job in todo}
                    for fut in as_completed(futures):
                        job = futures[fut]
                        try:
                            outcome = fut.result()
                        except Exception:  # a crashed worker process
                            outcome = Outcome(job.name, "failed", "", 0.0, traceback.format_exc())
                            with atomic_write(out_dir / f"{job.name}.error.log", "w") as handle:
                                handle.write(outcome.error)
                        report(outcome)
                        bar.update(1)
        finally:
            bar.close()
    registered = list(registry) if registry is not None else list(experiments)
    write_macros(out_dir, registered)
    write_summary(out_dir, registered)
    return [outcomes[e.name] for e in experiments]


# --------------------------------------------------------------------------- macros.tex

_DIGITS = ("Zero", "One", "Two", "Three", "Four", "Five", "Six", "Seven", "Eight", "Nine")


def macro_name(experiment: str, key: str) -> str:
    """``\\fl`` + CamelCase of experiment name and key, letters only: every
    digit becomes its English word, every other non-letter separates words.
    ``macro_name("objective_shift", "max_ratio_n2")`` -> ``\\flObjectiveShiftMaxRatioNTwo``."""
    def camel(text: str) -> str:
        words: list[str] = []
        current = ""
        for ch in text:
            if ch.isascii() and ch.isalpha():
                current += ch
            else:
                if current:
                    words.append(current)
                current = ""
                if ch.isdigit():
                    words.append(_DIGITS[int(ch)])
        if current:
            words.append(current)
        return "".join(w[0].upper() + w[1:] for w in words)
    return "\\fl" + camel(experiment) + camel(key)


def format_macro_value(value: float | int) -> str:
    """4 significant digits; powers of ten as ``\\ensuremath{m\\times10^{e}}``."""
    if isinstance(value, int):
        return str(value)
    text = f"{value:.4g}"
    if "e" in text:
        mantissa, exponent = text.split("e")
        return f"\\ensuremath{{{mantissa}\\times10^{{{int(exponent)}}}}}"
    return text


def write_macros(out: Path, experiments: Sequence[Experiment]) -> Path:
    """Rebuild ``macros.tex``: one ``\\newcommand{\\Name}{value}`` per headline
    number of every stored result; duplicate names raise."""
    lines = ["% Generated by `fltheory reproduce`; do not edit.",
             "% One macro per headline number; full precision is in NAME.json."]
    seen: dict[str, str] = {}
    for exp in experiments:
        doc = read_result(out, exp.name)
        if doc is None:
            continue
        for key, value in sorted(doc.get("macros", {}).items()):
            name = macro_name(exp.name, key)
            where = f"{exp.name}.macros[{key!r}]"
            if name in seen:
                raise ExperimentDefinitionError(f"{where} and {seen[name]} both map to the macro {name}")
            seen[name] = where
            lines.append(f"\\newcommand{{{name}}}{{{format_macro_value(value)}}}")
    target = Path(out) / "macros.tex"
    with atomic_write(target, "w") as handle:
        handle.write("\n".join(lines) + "\n")
    return target


# --------------------------------------------------------------------------- SUMMARY.md

def _theorem_line(exp: Experiment, theorem_key: str, checks: list[dict[str, Any]] | None) -> str:
    th = exp.theorem(theorem_key)
    head = f"- `{exp.name}` — {th.label()}:"
    if checks is None:
        return f"{head} not run"
    mine = [c for c in checks if c["theorem"] == theorem_key]
    if not mine:
        return f"{head} no check reported"
    status = overall_status(mine)
    ratios = [c["ratio"] for c in mine if c["ratio"] is not None]
    tight = f"; tightness (worst measured/bound) {max(ratios):.4g}" if ratios else ""
    details = [c["detail"] for c in mine if c["status"] == status and c["detail"]]
    if status == "violated":
        detail = "; instance: " + " | ".join(details)
    elif status == "not checkable":
        detail = "; why: " + " | ".join(details)
    else:
        detail = ""
    return f"{head} **{status}**{tight} ({len(mine)} check{'s' if len(mine) > 1 else ''}){detail}"


def write_summary(out: Path, experiments: Sequence[Experiment]) -> Path:
    """Rebuild ``SUMMARY.md``: one line per declared theorem of every experiment."""
    lines = ["# Theorem checks", "",
             "Generated by `fltheory reproduce`. Tightness = worst measured / bound "
             "(> 1 is a violation).", ""]
    for exp in experiments:
        doc = read_result(out, exp.name)
        checks = None if doc is None else doc.get("checks", [])
        for th in exp.theorems:
            lines.append(_theorem_line(exp, th.key, checks))
    if not experiments:
        lines.append("(no experiments registered)")
    target = Path(out) / "SUMMARY.md"
    with atomic_write(target, "w") as handle:
        handle.write("\n".join(lines) + "\n")
    return target
