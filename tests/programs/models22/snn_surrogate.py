# A spiking neural network trained with a surrogate gradient, the way
# Zenke's SpyTorch tutorials (fzenke/spytorch, SpyTorchTutorial1/2) and
# snntorch's tutorials 5/6 write it: a torch.autograd.Function
# SurrGradSpike (forward: heaviside of the membrane minus threshold, saved
# with ctx.save_for_backward; backward: the fast-sigmoid surrogate
# grad / (scale * |x| + 1) ** 2), leaky integrate-and-fire neurons with
# synaptic current over time steps (SpyTorch: reset through .detach() of
# the spike, mem = (beta * mem + syn) * (1 - rst)); snntorch's Leaky neuron
# as an nn.Module with reset by subtraction (mem = beta * mem + x -
# reset * threshold, reset detached), membrane / spike recordings stacked
# with torch.stack, spike-count readout, max-over-time membrane readout
# with log_softmax + NLLLoss (SpyTorch) and CrossEntropy on summed spikes
# (snntorch's ce_count_loss), Adam with betas=(0.9, 0.999), accuracy by
# argmax of spike counts. Changes for a CPU test: small sizes, spike
# trains and weights from numpy, a few steps; then one training step
# (backward inside) under torch.compile against the same step eagerly.
import copy

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

dtype = torch.float
device = torch.device("cpu")

nb_inputs = 20
nb_hidden = 16
nb_outputs = 3
time_step = 1e-3
nb_steps = 12
batch_size = 8

tau_mem = 10e-3
tau_syn = 5e-3

alpha = float(np.exp(-time_step / tau_syn))
beta = float(np.exp(-time_step / tau_mem))

weight_scale = 7 * (1.0 - beta)  # this should give us some spikes to begin with

r = np.random.default_rng(0)

w1 = torch.empty((nb_inputs, nb_hidden), device=device, dtype=dtype, requires_grad=True)
w2 = torch.empty((nb_hidden, nb_outputs), device=device, dtype=dtype, requires_grad=True)
with torch.no_grad():
    # torch.nn.init.normal_(w1, mean=0.0, std=weight_scale/np.sqrt(nb_inputs))
    w1.copy_(torch.from_numpy(r.normal(0.0, weight_scale / np.sqrt(nb_inputs), (nb_inputs, nb_hidden)).astype(np.float32)))
    w2.copy_(torch.from_numpy(r.normal(0.0, weight_scale / np.sqrt(nb_hidden), (nb_hidden, nb_outputs)).astype(np.float32)))
print("init done", w1.shape, w2.shape, f"{alpha:.5f} {beta:.5f} {weight_scale:.5f}")

# random Poisson-like input spike trains, 3 classes with different rates per input
freq = 0.25
rates = np.stack([np.roll(np.linspace(0.05, 0.6, nb_inputs), 6 * c) for c in range(nb_outputs)])
y_np = r.integers(0, nb_outputs, batch_size)
x_np = (r.random((batch_size, nb_steps, nb_inputs)) < rates[y_np][:, None, :]).astype(np.float32)
x_data = torch.from_numpy(x_np)
y_data = torch.from_numpy(y_np)
print("input spikes", int(x_data.sum()), x_data.shape, y_data.tolist())


class SurrGradSpike(torch.autograd.Function):
    """
    Here we implement our spiking nonlinearity which also implements
    the surrogate gradient. By subclassing torch.autograd.Function,
    we will be able to use all of PyTorch's autograd functionality.
    Here we use the normalized negative part of a fast sigmoid
    as this was done in Zenke & Ganguli (2018).
    """

    scale = 10.0  # controls steepness of surrogate gradient

    @staticmethod
    def forward(ctx, input):
        """
        In the forward pass we compute a step function of the input Tensor
        and return it. ctx is a context object that we use to stash information which
        we need to later backpropagate our error signals. To achieve this we use the
        ctx.save_for_backward method.
        """
        ctx.save_for_backward(input)
        out = torch.zeros_like(input)
        out[input > 0] = 1.0
        return out

    @staticmethod
    def backward(ctx, grad_output):
        """
        In the backward pass we receive a Tensor we need to compute the
        surrogate gradient of the loss with respect to the input.
        Here we use the normalized negative part of a fast sigmoid
        as this was done in Zenke & Ganguli (2018).
        """
        input, = ctx.saved_tensors
        grad_input = grad_output.clone()
        grad = grad_input / (SurrGradSpike.scale * torch.abs(input) + 1.0) ** 2
        return grad


