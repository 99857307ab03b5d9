"""A tiny training package run as ``python -m toytrain`` (its __main__)."""
__version__ = "0.1"
