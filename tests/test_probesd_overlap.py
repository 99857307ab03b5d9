"""fill_ / zero_ of an expanded tensor (its elements sharing memory), as
PyTorch 2.13 allows them (tracec raised the internal-overlap error), and
the ops PyTorch refuses there still refused; checked against torch in the
same process."""
import pytest
import torch

import tracec


def _fill(lib):
    b = lib.zeros(2, 1)
    x = b.expand(2, 3)
    x.fill_(2.5)
    out = [x.tolist(), b.tolist()]
    x.zero_()
    out += [x.tolist(), b.tolist()]
    y = lib.arange(3.0)[None].expand(4, 3)
    y.fill_(7)
    h = lib.zeros(1, dtype=lib.float16).expand(3)
    h.fill_(0.1)
    return out + [y.tolist(), h.tolist()]


def test_fill_of_expanded_tensor_as_torch():
    assert _fill(tracec) == _fill(torch)


@pytest.mark.parametrize("op", ["add_", "mul_", "exp_"])
def test_other_writes_to_expanded_tensor_refused(op):
    msgs = []
    for lib in (tracec, torch):
        x = lib.zeros(1).expand(3)
        with pytest.raises(RuntimeError) as e:
            getattr(x, op)(*([1] if op != "exp_" else []))
        msgs.append(str(e.value))
    assert msgs[0] == msgs[1]
