"""Theorem-check experiments, one module per check, run by ``fltheory reproduce``.

Every module here whose name does not start with ``_`` is an experiment; the
protocol it follows is in :mod:`fltheory.reproduce.protocol` and explained,
with a complete minimal example, in ``README.md``.  This folder is imported as
the package ``fltheory_experiments`` (never as ``experiments``, which a user's
own folder could shadow); see :mod:`fltheory.reproduce.discovery`.
"""
