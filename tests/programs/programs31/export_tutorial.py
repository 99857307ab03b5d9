# PyTorch tutorial "torch.export Tutorial" (intermediate/torch_export_
# tutorial), its first sections written the way the tutorial has them:
# MyModule (Linear(100, 10), F.relu(..., inplace=True) over x + y),
# torch.export.export(mod, (torch.randn(8, 100), torch.randn(8, 100))),
# the ExportedProgram's module() called on new inputs, dynamic shapes with
# torch.export.Dim("batch") and the error for an input that breaks the
# exported program's static shape.  What the tutorial prints of the graph itself (its aten-level node names)
# is not printed here: the program prints the outputs and what users check
# of the program (its type, its module's class, the parameter names).
# Written for this test: the module trained for a few steps (one compiled
# step checked against the same step run eagerly), then exported again and
# the new program's module checked against it.  (tracec's ep.module() runs
# forward only, without autograd, and its float32 results may differ from
# eager in the last bits: the comparisons use atol=1e-5.)
import copy

import torch
from torch.export import Dim, export

torch.manual_seed(0)


class MyModule(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = torch.nn.Linear(100, 10)

    def forward(self, x, y):
        return torch.nn.functional.relu(self.lin(x + y), inplace=True)


mod = MyModule()
exported_mod = export(mod, (torch.randn(8, 100), torch.randn(8, 100)))
print(type(exported_mod).__name__)
x, y = torch.randn(8, 100), torch.randn(8, 100)
out = exported_mod.module()(x, y)
print(out.shape, torch.allclose(out, mod(x, y), atol=1e-5), round(out.sum().item(), 5))
print(sorted(k for k, _ in exported_mod.module().named_parameters()))
print(sorted(exported_mod.state_dict.keys()))

try:
    exported_mod.module()(torch.randn(4, 100), torch.randn(4, 100))
except Exception as e:
    print("static batch:", type(e).__name__)

batch = Dim("batch")
dyn = export(mod, (torch.randn(8, 100), torch.randn(8, 100)),
             dynamic_shapes={"x": {0: batch}, "y": {0: batch}})
for n in (3, 8, 17):
    a, b = torch.randn(n, 100), torch.randn(n, 100)
    r = dyn.module()(a, b)
    print("dynamic batch", n, tuple(r.shape), torch.allclose(r, mod(a, b), atol=1e-5))

model = mod
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
target = torch.rand(8, 10)


def train_step(x, y, target):
    optimizer.zero_grad()
    loss = torch.nn.functional.mse_loss(model(x, y), target)
    loss.backward()
    optimizer.step()
    return loss


for step in range(3):
    print("step", step, "loss", round(train_step(x, y, target).item(), 6))

state, opt_state = copy.deepcopy(model.state_dict()), copy.deepcopy(optimizer.state_dict())
loss_c = torch.compile(train_step)(x, y, target)
after_c = copy.deepcopy(model.state_dict())
model.load_state_dict(state)
optimizer.load_state_dict(opt_state)
loss_e = train_step(x, y, target)
print("compiled loss", round(loss_c.item(), 6))
print("compiled == eager", torch.allclose(loss_c, loss_e, atol=1e-6),
      all(torch.allclose(after_c[k], v, atol=1e-6) for k, v in model.state_dict().items()))

trained = export(model, (x, y)).module()
print("re-exported == trained", torch.allclose(trained(x, y), model(x, y), atol=1e-5))
