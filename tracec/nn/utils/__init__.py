"""``tracec.nn.utils``: PyTorch's ``torch.nn.utils``: gradient clipping and
norms, parameter/vector conversion, variable-length sequences (``rnn``),
weight and spectral normalization (old hook API and ``parametrizations``),
``parametrize``, conv/linear + batch-norm fusion and ``skip_init``.

Each family lives in its own submodule, named as PyTorch names it, so
``torch.nn.utils.X.Y`` imports resolve the same way.
"""
from tracec.nn.utils import rnn  # noqa: F401  (first: the RNN layers import it)
from tracec.nn.utils.clip_grad import (clip_grad_norm, clip_grad_norm_,  # noqa: F401
                                       clip_grad_value_, clip_grads_with_norm_,
                                       get_total_norm)
from tracec.nn.utils.convert_parameters import (parameters_to_vector,  # noqa: F401
                                                vector_to_parameters)
from tracec.nn.utils.fusion import (fuse_conv_bn_eval, fuse_conv_bn_weights,  # noqa: F401
                                    fuse_linear_bn_eval, fuse_linear_bn_weights)
from tracec.nn.utils.init import skip_init  # noqa: F401
from tracec.nn.utils import clip_grad, convert_parameters, fusion  # noqa: F401
from tracec.nn.utils.weight_norm import remove_weight_norm, weight_norm  # noqa: F401
from tracec.nn.utils.spectral_norm import remove_spectral_norm, spectral_norm  # noqa: F401
from tracec.nn.utils import parametrize, parametrizations  # noqa: F401,E402
from tracec.nn.utils import stateless  # noqa: F401,E402
from tracec.nn.utils.memory_format import (convert_conv2d_weight_memory_format,  # noqa: F401,E402
                                           convert_conv3d_weight_memory_format)
from tracec.nn.utils import memory_format  # noqa: F401,E402


class _FunctionsOverSubmodules(type(rnn)):
    """This package, keeping its functions over the same-named submodules
    (``spectral_norm``, ``weight_norm``) as PyTorch's does: importing the
    submodule under another name (``import torch.nn.utils.spectral_norm as
    spectral_norm`` through the ``torch`` alias, SPADE's and other GANs'
    line) makes the import system set it on its parent, which would
    replace the function that PyTorch's import gives."""

    def __setattr__(self, name, value):
        old = self.__dict__.get(name)
        if isinstance(value, type(rnn)) and callable(old) and not isinstance(old, type(rnn)) \
                and value.__name__ == f"{__name__}.{name}":
            return
        super().__setattr__(name, value)


import sys as _sys  # noqa: E402

_sys.modules[__name__].__class__ = _FunctionsOverSubmodules
