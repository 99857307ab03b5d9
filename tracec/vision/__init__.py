"""``tracec.vision``: a subset of torchvision 0.28 on tracec (transforms,
datasets, models, utils, ops).  ``tracec.install_as_torch()`` makes
``import torchvision`` resolve here.  PIL images need Pillow (the ``vision``
extra); tensors, models and ops do not."""
from tracec.vision import datasets, io, models, ops, transforms, utils

__version__ = "0.28.0"

_image_backend = "PIL"


def set_image_backend(backend):
    global _image_backend
    if backend not in ("PIL", "accimage"):
        raise ValueError(f"Invalid backend '{backend}'. Options are 'PIL' and 'accimage'")
    if backend == "accimage":
        raise ValueError("tracec.vision supports the 'PIL' image backend only")
    _image_backend = backend


def get_image_backend():
    return _image_backend


__all__ = ["datasets", "io", "models", "ops", "transforms", "utils", "set_image_backend",
           "get_image_backend"]
