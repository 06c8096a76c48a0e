"""``fltheory falsify``: search for a counterexample to a registered bound.

::

    fltheory falsify NAME [--space FILE] [--budget N] [--processes N | --scheduler ADDR]
                          [--out DIR] [--seed S] [--timeout T]
    fltheory falsify --list

Writes ``DIR/results.parquet`` (one row per evaluated instance), ``worst.json``
and, when the bound fails, ``counterexample.json`` and ``test_counterexample.py``.
Exit codes: 0 done (a violation is a finding, not a failure), 2 bad input or
an unreachable cluster.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from pathlib import Path
from typing import Any

__all__ = ["add_parser", "run"]


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Register the ``falsify`` subcommand on an argparse subparsers object."""
    p = subparsers.add_parser("falsify", help="search for a counterexample to a registered bound")
    p.add_argument("name", nargs="?", metavar="NAME", help="registered bound (see --list)")
    p.add_argument("--list", action="store_true", help="list the registered bounds and exit")
    p.add_argument("--space", default=None, metavar="FILE",
                   help="JSON space {'params': [...]} replacing the bound's default space")
    p.add_argument("--budget", type=int, default=1000, help="maximum evaluations (default: 1000)")
    where = p.add_mutually_exclusive_group()
    where.add_argument("--processes", type=int, default=None, help="local Dask cluster of N worker processes")
    where.add_argument("--scheduler", default=None, metavar="ADDR", help="existing Dask scheduler address")
    p.add_argument("--timeout", type=float, default=10.0, help="seconds to reach the scheduler (default: 10)")
    p.add_argument("--out", default=None, metavar="DIR", help="output directory (default: falsify/NAME)")
    p.add_argument("--seed", type=int, default=0, help="master seed (default: 0)")
    p.set_defaults(handler=run)
    return p


def _say(text: str = "") -> None:
    from tqdm.auto import tqdm
    tqdm.write(text, file=sys.stdout)


def _quiet_dask() -> None:
    """Dask configures its loggers at INFO when imported: one line per worker
    event would bury the command's output.  Keep warnings and errors."""
    try:
        import distributed  # noqa: F401  (sets up the loggers to quieten)
    except ImportError:
        return
    for name in list(logging.root.manager.loggerDict):
        if name == "distributed" or name.startswith("distributed."):
            logging.getLogger(name).setLevel(logging.WARNING)
    # a worker slow to exit on a loaded machine is killed at shutdown: not the user's concern
    logging.getLogger("distributed.nanny").setLevel(logging.ERROR)


def run(args: argparse.Namespace) -> int:
    """Handler of ``fltheory falsify``; returns the exit code."""
    from ..errors import FLTheoryError
    from . import get_target, registered_targets, search, space_from_dict
    if args.processes is not None or args.scheduler is not None:
        _quiet_dask()
    if args.list or not args.name:
        targets = registered_targets()
        width = max(len(n) for n in targets)
        for name, t in sorted(targets.items()):
            _say(f"{name:<{width}}  {t.reference}")
        if not args.list:
            _say("error: give NAME (one of the above)")
            return 2
        return 0
    try:
        target = get_target(args.name)
        space = None
        if args.space is not None:
            try:
                doc = json.loads(Path(args.space).read_text())
            except (OSError, json.JSONDecodeError) as exc:
                _say(f"error: cannot read the space file {args.space!r}: {exc}")
                return 2
            space = space_from_dict(doc)
        out = args.out if args.out is not None else str(Path("falsify") / target.name)
        res = search(target, space, budget=args.budget, seed=args.seed, processes=args.processes,
                     scheduler=args.scheduler, out=out, timeout=args.timeout)
    except FLTheoryError as exc:
        _say(f"error: {exc}")
        return 2
    _say(f"{target.name}: {target.reference}")
    _say(f"evaluated {res.n_evaluated}, counted {res.n_counted}, hypothesis violated {res.n_invalid}, "
         f"errors {res.n_errors}, bound violated {res.n_violations}")
    if res.n_errors:
        first = next(r for r in res.rows if r["error"] is not None)
        _say(f"first error (index {first['index']}, {first['point']}): {first['error']}")
    if res.worst is not None:
        _say(f"worst measured/bound = {res.worst_ratio:.6g} at {res.worst['point']} "
             f"(seed {res.worst['seed']})")
    if res.counterexample is not None:
        ce = res.counterexample
        _say(f"COUNTEREXAMPLE (smallest found): ratio {ce['ratio']:.6g} at {ce['point']} "
             f"(seed {ce['seed']}); "
             f"pytest snippet in {Path(out) / 'test_counterexample.py'}")
    else:
        _say("no counterexample found")
    _say(f"table: {Path(out) / 'results.parquet'}")
    return 0
