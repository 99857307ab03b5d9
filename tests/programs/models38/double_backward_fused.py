# PyTorch tutorials "Double Backward with Custom Functions" and "Fusing
# Convolution and Batch Norm using Custom Function", written the way the
# tutorials have them: Square (saves its input), Exp (saves its output),
# Sinh returning its intermediates as outputs, SinhBad's ctx attributes
# (first derivative right, second not), Cube with a CubeBackward Function
# for its double backward, each checked with autograd.gradcheck /
# gradgradcheck in double; Conv2D with @once_differentiable and
# convolution_backward from conv2d / conv_transpose2d (checked against
# torch.nn.grad.conv2d_input / conv2d_weight), BatchNorm's
# batch_norm_backward by hand with in-place buffers, FusedConvBN2DFunction
# recomputing the conv in backward, FusedConvBN with kaiming_uniform_, and
# the MNIST Net (fused / unfused, F.relu_, Dropout(0.5), log_softmax)
# trained with Adadelta + StepLR, tested under inference_mode, and the
# torch.cuda.max_memory_allocated lines guarded by use_cuda.  Changes for a
# CPU test: torchviz.make_dot left out; random 12x12 "MNIST" tensors (16
# train, 8 test, batch 8) instead of the dataset; 4 / 8 channels and fc1 of
# 16 units; one epoch; then the unfused Net's training step (eval mode:
# no dropout) under torch.compile checked against eager.
import copy
import math

import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim
from torch.autograd.function import once_differentiable
from torch.optim.lr_scheduler import StepLR

torch.manual_seed(0)


