# PyTorch tutorial "Python Custom Operators" (advanced/python_custom_ops),
# written the way the tutorial has it: an image crop wrapped with
# @torch.library.custom_op("mylib::crop", mutates_args=()), its fake kernel
# (@crop.register_fake: pic.new_empty(...).permute(2, 0, 1)), a paste op
# and crop.register_autograd(backward, setup_context=setup_context); the
# numpy_mul op (x.numpy(force=True), torch.from_numpy(...).to(x.device))
# with ctx.save_for_backward / needs_input_grad in setup_context and
# backward; the mutating numpy_sin op (mutates_args={"output"},
# device_types="cpu", np.sin(input_np, out=output_np)); torch.library.opcheck
# over sample inputs; and the ops under torch.compile.  The tutorial's crop
# goes through PIL (torchvision's to_pil_image / F.crop): here it slices the
# array with numpy (height x width x channels, as PIL's), the same op.  Written for this test: a small model whose
# forward calls numpy_mul, a few SGD steps, and one compiled training step
# checked against the same step run eagerly.
import copy
from typing import Sequence

import numpy as np
import torch
import torch.nn as nn
from torch import Tensor

torch.manual_seed(0)


@torch.library.custom_op("mylib::crop", mutates_args=())
def crop(pic: torch.Tensor, box: Sequence[int]) -> torch.Tensor:
    x0, y0, x1, y1 = box
    # (PIL's image is height x width x channels: pil_to_tensor permutes it)
    img = np.ascontiguousarray(pic.cpu().numpy().transpose(1, 2, 0)[y0:y1, x0:x1])
    return torch.from_numpy(img).permute(2, 0, 1).to(pic.device)


@crop.register_fake
def _(pic, box):
    channels = pic.shape[0]
    x0, y0, x1, y1 = box
    result = pic.new_empty(y1 - y0, x1 - x0, channels).permute(2, 0, 1)
    # The result should have the same metadata (shape/strides/``dtype``/device)
    # as running the ``crop`` function above.
    return result


@torch.library.custom_op("mylib::paste", mutates_args=())
def paste(im1: torch.Tensor, im2: torch.Tensor, coord: Sequence[int]) -> torch.Tensor:
    assert im1.device == im2.device
    assert im1.dtype == im2.dtype
    result = im1.cpu().numpy().copy()
    x0, y0 = coord
    h, w = im2.shape[-2:]
    result[:, y0:y0 + h, x0:x0 + w] = im2.cpu().numpy()
    return torch.from_numpy(result).to(im1.device)


@paste.register_fake
def _(im1, im2, coord):
    assert im1.device == im2.device
    assert im1.dtype == im2.dtype
    return torch.empty_like(im1)


def backward(ctx, grad_output):
    grad_input = grad_output.new_zeros(ctx.pic_shape)
    grad_input = paste(grad_input, grad_output, ctx.coords)
    return grad_input, None


def setup_context(ctx, inputs, output):
    pic, box = inputs
    ctx.coords = box[:2]
    ctx.pic_shape = pic.shape


crop.register_autograd(backward, setup_context=setup_context)

img = torch.rand(3, 8, 10)


@torch.compile
def f(img):
    return crop(img, (2, 2, 6, 5))


cropped_img = f(img)
print("crop", tuple(cropped_img.shape), round(cropped_img.sum().item(), 5))
print("crop == slice", torch.equal(cropped_img, img[:, 2:5, 2:6]))

img = img.requires_grad_()
result = crop(img, (2, 2, 6, 5))
result.sum().backward()
print("crop grad sum", img.grad.sum().item(), "inside", img.grad[:, 2:5, 2:6].min().item())

examples = [
    [torch.randn(3, 8, 10), (2, 2, 6, 5)],
    [torch.randn(3, 8, 10, requires_grad=True), (1, 0, 9, 4)],
]
for example in examples:
    torch.library.opcheck(crop, example)
print("opcheck crop ok")


@torch.library.custom_op("mylib::numpy_mul", mutates_args=())
def numpy_mul(x: Tensor, y: Tensor) -> Tensor:
    x_np = x.numpy(force=True)
    y_np = y.numpy(force=True)
    z_np = x_np * y_np
    return torch.from_numpy(z_np).to(x.device)


