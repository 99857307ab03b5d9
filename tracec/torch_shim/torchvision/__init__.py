"""``import torchvision`` in a child of a ``tracec run`` process:
tracec.vision (``tracec.torch_shim``).  This module replaces itself in
``sys.modules`` by tracec's stand-in, which the importer then returns."""
import importlib
import sys

del sys.modules[__name__]
from tracec.as_torch import install_as_torch  # noqa: E402

install_as_torch()
sys.modules[__name__] = importlib.import_module(__name__)