# here we overwrite our naive spike function by the "SurrGradSpike" nonlinearity which implements a surrogate gradient
spike_fn = SurrGradSpike.apply


def run_snn(inputs):
    h1 = torch.einsum("abc,cd->abd", (inputs, w1))
    syn = torch.zeros((batch_size, nb_hidden), device=device, dtype=dtype)
    mem = torch.zeros((batch_size, nb_hidden), device=device, dtype=dtype)

    mem_rec = []
    spk_rec = []

    # Compute hidden layer activity
    for t in range(nb_steps):
        mthr = mem - 1.0
        out = spike_fn(mthr)
        rst = out.detach()  # We do not want to backprop through the reset

        new_syn = alpha * syn + h1[:, t]
        new_mem = (beta * mem + syn) * (1.0 - rst)

        mem_rec.append(mem)
        spk_rec.append(out)

        mem = new_mem
        syn = new_syn

    mem_rec = torch.stack(mem_rec, dim=1)
    spk_rec = torch.stack(spk_rec, dim=1)

    # Readout layer
    h2 = torch.einsum("abc,cd->abd", (spk_rec, w2))
    flt = torch.zeros((batch_size, nb_outputs), device=device, dtype=dtype)
    out = torch.zeros((batch_size, nb_outputs), device=device, dtype=dtype)
    out_rec = [out]
    for t in range(nb_steps):
        new_flt = alpha * flt + h2[:, t]
        new_out = beta * out + flt

        flt = new_flt
        out = new_out

        out_rec.append(out)

    out_rec = torch.stack(out_rec, dim=1)
    other_recs = [mem_rec, spk_rec]
    return out_rec, other_recs


def fmt(t, n=4):
    return [f"{v:.4f}" for v in t.reshape(-1)[:n].tolist()]


# the surrogate's gradient against its closed form
xs = torch.tensor([-1.0, -0.1, 0.0, 0.05, 2.0], requires_grad=True)
s = spike_fn(xs)
s.backward(torch.ones_like(s))
print("heaviside", s.tolist(), "surrogate", fmt(xs.grad, 5),
      torch.allclose(xs.grad, 1.0 / (10.0 * xs.detach().abs() + 1.0) ** 2))
print("grad_fn", type(s.grad_fn).__name__.replace("Backward", ""), s.requires_grad)

output, other_recordings = run_snn(x_data)
mem_rec, spk_rec = other_recordings
print("out_rec", tuple(output.shape), fmt(output[0, -1], 3), "hidden spikes", int(spk_rec.sum().item()),
      "per neuron", spk_rec.sum(dim=(0, 1))[:6].tolist())


def train(x_data, y_data, lr=1e-3, nb_epochs=10):
    params = [w1, w2]
    optimizer = torch.optim.Adam(params, lr=lr, betas=(0.9, 0.999))

    log_softmax_fn = nn.LogSoftmax(dim=1)
    loss_fn = nn.NLLLoss()

    loss_hist = []
    for e in range(nb_epochs):
        output, recs = run_snn(x_data)
        _, spks = recs
        m, _ = torch.max(output, 1)
        log_p_y = log_softmax_fn(m)

        # Here we set up our regularizer loss
        # The strength paramters here are merely a guess and there should be ample room for improvement by
        # tuning these paramters.
        reg_loss = 1e-5 * torch.sum(spks)  # L1 loss on total number of spikes
        reg_loss += 1e-5 * torch.mean(torch.sum(torch.sum(spks, dim=0), dim=0) ** 2)  # L2 loss on spikes per neuron

        # Here we combine supervised loss and the regularizer
        loss_val = loss_fn(log_p_y, y_data) + reg_loss

        optimizer.zero_grad()
        loss_val.backward()
        optimizer.step()
        loss_hist.append(loss_val.item())
    return loss_hist, optimizer


