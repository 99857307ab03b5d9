"""``torch.jit`` in passing: scripted and traced callables run as Python and
give eager's numbers; ``jit.save`` / ``jit.load`` round-trip the module
pickled whole; PyTorch's TorchScript archives are refused with a clear error."""
import numpy as np
import pytest
import torch

import tracec


def test_script_and_trace_give_eager_results():
    @tracec.jit.script
    def gelu_ish(x):
        return x * tracec.sigmoid(1.702 * x)
    m = tracec.nn.Sequential(tracec.nn.Linear(3, 2), tracec.nn.ReLU())
    x = tracec.randn(4, 3)
    traced = tracec.jit.trace(m, (x,))
    np.testing.assert_array_equal(traced(x).detach().numpy(), m(x).detach().numpy())
    np.testing.assert_array_equal(gelu_ish(x).numpy(), (x * tracec.sigmoid(1.702 * x)).numpy())
    assert tracec.jit.script(m) is m and not tracec.jit.is_scripting()
    assert not isinstance(m, tracec.jit.ScriptModule)
    assert tracec.jit.fork(lambda a: a + 1, 2).wait() == 3
    assert tracec.jit.annotate(list, [1]) == [1]


JIT_SCRIPT = """
import sys, torch, torch.nn as nn
class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(3, 2)
    def forward(self, x):
        return torch.relu(self.fc(x)) if x.sum() > 0 else self.fc(x)
torch.manual_seed(0)
model = Net().eval()
x = torch.randn(4, 3)
torch.jit.save(torch.jit.script(model), sys.argv[1])      # the tutorial's export
loaded = torch.jit.load(sys.argv[1])
loaded.eval()
print(torch.equal(loaded(x), model(x)), [round(v, 5) for v in loaded(x).flatten().tolist()])
"""


def test_jit_save_and_load_round_trip_as_the_saving_tutorial_does(tmp_path):
    # "Export/Load Model in TorchScript Format": the module is saved whole
    # and loads back computing what it computed; real torch prints the same
    # (its run recorded: torch_recordings.script_output)
    import torch_recordings
    from program_runner import tracec_cli
    script = tmp_path / "export.py"
    script.write_text(JIT_SCRIPT)
    r = tracec_cli(["run", str(script), str(tmp_path / "tracec.pt")], cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-2000:]
    want = torch_recordings.script_output("torch_compat/jit_save_load", script,
                                          [tmp_path / "torch.pt"], cwd=tmp_path)
    assert r.stdout == want and want.startswith("True")


def test_a_torchscript_archive_is_refused_saying_so(tmp_path):
    m = torch.jit.script(torch.nn.Linear(2, 2))
    torch.jit.save(m, str(tmp_path / "ts.pt"))
    with pytest.raises(tracec.serialization.CheckpointError, match="TorchScript archive"):
        tracec.jit.load(str(tmp_path / "ts.pt"))
    tracec.save({"w": tracec.ones(2)}, str(tmp_path / "sd.pt"))
    with pytest.raises(RuntimeError, match="not a module saved with torch.jit.save"):
        tracec.jit.load(str(tmp_path / "sd.pt"))
    with pytest.raises(NotImplementedError, match="extra files"):
        tracec.jit.save(tracec.nn.Linear(2, 2), str(tmp_path / "e.pt"),
                        _extra_files={"a.txt": "x"})


def test_names_match_torch_jit():
    used = ["script", "trace", "ignore", "unused", "export", "is_scripting", "is_tracing",
            "annotate", "Final", "fork", "wait", "freeze", "ScriptModule", "save", "load",
            "optimize_for_inference", "interface", "Attribute", "isinstance"]
    assert all(hasattr(torch.jit, n) and hasattr(tracec.jit, n) for n in used)


def test_script_module_subclass_is_a_module_with_script_methods():
    # RWKV's ``class RWKV_RNN(torch.jit.ScriptModule)`` with @script_method
    def build(m):
        class Mix(m.jit.ScriptModule):
            def __init__(self):
                super().__init__()
                self.eval()
                self.lin = m.nn.Linear(3, 2)

            @m.jit.script_method
            def forward(self, x, i: int):
                return self.lin(x) * i
        mod = Mix()
        return mod, (isinstance(mod, m.nn.Module), isinstance(mod, m.jit.ScriptModule),
                     mod.training, len(list(mod.parameters())))
    (tm, want), (gm, got) = build(torch), build(tracec)
    assert got == want == (True, True, False, 2)
    gm.load_state_dict({k: tracec.from_numpy(v.detach().numpy()) for k, v in tm.state_dict().items()})
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    np.testing.assert_allclose(gm(tracec.from_numpy(x), 3).detach().numpy(),
                               tm(torch.from_numpy(x), 3).detach().numpy(), rtol=1e-6)
