"""``torch.autograd.functional.jacobian`` / ``hessian`` with
``strategy="forward-mode"`` as PyTorch returns and refuses them, checked
against torch: results nested in lists where PyTorch's forward mode builds
them (tuple inputs), its errors for ``vectorize=False``, ``strict=True``,
``create_graph=True`` and an unknown strategy (AssertionError).  tracec
returned tuples and gave other messages / a ValueError."""
import numpy as np
import pytest
import torch

import tracec

X = np.array([0.3, -1.2, 0.8], np.float32)
Y = np.array([1.1, 0.4, -0.5], np.float32)


def _structure(r):
    if isinstance(r, (tuple, list)):
        return (type(r).__name__, [_structure(e) for e in r])
    return ("Tensor", tuple(r.shape), np.round(r.detach().numpy(), 5).tolist())


def _call(lib, case):
    F = lib.autograd.functional
    x, y = lib.tensor(X), lib.tensor(Y)
    g = lambda a, b: (a * b.exp()).cumsum(0)  # noqa: E731
    two = lambda a, b: (a * b, a.sin())       # noqa: E731
    cases = {
        "tuple_in_single_out": lambda: F.jacobian(g, (x, y), vectorize=True, strategy="forward-mode"),
        "tuple_in_tuple_out": lambda: F.jacobian(two, (x, y), vectorize=True, strategy="forward-mode"),
        "single_in_tuple_out": lambda: F.jacobian(lambda a: (a * 2, a.exp()), x, vectorize=True,
                                                  strategy="forward-mode"),
        "single_in_single_out": lambda: F.jacobian(lambda a: a.exp(), x, vectorize=True,
                                                   strategy="forward-mode"),
        "hessian_tuple": lambda: F.hessian(lambda a, b: (a * b).sin().sum(), (x, y), vectorize=True,
                                           outer_jacobian_strategy="forward-mode"),
        "hessian_single": lambda: F.hessian(lambda a: a.pow(3).sum(), x, vectorize=True,
                                            outer_jacobian_strategy="forward-mode"),
        "reverse_tuple": lambda: F.jacobian(g, (x, y)),
        "not_vectorized": lambda: F.jacobian(g, (x, y), strategy="forward-mode"),
        "strict": lambda: F.jacobian(g, (x, y), strict=True, vectorize=True, strategy="forward-mode"),
        "create_graph": lambda: F.jacobian(g, (x, y), create_graph=True, vectorize=True,
                                           strategy="forward-mode"),
        "bad_strategy": lambda: F.jacobian(g, (x, y), strategy="sideways"),
        "bad_hessian_strategy": lambda: F.hessian(lambda a: a.sum(), x,
                                                  outer_jacobian_strategy="sideways"),
    }
    try:
        return _structure(cases[case]())
    except (RuntimeError, NotImplementedError, AssertionError, ValueError) as e:
        return type(e).__name__, str(e)


@pytest.mark.parametrize("case", ["tuple_in_single_out", "tuple_in_tuple_out",
                                  "single_in_tuple_out", "single_in_single_out", "hessian_tuple",
                                  "hessian_single", "reverse_tuple", "not_vectorized", "strict",
                                  "create_graph", "bad_strategy", "bad_hessian_strategy"])
def test_forward_mode_jacobian_matches_torch(case):
    assert _call(tracec, case) == _call(torch, case)
