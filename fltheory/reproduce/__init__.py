"""The reproduce framework: experiment protocol, discovery, cache keys, runner.

Experiments are plug-in modules (the bundled ones in the repository's
``experiments/`` folder, imported as ``fltheory_experiments``); an experiment
module imports what it needs from here::

    from fltheory.reproduce import Check, Theorem

and its ``run(config, rng, progress)`` receives the progress callback.  The
``fltheory reproduce | list | show`` commands are built on :func:`reproduce`,
:func:`experiment_status` and :func:`read_stored`.
"""

from __future__ import annotations

from .discovery import (
                        DEFAULT_PACKAGE,
                        PACKAGE_ENV,
                        bundled_experiments_dir,
                        discover,
                        import_experiments_package,
                        load_experiment,
)
from .keys import import_closure, key_changes, result_key
from .overrides import apply_overrides, load_config_file, parse_assignments
from .progress import Progress, ProgressEvent, silent_progress
from .protocol import STATUSES, Check, Experiment, ExperimentDefinitionError, Theorem, validate_module
from .runner import Outcome, is_fresh, reproduce, results_directory
from .seeding import experiment_rng
from .status import ModeStatus, experiment_status
from .store import MODES, StoredResult, read_stored, result_dir
from .summary import format_macro_value, macro_name, overall_status

__all__ = [
                        "DEFAULT_PACKAGE",
                        "MODES",
                        "PACKAGE_ENV",
                        "STATUSES",
                        "Check",
                        "Experiment",
                        "ExperimentDefinitionError",
                        "ModeStatus",
                        "Outcome",
                        "Progress",
                        "ProgressEvent",
                        "StoredResult",
                        "Theorem",
                        "apply_overrides",
                        "bundled_experiments_dir",
                        "discover",
                        "experiment_rng",
                        "experiment_status",
                        "format_macro_value",
                        "import_closure",
                        "import_experiments_package",
                        "is_fresh",
                        "key_changes",
                        "load_config_file",
                        "load_experiment",
                        "macro_name",
                        "overall_status",
                        "parse_assignments",
                        "read_stored",
                        "reproduce",
                        "result_dir",
                        "result_key",
                        "results_directory",
                        "silent_progress",
                        "validate_module",
]
