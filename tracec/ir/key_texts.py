"""Exact texts of the attributes a trace makes from Python keys, for the
disk cache's fingerprint (``tracec.backends.cache.fingerprint``).

A trace's locations, static tensor types, primitive parameters and
argument names are made from Python values (``file_loc``'s
``(file, line, col)``, ``tensor_type``'s shape and dtype, ``encode_param``'s
key, ``set_arg_name``'s name) and shared.  Describing each attribute from
its xDSL parameters at the first reuse of a trace (every warm start) costs
several microseconds; the text of the key it was made from, kept here when
the attribute is made, costs nothing then.

Invariant: ``TEXTS[id(a)] == (a, text)`` where ``text`` identifies ``a``
exactly: equal texts only for equal attributes.  Each text starts with
``\\x04`` and a letter for its maker, then the ``repr`` of an exact key, so
it never equals the description ``attribute_text`` gives (which starts
with a module name).  Equal attributes from other makers may have other
texts (a cache miss, never a wrong hit).  The entry keeps ``a`` alive, so
its id is not reused while it is here.
"""
from __future__ import annotations

#: ``id(attribute) -> (attribute, text)``.
TEXTS: dict = {}
#: Entries kept at most (then all are dropped: a later fingerprint
#: describes those attributes from their parameters instead).
LIMIT = 16384


def register(attr, tag: str, key) -> None:
    """Record ``attr``'s text: made by maker ``tag`` from ``key``, whose
    ``repr`` identifies it exactly."""
    if len(TEXTS) > LIMIT:
        TEXTS.clear()
    TEXTS[id(attr)] = (attr, f"\x04{tag}{key!r}")