class Square(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        # Because we are saving one of the inputs use `save_for_backward`
        # Save non-tensors and non-inputs/non-outputs directly on ctx
        ctx.save_for_backward(x)
        return x**2

    @staticmethod
    def backward(ctx, grad_out):
        # A function support double backward automatically if autograd
        # is able to record the computations performed in backward
        x, = ctx.saved_tensors
        return grad_out * 2 * x


# Use double precision because finite differencing method magnifies errors
x = torch.rand(3, 3, requires_grad=True, dtype=torch.double)
print('Square', torch.autograd.gradcheck(Square.apply, x))
# Use gradcheck to verify second-order derivatives
print('Square gradgrad', torch.autograd.gradgradcheck(Square.apply, x))

x = torch.tensor(1., requires_grad=True).clone()
out = Square.apply(x)
grad_x, = torch.autograd.grad(out, x, create_graph=True)
print('grad_x', grad_x.item(), type(grad_x.grad_fn).__name__, type(out.grad_fn).__name__)
ggx, = torch.autograd.grad(grad_x, x)
print('second derivative', ggx.item())


class Exp(torch.autograd.Function):
    # Simple case where everything goes well
    @staticmethod
    def forward(ctx, x):
        # This time we save the output
        result = torch.exp(x)
        # Note that we should use `save_for_backward` here when
        # the tensor saved is an ouptut (or an input).
        ctx.save_for_backward(result)
        return result

    @staticmethod
    def backward(ctx, grad_out):
        result, = ctx.saved_tensors
        return result * grad_out


x = torch.tensor(1., requires_grad=True, dtype=torch.double).clone()
# Validate our gradients using gradcheck
print('Exp', torch.autograd.gradcheck(Exp.apply, x))
print('Exp gradgrad', torch.autograd.gradgradcheck(Exp.apply, x))
out = Exp.apply(x)
grad_x, = torch.autograd.grad(out, x, create_graph=True)
print('Exp second derivative', torch.autograd.grad(grad_x, x)[0].item())


class Sinh(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        expx = torch.exp(x)
        expnegx = torch.exp(-x)
        ctx.save_for_backward(expx, expnegx)
        # In order to be able to save the intermediate results, a trick is to
        # include them as our outputs, so that the backward graph is constructed
        return (expx - expnegx) / 2, expx, expnegx

    @staticmethod
    def backward(ctx, grad_out, _grad_out_exp, _grad_out_negexp):
        expx, expnegx = ctx.saved_tensors
        grad_input = grad_out * (expx + expnegx) / 2
        # We cannot skip accumulating these even though we won't use the outputs
        # directly. They will be used later in the second backward.
        grad_input += _grad_out_exp * expx
        grad_input -= _grad_out_negexp * expnegx
        return grad_input


def sinh(x):
    # Create a wrapper that only returns the first output
    return Sinh.apply(x)[0]


x = torch.rand(3, 3, requires_grad=True, dtype=torch.double)
print('Sinh', torch.autograd.gradcheck(sinh, x))
print('Sinh gradgrad', torch.autograd.gradgradcheck(sinh, x))
g, = torch.autograd.grad(sinh(x).sum(), x, create_graph=True)
gg, = torch.autograd.grad(g.sum(), x)
print('Sinh second derivative == sinh', torch.allclose(gg, torch.sinh(x)), gg[0])


class SinhBad(torch.autograd.Function):
    # This is an example of what NOT to do!
    @staticmethod
    def forward(ctx, x):
        expx = torch.exp(x)
        expnegx = torch.exp(-x)
        ctx.expx = expx
        ctx.expnegx = expnegx
        return (expx - expnegx) / 2

    @staticmethod
    def backward(ctx, grad_out):
        expx = ctx.expx
        expnegx = ctx.expnegx
        grad_input = grad_out * (expx + expnegx) / 2
        return grad_input


x = torch.tensor(1., requires_grad=True, dtype=torch.double).clone()
out = SinhBad.apply(x)
grad_x, = torch.autograd.grad(out, x, create_graph=True)
print('SinhBad grad_x', grad_x.item(), 'requires_grad', grad_x.requires_grad)
print('SinhBad gradcheck', torch.autograd.gradcheck(SinhBad.apply, x))
print('SinhBad gradgradcheck', torch.autograd.gradgradcheck(SinhBad.apply, x, raise_exception=False))


def cube_forward(x):
    return x**3


def cube_backward(grad_out, x):
    return grad_out * 3 * x**2


def cube_backward_backward(grad_out, sav_grad_out, x):
    return grad_out * sav_grad_out * 6 * x


def cube_backward_backward_grad_out(grad_out, x):
    return grad_out * 3 * x**2


class Cube(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return cube_forward(x)

    @staticmethod
    def backward(ctx, grad_out):
        x, = ctx.saved_tensors
        return CubeBackward.apply(grad_out, x)


class CubeBackward(torch.autograd.Function):
    @staticmethod
    def forward(ctx, grad_out, x):
        ctx.save_for_backward(x, grad_out)
        return cube_backward(grad_out, x)

    @staticmethod
    def backward(ctx, grad_out):
        x, sav_grad_out = ctx.saved_tensors
        dx = cube_backward_backward(grad_out, sav_grad_out, x)
        dgrad_out = cube_backward_backward_grad_out(grad_out, x)
        return dgrad_out, dx


x = torch.tensor(2., requires_grad=True, dtype=torch.double)

print('Cube', torch.autograd.gradcheck(Cube.apply, x))
print('Cube gradgrad', torch.autograd.gradgradcheck(Cube.apply, x))
out = Cube.apply(x)
grad_x, = torch.autograd.grad(out, x, create_graph=True)
print('Cube grads', grad_x.item(), torch.autograd.grad(grad_x, x)[0].item(), type(grad_x.grad_fn).__name__)


# Fusing Convolution and Batch Norm using Custom Function
def convolution_backward(grad_out, X, weight):
    grad_input = F.conv2d(X.transpose(0, 1), grad_out.transpose(0, 1)).transpose(0, 1)
    grad_X = F.conv_transpose2d(grad_out, weight)
    return grad_X, grad_input


class Conv2D(torch.autograd.Function):
    @staticmethod
    def forward(ctx, X, weight):
        ctx.save_for_backward(X, weight)
        return F.conv2d(X, weight)

    # Use @once_differentiable by default unless we intend to double backward
    @staticmethod
    @once_differentiable
    def backward(ctx, grad_out):
        X, weight = ctx.saved_tensors
        return convolution_backward(grad_out, X, weight)


weight = torch.rand(5, 3, 3, 3, requires_grad=True, dtype=torch.double)
X = torch.rand(2, 3, 6, 6, requires_grad=True, dtype=torch.double)
print('Conv2D', torch.autograd.gradcheck(Conv2D.apply, (X, weight)))
go = torch.rand(2, 5, 4, 4, dtype=torch.double)
gX, gW = convolution_backward(go, X, weight)
print('nn.grad agrees', torch.allclose(gX, torch.nn.grad.conv2d_input(X.shape, weight, go)),
      torch.allclose(gW, torch.nn.grad.conv2d_weight(X, weight.shape, go)))


def unsqueeze_all(t):
    # Helper function to ``unsqueeze`` all the dimensions that we reduce over
    return t[None, :, None, None]


def batch_norm_backward(grad_out, X, sum, sqrt_var, N, eps):
    # We use the formula: ``out = (X - mean(X)) / (sqrt(var(X)) + eps)``
    # in batch norm 2D forward. To simplify our derivation, we follow the
    # chain rule and compute the gradients as follows before accumulating
    # them all into a final grad_input.
    #  1) ``grad of out wrt var(X)`` * ``grad of var(X) wrt X``
    #  2) ``grad of out wrt mean(X)`` * ``grad of mean(X) wrt X``
    #  3) ``grad of out wrt X in the numerator`` * ``grad of X wrt X``
    # We then rewrite the formulas to use as few extra buffers as possible
    tmp = ((X - unsqueeze_all(sum) / N) * grad_out).sum(dim=(0, 2, 3))
    tmp *= -1
    d_denom = tmp / (sqrt_var + eps)**2  # ``d_denom = -num / denom**2``
    # It is useful to delete tensors when you no longer need them with ``del``
    # For example, we could've done ``del tmp`` here because we won't use it later
    # In this case, it's not a big difference because ``tmp`` only has size of (C,)
    # The important thing is avoid allocating NCHW-sized tensors unnecessarily
    d_var = d_denom / (2 * sqrt_var)  # ``denom = torch.sqrt(var) + eps``
    # Compute ``d_mean_dx`` before allocating the final NCHW-sized grad_input buffer
    d_mean_dx = grad_out / unsqueeze_all(sqrt_var + eps)
    d_mean_dx = unsqueeze_all(-d_mean_dx.sum(dim=(0, 2, 3)) / N)
    # ``d_mean_dx`` has already been reassigned to a C-sized buffer so no need to worry

    # ``(1) unbiased_var(x) = ((X - unsqueeze_all(mean))**2).sum(dim=(0, 2, 3)) / (N - 1)``
    grad_input = X * unsqueeze_all(d_var * N)
    grad_input += unsqueeze_all(-d_var * sum)
    grad_input *= 2 / ((N - 1) * N)
    # (2) mean (see above)
    grad_input += d_mean_dx
    # (3) Add 'grad_out / <factor>' without allocating an extra buffer
    grad_input *= unsqueeze_all(sqrt_var + eps)
    grad_input += grad_out
    grad_input /= unsqueeze_all(sqrt_var + eps)  # ``sqrt_var + eps > 0!``
    return grad_input


class BatchNorm(torch.autograd.Function):
    @staticmethod
    def forward(ctx, X, eps=1e-3):
        # Don't save ``keepdim`` values for backward
        sum = X.sum(dim=(0, 2, 3))
        var = X.var(unbiased=True, dim=(0, 2, 3))
        N = X.numel() / X.size(1)
        sqrt_var = torch.sqrt(var)
        ctx.save_for_backward(X)
        ctx.eps = eps
        ctx.sum = sum
        ctx.N = N
        ctx.sqrt_var = sqrt_var
        mean = sum / N
        denom = sqrt_var + eps
        out = X - unsqueeze_all(mean)
        out /= unsqueeze_all(denom)
        return out

    @staticmethod
    @once_differentiable
    def backward(ctx, grad_out):
        X, = ctx.saved_tensors
        return batch_norm_backward(grad_out, X, ctx.sum, ctx.sqrt_var, ctx.N, ctx.eps)


a = torch.rand(1, 2, 3, 4, requires_grad=True, dtype=torch.double)
print('BatchNorm', torch.autograd.gradcheck(BatchNorm.apply, (a,), fast_mode=False))


class FusedConvBN2DFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, X, conv_weight, eps=1e-3):
        assert X.ndim == 4  # N, C, H, W
        # (1) Only need to save this single buffer for backward!
        ctx.save_for_backward(X, conv_weight)

        # (2) Exact same Conv2D forward from example above
        X = F.conv2d(X, conv_weight)
        # (3) Exact same BatchNorm2D forward from example above
        sum = X.sum(dim=(0, 2, 3))
        var = X.var(unbiased=True, dim=(0, 2, 3))
        N = X.numel() / X.size(1)
        sqrt_var = torch.sqrt(var)
        ctx.eps = eps
        ctx.sum = sum
        ctx.N = N
        ctx.sqrt_var = sqrt_var
        mean = sum / N
        denom = sqrt_var + eps
        # Try to do as many things in-place as possible
        # Instead of `out = (X - a) / b`, doing `out = X - a; out /= b`
        # avoids allocating one extra NCHW-sized buffer here
        out = X - unsqueeze_all(mean)
        out /= unsqueeze_all(denom)
        return out

    @staticmethod
    def backward(ctx, grad_out):
        X, conv_weight, = ctx.saved_tensors
        # (4) Batch norm backward
        # (5) We need to recompute conv
        X_conv_out = F.conv2d(X, conv_weight)
        grad_out = batch_norm_backward(grad_out, X_conv_out, ctx.sum, ctx.sqrt_var,
                                       ctx.N, ctx.eps)
        # (6) Conv2d backward
        grad_X, grad_input = convolution_backward(grad_out, X, conv_weight)
        return grad_X, grad_input, None, None, None, None, None


class FusedConvBN(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, exp_avg_factor=0.1,
                 eps=1e-3, device=None, dtype=None):
        super(FusedConvBN, self).__init__()
        factory_kwargs = {'device': device, 'dtype': dtype}
        # Conv parameters
        weight_shape = (out_channels, in_channels, kernel_size, kernel_size)
        self.conv_weight = nn.Parameter(torch.empty(*weight_shape, **factory_kwargs))
        # Batch norm parameters
        num_features = out_channels
        self.num_features = num_features
        self.eps = eps
        # Initialize
        self.reset_parameters()

    def forward(self, X):
        return FusedConvBN2DFunction.apply(X, self.conv_weight, self.eps)

    def reset_parameters(self) -> None:
        nn.init.kaiming_uniform_(self.conv_weight, a=math.sqrt(5))


weight = torch.rand(5, 3, 3, 3, requires_grad=True, dtype=torch.double)
X = torch.rand(2, 3, 4, 4, requires_grad=True, dtype=torch.double)
print('FusedConvBN2DFunction', torch.autograd.gradcheck(FusedConvBN2DFunction.apply, (X, weight)))


class Net(nn.Module):
    def __init__(self, fused=True):
        super(Net, self).__init__()
        self.fused = fused
        if fused:
            self.convbn1 = FusedConvBN(1, 4, 3)
            self.convbn2 = FusedConvBN(4, 8, 3)
        else:
            self.conv1 = nn.Conv2d(1, 4, 3, 1, bias=False)
            self.bn1 = nn.BatchNorm2d(4, affine=False, track_running_stats=False)
            self.conv2 = nn.Conv2d(4, 8, 3, 1, bias=False)
            self.bn2 = nn.BatchNorm2d(8, affine=False, track_running_stats=False)
        self.fc1 = nn.Linear(128, 16)
        self.dropout = nn.Dropout(0.5)
        self.fc2 = nn.Linear(16, 10)

    def forward(self, x):
        if self.fused:
            x = self.convbn1(x)
        else:
            x = self.conv1(x)
            x = self.bn1(x)
        F.relu_(x)
        if self.fused:
            x = self.convbn2(x)
        else:
            x = self.conv2(x)
            x = self.bn2(x)
        F.relu_(x)
        x = F.max_pool2d(x, 2)
        F.relu_(x)
        x = x.flatten(1)
        x = self.fc1(x)
        x = self.dropout(x)
        F.relu_(x)
        x = self.fc2(x)
        output = F.log_softmax(x, dim=1)
        return output


def train(model, device, train_loader, optimizer, epoch):
    model.train()
    for batch_idx, (data, target) in enumerate(train_loader):
        data, target = data.to(device), target.to(device)
        optimizer.zero_grad()
        output = model(data)
        loss = F.nll_loss(output, target)
        loss.backward()
        optimizer.step()
        if batch_idx % 1 == 0:
            print('Train Epoch: {} [{}/{} ({:.0f}%)]\tLoss: {:.6f}'.format(
                epoch, batch_idx * len(data), len(train_loader.dataset),
                100. * batch_idx / len(train_loader), loss.item()))


def test(model, device, test_loader):
    model.eval()
    test_loss = 0
    correct = 0
    # Use inference mode instead of no_grad, for free improved test-time performance
    with torch.inference_mode():
        for data, target in test_loader:
            data, target = data.to(device), target.to(device)
            output = model(data)
            # sum up batch loss
            test_loss += F.nll_loss(output, target, reduction='sum').item()
            # get the index of the max log-probability
            pred = output.argmax(dim=1, keepdim=True)
            correct += pred.eq(target.view_as(pred)).sum().item()

    test_loss /= len(test_loader.dataset)

    print('\nTest set: Average loss: {:.4f}, Accuracy: {}/{} ({:.0f}%)\n'.format(
        test_loss, correct, len(test_loader.dataset),
        100. * correct / len(test_loader.dataset)))


use_cuda = torch.cuda.is_available()
device = torch.device("cuda" if use_cuda else "cpu")
train_kwargs = {'batch_size': 8}
test_kwargs = {'batch_size': 8}

if use_cuda:
    cuda_kwargs = {'num_workers': 1,
                   'pin_memory': True,
                   'shuffle': True}
    train_kwargs.update(cuda_kwargs)
    test_kwargs.update(cuda_kwargs)

images = (torch.rand(24, 1, 12, 12) - 0.1307) / 0.3081
labels = torch.randint(0, 10, (24,))
dataset1 = torch.utils.data.TensorDataset(images[:16], labels[:16])
dataset2 = torch.utils.data.TensorDataset(images[16:], labels[16:])
train_loader = torch.utils.data.DataLoader(dataset1, **train_kwargs)
test_loader = torch.utils.data.DataLoader(dataset2, **test_kwargs)

torch.backends.cudnn.enabled = True

for fused in (True, False):
    if use_cuda:
        peak_memory_allocated = 0
    torch.manual_seed(123456)

    model = Net(fused=fused).to(device)
    optimizer = optim.Adadelta(model.parameters(), lr=1.0)
    scheduler = StepLR(optimizer, step_size=1, gamma=0.7)
    for epoch in range(1):
        train(model, device, train_loader, optimizer, epoch)
        test(model, device, test_loader)
        scheduler.step()

    if use_cuda:
        peak_memory_allocated += torch.cuda.max_memory_allocated()
        torch.cuda.reset_peak_memory_stats()
        print("CUDA Memory Allocated: ", peak_memory_allocated)
    print('fused' if fused else 'unfused', 'lr now', scheduler.get_last_lr())

# compiled: the unfused Net's training step (eval mode: no dropout; the
# batch norms use batch statistics either way), checked against eager
model.eval()
init = {k: v.clone() for k, v in model.state_dict().items()}
init_opt = copy.deepcopy(optimizer.state_dict())
data, target = next(iter(train_loader))


def step(data, target):
    optimizer.zero_grad()
    loss = F.nll_loss(model(data), target)
    loss.backward()
    optimizer.step()
    return loss


loss_c = torch.compile(step)(data, target)
after_c = {k: v.clone() for k, v in model.state_dict().items()}
model.load_state_dict(init)
optimizer.load_state_dict(init_opt)
loss_e = step(data, target)
print('compiled == eager', torch.allclose(loss_c, loss_e, atol=1e-6),
      all(torch.allclose(after_c[k], v, atol=1e-5) for k, v in model.state_dict().items()))
print('loss', loss_e.item())
