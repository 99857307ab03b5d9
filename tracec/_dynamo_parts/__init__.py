"""Submodules of ``tracec._dynamo`` (``torch._dynamo.X``), found through its ``__path__``."""
