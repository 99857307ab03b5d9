"""Tensor subclasses and ``__torch_function__`` (tracec.subclass_dispatch),
each scenario run with tracec and with torch 2.13 and compared: result
types, printed text, which calls a subclass sees, gradients."""
import json
import os

import numpy as np
import pytest
import torch

import tracec


def _plain_subclass(L):
    class MyT(L.Tensor):
        pass
    x = L.ones(2, 3).as_subclass(MyT)
    y = L.ones(2, 3)
    outs = {"add": x + 1, "radd": 1 + x, "torch.add": L.add(y, x), "sum": x.sum(),
            "getitem": x[0], "detach": x.detach(), "T": x.T, "mT": x.mT, "cat": L.cat([y, x]),
            "stack": L.stack([y, x]), "relu": L.nn.functional.relu(x), "neg": -x,
            "pow": x ** 2, "matmul": x @ y.T, "split0": x.split(1)[0],
            "max.values": x.max(0).values, "linalg": L.linalg.vector_norm(x),
            "clone": x.clone(), "view": x.view(-1), "data": x.data, "eq": x == y}
    kinds = {k: type(v).__name__ for k, v in outs.items()}
    kinds["max"] = type(x.max(0)).__name__
    kinds["split"] = type(x.split(1)).__name__
    kinds["shape"] = type(x.shape).__name__
    kinds["item"] = type(x.sum().item()).__name__
    kinds["tolist"] = type(x.tolist()).__name__
    return kinds, repr(x), repr(x.sum()), str(L.zeros(2, 2).as_subclass(MyT) + 0.5)


def test_a_plain_subclass_propagates_through_ops_and_prints_its_name():
    assert _plain_subclass(tracec) == _plain_subclass(torch)


def _logged(L):
    seen = []

    class Logged(L.Tensor):
        @classmethod
        def __torch_function__(cls, func, types, args=(), kwargs=None):
            seen.append(func.__name__)
            return super().__torch_function__(func, types, args, kwargs or {})

    L.manual_seed(0)
    lin = L.nn.Linear(3, 2)
    x = L.randn(4, 3).as_subclass(Logged)
    y = lin(x)
    z = L.nn.functional.softmax(y, dim=-1).mean()
    w = L.matmul(x, L.ones(3, 1))
    seen.append("|")
    plain = L.ones(2) * 3 + L.ones(2)          # no subclass: nothing seen
    return seen, type(y).__name__, type(z).__name__, type(w).__name__, type(plain).__name__, \
        np.asarray(y.detach().tolist())


def test_a_subclass_sees_the_users_calls_not_the_librarys():
    ours, theirs = _logged(tracec), _logged(torch)
    assert ours[0] == theirs[0]
    assert ours[1:5] == theirs[1:5]
    np.testing.assert_allclose(ours[5], theirs[5], rtol=1e-6)


def _unwrapping(L):
    """The wrapper pattern: __torch_function__ unwraps to plain tensors,
    calls func, and wraps tensor results again (a unit-carrying tensor)."""
    class Meters(L.Tensor):
        @staticmethod
        def __new__(cls, data):
            return L.Tensor._make_subclass(cls, data)

        @classmethod
        def __torch_function__(cls, func, types, args=(), kwargs=None):
            plain = [a.as_subclass(L.Tensor) if isinstance(a, cls) else a for a in args]
            out = func(*plain, **(kwargs or {}))
            return cls(out) if isinstance(out, L.Tensor) and out.dim() > 0 else out

    m = Meters(L.tensor([1.0, 2.0]))
    r = (m * 2 + L.tensor([0.5, 0.5]))
    return type(r).__name__, r.tolist(), type(m.sum()).__name__, float(m.sum())


def test_an_unwrapping_subclass_gets_its_own_results():
    assert _unwrapping(tracec) == _unwrapping(torch)


def _autograd(L):
    class MyT(L.Tensor):
        pass
    p = L.tensor([1.0, 2.0, 3.0], requires_grad=True)
    q = p.as_subclass(MyT)
    loss = (q * q).sum()
    loss.backward()
    leaf = L.tensor([1.0, 2.0], requires_grad=True).as_subclass(MyT)
    (leaf * 3).sum().backward()
    return (q.is_leaf, type(q.grad_fn).__name__, type(loss).__name__, type(p.grad).__name__,
            p.grad.tolist(), leaf.is_leaf, leaf.grad)