def compute_classification_accuracy(x_data, y_data):
    """ Computes classification accuracy on supplied data in batches. """
    output, _ = run_snn(x_data)
    m, _ = torch.max(output, 1)  # max over time
    _, am = torch.max(m, 1)      # argmax over output units
    tmp = np.mean((y_data == am).detach().cpu().numpy())  # compare to labels
    return tmp


loss_hist, _ = train(x_data, y_data, lr=2e-3, nb_epochs=6)
print("SpyTorch losses", [f"{v:.5f}" for v in loss_hist])
print("Training accuracy: %.3f" % (compute_classification_accuracy(x_data, y_data)))
print("w1 grad", fmt(w1.grad, 3), "w2", fmt(w2, 3))


# snntorch.surrogate: FastSigmoid / ATan as autograd Functions with a
# non-tensor argument (its gradient None), the slope kept on ctx
class FastSigmoid(torch.autograd.Function):
    @staticmethod
    def forward(ctx, input_, slope=25):
        ctx.save_for_backward(input_)
        ctx.slope = slope
        out = (input_ > 0).float()
        return out

    @staticmethod
    def backward(ctx, grad_output):
        (input_,) = ctx.saved_tensors
        grad_input = grad_output.clone()
        grad = grad_input / (ctx.slope * torch.abs(input_) + 1.0) ** 2
        return grad, None


def fast_sigmoid(slope=25):
    """FastSigmoid surrogate gradient enclosed with a parameterized slope."""
    slope = slope

    def inner(x):
        return FastSigmoid.apply(x, slope)

    return inner


class ATan(torch.autograd.Function):
    @staticmethod
    def forward(ctx, input_, alpha=2.0):
        ctx.save_for_backward(input_)
        ctx.alpha = alpha
        out = torch.heaviside(input_, torch.tensor([0.0]))
        return out

    @staticmethod
    def backward(ctx, grad_output):
        (input_,) = ctx.saved_tensors
        grad_input = grad_output.clone()
        grad = (
            ctx.alpha
            / 2
            / (1 + (np.pi / 2 * ctx.alpha * input_).pow_(2))
            * grad_input
        )
        return grad, None


def atan(alpha=2.0):
    def inner(x):
        return ATan.apply(x, alpha)

    return inner


xs = torch.tensor([[-0.3, 0.0, 0.2], [1.5, -2.0, 0.01]], requires_grad=True)
for sg in (fast_sigmoid(slope=25), atan(alpha=2.0)):
    out = sg(xs)
    (out * torch.arange(6.0).view(2, 3)).sum().backward()
    print("surrogate", out.tolist(), fmt(xs.grad, 6), out.requires_grad)
    xs.grad = None
print("heaviside values", torch.heaviside(torch.tensor([-1.0, 0.0, 2.0]), torch.tensor([0.5])).tolist(),
      torch.heaviside(torch.tensor([0.0, 0.0]), torch.tensor([0.2, 0.7])).tolist())

# snntorch.spikegen.rate: Bernoulli rate coding (random, so counted only)
torch.manual_seed(0)
rate_in = torch.from_numpy(r.random((4, 5)).astype(np.float32))
spk_train = torch.bernoulli(rate_in.repeat(tuple([nb_steps] + torch.ones(len(rate_in.size()), dtype=int).tolist())))
print("rate coded", tuple(spk_train.shape), spk_train.dtype, "[rng]", int(spk_train.sum()),
      bool(((spk_train == 0) | (spk_train == 1)).all()))


# snntorch style: a Leaky neuron module, reset by subtraction
class Leaky(nn.Module):
    def __init__(self, beta, threshold=1.0, spike_grad=None):
        super().__init__()
        self.beta = beta
        self.threshold = threshold
        self.spike_grad = spike_grad if spike_grad is not None else SurrGradSpike.apply

    def init_leaky(self):
        return torch.zeros(0)

    def fire(self, mem):
        mem_shift = mem - self.threshold
        spk = self.spike_grad(mem_shift)
        return spk

    def forward(self, input_, mem):
        if not mem.numel():
            mem = torch.zeros_like(input_)
        reset = self.fire(mem).detach()
        mem = self.beta * mem + input_ - reset * self.threshold
        spk = self.fire(mem)
        return spk, mem


num_steps = nb_steps


