"""``torch.ao.quantization.fuse_modules`` / ``fuse_modules_qat``: replace a
run of named submodules (conv, bn, relu...) by one fused module, the rest by
``nn.Identity``.

Invariant (PyTorch 2.13's fuse_modules.py and fuser_method_mappings.py):
eval fusion folds a BatchNorm into the conv / linear before it
(``nn.utils.fuse_conv_bn_eval``), so the fused model computes the same
function; QAT fusion (``fuse_modules_qat``) keeps the modules, grouped in a
``torch.ao.nn.intrinsic`` container (``ConvBn2d``...).  The first module's
forward pre-hooks and the last one's forward hooks move to the fused module;
each Identity takes the first module's training flag.  ``inplace=False``
fuses a deep copy.
"""
from __future__ import annotations

import copy

from tracec import nn
from tracec.ao.nn import intrinsic as nni
from tracec.nn.utils.parametrize import type_before_parametrizations
from tracec.torch_names import torch_name

__all__ = ["fuse_known_modules", "fuse_modules", "fuse_modules_qat", "get_fuser_method",
           "fuse_conv_bn", "fuse_conv_bn_relu", "fuse_linear_bn", "fuse_convtranspose_bn"]


def _bn_checks(bn, out, what, bn_name):
    if bn.num_features != out:
        raise AssertionError(what)
    if not bn.affine:
        raise AssertionError(f"Only support fusing {bn_name} with affine set to True")
    if not bn.track_running_stats:
        raise AssertionError(f"Only support fusing {bn_name} with tracking_running_stats set to True")


def fuse_conv_bn(is_qat, conv, bn):
    if conv.training != bn.training:
        raise AssertionError("Conv and BN both must be in the same mode (train or eval).")
    if is_qat:
        _bn_checks(bn, conv.out_channels,
                   "Output channel of Conv2d must match num_features of BatchNorm2d.", "BatchNorm2d")
        cls = {nn.Conv1d: nni.ConvBn1d, nn.Conv2d: nni.ConvBn2d, nn.Conv3d: nni.ConvBn3d}.get(type(conv))
        if cls is None:
            raise NotImplementedError(f"Cannot fuse train modules: {(conv, bn)}")
        return cls(conv, bn)
    return nn.utils.fuse_conv_bn_eval(conv, bn)


def fuse_conv_bn_relu(is_qat, conv, bn, relu):
    if not (conv.training == bn.training == relu.training):
        raise AssertionError("Conv and BN both must be in the same mode (train or eval).")
    if is_qat:
        _bn_checks(bn, conv.out_channels,
                   "Output channel of Conv2d must match num_features of BatchNorm2d", "BatchNorm2d")
        cls = {nn.Conv1d: nni.ConvBnReLU1d, nn.Conv2d: nni.ConvBnReLU2d,
               nn.Conv3d: nni.ConvBnReLU3d}.get(type(conv))
        if cls is None:
            raise NotImplementedError(f"Cannot fuse train modules: {(conv, bn, relu)}")
        return cls(conv, bn, relu)
    cls = {nn.Conv1d: nni.ConvReLU1d, nn.Conv2d: nni.ConvReLU2d, nn.Conv3d: nni.ConvReLU3d}.get(type(conv))
    if cls is None:
        raise NotImplementedError(f"Cannot fuse eval modules: {(conv, bn, relu)}")
    return cls(nn.utils.fuse_conv_bn_eval(conv, bn), relu)


def fuse_linear_bn(is_qat, linear, bn):
    if linear.training != bn.training:
        raise AssertionError("Linear and BN both must be in the same mode (train or eval).")
    if is_qat:
        _bn_checks(bn, linear.out_features,
                   "Output features of Linear must match num_features of BatchNorm1d", "BatchNorm1d")
        return nni.LinearBn1d(linear, bn)
    return nn.utils.fuse_linear_bn_eval(linear, bn)


def fuse_convtranspose_bn(is_qat, convt, bn):
    if convt.training != bn.training:
        raise AssertionError("ConvTranspose and BN both must be in the same mode (train or eval).")
    if is_qat:
        raise Exception("Fusing ConvTranspose+BatchNorm not yet supported in QAT.")
    return nn.utils.fuse_conv_bn_eval(convt, bn, transpose=True)


def _sequential_wrapper2(sequential):
    def fuser_method(is_qat, m1, m2):
        return sequential(m1, m2)
    return fuser_method


