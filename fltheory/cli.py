"""The ``fltheory`` command.

::

    fltheory reproduce [NAMES...] [--quick|--full] [--out DIR] [--jobs N] [--seed S] [--force]
    fltheory list [--out DIR]
    fltheory show NAME [--out DIR] [--json]
    fltheory theorems [--paper P] [--status S] [--out DIR] [--long]
    fltheory falsify NAME [--budget N] [--processes N | --scheduler ADDR] [--out DIR]
    fltheory --version          (also: python -m fltheory ...)

``--package PKG`` (or the environment variable ``FLTHEORY_EXPERIMENTS``)
selects the experiments package, ``experiments`` by default.  Exit codes: 0
success (a *violated* bound is a finding, not a failure), 1 some experiment
failed, 2 usage or registry error.
"""

from __future__ import annotations

import os as _os

# The package's hot paths are many small batched BLAS products: threaded
# OpenBLAS is 10-50x slower on them on a 2-core machine, and one thread keeps
# reductions in a fixed order (same seed, same bits).  Set before numpy loads;
# an explicit setting in the environment wins.
for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    _os.environ.setdefault(_var, "1")

import argparse
import logging
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

__all__ = ["main", "build_parser"]

logger = logging.getLogger(__name__)


def _say(text: str = "") -> None:
    """Command output (goes through tqdm so it does not break a live bar)."""
    from tqdm.auto import tqdm
    tqdm.write(text, file=sys.stdout)


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of ``fltheory`` (subcommands reproduce, list, show)."""
    parser = argparse.ArgumentParser(
        prog="fltheory", description="Numerical checks of federated-optimization theory.")
    from fltheory import __version__
    parser.add_argument("--version", action="version", version=f"fltheory {__version__}")
    parser.add_argument("--package", default=None,
                        help="experiments package to use (default: $FLTHEORY_EXPERIMENTS or 'experiments')")
    sub = parser.add_subparsers(dest="command", required=True)

    rep = sub.add_parser("reproduce", help="run experiments; write figures, JSON, macros.tex, SUMMARY.md")
    rep.add_argument("names", nargs="*", metavar="NAME", help="experiments to run (default: all)")
    size = rep.add_mutually_exclusive_group()
    size.add_argument("--quick", dest="mode", action="store_const", const="quick",
                      help="small configurations (default)")
    size.add_argument("--full", dest="mode", action="store_const", const="full",
                      help="the configurations of the paper figures")
    rep.set_defaults(mode="quick")
    rep.add_argument("--out", default="figures", help="output directory (default: figures)")
    rep.add_argument("--jobs", type=int, default=1, help="parallel processes (default: 1)")
    rep.add_argument("--seed", type=int, default=0, help="master seed (default: 0)")
    rep.add_argument("--force", action="store_true", help="recompute even fresh results")

    lst = sub.add_parser("list", help="registered experiments and their last result")
    lst.add_argument("--out", default="figures", help="directory of results (default: figures)")

    show = sub.add_parser("show", help="the numbers of one experiment's last result")
    show.add_argument("name", metavar="NAME")
    show.add_argument("--out", default="figures", help="directory of results (default: figures)")
    show.add_argument("--json", action="store_true", help="print the stored result as JSON")

    from .search.cli import add_parser as add_falsify_parser
    add_falsify_parser(sub)

    from fltheory.theory.registry.cli import add_parser as add_theorems_parser  # registry subcommand
    add_theorems_parser(sub)
    return parser


def _select(registry: list[Any], names: Sequence[str]) -> list[Any]:
    if not names:
        return registry
    by_name = {e.name: e for e in registry}
    unknown = [n for n in names if n not in by_name]
    if unknown:
        raise KeyError(f"unknown experiment(s) {unknown}; registered: {sorted(by_name) or 'none'}")
    return [by_name[n] for n in dict.fromkeys(names)]


def _cmd_reproduce(args: argparse.Namespace, registry: list[Any], package: str) -> int:
    from experiments._runner import reproduce
    if args.jobs < 1:
        _say(f"error: --jobs must be >= 1, got {args.jobs}")
        return 2
    try:
        chosen = _select(registry, args.names)
    except KeyError as exc:
        _say(f"error: {exc.args[0]}")
        return 2
    _say(f"registry ({package}): {len(registry)} experiment(s)"
         + (": " + ", ".join(e.name for e in registry) if registry else ""))
    if not chosen:
        _say("nothing to run")
        return 0
    _say(f"reproducing {len(chosen)} experiment(s), mode {args.mode}, seed {args.seed}, "
         f"jobs {args.jobs}, into {args.out}/")
    from experiments._framework import ExperimentDefinitionError
    from fltheory.errors import InvalidHyperparameterError
    try:
        outcomes = reproduce(chosen, args.out, mode=args.mode, seed=args.seed, jobs=args.jobs,
                             force=args.force, echo=_say, registry=registry)
    except (ExperimentDefinitionError, InvalidHyperparameterError) as exc:
        _say(f"error: {exc}")
        return 2
    failed = [o.name for o in outcomes if o.action == "failed"]
    computed = sum(o.action == "computed" for o in outcomes)
    skipped = sum(o.action == "skipped" for o in outcomes)
    _say(f"done: {computed} computed, {skipped} up to date, {len(failed)} failed"
         + (f" ({', '.join(failed)})" if failed else "")
         + f"; summary in {Path(args.out) / 'SUMMARY.md'}")
    return 1 if failed else 0


def _cmd_list(args: argparse.Namespace, registry: list[Any], package: str) -> int:
    from experiments._runner import experiment_status
    _say(f"registry ({package}): {len(registry)} experiment(s); results from {args.out}/")
    if not registry:
        return 0
    from fltheory.cli_format import list_lines
    rows = [(exp.name, experiment_status(Path(args.out), exp), len(exp.theorems), exp.title)
            for exp in registry]
    for line in list_lines(rows):
        _say(line)
    return 0


def _cmd_show(args: argparse.Namespace, registry: list[Any], package: str) -> int:
    from experiments._runner import read_result
    by_name = {e.name: e for e in registry}
    if args.name not in by_name:
        _say(f"error: unknown experiment {args.name!r}; registered: {sorted(by_name) or 'none'}")
        return 2
    doc = read_result(Path(args.out), args.name)
    if doc is None:
        _say(f"{args.name}: not run (no {Path(args.out) / (args.name + '.json')})")
        return 0
    from fltheory.cli_format import show_json, show_lines
    exp = by_name[args.name]
    if args.json:
        _say(show_json(doc))
        return 0
    theorems = [(t.key, t.label()) for t in exp.theorems]
    for line in show_lines(doc, exp.title, theorems):
        _say(line)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``fltheory`` console script; returns the exit code."""
    os.environ.setdefault("MPLBACKEND", "Agg")
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    args = build_parser().parse_args(argv)
    if args.command == "falsify":
        return int(args.handler(args))
    if args.command == "theorems":     # the theorem registry needs no experiments package
        try:
            return int(args.handler(args, _say))
        except BrokenPipeError:        # e.g. `fltheory theorems | head`
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
            return 0
    # The experiments package lives beside fltheory in a source checkout.
    repo_root = str(Path(__file__).resolve().parent.parent)
    if repo_root not in sys.path:
        sys.path.append(repo_root)
    from experiments._framework import DEFAULT_PACKAGE, PACKAGE_ENV, ExperimentDefinitionError, discover
    package = args.package or os.environ.get(PACKAGE_ENV) or DEFAULT_PACKAGE
    try:
        registry = discover(package)
    except ExperimentDefinitionError as exc:
        _say(f"error: {exc}")
        return 2
    commands = {"reproduce": _cmd_reproduce, "list": _cmd_list, "show": _cmd_show}
    try:
        return commands[args.command](args, registry, package)
    except BrokenPipeError:            # e.g. `fltheory show NAME | head`
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
