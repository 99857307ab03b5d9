"""The command line, run as a real subprocess."""
import os
import textwrap

import pytest
from program_runner import tracec_cli as run_tracec_cli

USER = textwrap.dedent("""
    import tracec
    W = tracec.randn(4, 3, requires_grad=True)

    def step(x, y):
        W.grad = None
        loss = ((x @ W - y) ** 2).mean()
        loss.backward()
        with tracec.no_grad():
            W.sub_(0.1 * W.grad)
        return loss

    def bad(x):
        if round(x.sum().item()) > 0:  # (a comparison alone is speculated)
            return x
        return -x
""")


def tracec_cli(*args, env=None):
    return run_tracec_cli(args, env={**os.environ, **(env or {})}, timeout=120)


@pytest.fixture(scope="module")
def user_file(tmp_path_factory):
    p = tmp_path_factory.mktemp("user") / "model.py"
    p.write_text(USER)
    return str(p)


def test_dump_prints_the_stage_with_user_locations(user_file):
    r = tracec_cli("dump", f"{user_file}:step", "--arg", "x=f32[8,4]", "--arg", "y=f32[8,3]",
                   "--stage", "trace")
    assert r.returncode == 0, r.stderr
    assert "tracec.backward" in r.stdout
    assert f'loc("{user_file}":7:' in r.stdout


@pytest.mark.parametrize("args, needle", [
    (["dump", "{f}:bad", "--arg", "x=f32[3]"], "model.py:14: the number item() gave"),
    (["dump", "/nonexistent/x.py:step"], "no such file"),
    (["dump", "{f}:nope", "--arg", "x=f32[3]"], "has no function 'nope'"),
    (["dump", "{f}:step", "--arg", "x=f32[8,"], "malformed --arg"),
    (["dump", "{f}:step", "--arg", "x=q9[8]"], "unknown dtype"),
    (["dump", "{f}:step", "--arg", "x=f32[8,4]"], "missing --arg y"),
    (["dump", "{f}:step", "--arg", "x=f32[8,4]", "--arg", "y=f32[9,3]"], "Error:"),
    (["build", "/nonexistent/x.py:step", "-o", "/tmp/never/libx.so"], "no such file"),
    (["build", "{f}:bad", "--arg", "x=f32[3]", "-o", "/tmp/never/libx.so"], "item()"),
])
def test_bad_input_is_one_line_and_nonzero(user_file, args, needle):
    r = tracec_cli(*[a.format(f=user_file) for a in args])
    assert r.returncode != 0
    assert needle in r.stderr
    assert "Traceback" not in r.stderr and "Traceback" not in r.stdout
    assert len([l for l in r.stderr.splitlines() if l.startswith("Error")]) == 1


def test_cache_info_and_clear(tmp_path):
    env = {"TRACEC_CACHE_DIR": str(tmp_path)}
    r = tracec_cli("cache", "info", env=env)
    assert r.returncode == 0 and str(tmp_path) in r.stdout and "entries:      0" in r.stdout
    r = tracec_cli("cache", "clear", env=env)
    assert r.returncode == 0 and "removed 0" in r.stdout


def test_dump_and_build_a_forward_that_returns_tensors_needing_grad(tmp_path):
    """A model's forward (its result requires grad) dumps and builds: nothing
    backpropagates through tracec build / dump, so it is compiled as is."""
    src = tmp_path / "m.py"
    src.write_text("import tracec\nfrom tracec import nn\ntracec.manual_seed(0)\n"
                   "model = nn.Sequential(nn.Linear(4, 3), nn.ReLU())\n"
                   "def fwd(x):\n    return model(x)\n")
    r = run_tracec_cli(["dump", f"{src}:fwd", "--arg", "x=f32[2,4]", "--stage", "optimized"],
                       timeout=120)
    assert r.returncode == 0 and "tracec.matmul" in r.stdout, r.stderr
    r = run_tracec_cli(["build", f"{src}:fwd", "--arg", "x=f32[2,4]", "-o",
                        str(tmp_path / "libfwd.so")], timeout=300)
    assert r.returncode == 0, r.stderr
    assert "float *out" in (tmp_path / "libfwd.h").read_text()


def test_a_pytorch_style_file_gets_tracec_for_torch(tmp_path):
    """``dump`` / ``explain`` / ``build`` of a file written against ``torch``
    (torch is installed here, as on most users' machines) use tracec for
    ``import torch`` as ``tracec run`` does; before, the real torch was
    imported and the build failed with "must be Tensor, not Tensor"."""
    src = tmp_path / "m.py"
    src.write_text("import torch\nimport torch.nn as nn\nimport torch.nn.functional as F\n"
                   "torch.manual_seed(0)\n"
                   "emb = nn.Embedding(10, 4)\nopt = torch.optim.SGD(emb.parameters(), lr=0.1)\n"
                   "def step(x, y):\n    opt.zero_grad()\n"
                   "    loss = F.cross_entropy(emb(x), y)\n    loss.backward()\n    opt.step()\n"
                   "    return loss\n")
    r = tracec_cli("dump", f"{src}:step", "--arg", "x=i64[3]", "--arg", "y=i64[3]",
                   "--stage", "trace")
    assert r.returncode == 0 and 'm.py":9' in r.stdout, r.stderr
    r = tracec_cli("explain", f"{src}:step", "--arg", "x=i64[3]", "--arg", "y=i64[3]")
    assert r.returncode == 0, r.stderr
    r = tracec_cli("build", f"{src}:step", "--arg", "x=i64[B]", "--arg", "y=i64[B]",
                   "-o", str(tmp_path / "libstep.so"))
    assert r.returncode == 0, r.stderr
    assert "int64_t B" in (tmp_path / "libstep.h").read_text()
