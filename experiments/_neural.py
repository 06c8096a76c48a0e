"""What the neural experiments share beyond :mod:`fltheory.nn.training`: the
check that every run learned (ended above the majority-class accuracy), and
the macro names of the runs' final accuracies."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence

from fltheory.reproduce import Check


def learns_check(final: Mapping[str, float], majority: float, what: str = "final test accuracies") -> Check:
    """"learns": the worst final test accuracy beats always answering the most
    frequent label; value = worst test error / majority error (< 1 holds)."""
    worst = min(final, key=lambda r: final[r])
    return Check("learns", "holds" if final[worst] > majority else "violated", (1 - final[worst]) / (1 - majority),
                 f"majority accuracy {majority:.3f}; {what} " + ", ".join(f"{r} {v:.3f}" for r, v in final.items()))


def run_key(run: str) -> str:
    """A run's name as a macro key: lower case, "." -> "p", every other run of
    non-alphanumerics -> "_" (e.g. "lambda=0.1" -> "lambda_0p1", "FedProx-TE" -> "fedprox_te")."""
    return re.sub(r"[^a-z0-9]+", "_", run.lower().replace(".", "p"))


def final_accuracy_macros(acc: Mapping[str, Sequence[float]], runs: Iterable[str]) -> dict[str, float]:
    """{"final_acc_<run_key>": last accuracy of the run} for every run."""
    return {f"final_acc_{run_key(r)}": float(acc[r][-1]) for r in runs}
