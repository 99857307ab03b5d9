"""The tracec version (part of every disk-cache key)."""
__version__ = "0.1.0"
# torch.version's fields scripts print: tracec is built for no GPU toolkit.
cuda = None
hip = None
debug = False
git_version = "unknown"
