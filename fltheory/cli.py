"""The ``fltheory`` command.

::

    fltheory reproduce [NAMES...] [--quick|--full] [--out DIR] [--jobs N] [--seed S] [--force]
                       [--set KEY=VALUE ...] [--config FILE] [--allow-mixed] [--scheduler ADDR]
    fltheory list [--out DIR]
    fltheory show NAME [--out DIR] [--full] [--json]
    fltheory theorems [--paper P] [--status S] [--out DIR] [--long]
    fltheory falsify NAME [--budget N] [--processes N | --scheduler ADDR] [--out DIR] [--seed S]
    fltheory --version          (also: python -m fltheory ...)

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

__all__ = ["COMMANDS", "PLUGIN_COMMANDS", "Command", "build_parser", "main"]

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
    rep.add_argument("--scheduler", default=None, metavar="ADDR",
                     help="run the experiments on the Dask cluster at ADDR (tcp://host:8786); its workers "
                          "must see OUT at the same path")
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


def _remote(args: argparse.Namespace) -> Any:
    """The Dask task runner of ``--scheduler ADDR`` (None: local processes)."""
    if args.scheduler is None:
        return None
    from fltheory.search import task_runner
    return task_runner(args.scheduler)


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
                             allow_mixed=args.allow_mixed, run_remote=_remote(args))
    except (ExperimentDefinitionError, InvalidHyperparameterError, OutputDirectoryError,
            ConnectionError) as exc:
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
    import textwrap

    from fltheory.cli_format import WIDTH
    from fltheory.reproduce import MODES, experiment_status
    registry, package = _registry(args)
    say(f"registry ({package}): {len(registry)} experiment(s); results in {args.out}/, {Path(args.out) / 'full'}/")
    if not registry:
        return 0
    width = max(len(e.name) for e in registry)
    for exp in registry:           # one entry per experiment, wrapped to the terminal width
        statuses = " | ".join(experiment_status(args.out, exp, mode).text() for mode in MODES)
        entry = f"{exp.name:<{width}}  {statuses}  -- {' '.join(exp.title.split())}"
        for line in textwrap.wrap(entry, width=WIDTH, subsequent_indent=" " * (width + 2),
                                  break_long_words=False, break_on_hyphens=False):  # paths stay whole
            say(line)
    say("details (theorems, checks, numbers): fltheory show NAME [--json]")
    return 0


# --------------------------------------------------------------------------- show

def _configure_show(show: argparse.ArgumentParser) -> None:
    show.add_argument("name", metavar="NAME")
    _configure_out(show)
    show.add_argument("--full", dest="mode", action="store_const", const="full", default="quick",
                      help="the full-mode result (default: quick)")
    show.add_argument("--json", action="store_true", help="print the whole stored result as valid JSON")


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
    from fltheory.cli_format import show_json, show_lines
    doc = stored.doc
    exp = by_name[args.name]
    if args.json:
        say(show_json(doc))
        return 0
    rec = doc.get("record", {}) or {}
    theorems = [(t.key, t.label()) for t in exp.theorems]
    for line in show_lines(doc, exp.title, theorems):
        say(line)
    if isinstance(rec.get("wall_seconds"), (int, float)):
        say(f"wall time: {rec['wall_seconds']:.1f} s")
    if rec.get("data_source"):
        say("data source: " + json.dumps(rec["data_source"]))
    if rec.get("overrides"):
        say("overrides: " + json.dumps(rec["overrides"]))
    return 0


# --------------------------------------------------------------------------- registration

COMMANDS: list[Command] = [
    Command("reproduce", "run experiments; write figures, JSON, macros.tex, SUMMARY.md",
            _configure_reproduce, _cmd_reproduce),
    Command("list", "registered experiments and their last result in each mode", _configure_out, _cmd_list),
    Command("show", "the numbers of one experiment's last result", _configure_show, _cmd_show),
]


# Subcommands living in their own layer's package; each module has ``add_parser(subparsers)``
# (setting ``handler`` as a default) and its handler returns the exit code.
PLUGIN_COMMANDS: dict[str, str] = {
    "theorems": "fltheory.theory.registry.cli",   # the theorem registry (no experiments package needed)
    "falsify": "fltheory.search.cli",             # counterexample search
}


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of ``fltheory`` (one subparser per entry of :data:`COMMANDS`)."""
    import importlib

    from fltheory import __version__
    parser = argparse.ArgumentParser(
        prog="fltheory", description="Numerical checks of federated-optimization theory.")
    parser.add_argument("--version", action="version", version=f"fltheory {__version__}")
    parser.add_argument("--package", default=None,
                        help="experiments package to use (default: $FLTHEORY_EXPERIMENTS or the bundled "
                             "experiments)")
    sub = parser.add_subparsers(dest="command", required=True)
    for command in COMMANDS:
        command.configure(sub.add_parser(command.name, help=command.help))
    for module in PLUGIN_COMMANDS.values():
        importlib.import_module(module).add_parser(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``fltheory`` console script; returns the exit code."""
    from fltheory.errors import ExperimentDefinitionError
    os.environ.setdefault("MPLBACKEND", "Agg")
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    args = build_parser().parse_args(argv)
    handlers = {c.name: c.handler for c in COMMANDS}
    try:
        if args.command in PLUGIN_COMMANDS:
            return int(args.handler(args))
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
