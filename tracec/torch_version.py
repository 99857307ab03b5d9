"""``torch.torch_version``: ``TorchVersion``, the ``str`` that
``torch.__version__`` is, which compares as a version with strings
(``torch.__version__ >= '1.5.0'``), tuples (``>= (2, 0)``) and version
objects (``packaging.version.Version``), and falls back to comparing as a
string where the other side is no version (``'parrot'``).

``tracec.__version__`` is the PyTorch version whose API tracec follows
(2.13.0), with tracec's own version as its local label: programs branch on
``torch.__version__`` to pick the code path of their PyTorch, and under
``tracec run`` they see tracec as ``torch``.  tracec's own version is
``tracec.version.__version__``.
"""
from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from tracec.version import __version__ as _tracec_version

__all__ = ["TorchVersion"]

#: the PyTorch release whose API tracec follows
TORCH_API_VERSION = "2.13.0"

# PEP 440 (the part the ordering needs): epoch, release, pre, post, dev, local
_VERSION = re.compile(
    r"^\s*v?(?:(?P<epoch>\d+)!)?(?P<release>\d+(?:\.\d+)*)"
    r"(?:[-_.]?(?P<pre_l>a|b|c|rc|alpha|beta|pre|preview)[-_.]?(?P<pre_n>\d+)?)?"
    r"(?:-(?P<post_n1>\d+)|[-_.]?(?P<post_l>post|rev|r)[-_.]?(?P<post_n2>\d+)?)?"
    r"(?:[-_.]?(?P<dev_l>dev)[-_.]?(?P<dev_n>\d+)?)?"
    r"(?:\+(?P<local>[a-z0-9]+(?:[-_.][a-z0-9]+)*))?\s*$", re.I)
_PRE = {"a": "a", "alpha": "a", "b": "b", "beta": "b", "c": "rc", "rc": "rc", "pre": "rc",
        "preview": "rc"}
_INF = float("inf")


class InvalidVersion(ValueError):
    """Not a PEP 440 version."""


def _key(text: str):
    """The ordering key of PEP 440 version ``text`` (packaging's)."""
    m = _VERSION.match(text)
    if m is None:
        raise InvalidVersion(f"Invalid version: {text!r}")
    release = tuple(int(p) for p in m["release"].split("."))
    while len(release) > 1 and release[-1] == 0:
        release = release[:-1]
    pre = (_PRE[m["pre_l"].lower()], int(m["pre_n"] or 0)) if m["pre_l"] else None
    post = m["post_n1"] or m["post_n2"] or ("0" if m["post_l"] else None)
    dev = int(m["dev_n"] or 0) if m["dev_l"] else None
    if pre is None and post is None and dev is not None:
        pre_k = (-_INF,)        # 1.0.dev0 sorts before 1.0a0
    elif pre is None:
        pre_k = (_INF,)
    else:
        pre_k = (0, pre[0], pre[1])
    post_k = (-_INF,) if post is None else (int(post),)
    dev_k = (_INF,) if dev is None else (dev,)
    # no local label sorts first; numeric segments after alphanumeric ones
    local_k = () if m["local"] is None else tuple(
        (1, int(p), "") if p.isdigit() else (0, 0, p.lower()) for p in re.split(r"[-_.]", m["local"]))
    return int(m["epoch"] or 0), release, pre_k, post_k, dev_k, local_k


def _other_key(inp: Any):
    if isinstance(inp, str):
        return _key(inp)
    if isinstance(inp, Iterable):
        # (1, 20, 1) -> "1.20.1"
        return _key(".".join(str(item) for item in inp))
    if hasattr(inp, "release") and hasattr(inp, "public"):   # packaging's Version
        return _key(str(inp))
    raise InvalidVersion(inp)


class TorchVersion(str):
    """A string with magic powers to compare to both Version and iterables!"""

    __slots__ = ()

    def _cmp_wrapper(self, cmp: Any, method: str) -> bool:
        try:
            return getattr(_key(self), method)(_other_key(cmp))
        except InvalidVersion:
            # a string that is no version ('parrot'): compare as strings
            return getattr(str, method)(self, cmp)

    def __gt__(self, other): return self._cmp_wrapper(other, "__gt__")
    def __lt__(self, other): return self._cmp_wrapper(other, "__lt__")
    def __ge__(self, other): return self._cmp_wrapper(other, "__ge__")
    def __le__(self, other): return self._cmp_wrapper(other, "__le__")
    def __eq__(self, other): return self._cmp_wrapper(other, "__eq__")
    __hash__ = str.__hash__


__version__ = TorchVersion(f"{TORCH_API_VERSION}+tracec.{_tracec_version}")
