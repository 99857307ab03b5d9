"""The printed text of tracec IR, checked with LLVM-style FileCheck
directives (the ``filecheck`` package's CLI, run on the printed module)."""
from __future__ import annotations

import shutil
import subprocess
import sys

import pytest

import tracec.ir as ir
from ir_samples import hand_module

CHECKS = r"""
CHECK:      func.func @step(%x: tensor<4x8xf32> {{.*}}, %b: tensor<8xf32> {{.*}}, %rng: tensor<2xi64> {{.*}}) -> (tensor<f32>, tensor<4xf32>, tensor<4x8xf32>, tensor<8xf32>) {
CHECK-NEXT:   [[H:%[0-9]+]] = tracec.add %x, %b : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32> loc("user_file.py":10:4)
CHECK-NEXT:   [[H2:%[0-9]+]] = tracec.mul [[H]], [[H]] : tensor<4x8xf32> loc("user_file.py":11:4)
CHECK-NEXT:   [[W:%[0-9]+]] = tracec.constant dense<{{\[\[}}0.000000e+00, 2.500000e-01], {{.*}}]> : tensor<8x2xf32> loc("user_file.py":12:4)
CHECK-NEXT:   [[MM:%[0-9]+]] = tracec.matmul [[H2]], [[W]] : (tensor<4x8xf32>, tensor<8x2xf32>) -> tensor<4x2xf32>
CHECK-NEXT:   [[SL:%[0-9]+]] = tracec.slice [[H]] starts [0, 2] stops [4, 8] steps [1, 2] : tensor<4x8xf32> -> tensor<4x3xf32> loc("user_file.py":14:4)
CHECK-NEXT:   [[ONE:%[0-9]+]] = tracec.full value 1.0 shape [4, 3] dtype f32 : tensor<4x3xf32> loc("user_file.py":15:4)
CHECK-NEXT:   [[R:%[0-9]+]] = tracec.random_uniform %rng shape [4, 3] dtype f32 : tensor<2xi64> -> tensor<4x3xf32>
CHECK-NEXT:   [[K:%[0-9]+]] = tracec.kernel [[SL]], [[ONE]], [[R]] : (tensor<4x3xf32>, tensor<4x3xf32>, tensor<4x3xf32>) -> tensor<4xf32> {
CHECK-NEXT:   ^bb0([[A:%[0-9]+]]: tensor<4x3xf32> {{.*}}, [[B:%[0-9]+]]: tensor<4x3xf32> {{.*}}, [[C:%[0-9]+]]: tensor<4x3xf32> {{.*}}):
CHECK-NEXT:     [[T1:%[0-9]+]] = tracec.sub [[A]], [[B]] : tensor<4x3xf32>
CHECK-NEXT:     [[T2:%[0-9]+]] = tracec.mul [[T1]], [[C]] : tensor<4x3xf32>
CHECK-NEXT:     [[T3:%[0-9]+]] = tracec.reduce_sum [[T2]] axes [1] : tensor<4x3xf32> -> tensor<4xf32>
CHECK-NEXT:     tracec.yield [[T3]] : tensor<4xf32> loc("user_file.py":17:8)
CHECK-NEXT:   } loc("user_file.py":17:8)
CHECK-NEXT:   [[L:%[0-9]+]] = tracec.reduce_sum [[MM]] axes [0, 1] : tensor<4x2xf32> -> tensor<f32>
CHECK-NEXT:   [[G1:%[0-9]+]], [[G2:%[0-9]+]] = tracec.backward [[L]] wrt %x, %b : tensor<f32> wrt tensor<4x8xf32>, tensor<8xf32> -> tensor<4x8xf32>, tensor<8xf32> loc("user_file.py":19:4)
CHECK-NEXT:   func.return [[L]], [[K]], [[G1]], [[G2]] : {{.*}} loc("user_file.py":20:4)
CHECK-NEXT: } loc("user_file.py":1:0)
"""


def _filecheck_cmd():
    exe = shutil.which("filecheck")
    if exe:
        return [exe]
    return [sys.executable, "-m", "filecheck"]


def run_filecheck(text: str, checks: str, tmp_path) -> subprocess.CompletedProcess:
    check_file = tmp_path / "checks.mlir"
    check_file.write_text(checks)
    return subprocess.run([*_filecheck_cmd(), str(check_file)], input=text,
                          capture_output=True, text=True)


def test_printed_module_matches_checks(tmp_path):
    text = ir.print_module(hand_module())
    res = run_filecheck(text, CHECKS, tmp_path)
    assert res.returncode == 0, res.stdout + res.stderr + "\n--- input ---\n" + text


def test_filecheck_catches_a_wrong_expectation(tmp_path):
    text = ir.print_module(hand_module())
    res = run_filecheck(text, "CHECK: tracec.add %x, %b : tensor<4x8xf32>\n", tmp_path)
    assert res.returncode != 0


@pytest.mark.parametrize("text_check", [
    "CHECK: tracec.backward",
    "CHECK-NOT: tracec.backward",
])
def test_check_not(tmp_path, text_check):
    module = hand_module()
    res = run_filecheck(ir.print_module(module), text_check + "\n", tmp_path)
    assert (res.returncode == 0) == (text_check == "CHECK: tracec.backward")
