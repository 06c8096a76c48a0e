"""Build throw-away experiment packages in a temporary directory for the
framework tests (a fresh package name each time, so nothing is cached)."""

from __future__ import annotations

import importlib
import shutil
import sys
import textwrap
import uuid
from pathlib import Path

#: A valid experiment: sample mean of n standard normals against 3 sigma/sqrt(n).
GOOD = '''
import numpy as np
from fltheory.reproduce import Check, Theorem
from fltheory import plotting

NAME = "{name}"
TITLE = "Fake: the sample mean stays within 4 sigma / sqrt(n)"
THEOREMS = [Theorem("clt", "test suite", "Fake theorem", "eq. 1"),
            Theorem("never", "test suite", "Unmeasurable statement")]
QUICK = {{"n": {n}, "reps": 3}}
FULL = {{"n": 4000, "reps": 3}}
EXPECTED_AXES = {axes}

def run(config, rng):
    x = rng.standard_normal((config["reps"], config["n"]))
    means = x.mean(axis=1)
    return {{"n": config["n"], "means": means, "first": x[0, :50]}}

def checks(results):
    bound = 4.0 / np.sqrt(results["n"])
    ratio = float(np.max(np.abs(results["means"])) / bound)
    status = "holds" if ratio <= 1 else "violated"
    return [Check("clt", status, ratio, "" if status == "holds" else f"n={{results['n']}}"),
            Check("never", "not checkable", None, "no bound to evaluate")]

def macros(results):
    return {{"worst_ratio": float(np.max(np.abs(results["means"]))) * np.sqrt(results["n"]) / 4.0,
            "n_2": results["n"]}}

def plot(results):
    fig, axes = plotting.figure(1, {axes})
    axes[0].plot(results["first"], marker="o")
    axes[0].set_xlabel("sample index")
    axes[0].set_ylabel("value (a.u.)")
    for ax in axes[1:]:
        ax.plot(np.abs(results["means"]) * np.sqrt(results["n"]) / 4.0, marker="s")
        plotting.ratio_axis(ax)
        ax.set_xlabel("repetition")
    return fig
'''

FAILING = '''
from fltheory.reproduce import Check, Theorem
NAME = "{name}"
TITLE = "Fails on purpose"
THEOREMS = [Theorem("t", "test suite", "Theorem 0")]
QUICK = {{}}
FULL = {{}}
EXPECTED_AXES = 1
def run(config, rng):
    raise RuntimeError("boom from {name}")
def checks(results):
    return []
def macros(results):
    return {{}}
def plot(results):
    raise AssertionError("not reached")
'''


def good(name: str, n: int = 200, axes: int = 2) -> str:
    return GOOD.format(name=name, n=n, axes=axes)


def failing(name: str) -> str:
    return FAILING.format(name=name)


def make_package(root: Path, modules: dict[str, str], package: str | None = None) -> str:
    """Write ``root/<package>/{__init__,<name>}.py`` and return the package name.
    ``root`` must be on sys.path (use monkeypatch.syspath_prepend)."""
    package = package or f"fakeexp_{uuid.uuid4().hex[:10]}"
    pkg_dir = root / package
    pkg_dir.mkdir(parents=True, exist_ok=True)
    (pkg_dir / "__init__.py").write_text('"""Fake experiments."""\n')
    for name, source in modules.items():
        (pkg_dir / f"{name}.py").write_text(textwrap.dedent(source))
    forget(root, package)
    return package


def rewrite(root: Path, package: str, name: str, source: str) -> None:
    """Replace one module's source and make the next import see it."""
    (root / package / f"{name}.py").write_text(textwrap.dedent(source))
    forget(root, package)


def forget(root: Path, package: str) -> None:
    for mod in [m for m in sys.modules if m == package or m.startswith(package + ".")]:
        del sys.modules[mod]
    shutil.rmtree(root / package / "__pycache__", ignore_errors=True)
    importlib.invalidate_caches()
