"""perflab: declared database benchmark experiments, run on a managed server, explained."""

__version__ = "0.1.0"