@numpy_mul.register_fake
def _(x, y):
    return torch.empty_like(x)


def setup_context(ctx, inputs, output):
    ctx.save_for_backward(*inputs)


def backward(ctx, grad):
    x, y = ctx.saved_tensors
    grad_x = grad * y if ctx.needs_input_grad[0] else None
    grad_y = grad * x if ctx.needs_input_grad[1] else None
    return grad_x, grad_y


numpy_mul.register_autograd(backward, setup_context=setup_context)


def sample_inputs(device, *, requires_grad=False):
    def make_tensor(*size):
        return torch.randn(size, device=device, requires_grad=requires_grad)

    def make_nograd_tensor(*size):
        return torch.randn(size, device=device, requires_grad=False)

    return [
        [make_tensor(3), make_tensor(3)],
        [make_tensor(2, 3), make_tensor(2, 3)],
        [make_tensor(3), make_nograd_tensor(3)],
    ]


# Use torch.library.opcheck to test that the custom operator was correctly
# registered.
samples = sample_inputs("cpu", requires_grad=True)
samples.extend(sample_inputs("cpu", requires_grad=False))
for example in samples:
    torch.library.opcheck(numpy_mul, example)
    # Compare the result against the reference implementation
    result = numpy_mul(*example)
    expected = torch.mul(*example)
    torch.testing.assert_close(result, expected)
print("opcheck numpy_mul ok")

x = torch.randn(3, requires_grad=True)
y = torch.randn(3, requires_grad=True)
z = numpy_mul(x, y)
z.sum().backward()
print("numpy_mul grads", torch.allclose(x.grad, y.detach()), torch.allclose(y.grad, x.detach()))


@torch.library.custom_op("mylib::numpy_sin", mutates_args={"output"}, device_types="cpu")
def numpy_sin(input: Tensor, output: Tensor) -> None:
    assert input.device == output.device
    assert input.device.type == "cpu"
    input_np = input.numpy()
    output_np = output.numpy()
    np.sin(input_np, out=output_np)


@torch.compile
def g(x):
    out = torch.empty(3)
    numpy_sin(x, out)
    return out


x = torch.randn(3)
y = g(x)
print("numpy_sin", torch.allclose(y, x.sin()), [round(v, 5) for v in y.tolist()])

example_inputs = [
    [torch.randn(3), torch.empty(3)],
    [torch.randn(0, 3), torch.empty(0, 3)],
    [torch.randn(1, 2, 3, 4, dtype=torch.double), torch.empty(1, 2, 3, 4, dtype=torch.double)],
]
for example in example_inputs:
    torch.library.opcheck(numpy_sin, example)
print("opcheck numpy_sin ok")


class ScaledMLP(nn.Module):
    """A model whose forward calls the custom op (learned per-feature gain)."""

    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(6, 16)
        self.gain = nn.Parameter(torch.ones(16))
        self.fc2 = nn.Linear(16, 1)

    def forward(self, x):
        h = torch.tanh(self.fc1(x))
        return self.fc2(numpy_mul(h, self.gain.expand_as(h).contiguous()))


model = ScaledMLP()
optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
xs = torch.randn(32, 6)
ys = xs[:, :1] * 2 - xs[:, 1:2]


def train_step(xb, yb):
    optimizer.zero_grad()
    loss = nn.functional.mse_loss(model(xb), yb)
    loss.backward()
    optimizer.step()
    return loss


for step in range(5):
    print("step", step, "loss", round(train_step(xs, ys).item(), 6))

state, opt_state = copy.deepcopy(model.state_dict()), copy.deepcopy(optimizer.state_dict())
loss_c = torch.compile(train_step)(xs, ys)
after_c = copy.deepcopy(model.state_dict())
model.load_state_dict(state)
optimizer.load_state_dict(opt_state)
loss_e = train_step(xs, ys)
print("compiled loss", round(loss_c.item(), 6))
print("compiled == eager", torch.allclose(loss_c, loss_e, atol=1e-6),
      all(torch.allclose(after_c[k], v, atol=1e-6) for k, v in model.state_dict().items()))
