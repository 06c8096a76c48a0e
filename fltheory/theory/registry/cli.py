"""``fltheory theorems [--paper P] [--status S] [--out DIR] [--long]``: print the registry.

One line per item: key, verdict (status and tightness), printed number, statement.
``--long`` adds hypotheses, code, tests, experiment checks, coverage and the
verdict's detail.  Verdicts are read from the experiments' results in ``--out``
(``figures`` by default).  Exit codes: 0, or 2 for an unknown paper / status, an ``--out`` that
is not a directory or a malformed results file there.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable

from ...errors import InvalidHyperparameterError, ResultsFileError
from .catalog import items
from .model import VERDICT_STATUSES
from .papers import PAPERS
from .verdicts import verdicts

__all__ = ["add_parser", "handler"]


def add_parser(sub: argparse._SubParsersAction) -> argparse.ArgumentParser:  # type: ignore[type-arg,unused-ignore]
    """Register the ``theorems`` subcommand on an argparse sub-parser collection."""
    p = sub.add_parser("theorems", help="every checkable item of the seed papers and its last verdict")
    p.add_argument("--paper", default=None, choices=sorted(PAPERS), help="only this paper version")
    p.add_argument("--status", default=None, choices=VERDICT_STATUSES, help="only items with this verdict")
    p.add_argument("--out", default="figures", help="directory of experiment results (default: figures)")
    p.add_argument("--long", action="store_true", help="hypotheses, code, tests, checks and details")
    p.set_defaults(handler=handler)
    return p


def handler(args: argparse.Namespace, echo: Callable[[str], None] | None = None) -> int:
    """Print the selected items; returns the exit code."""
    say = echo or (lambda s: print(s, file=sys.stdout))
    chosen = items(args.paper)
    try:
        v = verdicts(chosen, args.out)
    except (InvalidHyperparameterError, ResultsFileError) as exc:
        print(f"fltheory theorems: error: {exc}", file=sys.stderr)
        return 2
    shown = [it for it in chosen if args.status is None or v[it.key].status == args.status]
    by_paper: dict[str, int] = {}
    for it in shown:
        if by_paper.get(it.paper) is None:
            paper = PAPERS[it.paper]
            say(f"== {paper.citation()}" + (f" [seed {paper.seed}]" if paper.seed else " [not a seed]"))
        by_paper[it.paper] = by_paper.get(it.paper, 0) + 1
        say(f"{it.key:<34} {v[it.key].short():<24} {it.number}: {it.statement}")
        if args.long:
            for label, values in (("hypotheses", it.hypotheses), ("code", it.code), ("tests", it.tests),
                                  ("checks", it.checks)):
                if values:
                    say(f"    {label}: " + "; ".join(values))
            say(f"    coverage: {it.coverage}" + (f" (before: "
                                                  f"{it.coverage_before})" if it.coverage_before else "")
                + (f"; {it.note}" if it.note else ""))
            say(f"    verdict [{v[it.key].source}]: {v[it.key].detail}")
    counts = {s: sum(v[it.key].status == s for it in shown) for s in VERDICT_STATUSES}
    say(f"{len(shown)} item(s): " + ", ".join(f"{n} {s}" for s, n in counts.items()))
    return 0
