# pytorch/tutorials, recipes_source/recipes/module_load_state_dict_tips.py
# ("Tips for Loading an nn.Module from a Checkpoint"): torch.save of a
# state_dict, torch.load(mmap=True), a model built under
# torch.device('meta'), load_state_dict(assign=True), the vanilla
# torch.load + load_state_dict, and the in-place copy into a meta tensor
# being a no-op (PyTorch warns); the optimizer made after an assign=True
# load.
# Changes for a test: torch.manual_seed(0); what the recipe only computes
# is printed; the loaded models are chained and compared; SomeModule's
# forward (self.linears(x) on a ModuleList, which raises in PyTorch) is
# shown raising; one SGD step on the assigned parameters, and the same
# step under torch.compile checked against eager.
import copy

import torch
from torch import nn

torch.manual_seed(0)

class SomeModule(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.linears = nn.ModuleList([nn.Linear(1, 1) for i in range(10)])

    def forward(self, x):
        return self.linears(x)


m = SomeModule()
torch.save(m.state_dict(), 'checkpoint.pth')
state_dict = torch.load('checkpoint.pth', mmap=True)
with torch.device('meta'):
  meta_m = SomeModule()
print('meta before', meta_m.linears[0].weight.device, meta_m.linears[0].weight.is_meta)
meta_m.load_state_dict(state_dict, assign=True)
print('after assign', meta_m.linears[0].weight.device, meta_m.linears[0].weight.is_meta,
      isinstance(meta_m.linears[0].weight, nn.Parameter), meta_m.linears[0].weight.requires_grad)

state_dict = torch.load('checkpoint.pth')
m = SomeModule()
m.load_state_dict(state_dict)
print('loaded equal', all(torch.equal(a, b) for a, b in zip(m.state_dict().values(), meta_m.state_dict().values())))

with torch.device('meta'):
  meta_m = SomeModule()
print(meta_m.load_state_dict(torch.load('checkpoint.pth', mmap=True), assign=True))
x = torch.randn(4, 1)
y = x
for lin in meta_m.linears:
    y = lin(y)
z = x
for lin in m.linears:
    z = lin(z)
print('chained', y.squeeze(1), torch.equal(y, z))
try:
    m(x)
except NotImplementedError as e:
    print('SomeModule.forward:', type(e).__name__)
# an in-place copy into a meta tensor is a no-op
with torch.device('meta'):
  meta_m = SomeModule()
meta_m.load_state_dict(state_dict)
print('copy into meta', meta_m.linears[0].weight.is_meta, meta_m.linears[0].weight.shape)

# the optimizer must be made after an assign=True load
with torch.device('meta'):
  meta_m = SomeModule()
opt = torch.optim.SGD(meta_m.parameters(), lr=0.1)
meta_m.load_state_dict(state_dict, assign=True)
print('optimizer holds the meta parameters', opt.param_groups[0]['params'][0].is_meta)
opt = torch.optim.SGD(meta_m.parameters(), lr=0.1)
loss = sum(lin(x).pow(2).sum() for lin in meta_m.linears)
loss.backward()
opt.step()
print('step', f'{loss.item():.6f}', meta_m.linears[3].weight.detach().squeeze())

# compiled: the same step on the loaded model checked against eager
state, opt_state = copy.deepcopy(meta_m.state_dict()), copy.deepcopy(opt.state_dict())


def train_step(x):
    opt.zero_grad()
    loss = sum(lin(x).pow(2).sum() for lin in meta_m.linears)
    loss.backward()
    opt.step()
    return loss


loss_c = torch.compile(train_step)(x)
after_c = copy.deepcopy(meta_m.state_dict())
meta_m.load_state_dict(state)
opt.load_state_dict(opt_state)
loss_e = train_step(x)
print('compiled == eager', torch.allclose(loss_c, loss_e, atol=1e-6),
      all(torch.allclose(after_c[k], v, atol=1e-6) for k, v in meta_m.state_dict().items()))
