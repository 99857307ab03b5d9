# PyTorch tutorials "Learning PyTorch with Examples: PyTorch: Defining New
# autograd Functions" (LegendrePolynomial3), "Double Backward with Custom
# Functions" and the "Extending PyTorch" notes (LinearFunction with
# needs_input_grad, MulConstant, mark_non_differentiable, set_materialize_grads,
# once_differentiable, gradcheck/gradgradcheck), plus activation
# checkpointing with torch.utils.checkpoint.checkpoint(use_reentrant=False).
# Data come from numpy so tracec and torch run the same numbers.
import math

import numpy as np
import torch
from torch.autograd import Function
from torch.autograd.function import once_differentiable
from torch.utils.checkpoint import checkpoint

rng = np.random.default_rng(0)


def npt(*shape, dtype=np.float32):
    return torch.from_numpy(rng.standard_normal(shape).astype(dtype))


class LegendrePolynomial3(torch.autograd.Function):
    @staticmethod
    def forward(ctx, input):
        ctx.save_for_backward(input)
        return 0.5 * (5 * input ** 3 - 3 * input)

    @staticmethod
    def backward(ctx, grad_output):
        input, = ctx.saved_tensors
        return grad_output * 1.5 * (5 * input ** 2 - 1)


dtype = torch.float
device = torch.device("cpu")
x = torch.linspace(-math.pi, math.pi, 2000, device=device, dtype=dtype)
y = torch.sin(x)

a = torch.full((), 0.0, device=device, dtype=dtype, requires_grad=True)
b = torch.full((), -1.0, device=device, dtype=dtype, requires_grad=True)
c = torch.full((), 0.0, device=device, dtype=dtype, requires_grad=True)
d = torch.full((), 0.3, device=device, dtype=dtype, requires_grad=True)

learning_rate = 5e-6
for t in range(200):
    P3 = LegendrePolynomial3.apply
    y_pred = a + b * P3(c + d * x)
    loss = (y_pred - y).pow(2).sum()
    if t % 50 == 49:
        print(t, '%.4f' % loss.item())
    loss.backward()
    with torch.no_grad():
        a -= learning_rate * a.grad
        b -= learning_rate * b.grad
        c -= learning_rate * c.grad
        d -= learning_rate * d.grad
        a.grad = None
        b.grad = None
        c.grad = None
        d.grad = None
print(f'Result: y = {a.item():.4f} + {b.item():.4f} * P3({c.item():.4f} + {d.item():.4f} x)')
print(y_pred.grad_fn.name(), P3(c + d * x).grad_fn.name())


calls = []


class LinearFunction(Function):
    @staticmethod
    def forward(input, weight, bias):
        output = input.mm(weight.t())
        if bias is not None:
            output += bias.unsqueeze(0).expand_as(output)
        return output

    @staticmethod
    def setup_context(ctx, inputs, output):
        input, weight, bias = inputs
        ctx.save_for_backward(input, weight, bias)

    @staticmethod
    def backward(ctx, grad_output):
        input, weight, bias = ctx.saved_tensors
        grad_input = grad_weight = grad_bias = None
        if ctx.needs_input_grad[0]:
            grad_input = grad_output.mm(weight)
        if ctx.needs_input_grad[1]:
            grad_weight = grad_output.t().mm(input)
        if bias is not None and ctx.needs_input_grad[2]:
            grad_bias = grad_output.sum(0)
        if calls.append(1) or len(calls) <= 2:   # (gradcheck's own calls vary)
            print('needs_input_grad', ctx.needs_input_grad)
        return grad_input, grad_weight, grad_bias


class MulConstant(Function):
    @staticmethod
    def forward(tensor, constant):
        return tensor * constant

    @staticmethod
    def setup_context(ctx, inputs, output):
        _, constant = inputs
        ctx.constant = constant

    @staticmethod
    def backward(ctx, grad_output):
        return grad_output * ctx.constant, None


class MyCube(torch.autograd.Function):
    @staticmethod
    def forward(x):
        result = x ** 3
        dx = 3 * x ** 2
        return result, dx

    @staticmethod
    def setup_context(ctx, inputs, output):
        x, = inputs
        result, dx = output
        ctx.save_for_backward(x, dx)

    @staticmethod
    def backward(ctx, grad_output, grad_dx):
        x, dx = ctx.saved_tensors
        result = grad_output * dx + grad_dx * 6 * x
        return result


class Exp(Function):
    @staticmethod
    def forward(ctx, i):
        result = i.exp()
        ctx.save_for_backward(result)
        return result

    @staticmethod
    def backward(ctx, grad_output):
        result, = ctx.saved_tensors
        return grad_output * result


class Sort(Function):
    @staticmethod
    def forward(ctx, x):
        out, idx = x.sort()
        ctx.mark_non_differentiable(idx)
        ctx.save_for_backward(x, idx)
        return out, idx

    @staticmethod
    def backward(ctx, g1, g2):
        x, idx = ctx.saved_tensors
        grad_input = torch.zeros_like(x)
        grad_input.index_add_(0, idx, g1)
        return grad_input


