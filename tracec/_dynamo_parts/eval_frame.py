"""``torch._dynamo.eval_frame``: the class of ``torch.compile(module)``'s
result, ``OptimizedModule`` (libraries test ``isinstance(m,
torch._dynamo.eval_frame.OptimizedModule)`` to unwrap ``m._orig_mod``)."""
from tracec.compiled_module import OptimizedModule

__all__ = ["OptimizedModule"]