# Define Network
class Net(nn.Module):
    def __init__(self, num_inputs, num_hidden, num_outputs, beta=0.95):
        super().__init__()

        # Initialize layers
        self.fc1 = nn.Linear(num_inputs, num_hidden)
        self.lif1 = Leaky(beta=beta, spike_grad=fast_sigmoid(slope=25))
        self.fc2 = nn.Linear(num_hidden, num_outputs)
        self.lif2 = Leaky(beta=beta, spike_grad=atan())

    def forward(self, x):

        # Initialize hidden states at t=0
        mem1 = self.lif1.init_leaky()
        mem2 = self.lif2.init_leaky()

        # Record the final layer
        spk2_rec = []
        mem2_rec = []

        for step in range(num_steps):
            cur1 = self.fc1(x[step])
            spk1, mem1 = self.lif1(cur1, mem1)
            cur2 = self.fc2(spk1)
            spk2, mem2 = self.lif2(cur2, mem2)
            spk2_rec.append(spk2)
            mem2_rec.append(mem2)

        return torch.stack(spk2_rec, dim=0), torch.stack(mem2_rec, dim=0)


def ce_count_loss(spk_out, targets):
    # snntorch.functional.ce_count_loss: cross entropy on the spike counts
    log_softmax_fn = nn.LogSoftmax(dim=-1)
    loss_fn = nn.NLLLoss()
    spike_count = torch.sum(spk_out, 0)  # B x C
    log_p_y = log_softmax_fn(spike_count)
    return loss_fn(log_p_y, targets)


net = Net(nb_inputs, nb_hidden, nb_outputs).to(device)
with torch.no_grad():
    for name, p in net.named_parameters():
        p.copy_(torch.from_numpy(r.normal(0, 0.5 if "weight" in name else 0.2, tuple(p.shape)).astype(np.float32)))
data = x_data.transpose(0, 1).contiguous()   # [time x batch x features], as snntorch's spikegen yields
optimizer = torch.optim.Adam(net.parameters(), lr=5e-3, betas=(0.9, 0.999))
loss = nn.CrossEntropyLoss()

for epoch in range(4):
    net.train()
    spk_rec, mem_rec = net(data)

    # initialize the loss & sum over time
    loss_val = torch.zeros((1), dtype=dtype, device=device)
    for step in range(num_steps):
        loss_val += loss(mem_rec[step], y_data)
    count_loss = ce_count_loss(spk_rec, y_data)

    # Gradient calculation + weight update
    optimizer.zero_grad()
    (loss_val + count_loss).backward()
    optimizer.step()

    _, idx = spk_rec.sum(dim=0).max(1)
    acc = np.mean((y_data == idx).detach().cpu().numpy())
    print(f"Epoch {epoch}, Train Loss: {loss_val.item():.4f} count {count_loss.item():.4f} acc {acc * 100:.2f}%",
          "spikes", int(spk_rec.sum().item()))

print("fc1 grad", fmt(net.fc1.weight.grad, 3), "bias", fmt(net.fc2.bias, 3))
with torch.no_grad():
    spk, mem = net(data)
print("eval counts", spk.sum(0)[:3].tolist(), fmt(mem[-1], 3))


# one training step under torch.compile against the same step eagerly
def train_step(data, targets):
    spk_rec, mem_rec = net(data)
    loss_val = torch.zeros((1), dtype=dtype, device=device)
    for step in range(num_steps):
        loss_val += loss(mem_rec[step], targets)
    loss_val = loss_val + ce_count_loss(spk_rec, targets)
    optimizer.zero_grad()
    loss_val.backward()
    optimizer.step()
    return loss_val


state, opt_state = copy.deepcopy(net.state_dict()), copy.deepcopy(optimizer.state_dict())
eager = [train_step(data, y_data).item() for _ in range(2)]
after = {k: v.clone() for k, v in net.state_dict().items()}
net.load_state_dict(state)
optimizer.load_state_dict(opt_state)
cstep = torch.compile(train_step)
compiled = [cstep(data, y_data).item() for _ in range(2)]
print("compiled losses", [f"{v:.5f}" for v in compiled])
print("compiled == eager:", all(abs(a - b) <= 1e-4 * max(1.0, abs(b)) for a, b in zip(compiled, eager)),
      all(torch.allclose(net.state_dict()[k], after[k], rtol=1e-4, atol=1e-5) for k in after))
