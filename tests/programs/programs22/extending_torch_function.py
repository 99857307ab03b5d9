"""PyTorch's docs, "Extending torch" (pytorch/pytorch
docs/source/notes/extending.rst: Extending torch with a Tensor-like type /
Subclassing torch.Tensor / a Tensor wrapper type / Operations on multiple
types that define __torch_function__): the duck-typed ScalarTensor with a
classmethod __torch_function__, a HANDLED_FUNCTIONS table filled by an
``implements`` decorator (functools.update_wrapper), torch.mean / torch.add
overrides with the fallback through ensure_tensor, the TypeError when every
handler returns NotImplemented, the permissive variant that converts and
calls func; SubTensor results of torch functions, the lowest subclass
winning, unrelated subclasses refused; a LoggingTensor calling
super().__torch_function__; MetadataTensor propagating metadata; two
Tensor-like types in one call. Changes for a test: logging.info is a print
(to stdout), and the doc's interactive lines are printed."""
import functools

import torch

HANDLED_FUNCTIONS = {}


class ScalarTensor(object):
    def __init__(self, N, value):
        self._N = N
        self._value = value

    def __repr__(self):
        return "ScalarTensor(N={}, value={})".format(self._N, self._value)

    def tensor(self):
        return self._value * torch.eye(self._N)

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        if kwargs is None:
            kwargs = {}
        if func not in HANDLED_FUNCTIONS or not all(
            issubclass(t, (torch.Tensor, ScalarTensor))
            for t in types
        ):
            return NotImplemented
        return HANDLED_FUNCTIONS[func](*args, **kwargs)


def implements(torch_function):
    """Register a torch function override for ScalarTensor"""
    def decorator(func):
        functools.update_wrapper(func, torch_function)
        HANDLED_FUNCTIONS[torch_function] = func
        return func
    return decorator


@implements(torch.mean)
def mean(input):
    return float(input._value) / input._N


def ensure_tensor(data):
    if isinstance(data, ScalarTensor):
        return data.tensor()
    return torch.as_tensor(data)


@implements(torch.add)
def add(input, other):
    try:
        if input._N == other._N:
            return ScalarTensor(input._N, input._value + other._value)
        else:
            raise ValueError("Shape mismatch!")
    except AttributeError:
        return torch.add(ensure_tensor(input), ensure_tensor(other))


d = ScalarTensor(5, 2)
print(d)
print(d.tensor())
print(torch.mean(d))
s = ScalarTensor(2, 2)
print(torch.add(s, s))
t = torch.tensor([[1, 1, ], [1, 1]])
print(torch.add(s, t))
print(torch.add(t, s))
try:
    torch.add(s, ScalarTensor(3, 1))
except ValueError as e:
    print("ValueError:", e)
try:
    torch.mul(s, 3)
except TypeError as e:
    print("TypeError:", e)


class PermissiveScalarTensor(ScalarTensor):
    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        if kwargs is None:
            kwargs = {}
        if func not in HANDLED_FUNCTIONS or not all(
                issubclass(t, (torch.Tensor, ScalarTensor))
                for t in types
        ):
            args = [a.tensor() if hasattr(a, 'tensor') else a for a in args]
            return func(*args, **kwargs)
        return HANDLED_FUNCTIONS[func](*args, **kwargs)


ps = PermissiveScalarTensor(2, 2)
print(torch.mul(ps, ps))
print(torch.exp(ps))
print(torch.mean(ps))


class SubTensor(torch.Tensor):
    pass


class SubTensor2(SubTensor):
    pass


class OtherSubTensor(torch.Tensor):
    pass


print(type(torch.add(SubTensor([0]), SubTensor([1]))).__name__)
print(type(torch.add(SubTensor([0]), torch.tensor([1]))).__name__)
print(type(torch.add(SubTensor2([0]), SubTensor([1]))).__name__)
print(type(torch.add(SubTensor2([0]), torch.tensor([1]))).__name__)
try:
    torch.add(SubTensor([0]), OtherSubTensor([1]))
except TypeError as e:
    print("TypeError:", e)


class LoggingTensor(torch.Tensor):
    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        # NOTE: Logging calls Tensor.__repr__, so we can't log __repr__ without infinite recursion
        if func is not torch.Tensor.__repr__:
            print(f"func: {func.__name__}, kwargs: {kwargs!r}")
        if kwargs is None:
            kwargs = {}
        return super().__torch_function__(func, types, args, kwargs)


lt = torch.arange(6.).reshape(2, 3).as_subclass(LoggingTensor)
out = (lt * 2 + 1).relu().sum(dim=1)
print(type(out).__name__, out.tolist())


class MetadataTensor(object):
    def __init__(self, data, metadata=None, **kwargs):
        self._t = torch.as_tensor(data, **kwargs)
        self._metadata = metadata

    def __repr__(self):
        return "Metadata:\n{}\n\ndata:\n{}".format(self._metadata, self._t)

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        if kwargs is None:
            kwargs = {}
        metadatas = tuple(a._metadata for a in args if hasattr(a, '_metadata'))
        args = [getattr(a, '_t', a) for a in args]
        assert len(metadatas) > 0
        ret = func(*args, **kwargs)
        return MetadataTensor(ret, metadata=metadatas[0])


metadata = {'owner': 'Ministry of Silly Walks'}
m = MetadataTensor([[1, 2], [3, 4]], metadata=metadata)
t = torch.tensor([[1, 2], [1, 2]])
print(torch.add(t, m))
print(torch.mul(t, m))
print(torch.matmul(m, t))
print(torch.nn.functional.relu(MetadataTensor([[-1., 2.]], metadata={"k": 1})))
# both types in one call: the first that does not return NotImplemented wins
print(type(torch.add(m, s)).__name__)
print(torch.overrides.has_torch_function((t, m)), torch.overrides.has_torch_function((t,)),
      torch.overrides.is_tensor_like(m), torch.overrides.is_tensor_like(t),
      torch.overrides.is_tensor_like([t]))
