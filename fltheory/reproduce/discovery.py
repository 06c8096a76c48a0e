"""Finding experiment modules: the bundled ones and a user's own package.

The bundled experiments live in the repository's top-level ``experiments/``
folder but are imported under the name :data:`DEFAULT_PACKAGE`
(``fltheory_experiments``), never as ``experiments``: a project or notebook
directory with an ``experiments/`` folder of its own on ``sys.path`` (or as
the working directory) cannot shadow them.  In a source checkout (plain or
``pip install -e``) the folder beside the imported ``fltheory`` package is
loaded by file path under that name; a regular ``pip install .`` installs it
as the package ``fltheory_experiments`` (``[tool.setuptools.package-dir]`` in
``pyproject.toml``).

A user's own experiments package is chosen with ``--package PKG`` or the
environment variable :data:`PACKAGE_ENV`; it is imported by its dotted name.
Every module of the package whose name does not start with ``_`` is an
experiment.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import pkgutil
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

from fltheory import _import_stamps
from fltheory.errors import ExperimentDefinitionError

from .protocol import Experiment, validate_module

__all__ = [
    "DEFAULT_PACKAGE",
    "PACKAGE_ENV",
    "bundled_experiments_dir",
    "discover",
    "import_experiments_package",
    "load_experiment",
]

DEFAULT_PACKAGE = "fltheory_experiments"
PACKAGE_ENV = "FLTHEORY_EXPERIMENTS"


def bundled_experiments_dir() -> Path | None:
    """The ``experiments/`` folder of the source checkout holding the imported
    ``fltheory`` (None when fltheory is a regular install).  The folder counts
    only when its parent is fltheory's own project (a ``pyproject.toml``
    naming ``fltheory``), so no unrelated ``experiments`` folder is taken."""
    import fltheory
    project = Path(fltheory.__file__).resolve().parent.parent
    folder = project / "experiments"
    if not (folder / "__init__.py").is_file():
        return None
    try:
        meta = (project / "pyproject.toml").read_text(encoding="utf-8")
    except OSError:
        return None
    return folder if 'name = "fltheory"' in meta else None


def _load_bundled() -> ModuleType:
    loaded = sys.modules.get(DEFAULT_PACKAGE)
    if loaded is not None:
        return loaded
    folder = bundled_experiments_dir()
    if folder is None:                 # a regular install: the package is on sys.path
        return importlib.import_module(DEFAULT_PACKAGE)
    spec = importlib.util.spec_from_file_location(
        DEFAULT_PACKAGE, folder / "__init__.py", submodule_search_locations=[str(folder)])
    if spec is None or spec.loader is None:      # pragma: no cover - a file that exists always has a spec
        raise ImportError(f"cannot load {folder / '__init__.py'}")
    module = importlib.util.module_from_spec(spec)
    _import_stamps.record(DEFAULT_PACKAGE, folder / "__init__.py")    # loaded past the finders
    sys.modules[DEFAULT_PACKAGE] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[DEFAULT_PACKAGE]
        raise
    return module


def _is_dotted_name(text: str) -> bool:
    return bool(text) and all(part.isidentifier() for part in text.split("."))


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def import_experiments_package(package: str | ModuleType | None = None) -> ModuleType:
    """The experiments package: ``package`` (a module or a dotted name), else
    ``$FLTHEORY_EXPERIMENTS``, else the bundled experiments.  Anything else than a module, a
    non-empty dotted name or None raises ExperimentDefinitionError."""
    if isinstance(package, ModuleType):
        return package
    if package is not None and (not isinstance(package, str) or not _is_dotted_name(package)):
        raise ExperimentDefinitionError(f"package must be a module, a dotted module name (str) or None, "
                                        f"got {_short(package)} ({type(package).__name__})")
    name = package or os.environ.get(PACKAGE_ENV) or DEFAULT_PACKAGE
    try:
        return _load_bundled() if name == DEFAULT_PACKAGE else importlib.import_module(name)
    except ImportError as exc:
        raise ExperimentDefinitionError(
            f"cannot import the experiments package {name!r}: {exc}") from exc


def discover(package: str | ModuleType | None = None) -> list[Experiment]:
    """Import and validate every experiment module of the experiments package
    (see :func:`import_experiments_package`).

    Returns experiments sorted by name; raises one
    :class:`~fltheory.errors.ExperimentDefinitionError` listing every broken
    module (import errors included, with their message).
    """
    pkg = import_experiments_package(package)
    paths = getattr(pkg, "__path__", None)
    if paths is None:
        raise ExperimentDefinitionError(f"{pkg.__name__} is a module, expected a package")
    found: list[Experiment] = []
    problems: list[str] = []
    for info in sorted(pkgutil.iter_modules(paths), key=lambda i: i.name):
        if info.name.startswith("_"):
            continue
        full_name = f"{pkg.__name__}.{info.name}"
        try:
            module = importlib.import_module(full_name)
        except Exception as exc:
            problems.append(f"experiment module {full_name} failed to import: "
                            f"{type(exc).__name__}: {exc}")
            continue
        try:
            found.append(validate_module(module))
        except ExperimentDefinitionError as exc:
            problems.append(str(exc))
    if problems:
        raise ExperimentDefinitionError("invalid experiments:\n" + "\n".join(problems))
    return found


def load_experiment(module_name: str, sys_path_entry: str | None = None) -> Experiment:
    """Import one experiment module by dotted name (in a worker process).
    Bundled experiments are loaded as in :func:`discover`; for a user's
    package, ``sys_path_entry`` (the directory holding it) is put on
    ``sys.path`` first if it is not there.  ``module_name`` must be a dotted module name and
    ``sys_path_entry`` None or an existing directory (ExperimentDefinitionError otherwise, and
    when the module cannot be imported)."""
    if not isinstance(module_name, str) or not _is_dotted_name(module_name):
        raise ExperimentDefinitionError(f"module_name must be a dotted module name (str), got {_short(module_name)}")
    if sys_path_entry is not None:
        if not isinstance(sys_path_entry, str) or not sys_path_entry or "\0" in sys_path_entry \
                or not Path(sys_path_entry).is_dir():
            raise ExperimentDefinitionError(f"sys_path_entry must be None or the path (str) of an existing "
                                            f"directory, got {_short(sys_path_entry)}")
    if module_name.split(".", 1)[0] == DEFAULT_PACKAGE:
        _load_bundled()
    elif sys_path_entry and sys_path_entry not in sys.path:
        sys.path.insert(0, sys_path_entry)
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise ExperimentDefinitionError(f"cannot import the experiment module {module_name!r}: "
                                        f"{type(exc).__name__}: {exc}") from exc
    return validate_module(module)
