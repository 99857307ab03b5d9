"""A PyTorch script run on tracec (``tracec run``) saves checkpoints in
PyTorch's own zip format (tracec/torch_save.py), which the real
``torch.load`` reads (weights_only and mmap too) and ``tracec.load`` reads
back; objects outside the weights-only set are pickled whole in PyTorch's
format too (tests/test_whole_model_checkpoints.py)."""
import io
import pickle
import textwrap
import zipfile

import numpy as np
import pytest

import torch_recordings
import tracec
from tracec.torch_save import encodable, save_torch
from program_runner import tracec_cli

torch = pytest.importorskip("torch")

SCRIPT = textwrap.dedent("""
    import argparse, sys
    import torch, torch.nn as nn
    torch.manual_seed(0)
    m = nn.Sequential(nn.Linear(3, 4), nn.BatchNorm1d(4), nn.Linear(4, 2))
    opt = torch.optim.Adam(m.parameters(), lr=1e-3)
    m(torch.ones(5, 3)).sum().backward()
    opt.step()
    sched = torch.optim.lr_scheduler.StepLR(opt, 2)
    base = torch.arange(12.0).view(3, 4)
    torch.save({"epoch": 3, "model_state_dict": m.state_dict(), "optimizer": opt.state_dict(),
                "scheduler": sched.state_dict(), "best": 0.5, "names": ["a", "b"],
                "view": base[:, 1], "base": base, "bf16": torch.ones(3, dtype=torch.bfloat16) * 1.5,
                "param": nn.Parameter(torch.ones(2)), "dtype": torch.float16,
                "size": torch.Size([2, 3]), "t": (1, None, True)}, sys.argv[1])
    torch.save({"args": argparse.Namespace(lr=0.1), "w": torch.ones(2)}, sys.argv[2])
    for k, v in m.state_dict().items():
        print(k, v.flatten().tolist())
""")


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    d = tmp_path_factory.mktemp("torchfmt")
    (d / "prog.py").write_text(SCRIPT)
    r = tracec_cli(["run", str(d / "prog.py"), str(d / "ckpt.pt"), str(d / "args.pt")])
    assert r.returncode == 0, r.stderr
    want = {line.split(" ", 1)[0]: eval(line.split(" ", 1)[1]) for line in r.stdout.splitlines()}
    return d, want


def test_torch_loads_a_checkpoint_a_script_saved_on_tracec(saved):
    d, want = saved
    for kwargs in ({}, {"mmap": True}, {"weights_only": True, "map_location": "cpu"}):
        ck = torch.load(str(d / "ckpt.pt"), **kwargs)
        assert ck["epoch"] == 3 and ck["best"] == 0.5 and ck["names"] == ["a", "b"]
        assert ck["t"] == (1, None, True) and ck["dtype"] is torch.float16
        assert ck["size"] == torch.Size([2, 3])
        for k, v in want.items():
            np.testing.assert_array_equal(ck["model_state_dict"][k].flatten().numpy(), v)
        assert ck["view"].tolist() == [1.0, 5.0, 9.0]
        # views keep sharing their storage, as torch.save keeps them
        assert ck["view"].untyped_storage().data_ptr() == ck["base"].untyped_storage().data_ptr()
        assert ck["bf16"].dtype is torch.bfloat16 and ck["bf16"].tolist() == [1.5] * 3
        assert isinstance(ck["param"], torch.nn.Parameter) and ck["param"].requires_grad
    m = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.BatchNorm1d(4),
                            torch.nn.Linear(4, 2))
    m.load_state_dict(ck["model_state_dict"])
    opt = torch.optim.Adam(m.parameters())
    opt.load_state_dict(ck["optimizer"])
    assert opt.state_dict()["state"][0]["step"].item() == 1.0
    assert ck["scheduler"]["step_size"] == 2


def test_tracec_loads_it_back(saved):
    d, want = saved
    ck = tracec.load(str(d / "ckpt.pt"))
    for k, v in want.items():
        np.testing.assert_array_equal(ck["model_state_dict"][k].flatten().numpy(), v)
    assert ck["view"].tolist() == [1.0, 5.0, 9.0] and ck["dtype"] is tracec.float16


def test_what_weights_only_would_refuse_needs_weights_only_false_in_both(saved):
    # An object outside the weights-only set (DINO's argparse.Namespace) is
    # pickled whole in PyTorch's format too: both libraries load it only
    # when the caller says the file is trusted.
    d, _ = saved
    assert zipfile.is_zipfile(d / "args.pt")
    for load in (torch.load, tracec.load):
        with pytest.raises(pickle.UnpicklingError, match="weights_only"):
            load(str(d / "args.pt"))
        ck = load(str(d / "args.pt"), weights_only=False)
        assert ck["args"].lr == 0.1 and ck["w"].tolist() == [1.0, 1.0]


def test_a_tensor_subclass_crosses_as_in_pytorch(tmp_path):
    # A user's Tensor subclass pickles as PyTorch pickles it (the class by
    # name, the instance's attributes): PyTorch and tracec load it back as
    # that class with weights_only=False.
    script = tmp_path / "sub.py"
    script.write_text(textwrap.dedent("""
        import sys, torch
        class Mine(torch.Tensor):
            pass
        t = torch.ones(2).as_subclass(Mine)
        t.tag = "x"
        torch.save({"t": t}, sys.argv[1])
        if sys.argv[2] == "load":
            u = torch.load(sys.argv[1], weights_only=False)["t"]
            print(type(u).__name__, u.tag, u.tolist())
    """))
    r = tracec_cli(["run", str(script), str(tmp_path / "s.pt"), "load"])
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "Mine x [1.0, 1.0]"
    assert zipfile.is_zipfile(tmp_path / "s.pt")
    # PyTorch's run (recorded: torch_recordings.script_output)
    want = torch_recordings.script_output("torch_compat/tensor_subclass_save", script,
                                          [tmp_path / "torch.pt", "load"])
    assert want.strip() == "Mine x [1.0, 1.0]"


def test_encodable_is_what_weights_only_loading_accepts():
    import argparse
    assert encodable({"a": [tracec.ones(2), (1, 2.5, "x", None)], "d": tracec.float32})
    assert not encodable({"args": argparse.Namespace(lr=1)})
    assert not encodable({"acc": np.float64(1.0)})
    assert not encodable(tracec.nn.Linear(2, 2))
    buf = io.BytesIO()
    save_torch({"x": tracec.arange(6.0).view(2, 3).t()}, buf, "archive")
    buf.seek(0)
    x = torch.load(buf)["x"]
    assert x.tolist() == [[0.0, 3.0], [1.0, 4.0], [2.0, 5.0]] and x.stride() == (1, 3)
    buf = io.BytesIO()        # a reversed NumPy view and an expanded one
    save_torch({"neg": tracec.from_numpy(np.arange(6.0)[::-1]),
                "exp": tracec.ones(3).expand(2, 3)}, buf, "archive")
    buf.seek(0)
    ck = torch.load(buf)
    assert ck["neg"].tolist() == [5.0, 4.0, 3.0, 2.0, 1.0, 0.0]
    assert ck["exp"].tolist() == [[1.0] * 3] * 2 and ck["exp"].stride() == (0, 1)
