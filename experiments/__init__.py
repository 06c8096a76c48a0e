"""Theorem-check experiments, one module per check, run by ``fltheory reproduce``.

Every module here whose name does not start with ``_`` is an experiment; the
protocol it follows is in ``_framework.py`` and explained, with a complete
minimal example, in ``README.md``.
"""