class SimpleFunc(Function):
    @staticmethod
    def forward(ctx, x):
        ctx.set_materialize_grads(False)
        return x.clone(), x.clone()

    @staticmethod
    @once_differentiable
    def backward(ctx, g1, g2):
        x = torch.zeros(2)
        if g1 is not None:
            x += g1
        if g2 is not None:
            x += g2
        print('materialized', g1 is not None, g2 is not None)
        return x


class ScaleOnce(Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * x

    @staticmethod
    @once_differentiable
    def backward(ctx, g):
        x, = ctx.saved_tensors
        return 2 * x * g


inp = npt(4, 3, dtype=np.float64).requires_grad_()
w = npt(2, 3, dtype=np.float64).requires_grad_()
bias = npt(2, dtype=np.float64).requires_grad_()
out = LinearFunction.apply(inp, w, bias)
out.sum().backward()
print('linear', '%.6f' % out.sum().item(), '%.6f' % inp.grad.sum().item(), '%.6f' % w.grad.sum().item(),
      '%.6f' % bias.grad.sum().item())
out = LinearFunction.apply(inp.detach(), w, None)
out.sum().backward()
print(torch.autograd.gradcheck(LinearFunction.apply, (inp, w, bias), eps=1e-6, atol=1e-4))
print(torch.autograd.gradcheck(lambda t: MulConstant.apply(t, 2.5), (inp,)))

xc = npt(5, dtype=np.float64).requires_grad_()
print(torch.autograd.gradcheck(lambda v: MyCube.apply(v)[0], (xc,)))
print(torch.autograd.gradgradcheck(lambda v: MyCube.apply(v)[0], (xc,)))
cube, dx = MyCube.apply(xc)
g, = torch.autograd.grad(cube.sum(), xc, create_graph=True)
gg, = torch.autograd.grad(g.sum(), xc)
print('double backward', '%.6f' % g.sum().item(), '%.6f' % gg.sum().item())
print(torch.autograd.gradgradcheck(Exp.apply, (xc,)))

xs = npt(6).requires_grad_()
out, idx = Sort.apply(xs)
print('sort', out.requires_grad, idx.requires_grad, idx.dtype)
(out * torch.arange(6.)).sum().backward()
print('sort grad', xs.grad.tolist() == torch.arange(6.)[torch.argsort(idx)].tolist())

x2 = torch.tensor([1., 2.], requires_grad=True)
o1, o2 = SimpleFunc.apply(x2)
o1.sum().backward()
print('SimpleFunc grad', x2.grad.tolist())

x3 = npt(3).requires_grad_()
y3 = ScaleOnce.apply(x3)
g3, = torch.autograd.grad(y3.sum(), x3, create_graph=True)
print('once_differentiable', g3.requires_grad, g3.grad_fn is not None)
try:
    g3.sum().backward()
except RuntimeError as e:
    print('RuntimeError', str(e).split('\n')[0])

try:
    torch.autograd.gradcheck(lambda v: ScaleOnce.apply(v) + 0 * v.sum(), (npt(3, dtype=np.float32).requires_grad_(),))
except Exception as e:
    print(type(e).__name__, str(e).split('\n')[0][:60])


# activation checkpointing, non-reentrant
class Block(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin1 = torch.nn.Linear(8, 16)
        self.lin2 = torch.nn.Linear(16, 8)

    def forward(self, x):
        return x + self.lin2(torch.tanh(self.lin1(x)))


class Net(torch.nn.Module):
    def __init__(self, use_checkpoint):
        super().__init__()
        self.blocks = torch.nn.ModuleList([Block() for _ in range(3)])
        self.head = torch.nn.Linear(8, 1)
        self.use_checkpoint = use_checkpoint

    def forward(self, x):
        for blk in self.blocks:
            x = checkpoint(blk, x, use_reentrant=False) if self.use_checkpoint else blk(x)
        return self.head(x)


nets = [Net(False), Net(True)]
with torch.no_grad():
    for p, q in zip(nets[0].parameters(), nets[1].parameters()):
        v = 0.3 * npt(*p.shape)
        p.copy_(v)
        q.copy_(v)
xb, yb = npt(16, 8), npt(16, 1)
opts = [torch.optim.SGD(n.parameters(), lr=0.05) for n in nets]
for step in range(3):
    losses = []
    for n, o in zip(nets, opts):
        o.zero_grad()
        loss = torch.nn.functional.mse_loss(n(xb), yb)
        loss.backward()
        o.step()
        losses.append(loss.item())
    print('checkpoint step', step, '%.6f %.6f' % tuple(losses))
xg = npt(4, 8).requires_grad_()
out = checkpoint(lambda t: (t.sin() * 2).sum(), xg, use_reentrant=False)
gx, = torch.autograd.grad(out, xg, create_graph=True)
ggx, = torch.autograd.grad(gx.sum(), xg)
print('checkpoint double backward', '%.6f' % gx.sum().item(), '%.6f' % ggx.sum().item())
