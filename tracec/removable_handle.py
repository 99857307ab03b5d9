"""``torch.utils.hooks.RemovableHandle``, what every ``register_*_hook``
(modules, optimizers) returns, with PyTorch's behaviour: ids from one
counter, ``remove()`` deletes the id from the hooks table and from any
``extra_dict`` tables (a no-op once removed or once the tables are gone),
a context manager that removes on exit, and pickling as ``(table, id,
extras)``.

PyTorch keeps weak references to the tables (they are ``OrderedDict``s);
tracec's may be plain ``dict``s, which take no weak reference, so those are
held strongly (a handle then keeps its table alive, nothing else).

It lives at the bottom of the layers (the autograd engine's node hooks
return it too); ``tracec.utils.hooks`` is its public name."""
from __future__ import annotations

import weakref
from collections import OrderedDict
from typing import Any

__all__ = ["RemovableHandle"]


def _ref(d):
    try:
        return weakref.ref(d)
    except TypeError:
        return lambda: d


#: ``[id]`` while a call is traced: the first handle id registered during
#: it (``tracing.record``); modules' guards leave out hooks from there on
#: (registered by the call itself), else None.
TRACE_FLOOR: list = [None]


class RemovableHandle:
    r"""A handle which provides the capability to remove a hook.

    Args:
        hooks_dict (dict): A dictionary of hooks, indexed by hook ``id``.
        extra_dict (Union[dict, List[dict]]): An additional dictionary or list of
            dictionaries whose keys will be deleted when the same keys are
            removed from ``hooks_dict``.
    """

    id: int
    next_id: int = 0

    def __init__(self, hooks_dict: Any, *, extra_dict: Any = None) -> None:
        self.hooks_dict_ref = _ref(hooks_dict)
        self.id = RemovableHandle.next_id
        RemovableHandle.next_id += 1
        self.extra_dict_ref: tuple = ()
        if isinstance(extra_dict, dict):
            self.extra_dict_ref = (_ref(extra_dict),)
        elif isinstance(extra_dict, list):
            self.extra_dict_ref = tuple(_ref(d) for d in extra_dict)

    def remove(self) -> None:
        for ref in (self.hooks_dict_ref,) + self.extra_dict_ref:
            d = ref()
            if d is not None and self.id in d:
                del d[self.id]

    def __getstate__(self):
        return (self.hooks_dict_ref(), self.id, tuple(ref() for ref in self.extra_dict_ref))

    def __setstate__(self, state) -> None:
        # a table that was gone when pickled: a dead reference
        self.hooks_dict_ref = _ref(state[0]) if state[0] is not None else \
            weakref.ref(OrderedDict())
        self.id = state[1]
        RemovableHandle.next_id = max(RemovableHandle.next_id, self.id + 1)
        self.extra_dict_ref = () if len(state) < 3 or state[2] is None else \
            tuple(_ref(d) for d in state[2] if d is not None)

    def __enter__(self) -> "RemovableHandle":
        return self

    def __exit__(self, type: Any, value: Any, tb: Any) -> None:
        self.remove()


RemovableHandle.__module__ = "tracec.utils.hooks"   # (its public name: pickles say so)
