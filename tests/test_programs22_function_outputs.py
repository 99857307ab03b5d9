"""What a custom autograd.Function returns and what its backward gives
back, as PyTorch treats them, checked against torch: an input returned
as-is becomes a new view whose node is the Function's (tracec skipped the
backward: GradReverse / ScaleGrad layers that ``return x`` got the identity
gradient, and the input itself took the Function's node); an output that
is a view refuses in-place writes with PyTorch's message; a backward
returning too few / too many gradients, or one for a non-tensor input, is
refused (tracec padded or ignored them)."""
import pytest
import torch

import tracec


def _functions(lib):
    F = lib.autograd.Function

    class GradReverse(F):
        @staticmethod
        def forward(ctx, x, alpha):
            ctx.alpha = alpha
            return x

        @staticmethod
        def backward(ctx, g):
            return -ctx.alpha * g, None

    class Two(F):
        @staticmethod
        def forward(ctx, a, b):
            return a, a * b

        @staticmethod
        def backward(ctx, g1, g2):
            return g1 * 10 + g2, g2

    class ViewOut(F):
        @staticmethod
        def forward(ctx, x):
            return x.view(-1)

        @staticmethod
        def backward(ctx, g):
            return g.view(2, 2)

    class TooFew(F):
        @staticmethod
        def forward(ctx, x, y):
            return x + y

        @staticmethod
        def backward(ctx, g):
            return g

    class TrailingNones(F):
        @staticmethod
        def forward(ctx, x):
            return x * 1

        @staticmethod
        def backward(ctx, g):
            return g, None, None

    class GradForNumber(F):
        @staticmethod
        def forward(ctx, x, n):
            return x * n

        @staticmethod
        def backward(ctx, g):
            return g, lib.ones(1)

    return locals()


def _run(lib, case):
    fs = _functions(lib)
    x = lib.tensor([[0.5, -1.0], [2.0, 3.0]], requires_grad=True)
    try:
        if case == "returned_input":
            y = fs["GradReverse"].apply(x, 0.5)
            g, = lib.autograd.grad((y * y).sum(), x)
            return (y is x, y._base is x, y.is_leaf, x.is_leaf, x.grad_fn is None,
                    type(y.grad_fn).__name__, g.tolist())
        if case == "returned_input_no_grad":
            q = lib.ones(2)
            r = fs["GradReverse"].apply(q, 1.0)
            return r is q, r._base is q, r.requires_grad
        if case == "two_outputs":
            b = lib.ones(2, 2, requires_grad=True)
            o1, o2 = fs["Two"].apply(x, b)
            return o1 is x, lib.autograd.grad((o1 + o2).sum(), x)[0].tolist()
        if case == "view_inplace":
            fs["ViewOut"].apply(x * 1).mul_(2)
        if case == "returned_input_inplace":
            fs["GradReverse"].apply(x * 1, 1.0).add_(1)
        if case == "too_few":
            lib.autograd.grad(fs["TooFew"].apply(x, x).sum(), x)
        if case == "trailing_nones":
            return lib.autograd.grad(fs["TrailingNones"].apply(x).sum(), x)[0].tolist()
        if case == "grad_for_number":
            lib.autograd.grad(fs["GradForNumber"].apply(x, 2).sum(), x)
    except RuntimeError as e:
        return "RuntimeError", str(e)
    return None


@pytest.mark.parametrize("case", ["returned_input", "returned_input_no_grad", "two_outputs",
                                  "view_inplace", "returned_input_inplace", "too_few",
                                  "trailing_nones", "grad_for_number"])
def test_custom_function_outputs_and_grads_match_torch(case):
    assert _run(tracec, case) == _run(torch, case)


def test_legacy_instantiated_function_is_refused_as_in_torch():
    import warnings
    out = []
    for lib in (torch, tracec):
        class GradReverse(lib.autograd.Function):    # the pre-1.3 style (MCD_DA's grad_reversal)
            def __init__(self, lambd):
                super().__init__()
                self.lambd = lambd

            def forward(self, x):
                return x.view_as(x)

        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            f = GradReverse(1.0)
        with pytest.raises(RuntimeError) as e:
            f(lib.ones(2, requires_grad=True))
        out.append(([w.category.__name__ for w in caught],
                     [str(w.message).split(" should")[1] for w in caught], str(e.value)))
    assert out[0] == out[1]
