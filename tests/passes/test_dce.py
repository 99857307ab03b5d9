"""``DeadCode`` (one backward sweep) removes exactly what xDSL's fixed-point
``dce`` removes, on traced training steps at each point of the pipeline
where it runs, and keeps what has effects."""
from __future__ import annotations

import numpy as np
import pytest
from xdsl.printer import Printer
from xdsl.transforms.dead_code_elimination import DeadCodeElimination

import io

import tracec
import tracec.nn as nn
import tracec.nn.functional as F
from passes_helpers import make_mlp_step, mlp_params, traced
from tracec import ir
from tracec.passes.dce import DeadCode
from tracec.passes.pipeline import OPTIMIZE, run_passes


def _text(module) -> str:
    s = io.StringIO()
    Printer(stream=s).print_op(module)
    return s.getvalue()


def _lstm_step():
    tracec.manual_seed(0)
    lstm, head = nn.LSTM(3, 5, batch_first=True), nn.Linear(5, 2)
    params = list(lstm.parameters()) + list(head.parameters())
    opt = tracec.optim.Adam(params, lr=1e-2)

    def step(x, y):
        opt.zero_grad()
        out, _ = lstm(x)
        loss = F.cross_entropy(head(out[:, -1]), y)
        loss.backward()
        opt.step()
        return loss
    return step, (tracec.randn(2, 4, 3), tracec.tensor([0, 1]))


def _mlp_step():
    step = make_mlp_step(mlp_params())
    return step, (tracec.randn(5, 8), tracec.randn(5, 4))


@pytest.mark.parametrize("make", [_mlp_step, _lstm_step], ids=["mlp_sgd_mse", "lstm_adam"])
def test_sweep_removes_what_the_fixed_point_removes(make):
    step, args = make()
    module = traced(step, *args)
    checked, removing = 0, 0
    for p in OPTIMIZE:
        if isinstance(p, DeadCode):
            ours, theirs = module.clone(), module.clone()
            run_passes([DeadCode()], ours, verify=True)
            run_passes([DeadCodeElimination()], theirs, verify=True)
            assert _text(ours) == _text(theirs)
            checked += 1
            removing += _text(theirs) != _text(module)
        run_passes([p], module, verify=True)
    assert checked == 3 and removing >= 1     # (the comparisons had dead code to find)


def test_dead_chains_go_and_effects_stay():
    module = ir.parse_module("""
func.func @f(%x: tensor<4xf32>) -> (tensor<4xf32>) {
  %a = tracec.exp %x : (tensor<4xf32>) -> tensor<4xf32>
  %b = tracec.mul %a, %a : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %c = tracec.neg %b : (tensor<4xf32>) -> tensor<4xf32>
  %d = tracec.add %x, %x : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  func.return %d : tensor<4xf32>
}
""")
    run_passes([DeadCode()], module, verify=True)
    text = _text(module)
    assert "tracec.exp" not in text and "tracec.mul" not in text and "tracec.neg" not in text
    assert "tracec.add" in text and "func.return" in text and "func.func @f" in text
