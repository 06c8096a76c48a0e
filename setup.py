"""Package list for setuptools (all metadata is in pyproject.toml).

The repository's top-level ``experiments/`` folder is installed as the package
``fltheory_experiments``: a generic import name ``experiments`` would be
shadowed by any project or notebook folder of that name.  pyproject.toml
alone cannot combine package discovery with this renaming, hence this file.
"""

from setuptools import find_packages, setup

setup(
    packages=[*find_packages(include=["fltheory", "fltheory.*"]), "fltheory_experiments"],
    package_dir={"fltheory_experiments": "experiments"},
)
