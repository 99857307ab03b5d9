"""``tracec.install_as_torch()`` and ``tracec run SCRIPT.py``: ``import
torch`` and its submodules give tracec's own modules, a submodule tracec
lacks is refused by name, and the script runs as ``python SCRIPT.py`` would.
Also ``Tensor.type()`` (which such scripts call), against torch."""
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import torch

import tracec
from program_runner import tracec_cli

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def python(code, *args, cli=False, cwd=None):
    """``python -c code ARGS`` in a fresh interpreter; ``cli``: ``python -m
    tracec.cli run ARGS``, forked from the program tests' zygote (a process
    that has run only the imports every ``tracec run`` makes first)."""
    env = {**os.environ, "PYTHONPATH": ROOT}
    if cli:
        return tracec_cli(["run", *args], cwd=cwd, env=env, timeout=120)
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code), *args],
                          capture_output=True, text=True, timeout=120, env=env, cwd=cwd)


IMPORTS = """
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim
from torch.optim.lr_scheduler import StepLR
from torch.utils.data import DataLoader, TensorDataset
from torch.distributions import Categorical
import torch.autograd, torch.cuda, torch.backends.cudnn, torch.amp
import tracec
assert torch is tracec and nn is tracec.nn and F is tracec.nn.functional
assert optim is tracec.optim and StepLR is tracec.optim.lr_scheduler.StepLR
assert DataLoader is tracec.utils.data.DataLoader
assert Categorical is tracec.distributions.Categorical
assert torch.autograd is tracec.autograd and torch.cuda is tracec.cuda
# the aliases rename no tracec module but the top one, whose __name__ is
# "torch" as PyTorch's (Pyro's patch_dependency checks it)
assert nn.__name__ == "tracec.nn" and nn.__spec__.name == "tracec.nn"
import sys
assert sys.modules["torch.nn.functional"] is tracec.nn.functional
assert {id(m) for m in list(sys.modules.values())
        if getattr(m, "__name__", None) == "torch"} == {id(tracec)}
assert tracec.__spec__.name == "tracec"
"""


def test_install_as_torch_aliases_tracec_modules():
    r = python("import tracec; tracec.install_as_torch(); tracec.install_as_torch()\n" + IMPORTS
               + "print('ok')")
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "ok"


def test_a_missing_submodule_is_refused_never_the_real_torch():
    r = python("""
        import tracec; tracec.install_as_torch()
        try:
            import torch._lazy
        except ModuleNotFoundError as e:
            print(e.name, '|', e)
        """)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == ("torch._lazy | No module named 'torch._lazy': tracec (installed "
                                "as torch by tracec.install_as_torch) has no 'tracec._lazy'")


def test_install_after_the_real_torch_raises_and_uninstall_restores():
    # One process (each start imports the real torch, seconds): installed,
    # uninstalled, the real torch imported, and a second install refused.
    r = python("""
        import sys, tracec
        tracec.install_as_torch()
        import torch.nn
        assert torch.nn is tracec.nn
        tracec.uninstall_as_torch()
        assert "torch" not in sys.modules and "torch.nn" not in sys.modules
        import torch
        assert torch is not tracec and torch.__name__ == "torch"
        print("ok")
        try:
            tracec.install_as_torch()
        except RuntimeError as e:
            print(e)
        assert sys.modules["torch"] is torch
        """)
    assert r.stdout.splitlines()[0] == "ok", r.stderr
    assert "the real torch is already imported" in r.stdout, r.stderr


def test_public_classes_carry_pytorchs_names_while_installed(tmp_path):
    # print(type(x)) in a script shows <class 'torch.Tensor'> as in PyTorch;
    # files saved meanwhile load in plain tracec; uninstall restores the names.
    expect = ("<class 'torch.Tensor'> <class 'torch.Size'> <class 'torch.dtype'> "
              "<class 'torch.device'> <class 'torch.nn.parameter.Parameter'> "
              "<class 'torch.nn.parameter.Buffer'> dtype")
    got = " ".join(map(str, (type(torch.ones(1)), type(torch.ones(1).shape), type(torch.float32),
                             type(torch.device("cpu")), type(torch.nn.Parameter(torch.ones(1))),
                             torch.nn.Buffer, torch.dtype.__name__)))
    assert got == expect
    r = python(f"""
        import pickle, tracec
        tracec.install_as_torch()
        import torch
        print(type(torch.ones(1)), type(torch.ones(1).shape), type(torch.float32),
              type(torch.device("cpu")), type(torch.nn.Parameter(torch.ones(1))),
              torch.nn.Buffer, torch.dtype.__name__)
        class Box:
            pass
        box = Box()
        box.s, box.d, box.p = torch.Size([2, 3]), torch.float16, torch.nn.Parameter(torch.ones(2))
        torch.save(box, {str(tmp_path / "box.pt")!r})
        back = pickle.loads(pickle.dumps(box))
        assert back.s == (2, 3) and type(back.s) is torch.Size and back.d is torch.float16
        tracec.uninstall_as_torch()
        print(type(tracec.ones(1)), tracec.Size, tracec.dtype, tracec.device,
              tracec.nn.Parameter, tracec.nn.Buffer)
        back = tracec.load({str(tmp_path / "box.pt")!r}, weights_only=False)
        assert type(back.s) is tracec.Size and back.s == (2, 3) and back.d is tracec.float16
        assert type(back.p) is tracec.nn.Parameter and back.p.tolist() == [1.0, 1.0]
        """)
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines() == [
        expect,
        "<class 'tracec.tensor.Tensor'> <class 'tracec.tensor.Size'> <class 'tracec.dtypes.DType'> "
        "<class 'tracec.device.device'> <class 'tracec.nn.parameter.Parameter'> "
        "<class 'tracec.nn.parameter.Buffer'>"]


