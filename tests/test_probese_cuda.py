"""Asking for CUDA without it, checked against torch 2.13 (a CPU build) in
the same process: moving or creating a tensor there raises PyTorch's
AssertionError('Torch not compiled with CUDA enabled') (tracec raised a
RuntimeError of its own, which scripts' ``except AssertionError`` fallbacks
missed); torch.load(map_location='cuda') raises PyTorch's RuntimeError; a
``with device('cuda')`` block is entered, its tensor creation raises."""
import io

import pytest
import torch

import tracec

CASES = {
    "cuda()": lambda L: L.ones(2).cuda(),
    "to('cuda')": lambda L: L.ones(2).to("cuda"),
    "to('cuda:0')": lambda L: L.ones(2).to("cuda:0"),
    "to(device)": lambda L: L.ones(2).to(L.device("cuda")),
    "ones(device=)": lambda L: L.ones(2, device="cuda"),
    "module.cuda()": lambda L: L.nn.Linear(2, 2).cuda(),
    "module.to('cuda')": lambda L: L.nn.Linear(2, 2).to("cuda"),
    "device context": lambda L: _in_context(L),
    "load(map_location='cuda')": lambda L: _load(L),
    "type(cuda.FloatTensor)": lambda L: L.ones(2).type(L.cuda.FloatTensor),
    "type('torch.cuda.FloatTensor')": lambda L: L.ones(2).type("torch.cuda.FloatTensor"),
}


def _in_context(L):
    with L.device("cuda"):
        return L.ones(2)


def _load(L):
    buf = io.BytesIO()
    L.save({"w": L.ones(2)}, buf)
    buf.seek(0)
    return L.load(buf, map_location="cuda")


def _outcome(L, fn):
    try:
        fn(L)
    except Exception as e:
        return type(e).__name__, str(e)
    return "ok", ""


@pytest.mark.parametrize("name", list(CASES))
def test_cuda_without_cuda_raises_as_torch(name):
    want = _outcome(torch, CASES[name])
    assert want[0] != "ok"
    assert _outcome(tracec, CASES[name]) == want
