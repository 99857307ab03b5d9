# pytorch/tutorials, intermediate_source/optimizer_step_in_backward_tutorial.py
# ("How to save memory by fusing the optimizer step into the backward
# pass"): a torchvision vision transformer trained with Adam, then the same
# with one Adam(foreach=False) per parameter in a dict, stepped and zeroed
# by Tensor.register_post_accumulate_grad_hook during backward, and train()
# without optimizer.step().
# Changes for a CPU test: models.VisionTransformer built small (image_size
# 32, patch_size 16, 2 layers, 2 heads, hidden 32) in place of
# vit_l_16(weights='DEFAULT') (no download), no .cuda() and no CUDA memory
# snapshots; IMAGE_SIZE 32; torch.manual_seed(0); the losses and a
# parameter checksum printed; the fused run starts from the same weights as
# the plain one, and is checked against the plain Adam trajectory; one
# fused step under torch.compile checked against eager.
import copy

import torch
from torchvision import models

torch.manual_seed(0)
model = models.VisionTransformer(image_size=32, patch_size=16, num_layers=2, num_heads=2,
                                 hidden_dim=32, mlp_dim=64, num_classes=10)
init = copy.deepcopy(model.state_dict())
optimizer = torch.optim.Adam(model.parameters())

IMAGE_SIZE = 32

def train(model, optimizer):
  # create our fake image input: tensor shape is batch_size, channels, height, width
  fake_image = torch.rand(1, 3, IMAGE_SIZE, IMAGE_SIZE)

  # call our forward and backward
  loss = model.forward(fake_image)
  loss.sum().backward()

  # optimizer update
  optimizer.step()
  optimizer.zero_grad()
  return loss.sum()


def checksum(model):
  return sum(p.detach().double().abs().sum().item() for p in model.parameters())


torch.manual_seed(1)
for _ in range(3):
  print(f'plain loss {train(model, optimizer).item():.6f}')
plain = copy.deepcopy(model.state_dict())
print(f'plain checksum {checksum(model):.6f}')

model.load_state_dict(init)
del optimizer

# Instead of having just *one* optimizer, we will have a ``dict`` of optimizers
# for every parameter so we could reference them in our hook.
optimizer_dict = {p: torch.optim.Adam([p], foreach=False) for p in model.parameters()}

# Define our hook, which will call the optimizer ``step()`` and ``zero_grad()``
def optimizer_hook(parameter) -> None:
  optimizer_dict[parameter].step()
  optimizer_dict[parameter].zero_grad()

# Register the hook onto every parameter
for p in model.parameters():
   p.register_post_accumulate_grad_hook(optimizer_hook)

def train(model):
  # create our fake image input: tensor shape is batch_size, channels, height, width
  fake_image = torch.rand(1, 3, IMAGE_SIZE, IMAGE_SIZE)

  # call our forward and backward
  loss = model.forward(fake_image)
  loss.sum().backward()
  return loss.sum()

  # optimizer update --> no longer needed!
  # optimizer.step()
  # optimizer.zero_grad()


torch.manual_seed(1)
for _ in range(3):
  print(f'fused loss {train(model).item():.6f}')
print(f'fused checksum {checksum(model):.6f}')
print('grads freed', all(p.grad is None for p in model.parameters()))
print('fused == plain', all(torch.allclose(v, plain[k], atol=1e-6) for k, v in model.state_dict().items()))
print('adam steps', sorted({int(o.state[p]['step']) for p, o in optimizer_dict.items()}))

# compiled: one fused step (the hooks run in the compiled backward) checked against eager
state = copy.deepcopy(model.state_dict())
opt_states = {p: copy.deepcopy(o.state_dict()) for p, o in optimizer_dict.items()}
model.eval()                    # (no dropout: the same step twice)
fake_image = torch.rand(2, 3, IMAGE_SIZE, IMAGE_SIZE)


def step(x):
  loss = model(x).sum()
  loss.backward()
  return loss


loss_c = torch.compile(step)(fake_image)
after_c = copy.deepcopy(model.state_dict())
model.load_state_dict(state)
for p, o in optimizer_dict.items():
  o.load_state_dict(opt_states[p])
loss_e = step(fake_image)
print('compiled == eager', torch.allclose(loss_c, loss_e, atol=1e-6),
      all(torch.allclose(after_c[k], v, atol=1e-6) for k, v in model.state_dict().items()))
