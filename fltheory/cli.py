"""The ``fltheory`` command.

::

    fltheory reproduce [NAMES...] [--quick|--full] [--out DIR] [--jobs N] [--seed S] [--force]
                       [--set KEY=VALUE ...] [--config FILE] [--allow-mixed]
    fltheory list [--out DIR]
    fltheory show NAME [--out DIR] [--full]

``--package PKG`` (or the environment variable ``FLTHEORY_EXPERIMENTS``)
selects a package of one's own experiments instead of the bundled ones.
Exit codes: 0 success (a *violated* bound is a finding, not a failure), 1
some experiment failed or the summary was refused (results of mixed
versions), 2 usage, registry or output-directory error.

Subcommands are registered in :data:`COMMANDS`: one :class:`Command` (name,
help, a function adding its arguments, a handler returning the exit code)
per subcommand; adding one is one entry.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import logging
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

__all__ = ["COMMANDS", "Command", "build_parser", "main"]

logger = logging.getLogger(__name__)


def say(text: str = "") -> None:
    """Command output (goes through tqdm so it does not break a live bar)."""
    from tqdm.auto import tqdm
    tqdm.write(text, file=sys.stdout)


@dataclasses.dataclass(frozen=True)
class Command:
    """One subcommand: ``configure(parser)`` adds its arguments, ``handler(args)`` runs it."""

    name: str
    help: str
    configure: Callable[[argparse.ArgumentParser], None]
    handler: Callable[[argparse.Namespace], int]


def _registry(args: argparse.Namespace) -> tuple[list[Any], str]:
    """(experiments, package name); raises ExperimentDefinitionError."""
    from fltheory.reproduce import DEFAULT_PACKAGE, PACKAGE_ENV, discover
    package = args.package or os.environ.get(PACKAGE_ENV) or DEFAULT_PACKAGE
    return discover(package), package


def _select(registry: list[Any], names: Sequence[str]) -> list[Any]:
    if not names:
        return registry
    by_name = {e.name: e for e in registry}
    unknown = [n for n in names if n not in by_name]
    if unknown:
        raise KeyError(f"unknown experiment(s) {unknown}; registered: {sorted(by_name) or 'none'}")
    return [by_name[n] for n in dict.fromkeys(names)]


# --------------------------------------------------------------------------- reproduce

def _configure_reproduce(rep: argparse.ArgumentParser) -> None:
    rep.add_argument("names", nargs="*", metavar="NAME", help="experiments to run (default: all)")
    size = rep.add_mutually_exclusive_group()
    size.add_argument("--quick", dest="mode", action="store_const", const="quick",
                      help="small configurations (default); results in OUT/")
    size.add_argument("--full", dest="mode", action="store_const", const="full",
                      help="the configurations of the paper figures; results in OUT/full/")
    rep.set_defaults(mode="quick")
    rep.add_argument("--out", default="figures", help="output root directory (default: figures)")
    rep.add_argument("--jobs", type=int, default=1, help="parallel processes (default: 1)")
    rep.add_argument("--seed", type=int, default=0,
                     help="master seed (default: 0; another seed writes to OUT/seeds/SEED/)")
    rep.add_argument("--force", action="store_true", help="recompute even fresh results")
    rep.add_argument("--set", dest="assignments", action="append", default=[], metavar="KEY=VALUE",
                     help="override a config field of the one experiment named (JSON value; dotted "
                          "KEY inside dict fields); results go to OUT/custom/NAME-MODE-DIGEST/")
    rep.add_argument("--config", dest="config_file", default=None, metavar="FILE",
                     help="JSON or TOML file of config overrides (as --set; --set wins)")
    rep.add_argument("--allow-mixed", action="store_true",
                     help="summarise even when the directory holds results of other sources or versions")


def _overrides(args: argparse.Namespace, chosen: list[Any]) -> dict[str, Any]:
    from fltheory.errors import InvalidHyperparameterError
    from fltheory.reproduce.overrides import flatten_overrides, load_config_file, parse_assignments
    if not args.assignments and not args.config_file:
        return {}
    if len(chosen) != 1 or not args.names:
        raise InvalidHyperparameterError(
            f"--set/--config change one experiment's config: name exactly one experiment, "
            f"got {[e.name for e in chosen] if args.names else 'all'}")
    base = chosen[0].config(args.mode)
    merged: dict[str, Any] = {}
    if args.config_file:
        merged.update(flatten_overrides(load_config_file(args.config_file), base))
    merged.update(parse_assignments(args.assignments))
    return merged


def _cmd_reproduce(args: argparse.Namespace) -> int:
    from fltheory.errors import (
        ExperimentDefinitionError,
        InvalidHyperparameterError,
        MixedResultsError,
        OutputDirectoryError,
    )
    from fltheory.reproduce import apply_overrides, reproduce, results_directory
    if args.jobs < 1:
        say(f"error: --jobs must be >= 1, got {args.jobs}")
        return 2
    try:
        registry, package = _registry(args)
        chosen = _select(registry, args.names)
        overrides = _overrides(args, chosen)
        for exp in chosen if overrides else []:
            apply_overrides(exp.name, exp.config(args.mode), overrides)      # refuse early, before any run
    except KeyError as exc:
        say(f"error: {exc.args[0]}")
        return 2
    except (ExperimentDefinitionError, InvalidHyperparameterError) as exc:
        say(f"error: {exc}")
        return 2
    say(f"registry ({package}): {len(registry)} experiment(s)"
        + (": " + ", ".join(e.name for e in registry) if registry else ""))
    if not chosen:
        say("nothing to run")
        return 0
    if args.seed < 0:
        say(f"error: seed must be an int >= 0, got {args.seed}")
        return 2
    target = results_directory(args.out, args.mode, args.seed, chosen[0].name if overrides else None,
                               overrides)
    say(f"reproducing {len(chosen)} experiment(s), mode {args.mode}, seed {args.seed}, jobs {args.jobs}"
        + (f", overrides {json.dumps(overrides)}" if overrides else "") + f", into {target}/")
    try:
        outcomes = reproduce(chosen, args.out, mode=args.mode, seed=args.seed, jobs=args.jobs,
                             force=args.force, echo=say, registry=registry, overrides=overrides,
                             allow_mixed=args.allow_mixed)
    except (ExperimentDefinitionError, InvalidHyperparameterError, OutputDirectoryError) as exc:
        say(f"error: {exc}")
        return 2
    except MixedResultsError as exc:
        say(f"error: {exc}")
        return 1
    failed = [o.name for o in outcomes if o.action == "failed"]
    computed = sum(o.action == "computed" for o in outcomes)
    skipped = sum(o.action == "skipped" for o in outcomes)
    say(f"done: {computed} computed, {skipped} up to date, {len(failed)} failed"
        + (f" ({', '.join(failed)})" if failed else "")
        + f"; summary in {target / 'SUMMARY.md'}")
    return 1 if failed else 0


# --------------------------------------------------------------------------- list

def _configure_out(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--out", default="figures", help="output root directory (default: figures)")


def _cmd_list(args: argparse.Namespace) -> int:
    from fltheory.reproduce import MODES, experiment_status
    registry, package = _registry(args)
    say(f"registry ({package}): {len(registry)} experiment(s); results from {args.out}/ (quick) "
        f"and {Path(args.out) / 'full'}/ (full)")
    if not registry:
        return 0
    width = max(len(e.name) for e in registry)
    for exp in registry:
        statuses = [experiment_status(args.out, exp, mode) for mode in MODES]
        theorems = "; ".join(t.label() for t in exp.theorems)
        say(f"{exp.name:<{width}}  " + " | ".join(s.text() for s in statuses) + f"  -- {theorems}")
    return 0


# --------------------------------------------------------------------------- show

def _configure_show(show: argparse.ArgumentParser) -> None:
    show.add_argument("name", metavar="NAME")
    _configure_out(show)
    show.add_argument("--full", dest="mode", action="store_const", const="full", default="quick",
                      help="the full-mode result (default: quick)")


def _short(value: Any, limit: int = 6) -> str:
    if isinstance(value, list):
        if len(value) > limit:
            head = ", ".join(_short(v, limit) for v in value[:limit])
            return f"[{head}, ... ({len(value)} items)]"
        return "[" + ", ".join(_short(v, limit) for v in value) + "]"
    if isinstance(value, float):
        return f"{value:.6g}"
    if isinstance(value, dict):
        return json.dumps(value)[:200]
    return str(value)


def _flatten(data: dict[str, Any], prefix: str = "") -> list[tuple[str, Any]]:
    """Nested dicts as dotted keys: {"a": {"b": 1}} -> [("a.b", 1)]."""
    out: list[tuple[str, Any]] = []
    for key, value in data.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict) and value:
            out.extend(_flatten(value, name + "."))
        else:
            out.append((name, value))
    return out


def _cmd_show(args: argparse.Namespace) -> int:
    from fltheory.reproduce import read_stored, results_directory
    registry, _ = _registry(args)
    by_name = {e.name: e for e in registry}
    if args.name not in by_name:
        say(f"error: unknown experiment {args.name!r}; registered: {sorted(by_name) or 'none'}")
        return 2
    directory = results_directory(args.out, args.mode)
    stored = read_stored(directory, args.name)
    if stored.problem:
        say(f"{args.name}: unreadable result, treated as stale: {stored.problem}")
        return 1
    if stored.doc is None:
        say(f"{args.name}: not run (no {stored.path})")
        return 0
    doc = stored.doc
    exp = by_name[args.name]
    rec = doc["record"]
    key = doc["key"]
    say(f"{exp.name}: {exp.title}")
    say(f"mode {key.get('mode')}, seed {key.get('seed')}, computed {rec.get('timestamp')} "
        f"at commit {rec.get('git_commit')}{' (dirty)' if rec.get('git_dirty') else ''}"
        + (f" in {rec['wall_seconds']:.1f} s" if isinstance(rec.get("wall_seconds"), (int, float)) else ""))
    if rec.get("data_source"):
        say("data source: " + json.dumps(rec["data_source"]))
    if rec.get("overrides"):
        say("overrides: " + json.dumps(rec["overrides"]))
    say("checks:")
    for c in doc["checks"]:
        ratio = "n/a" if c["ratio"] is None else f"{c['ratio']:.4g}"
        say(f"  {c['theorem']}: {c['status']}, measured/bound {ratio}"
            + (f" -- {c['detail']}" if c.get("detail") else ""))
    say("macros:")
    for k, v in doc["macros"].items():
        say(f"  {k} = {v:.6g}" if isinstance(v, float) else f"  {k} = {v}")
    say("results:")
    for k, v in _flatten(doc["data"]):
        say(f"  {k} = {_short(v)}")
    say("config: " + json.dumps(key.get("config", {})))
    return 0


# --------------------------------------------------------------------------- registration

COMMANDS: list[Command] = [
    Command("reproduce", "run experiments; write figures, JSON, macros.tex, SUMMARY.md",
            _configure_reproduce, _cmd_reproduce),
    Command("list", "registered experiments and their last result in each mode", _configure_out, _cmd_list),
    Command("show", "the numbers of one experiment's last result", _configure_show, _cmd_show),
]


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of ``fltheory`` (one subparser per entry of :data:`COMMANDS`)."""
    parser = argparse.ArgumentParser(
        prog="fltheory", description="Numerical checks of federated-optimization theory.")
    parser.add_argument("--package", default=None,
                        help="experiments package to use (default: $FLTHEORY_EXPERIMENTS or the bundled "
                             "experiments)")
    sub = parser.add_subparsers(dest="command", required=True)
    for command in COMMANDS:
        command.configure(sub.add_parser(command.name, help=command.help))
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``fltheory`` console script; returns the exit code."""
    from fltheory.errors import ExperimentDefinitionError
    os.environ.setdefault("MPLBACKEND", "Agg")
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    args = build_parser().parse_args(argv)
    handlers = {c.name: c.handler for c in COMMANDS}
    try:
        return handlers[args.command](args)
    except ExperimentDefinitionError as exc:
        say(f"error: {exc}")
        return 2
    except BrokenPipeError:            # e.g. `fltheory show NAME | head`
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