_DEFAULT_OP_LIST_TO_FUSER_METHOD = {
    (nn.Conv1d, nn.BatchNorm1d): fuse_conv_bn,
    (nn.Conv1d, nn.BatchNorm1d, nn.ReLU): fuse_conv_bn_relu,
    (nn.Conv2d, nn.BatchNorm2d): fuse_conv_bn,
    (nn.Conv2d, nn.BatchNorm2d, nn.ReLU): fuse_conv_bn_relu,
    (nn.Conv3d, nn.BatchNorm3d): fuse_conv_bn,
    (nn.Conv3d, nn.BatchNorm3d, nn.ReLU): fuse_conv_bn_relu,
    (nn.Conv1d, nn.ReLU): _sequential_wrapper2(nni.ConvReLU1d),
    (nn.Conv2d, nn.ReLU): _sequential_wrapper2(nni.ConvReLU2d),
    (nn.Conv3d, nn.ReLU): _sequential_wrapper2(nni.ConvReLU3d),
    (nn.Linear, nn.BatchNorm1d): fuse_linear_bn,
    (nn.Linear, nn.ReLU): _sequential_wrapper2(nni.LinearReLU),
    (nn.BatchNorm2d, nn.ReLU): _sequential_wrapper2(nni.BNReLU2d),
    (nn.BatchNorm3d, nn.ReLU): _sequential_wrapper2(nni.BNReLU3d),
    (nn.ConvTranspose1d, nn.BatchNorm1d): fuse_convtranspose_bn,
    (nn.ConvTranspose2d, nn.BatchNorm2d): fuse_convtranspose_bn,
    (nn.ConvTranspose3d, nn.BatchNorm3d): fuse_convtranspose_bn,
}


def get_fuser_method(op_list, additional_fuser_method_mapping=None):
    """The function fusing modules of the types ``op_list`` (a tuple)."""
    mapping = {**_DEFAULT_OP_LIST_TO_FUSER_METHOD, **(additional_fuser_method_mapping or {})}
    fuser_method = mapping.get(op_list, None)
    if fuser_method is None:
        raise AssertionError(f"did not find fuser method for: {_types_repr(op_list)} ")
    return fuser_method


def _types_repr(types):
    # PyTorch prints the classes' reprs: <class 'torch.nn.modules.conv.Conv2d'>
    return "(" + ", ".join(f"<class '{_torch_path(t)}'>" for t in types) + \
        ("," if len(types) == 1 else "") + ")"


def _torch_path(t):
    """A class's dotted path as PyTorch names it (``torch_names``)."""
    name = torch_name(t)
    return ".".join(name) if name else f"{t.__module__}.{t.__qualname__}"


def fuse_known_modules(mod_list, is_qat, additional_fuser_method_mapping=None):
    """The fused module followed by Identities, for ``mod_list``."""
    types = tuple(type_before_parametrizations(m) for m in mod_list)
    fuser_method = get_fuser_method(types, additional_fuser_method_mapping)
    fused = fuser_method(is_qat, *mod_list)
    for pre_hook_fn in mod_list[0]._forward_pre_hooks.values():
        fused.register_forward_pre_hook(pre_hook_fn)
    mod_list[0]._forward_pre_hooks.clear()
    for hook_fn in mod_list[-1]._forward_hooks.values():
        fused.register_forward_hook(hook_fn)
    mod_list[-1]._forward_hooks.clear()
    new_mod = [fused]
    for _ in range(1, len(mod_list)):
        identity = nn.Identity()
        identity.training = mod_list[0].training
        new_mod.append(identity)
    return new_mod


def _get_module(model, key):
    cur = model
    for s in key.split("."):
        cur = getattr(cur, s)
    return cur


def _set_module(model, key, module):
    tokens = key.split(".")
    cur = model
    for s in tokens[:-1]:
        cur = getattr(cur, s)
    setattr(cur, tokens[-1], module)


def _fuse_modules_helper(model, modules_to_fuse, is_qat, fuser_func, fuse_custom_config_dict):
    extra = (fuse_custom_config_dict or {}).get("additional_fuser_method_mapping", {})
    mod_list = [_get_module(model, item) for item in modules_to_fuse]
    new_mod_list = fuser_func(mod_list, is_qat, extra)
    for i, item in enumerate(modules_to_fuse):
        _set_module(model, item, new_mod_list[i])


def _fuse_modules(model, modules_to_fuse, is_qat, inplace=False, fuser_func=fuse_known_modules,
                  fuse_custom_config_dict=None):
    if not inplace:
        model = copy.deepcopy(model)
    if all(isinstance(m, str) for m in modules_to_fuse):
        _fuse_modules_helper(model, modules_to_fuse, is_qat, fuser_func, fuse_custom_config_dict)
    else:
        for module_list in modules_to_fuse:
            _fuse_modules_helper(model, module_list, is_qat, fuser_func, fuse_custom_config_dict)
    return model


def fuse_modules(model, modules_to_fuse, inplace=False, fuser_func=fuse_known_modules,
                 fuse_custom_config_dict=None):
    """``torch.ao.quantization.fuse_modules``: ``modules_to_fuse`` one list
    of submodule names, or a list of such lists; eval-mode fusion."""
    return _fuse_modules(model, modules_to_fuse, is_qat=False, inplace=inplace,
                         fuser_func=fuser_func, fuse_custom_config_dict=fuse_custom_config_dict)


def fuse_modules_qat(model, modules_to_fuse, inplace=False, fuser_func=fuse_known_modules,
                     fuse_custom_config_dict=None):
    """``torch.ao.quantization.fuse_modules_qat``: as ``fuse_modules``, for
    training (BatchNorms kept, in ``torch.ao.nn.intrinsic`` containers)."""
    return _fuse_modules(model, modules_to_fuse, is_qat=True, inplace=inplace,
                         fuser_func=fuser_func, fuse_custom_config_dict=fuse_custom_config_dict)
