"""``torch.jit.annotations``: the typing names TorchScript code imports from
there (``from torch.jit.annotations import List, Tuple``).

tracec runs such code as Python, so these are ``typing``'s own objects; the
``BroadcastingListN`` aliases are TorchScript's "an int or a list of N ints"
hints, which TorchScript alone reads: to Python, subscripting one gives
``None``, as PyTorch's does.
"""
from typing import Any, Dict, List, Optional, Tuple, Union



class BroadcastingListCls:
    def __getitem__(self, types):
        return None


BroadcastingList1 = BroadcastingList2 = BroadcastingList3 = BroadcastingListCls()

__all__ = ["Any", "List", "BroadcastingList1", "BroadcastingList2", "BroadcastingList3",
           "Tuple", "Dict", "Optional", "Union"]
