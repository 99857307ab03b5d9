"""Tensor-like types that are no Tensor with a classmethod
``__torch_function__`` (PyTorch's docs' ScalarTensor and MetadataTensor;
linear_operator's LinearOperator), checked against torch: torch functions
and Tensor methods / operators hand such arguments to it, PyTorch's
TypeError when every handler returns NotImplemented, and the functions a
class body registers (``torch.Tensor.mul``) are those it is handed.
tracec refused them as operands (``mean(): unsupported operand type``).
The classes are defined by ``exec`` under each library: the protocol turns
on when a class statement defines ``__torch_function__``."""
import pytest
import torch

import tracec

SOURCE = '''
HANDLED = {}

class Scalar(object):
    def __init__(self, n, value):
        self._n, self._value = n, value

    def tensor(self):
        return self._value * lib.eye(self._n)

    REGISTERED_MUL = lib.Tensor.mul

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        if func is cls.REGISTERED_MUL:
            return ("Tensor.mul", [type(a).__name__ for a in args])
        if func not in HANDLED or not all(issubclass(t, (lib.Tensor, Scalar)) for t in types):
            return NotImplemented
        return HANDLED[func](*args, **(kwargs or {}))

HANDLED[lib.mean] = lambda x: float(x._value) / x._n
HANDLED[lib.add] = lambda a, b: lib.add(getattr(a, "tensor", lambda: a)(),
                                       getattr(b, "tensor", lambda: b)())

class Meta(object):
    def __init__(self, data, metadata=None):
        self._t = lib.as_tensor(data)
        self.metadata = metadata

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        metas = [a.metadata for a in args if hasattr(a, "metadata")]
        ret = func(*[getattr(a, "_t", a) for a in args], **(kwargs or {}))
        return Meta(ret, metas[0])
'''


def _run(lib):
    ns = {"lib": lib}
    exec(SOURCE, ns)
    Scalar, Meta = ns["Scalar"], ns["Meta"]
    s = Scalar(2, 3)
    t = lib.ones(2, 2)
    out = [lib.mean(s), lib.add(s, t).tolist(), lib.add(t, s).tolist(), t * s, t.mul(s)]
    try:
        lib.exp(s)
    except TypeError as e:
        out.append(str(e).replace("tracec", "torch"))
    m = Meta([[1., -2.], [3., 4.]], {"owner": "x"})
    for r in (lib.add(t, m), lib.matmul(m, t), lib.nn.functional.relu(m), lib.sum(m, dim=0)):
        out.append((type(r).__name__, r.metadata, r._t.tolist()))
    out.append(lib.overrides.has_torch_function((t, m)))
    return out


def test_tensor_like_types_dispatch_as_in_torch():
    assert _run(tracec) == _run(torch)


PLAIN = '''
class PlainMeta(object):
    def __init__(self, data, metadata=None):
        self._t = lib.as_tensor(data)
        self._metadata = metadata

    def __torch_function__(self, func, types, args=(), kwargs=None):
        args = [a._t if hasattr(a, "_t") else a for a in args]
        return PlainMeta(func(*args, **(kwargs or {})), metadata=self._metadata)
'''


def _plain(lib):
    import warnings
    ns = {"lib": lib}
    exec(PLAIN, ns)
    m = ns["PlainMeta"]([[1, 2], [3, 4]], {"owner": "x"})
    t = lib.tensor([[1, 2], [1, 2]])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        r1, r2 = lib.add(t, m), lib.mul(t, m)
    funcs = lib.overrides.get_overridable_functions()
    return ([(r._metadata, r._t.tolist()) for r in (r1, r2)],
            sorted({str(w.message) for w in caught}),
            [f.__name__ for f in funcs[lib.nn.functional][:5]],
            lib.add in funcs[lib], lib.Tensor.add in funcs[lib.Tensor])


def test_plain_method_torch_function_and_overridable_functions_as_in_torch():
    assert _plain(tracec) == _plain(torch)


def test_class_statements_with_any_keywords_still_build():
    """tracec watches class statements (``builtins.__build_class__``) for
    Tensor-like types; class keywords named like its own parameters
    (``name=``, ``func=``, tensorly's ``class F(..., name='')``) reach the
    metaclass as before."""
    class Meta(type):
        def __new__(mcls, clsname, bases, ns, name=None, func=None):
            cls = super().__new__(mcls, clsname, bases, ns)
            cls.got = (name, func)
            return cls

    class A(metaclass=Meta, name="", func=3):
        pass
    assert A.got == ("", 3)
