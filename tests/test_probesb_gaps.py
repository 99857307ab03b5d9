"""Gaps found by probing the parts of training programs around the model
(optimizers, schedulers, data loading, checkpoints, the nn.Module API),
each checked against torch 2.13 in the same process."""
import torch

import tracec


def _hook_log(lib):
    import importlib
    oo = importlib.import_module(lib.__name__ + ".optim.optimizer")
    log = []
    lib.manual_seed(0)
    m = lib.nn.Linear(2, 1)
    opt = lib.optim.SGD(m.parameters(), lr=0.1)
    g = oo.register_optimizer_step_pre_hook(lambda o, a, k: log.append(("gpre", len(a), a[0] is o)))
    opt.register_step_pre_hook(lambda o, a, k: (a, {"closure": None}))
    opt.register_step_post_hook(lambda o, a, k: log.append(("post", len(a), dict(k))))
    opt.register_state_dict_pre_hook(lambda o: log.append("sd pre"))
    opt.register_state_dict_post_hook(lambda o, sd: {**sd, "extra": 1})
    opt.register_load_state_dict_pre_hook(lambda o, sd: log.append(("lsd pre", sorted(sd))))
    opt.register_load_state_dict_post_hook(lambda o: log.append("lsd post"), prepend=True)
    m(lib.ones(1, 2)).sum().backward()
    opt.step()
    g.remove()
    opt.step()
    sd = opt.state_dict()
    log.append(sorted(sd))
    opt.load_state_dict(sd)
    return log


def test_optimizer_hooks_follow_torch():
    """State-dict hooks exist; step hooks see ``(self, *args)`` as PyTorch's
    ``profile_hook_step`` passes them; global step hooks run."""
    assert _hook_log(tracec) == _hook_log(torch)