def test_as_subclass_aliases_and_gradients_are_plain_tensors():
    assert _autograd(tracec) == _autograd(torch)


def _parameters(L):
    p = L.nn.Parameter(L.ones(2))
    class MyParam(L.nn.Parameter):
        pass
    mp = MyParam(L.ones(2))
    return type(p * 2).__name__, type(mp * 2).__name__, repr(p), type(L.nn.Buffer(L.ones(1)) + 1).__name__


def test_parameters_stay_out_of_the_protocol():
    assert _parameters(tracec) == _parameters(torch)


def test_disable_torch_function_subclass_and_default_nowrap():
    class MyT(tracec.Tensor):
        pass
    x = tracec.ones(2).as_subclass(MyT)
    with tracec._C.DisableTorchFunctionSubclass():
        assert type(x + 1) is tracec.Tensor
    assert type(x + 1) is MyT
    assert tracec.Tensor.grad.__get__ in tracec.overrides.get_default_nowrap_functions()
    with pytest.raises(TypeError, match="Tensor subclass"):
        tracec.ones(1).as_subclass(int)


def test_the_list_of_covered_names_is_torchs():
    """tracec/data/overridable.json is what scripts/overridable_names.py
    writes from the torch the tests pin."""
    import importlib.util
    here = os.path.dirname(__file__)
    spec = importlib.util.spec_from_file_location(
        "overridable_names", os.path.join(here, "..", "scripts", "overridable_names.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    with open(os.path.join(here, "..", "tracec", "data", "overridable.json")) as f:
        assert json.load(f) == mod.names()


def test_with_the_protocol_on_fx_graphs_name_and_save_their_calls_as_before():
    """A subclass turns the protocol on for the process; an fx trace made
    afterwards still names torch's functions and saves and loads."""
    import io

    class MyT(tracec.Tensor):
        pass
    assert tracec.subclass_dispatch.enabled()

    class Net(tracec.nn.Module):
        def forward(self, x):
            return tracec.nn.functional.relu(tracec.flatten(x, 1)) * 2
    gm = tracec.fx.symbolic_trace(Net())
    assert "torch.flatten" in gm.code and "relu" in gm.code and "_fx_" not in gm.code
    buf = io.BytesIO()
    tracec.save(gm, buf)
    buf.seek(0)
    back = tracec.load(buf, weights_only=False)
    x = tracec.tensor([[[-1.0, 2.0]], [[3.0, -4.0]]])
    assert back(x).tolist() == [[0.0, 4.0], [6.0, 0.0]]
    assert type(back(x.as_subclass(MyT))) is MyT


def _docs_logging_tensor(L):
    """PyTorch's docs ("Extending PyTorch: Subclassing torch.Tensor"): the
    LoggingTensor example, its log lines collected."""
    lines = []

    class LoggingTensor(L.Tensor):
        @classmethod
        def __torch_function__(cls, func, types, args=(), kwargs=None):
            # NOTE: Logging calls Tensor.__repr__, so we can't log __repr__ without infinite recursion
            if func is not L.Tensor.__repr__:
                lines.append(f"func: {func.__name__}, args: {args!r}, kwargs: {kwargs!r}")
            if kwargs is None:
                kwargs = {}
            return super().__torch_function__(func, types, args, kwargs)

    t = L.tensor([1.0, 2.0]).as_subclass(LoggingTensor)
    u = t * 2 + 1
    v = L.nn.functional.relu(u - 4).sum()
    w = (1 - t) / 2 + 3 * t
    lin = L.nn.Linear(2, 1)
    with L.no_grad():
        lin.weight.fill_(0.5)
        lin.bias.zero_()
    out = lin(t)
    return lines, repr(v), repr(w), repr(out)


def test_the_docs_logging_tensor_logs_what_pytorchs_does():
    assert _docs_logging_tensor(tracec) == _docs_logging_tensor(torch)
