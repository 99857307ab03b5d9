"""``torch.jit`` in passing: scripted and traced callables run as Python and
give eager's numbers; TorchScript archives are refused with a clear error."""
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


def test_archives_are_refused():
    with pytest.raises(NotImplementedError, match="no TorchScript"):
        tracec.jit.save(tracec.nn.Linear(2, 2), "m.pt")
    with pytest.raises(NotImplementedError, match="tracec.save"):
        tracec.jit.load("m.pt")


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