def test_classes_carry_pytorchs_module_names_and_still_pickle(tmp_path):
    """Under install_as_torch every class of the PyTorch names table that the
    PyTorch name leads back to prints as PyTorch's (``nn.Linear.__module__``
    is ``torch.nn.modules.linear``, also for modules imported later, as
    ``torch.distributions``); pickles and whole-model saves made meanwhile
    load, in this process and in plain tracec; uninstall restores."""
    r = python(f"""
        import pickle, tracec
        tracec.install_as_torch()
        import torch, torch.nn as nn
        from torch.utils.data import DataLoader
        m = nn.Sequential(nn.Linear(2, 3), nn.ReLU())
        print(type(m[0]), nn.Linear.__module__, torch.optim.Adam.__module__,
              DataLoader.__module__, torch.autograd.Function.__module__,
              torch.autograd.graph.Node.__module__, torch.distributions.Normal.__module__,
              repr(torch.nn.Module))
        back = pickle.loads(pickle.dumps(m))
        assert type(back[0]) is nn.Linear and back[0].weight.shape == (3, 2)
        torch.save(m, {str(tmp_path / "m.pt")!r})
        assert type(torch.load({str(tmp_path / "m.pt")!r}, weights_only=False)[1]) is nn.ReLU
        tracec.uninstall_as_torch()
        print(tracec.nn.Linear.__module__, tracec.optim.Adam.__module__)
        m2 = tracec.load({str(tmp_path / "m.pt")!r}, weights_only=False)
        assert type(m2[0]) is tracec.nn.Linear
        """)
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines() == [
        "<class 'torch.nn.modules.linear.Linear'> torch.nn.modules.linear torch.optim.adam "
        "torch.utils.data.dataloader torch.autograd.function torch.autograd.graph "
        "torch.distributions.normal <class 'torch.nn.modules.module.Module'>",
        "tracec.nn.modules.linear tracec.optim.adam"]


def test_cli_run_is_like_python_script(tmp_path):
    (tmp_path / "helper.py").write_text("VALUE = 7\n")
    script = tmp_path / "prog.py"
    script.write_text(textwrap.dedent("""
        import sys
        import torch
        import torch.nn as nn
        import helper                     # the script's folder is on sys.path
        print(torch.__name__, nn.Linear.__module__, helper.VALUE)
        print(sys.argv)
        print(__file__ == sys.argv[0], __name__)
        if __name__ == "__main__":
            x = torch.ones(2, 3)
            print(nn.functional.relu(x).sum().item())
            sys.exit(int(sys.argv[-1]))
        """))
    r = python(None, str(script), "--epochs", "1", "-x", "3", cli=True)
    assert r.returncode == 3, r.stderr
    assert r.stdout.splitlines() == [
        "torch torch.nn.modules.linear 7",
        str([str(script), "--epochs", "1", "-x", "3"]),
        "True __main__",
        "6.0"]


def test_cli_run_of_a_relative_path_gives_pythons_file_and_argv(tmp_path):
    """``__file__`` absolute (as Python 3.9+ gives the main script), argv[0]
    as typed: a script's ``os.chdir(os.path.dirname(__file__))`` works."""
    import subprocess
    import sys
    (tmp_path / "rel.py").write_text(textwrap.dedent("""
        import os, sys
        print(__file__, sys.argv[0], __name__, __spec__)
        os.chdir(os.path.dirname(__file__))
        print(os.getcwd())
        """))
    want = subprocess.run([sys.executable, "rel.py"], cwd=tmp_path, capture_output=True,
                          text=True)
    got = tracec_cli(["run", "rel.py"], cwd=tmp_path)
    assert want.returncode == 0 and got.returncode == 0, got.stderr
    assert got.stdout == want.stdout
    assert got.stdout.split()[0] == str(tmp_path / "rel.py")


def test_cli_run_errors(tmp_path):
    r = python(None, str(tmp_path / "nope.py"), cli=True)
    assert r.returncode != 0 and "Error: no such file:" in r.stderr
    bad = tmp_path / "bad.py"
    bad.write_text("import torch\nraise ValueError('boom')\n")
    r = python(None, str(bad), cli=True)
    # the script's own exception: a traceback ending like python's
    lines = r.stderr.strip().splitlines()
    assert r.returncode == 1 and lines[-1] == "ValueError: boom"
    assert lines[:2] == ["Traceback (most recent call last):",
                         f'  File "{bad}", line 2, in <module>']


@pytest.mark.parametrize("dtype", ["float32", "float64", "int64", "int32", "bool"])
def test_tensor_type(dtype):
    a = np.array([[1, 0], [2, 3]]).astype(dtype)
    t, c = torch.tensor(a), tracec.tensor(a)
    assert c.type() == t.type()
    for target in ["float32", "float64", "int64", "int32", "float16", "bool"]:
        tt, ct = t.type(getattr(torch, target)), c.type(getattr(tracec, target))
        assert str(ct.dtype).split(".")[-1] == str(tt.dtype).split(".")[-1] and ct.type() == tt.type()
        np.testing.assert_array_equal(ct.numpy(), tt.numpy())
    for name in ["torch.LongTensor", "torch.DoubleTensor", "torch.FloatTensor"]:
        assert c.type(name).type() == t.type(name).type() == name
    assert c.type(c.dtype) is c
    with pytest.raises(ValueError, match="invalid type: 'torch.NopeTensor'"):
        c.type("torch.NopeTensor")


def test_tensor_type_keeps_grad():
    x = tracec.tensor([1.0, 2.0], requires_grad=True)
    y = x.type(tracec.float64)
    (y * y).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), [2.0, 4.0])
