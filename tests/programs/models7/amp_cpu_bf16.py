# The PyTorch "Automatic Mixed Precision" recipe (recipes/recipes/amp_recipe.py:
# make_model, the autocast + GradScaler loop with its dtype asserts,
# unscale_ before clip_grad_norm_, the checkpoint with the scaler's
# state_dict and its resume) written device-agnostic as scripts are:
# device = "cuda" if available else "cpu", torch.autocast(device_type=device,
# dtype=...), torch.amp.GradScaler(device), on CPU with bfloat16 (and one
# float16 pass); the ops autocast runs in float32 (softmax, log_softmax,
# mse_loss, cross_entropy) and those it runs in the lower precision (linear,
# matmul, conv); custom_fwd / custom_bwd; an overflowing step the scaler
# skips.  Changes for a CPU test: sizes (in_size=16, out_size=8, num_layers=2,
# batch 8, 3 epochs of 4 batches), the overflow is forced by scaling one
# loss by inf, printed losses are rounded to bfloat16's precision, and the
# weights come from numpy, so tracec and torch compute the same numbers.
# Then the training step under torch.compile against the same step run
# eagerly.
import copy

import numpy as np
import torch
import torch.nn.functional as F

device = "cuda" if torch.cuda.is_available() else "cpu"
amp_dtype = torch.float16 if device == "cuda" else torch.bfloat16


def make_model(in_size, out_size, num_layers):
    layers = []
    for _ in range(num_layers - 1):
        layers.append(torch.nn.Linear(in_size, in_size))
        layers.append(torch.nn.ReLU())
    layers.append(torch.nn.Linear(in_size, out_size))
    return torch.nn.Sequential(*tuple(layers)).to(device=device)


def numpy_init(model, seed):
    r = np.random.default_rng(seed)
    with torch.no_grad():
        for p in model.parameters():
            v = 0.1 * r.standard_normal(tuple(p.shape)) if p.dim() == 1 else \
                r.standard_normal(tuple(p.shape)) * (1.0 / p.shape[1]) ** 0.5
            p.copy_(torch.from_numpy(v.astype(np.float32)))
    return model


batch_size = 8
in_size = 16
out_size = 8
num_layers = 2
num_batches = 4
epochs = 3

rng = np.random.default_rng(0)
data = [torch.from_numpy(rng.standard_normal((batch_size, in_size)).astype(np.float32)).to(device)
        for _ in range(num_batches)]
targets = [torch.from_numpy(rng.standard_normal((batch_size, out_size)).astype(np.float32)).to(device)
           for _ in range(num_batches)]
loss_fn = torch.nn.MSELoss().to(device)

# what autocast runs in which dtype
a, b = data[0], data[1]
with torch.autocast(device_type=device, dtype=amp_dtype):
    print("enabled", torch.is_autocast_enabled(device), torch.get_autocast_dtype(device))
    lin = F.linear(a, torch.ones(4, in_size))
    mm = a @ b.t()
    conv = F.conv1d(a.unsqueeze(1), torch.ones(2, 1, 3))
    sm = torch.softmax(mm, dim=-1)
    lsm = F.log_softmax(mm, dim=-1)
    mse = F.mse_loss(lin, torch.zeros(8, 4))
    ce = F.cross_entropy(mm, torch.arange(8))
    added = lin + a[:, :4]
    print("dtypes", lin.dtype, mm.dtype, conv.dtype, sm.dtype, lsm.dtype, mse.dtype, ce.dtype, added.dtype)
    with torch.autocast(device_type=device, enabled=False):
        print("disabled inside", (a @ b.t()).dtype, torch.is_autocast_enabled(device))
print("outside", torch.is_autocast_enabled(device), (a @ b.t()).dtype)
print("bf16 linear", [f"{v:.3f}" for v in lin[0].float().tolist()])
print("bf16 mse", f"{mse.item():.3f}", f"{ce.item():.2f}")

net = numpy_init(make_model(in_size, out_size, num_layers), 0)
opt = torch.optim.SGD(net.parameters(), lr=0.01)
scaler = torch.amp.GradScaler(device)
print("scaler", scaler.is_enabled(), scaler.get_scale(), scaler.get_growth_factor(), scaler.get_backoff_factor(),
      scaler.get_growth_interval())

