"""Cache keys: everything that can change an experiment's numbers.

A stored result is *fresh* when its key equals the key computed now.  The key
(:func:`result_key`) holds

* ``mode``, ``seed`` and ``config`` (after overrides) and the ``overrides``;
* ``sources``: a sha256 of the source of every module in the experiment's
  *import closure* within fltheory and the experiments package, by module
  name (so the key does not depend on where the checkout lives).  The closure
  is found statically (:func:`import_closure`): every ``import`` statement of
  the experiment module, at any depth (function-level imports included), and
  recursively of the modules it reaches, plus their parent packages.  A
  module nobody imports does not enter any key; editing a module makes stale
  exactly the experiments that reach it;
* ``versions``: the installed versions of numpy, scipy and every third-party
  distribution the closure imports (found through
  :func:`importlib.metadata.packages_distributions`);
* ``data_source``: the version (or ``"not installed"``) of each distribution
  the experiment declares in ``DATA_PACKAGES``, i.e. which data it reads.

:func:`key_changes` says in words why a stored key differs from the current one.
"""

from __future__ import annotations

import ast
import functools
import hashlib
import sys
from collections.abc import Mapping
from importlib import metadata
from pathlib import Path
from typing import Any

from fltheory.errors import InvalidProblemError
from fltheory.results import to_jsonable

from . import _arguments as arg
from .protocol import Experiment

__all__ = [
    "ALWAYS_VERSIONED",
    "KEY_FORMAT",
    "closure_sources",
    "data_source",
    "import_closure",
    "key_changes",
    "result_key",
    "third_party_versions",
]

KEY_FORMAT = "fltheory-key/2"
#: Distributions whose versions are in every key.
ALWAYS_VERSIONED: tuple[str, ...] = ("numpy", "scipy")
#: Imported distributions that cannot change a number (progress bars, thread pinning).
_NOT_NUMERIC = frozenset({"tqdm", "threadpoolctl"})


def _roots(experiment: Experiment) -> dict[str, Path]:
    """Top-level package name -> directory, for fltheory and the experiment's package."""
    import fltheory
    roots = {"fltheory": Path(fltheory.__file__).resolve().parent}
    top = experiment.module_name.split(".", 1)[0]
    package = sys.modules.get(top)
    paths = list(getattr(package, "__path__", []) or [])
    if paths:
        roots[top] = Path(paths[0]).resolve()
    elif top != experiment.module_name:
        roots[top] = experiment.source_file.parent
    return roots


def _module_file(name: str, roots: Mapping[str, Path]) -> Path | None:
    top, *rest = name.split(".")
    root = roots.get(top)
    if root is None:
        return None
    base = root.joinpath(*rest)
    if (base / "__init__.py").is_file():
        return base / "__init__.py"
    candidate = base.with_name(base.name + ".py") if rest else None
    return candidate if candidate is not None and candidate.is_file() else None


