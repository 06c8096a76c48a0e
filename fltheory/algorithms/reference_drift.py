"""Reference loops of the drift-correcting algorithms (SCAFFOLD, FedDyn,
FedElasticNet) and EFL; see ``reference.py`` for the conventions."""
