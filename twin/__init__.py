"""hpctwin: the simulation core (jobs, machine, event loop, metrics, run folders, CLI)."""
__version__ = "0.1.0"