@functools.lru_cache(maxsize=4096)
def _imports_of(path: Path, mtime_ns: int, size: int, module: str, is_package: bool) -> tuple[str, ...]:
    """Dotted names an import statement anywhere in ``path`` may load (a name
    ``pkg.attr`` from ``from pkg import attr`` is a candidate; it counts only
    if it is a module)."""
    del mtime_ns, size                  # cache key only
    tree = ast.parse(path.read_bytes(), filename=str(path))
    package_parts = module.split(".") if is_package else module.split(".")[:-1]
    names: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.extend(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                parts = package_parts[:len(package_parts) - (node.level - 1)]
                base = ".".join(parts + ([node.module] if node.module else []))
            else:
                base = node.module or ""
            if base:
                names.append(base)
                names.extend(f"{base}.{alias.name}" for alias in node.names if alias.name != "*")
    return tuple(names)


def import_closure(experiment: Experiment) -> tuple[dict[str, Path], set[str]]:
    """``(modules, third_party)``: every module (name -> file) of fltheory and
    of the experiments package that importing and running the experiment can
    load, and the top-level names of the other non-standard-library modules
    imported along the way."""
    experiment = arg.experiment("experiment", experiment)
    roots = _roots(experiment)
    modules: dict[str, Path] = {}
    third_party: set[str] = set()
    queue = [experiment.module_name]
    seen: set[str] = set()
    while queue:
        name = queue.pop()
        if name in seen:
            continue
        seen.add(name)
        top = name.split(".", 1)[0]
        if top not in roots:
            if top and top not in sys.stdlib_module_names and top not in sys.builtin_module_names:
                third_party.add(top)
            continue
        parts = name.split(".")
        queue.extend(".".join(parts[:i]) for i in range(1, len(parts)))     # parent packages run first
        path = _module_file(name, roots)
        if path is None:                # an attribute imported from a module, not a module
            continue
        modules[name] = path
        stat = path.stat()
        queue.extend(_imports_of(path, stat.st_mtime_ns, stat.st_size, name, path.name == "__init__.py"))
    return dict(sorted(modules.items())), third_party


def closure_sources(experiment: Experiment) -> dict[str, str]:
    """Module name -> sha256 of its source, over the import closure."""
    experiment = arg.experiment("experiment", experiment)
    modules, _ = import_closure(experiment)
    return {name: hashlib.sha256(path.read_bytes()).hexdigest() for name, path in modules.items()}


@functools.lru_cache(maxsize=1)
def _distributions_of_imports() -> dict[str, tuple[str, ...]]:
    return {k: tuple(v) for k, v in metadata.packages_distributions().items()}


def _version(distribution: str) -> str:
    try:
        return metadata.version(distribution)
    except metadata.PackageNotFoundError:
        return "not installed"


def third_party_versions(experiment: Experiment) -> dict[str, str]:
    """Distribution -> installed version, for numpy, scipy and every
    third-party distribution in the experiment's import closure."""
    experiment = arg.experiment("experiment", experiment)
    _, tops = import_closure(experiment)
    by_import = _distributions_of_imports()
    dists = set(ALWAYS_VERSIONED)
    for top in tops:
        dists.update(by_import.get(top, (top,)))
    return {d: _version(d) for d in sorted(dists) if d.lower() not in _NOT_NUMERIC}


def data_source(experiment: Experiment) -> dict[str, str]:
    """Distribution -> installed version (or "not installed") for each entry of
    the experiment's ``DATA_PACKAGES``."""
    experiment = arg.experiment("experiment", experiment)
    return {d: _version(d) for d in experiment.data_packages}


def result_key(experiment: Experiment, mode: str, seed: int, config: Mapping[str, Any] | None = None,
               overrides: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """What a stored result must match to be fresh (see the module docstring).
    ``config`` defaults to the experiment's configuration of ``mode``.  Bad arguments (not an
    Experiment, a mode not in MODES, a seed not an int in [0, 2**63), a config / overrides not a
    mapping with str keys) raise InvalidProblemError."""
    experiment = arg.experiment("experiment", experiment)
    mode = arg.mode(mode)
    seed = arg.seed(seed)
    cfg = experiment.config(mode) if config is None else arg.mapping("config", config)
    overrides = arg.mapping("overrides", overrides, optional=True)
    return {"format": KEY_FORMAT, "mode": mode, "seed": int(seed),
            "config": to_jsonable(dict(cfg), where=f"{experiment.name} config"),
            "overrides": to_jsonable(dict(overrides or {}), where=f"{experiment.name} overrides"),
            "sources": closure_sources(experiment),
            "versions": third_party_versions(experiment),
            "data_source": data_source(experiment)}


def _dict_changes(what: str, old: Any, new: Mapping[str, Any], limit: int = 4) -> list[str]:
    if not isinstance(old, Mapping):
        return [f"{what} not recorded"]
    lines = [f"{what} {k}: {old.get(k, 'absent')} -> {new.get(k, 'absent')}"
             for k in sorted(set(old) | set(new)) if old.get(k) != new.get(k)]
    return lines[:limit] + ([f"... and {len(lines) - limit} more"] if len(lines) > limit else [])


_KEY_FIELDS = ("format", "mode", "seed", "config", "overrides", "sources", "versions", "data_source")


def _check_current(current: Any) -> None:
    if (not isinstance(current, Mapping) or any(f not in current for f in _KEY_FIELDS)
            or not all(isinstance(current[f], Mapping) for f in ("sources", "versions", "data_source"))):
        raise InvalidProblemError(f"current must be a key made by result_key (a mapping with the fields "
                                  f"{_KEY_FIELDS}), got {arg.short(current)}")


def key_changes(stored: Any, current: Mapping[str, Any]) -> list[str]:
    """Why ``stored`` differs from ``current``, one short phrase per difference
    (empty when they are equal).  ``stored`` may be anything read from a file (not a mapping:
    "no key stored"); ``current`` must be a key made by :func:`result_key` (InvalidProblemError)."""
    _check_current(current)
    if not isinstance(stored, Mapping):
        return ["no key stored"]
    if stored.get("format") != current["format"]:
        return [f"key format {stored.get('format')!r} (current {current['format']!r})"]
    out: list[str] = []
    for field in ("mode", "seed"):
        if stored.get(field) != current[field]:
            out.append(f"{field} {stored.get(field)!r} -> {current[field]!r}")
    for field in ("config", "overrides"):
        if stored.get(field) != current[field]:
            out.append(f"{field} changed")
    old_sources = stored.get("sources")
    if old_sources != current["sources"]:
        if not isinstance(old_sources, Mapping):
            out.append("sources not recorded")
        else:
            changed = sorted(k for k in set(old_sources) | set(current["sources"])
                             if old_sources.get(k) != current["sources"].get(k))
            shown = ", ".join(changed[:4]) + (f" and {len(changed) - 4} more" if len(changed) > 4 else "")
            out.append(f"source of {shown} changed")
    if stored.get("versions") != current["versions"]:
        out.extend(_dict_changes("version of", stored.get("versions"), current["versions"]))
    if stored.get("data_source") != current["data_source"]:
        out.extend(_dict_changes("data source", stored.get("data_source"), current["data_source"]))
    return out
