"""The tracec version (part of every disk-cache key)."""
__version__ = "0.1.0"