use_amp = True
for epoch in range(epochs):
    for i, (input, target) in enumerate(zip(data, targets)):
        with torch.autocast(device_type=device, dtype=amp_dtype, enabled=use_amp):
            output = net(input)
            assert output.dtype is amp_dtype
            loss = loss_fn(output, target)
            assert loss.dtype is torch.float32
            if epoch == 1 and i == 2:
                loss = loss * float("inf")   # an overflow: the scaler skips this step
        scaler.scale(loss).backward()

        # Unscales the gradients of optimizer's assigned params in-place
        scaler.unscale_(opt)

        # Since the gradients of optimizer's assigned params are now unscaled, clips as usual.
        # You may use the same value for max_norm here as you would without gradient scaling.
        gn = torch.nn.utils.clip_grad_norm_(net.parameters(), max_norm=0.1)

        scaler.step(opt)
        scaler.update()
        opt.zero_grad(set_to_none=True)  # set_to_none=True here can modestly improve performance
    print(f"epoch {epoch} loss {loss.item():.2f} scale {scaler.get_scale():.1f} gn {gn.item():.1f}",
          scaler._get_growth_tracker() if hasattr(scaler, "_get_growth_tracker") else "")
print("weight", [f"{v:.3f}" for v in net[0].weight[0, :4].tolist()], net[0].weight.dtype,
      net[0].weight.grad is None)

checkpoint = {"model": net.state_dict(),
              "optimizer": opt.state_dict(),
              "scaler": scaler.state_dict()}
print("scaler state", sorted(checkpoint["scaler"].items()))
torch.save(checkpoint, "amp.pt")
checkpoint = torch.load("amp.pt", map_location=lambda storage, loc: storage)
net2 = make_model(in_size, out_size, num_layers)
opt2 = torch.optim.SGD(net2.parameters(), lr=0.01)
scaler2 = torch.amp.GradScaler(device)
net2.load_state_dict(checkpoint["model"])
opt2.load_state_dict(checkpoint["optimizer"])
scaler2.load_state_dict(checkpoint["scaler"])
print("resumed", scaler2.get_scale(), torch.equal(net2[0].weight, net[0].weight))

# float16 autocast on CPU, and a disabled scaler (what scripts do for bfloat16)
with torch.autocast(device_type="cpu", dtype=torch.float16):
    print("fp16", net(data[0]).dtype, torch.get_autocast_dtype("cpu"))
off = torch.amp.GradScaler(device, enabled=False)
print("disabled scaler", off.is_enabled(), off.scale(loss) is loss, off.get_scale(), off.state_dict())


# custom_fwd / custom_bwd
class MyMM(torch.autograd.Function):
    @staticmethod
    @torch.amp.custom_fwd(device_type=device, cast_inputs=torch.float32)
    def forward(ctx, a, b):
        ctx.save_for_backward(a, b)
        return a.mm(b)

    @staticmethod
    @torch.amp.custom_bwd(device_type=device)
    def backward(ctx, grad):
        a, b = ctx.saved_tensors
        return grad.mm(b.t()), a.t().mm(grad)


x1 = data[0].clone().requires_grad_()
with torch.autocast(device_type=device, dtype=amp_dtype):
    out = MyMM.apply(x1, data[1].t())
    print("custom_fwd", out.dtype, (out.float() * 2).sum().dtype)
out.sum().backward()
print("custom_bwd", x1.grad.dtype, f"{x1.grad.sum().item():.3f}")


def train_step(input, target):
    with torch.autocast(device_type=device, dtype=amp_dtype):
        output = net(input)
        loss = loss_fn(output, target)
    scaler.scale(loss).backward()
    scaler.unscale_(opt)
    torch.nn.utils.clip_grad_norm_(net.parameters(), max_norm=0.1)
    scaler.step(opt)
    scaler.update()
    opt.zero_grad(set_to_none=True)
    return loss


model, optimizer = net, opt


# the training step under torch.compile against the same step run eagerly
def compile_check(model, optimizer, train_step, *batch, steps=2):
    model.train()
    state, opt_state = copy.deepcopy(model.state_dict()), copy.deepcopy(optimizer.state_dict())
    eager = [train_step(*batch).item() for _ in range(steps)]
    after = copy.deepcopy(model.state_dict())
    model.load_state_dict(state)
    optimizer.load_state_dict(opt_state)
    cstep = torch.compile(train_step)
    compiled = [cstep(*batch).item() for _ in range(steps)]
    print("compiled losses", [f"{v:.5f}" for v in compiled])
    print("compiled == eager:", all(abs(a - b) <= 1e-4 * max(1.0, abs(b)) for a, b in zip(compiled, eager)),
          all(torch.allclose(model.state_dict()[k].float(), after[k].float(), rtol=1e-3, atol=1e-5)
              for k in after))
compile_check(model, optimizer, train_step, data[0], targets[0])
