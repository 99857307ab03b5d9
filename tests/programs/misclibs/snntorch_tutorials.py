"""snntorch's tutorials 1-5 on tiny synthetic MNIST-like data: spike
encoding (spikegen.rate / latency / delta), Lapicque / Leaky / Synaptic /
Alpha / RLeaky neurons stepped by hand, surrogate gradients, a two-layer
spiking MLP trained with SF.ce_rate_loss and the accuracy helper, an
init_hidden Sequential trained with backprop.BPTT / TBPTT / RTRL, tutorial 6's
convolutional SNN, SLSTM / SConv2dLSTM / RSynaptic, learnable beta and
threshold, inhibition, graded spikes, state quantization, the temporal
losses, population coding, LeakyParallel (an nn.RNN inside), StateLeaky,
LinearLeaky, DeltaLeaky, AssociativeLeaky and BatchNormTT1d."""
import random

import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset

import snntorch as snn
import snntorch.functional as SF
import snntorch.functional.quant as sq
from snntorch import backprop, spikegen, surrogate, utils

torch.manual_seed(0)
random.seed(0)


def show(name, t):
    t = t.detach().float()
    print(f"{name} {tuple(t.shape)} sum={t.sum().item():.5f} mean={t.mean().item():.6f}")


# --- tutorial 1: spike encoding
img = torch.rand(4, 1, 6, 6)
show("rate", spikegen.rate(img, num_steps=10))
show("rate_gain", spikegen.rate(img, num_steps=10, gain=0.5))
show("latency", spikegen.latency(img, num_steps=10, tau=5, threshold=0.01, normalize=True, linear=True))
show("latency_lin", spikegen.latency(img, num_steps=10, tau=5, threshold=0.01,
                                     normalize=True, clip=True))
seq = torch.rand(10, 3, 5)
show("delta", spikegen.delta(seq, threshold=0.1, off_spike=True))

# --- tutorial 2: neurons stepped by hand
cur_in = torch.cat((torch.zeros(5, 1), torch.ones(25, 1) * 0.3), 0)
for name, neuron in [
    ("lapicque", snn.Lapicque(R=5.1, C=5e-3, time_step=1e-3)),
    ("leaky", snn.Leaky(beta=0.8)),
    ("leaky_zero", snn.Leaky(beta=0.8, reset_mechanism="zero")),
]:
    mem = neuron.init_leaky() if hasattr(neuron, "init_leaky") else torch.zeros(1)
    spikes, mems = [], []
    for step in range(30):
        spk, mem = neuron(cur_in[step], mem)
        spikes.append(spk)
        mems.append(mem)
    show(name + "_spk", torch.stack(spikes))
    show(name + "_mem", torch.stack(mems))

syn_neuron = snn.Synaptic(alpha=0.8, beta=0.7)
syn, mem = syn_neuron.init_synaptic()
rec = []
for step in range(30):
    spk, syn, mem = syn_neuron(cur_in[step], syn, mem)
    rec.append(torch.cat([spk, syn, mem]))
show("synaptic", torch.stack(rec))

alpha_neuron = snn.Alpha(alpha=0.8, beta=0.7)
syn_exc, syn_inh, mem = alpha_neuron.init_alpha()
rec = []
for step in range(30):
    spk, syn_exc, syn_inh, mem = alpha_neuron(cur_in[step], syn_exc, syn_inh, mem)
    rec.append(torch.cat([spk, mem]))
show("alpha", torch.stack(rec))

rlif = snn.RLeaky(beta=0.9, linear_features=4)
spk, mem = rlif.init_rleaky()
rec = []
x4 = torch.rand(30, 4)
for step in range(30):
    spk, mem = rlif(x4[step], spk, mem)
    rec.append(mem)
show("rleaky", torch.stack(rec))

# --- surrogate gradients
x = torch.linspace(-1, 1, 9, requires_grad=True)
for name, sg in [("atan", surrogate.atan()), ("fast_sigmoid", surrogate.fast_sigmoid(slope=25)),
                 ("sigmoid", surrogate.sigmoid()), ("straight", surrogate.straight_through_estimator()),
                 ("triangular", surrogate.triangular()), ("spike_rate_escape", surrogate.spike_rate_escape())]:
    y = sg(x)
    (g,) = torch.autograd.grad(y.sum(), x)
    print(name, [f"{v:.5f}" for v in y.tolist()], [f"{v:.5f}" for v in g.tolist()])

# --- tutorial 5: a spiking MLP trained with ce_rate_loss
num_inputs, num_hidden, num_outputs, num_steps, beta = 36, 20, 10, 8, 0.95
data = torch.rand(32, 1, 6, 6)
targets = torch.randint(0, 10, (32,))
loader = DataLoader(TensorDataset(data, targets), batch_size=16, shuffle=True)


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(num_inputs, num_hidden)
        self.lif1 = snn.Leaky(beta=beta, spike_grad=surrogate.fast_sigmoid(slope=25))
        self.fc2 = nn.Linear(num_hidden, num_outputs)
        self.lif2 = snn.Leaky(beta=beta, spike_grad=surrogate.fast_sigmoid(slope=25))

    def forward(self, x):
        mem1 = self.lif1.init_leaky()
        mem2 = self.lif2.init_leaky()
        spk2_rec, mem2_rec = [], []
        for step in range(num_steps):
            cur1 = self.fc1(x[step].flatten(1))
            spk1, mem1 = self.lif1(cur1, mem1)
            cur2 = self.fc2(spk1)
            spk2, mem2 = self.lif2(cur2, mem2)
            spk2_rec.append(spk2)
            mem2_rec.append(mem2)
        return torch.stack(spk2_rec, dim=0), torch.stack(mem2_rec, dim=0)


net = Net()
optimizer = torch.optim.Adam(net.parameters(), lr=5e-3, betas=(0.9, 0.999))
loss_fn = SF.ce_rate_loss()
for epoch in range(2):
    for x, y in loader:
        spk_in = spikegen.rate(x, num_steps=num_steps)
        spk_rec, mem_rec = net(spk_in)
        loss = loss_fn(spk_rec, y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        acc = SF.accuracy_rate(spk_rec, y)
        print(f"epoch {epoch} loss {loss.item():.5f} acc {acc:.4f} spikes {spk_rec.sum().item():.0f}")

mse_fn = SF.mse_count_loss(correct_rate=0.8, incorrect_rate=0.2)
spk_rec, mem_rec = net(spikegen.rate(data[:8], num_steps=num_steps))
print(f"mse_count {mse_fn(spk_rec, targets[:8]).item():.5f}")
print(f"ce_count {SF.ce_count_loss()(spk_rec, targets[:8]).item():.5f}")
print(f"ce_max_mem {SF.ce_max_membrane_loss()(mem_rec, targets[:8]).item():.5f}")
print(f"mse_membrane {SF.mse_membrane_loss()(mem_rec, targets[:8]).item():.5f}")

# --- init_hidden Sequential trained by backprop.BPTT (time-varying input)
seq_net = nn.Sequential(
    nn.Flatten(),
    nn.Linear(num_inputs, num_hidden),
    snn.Leaky(beta=0.9, init_hidden=True, spike_grad=surrogate.atan()),
    nn.Linear(num_hidden, num_outputs),
    snn.Leaky(beta=0.9, init_hidden=True, output=True, spike_grad=surrogate.atan()),
)
spk_data = spikegen.rate(data, num_steps=num_steps).transpose(0, 1)  # B x T x ...
bptt_loader = DataLoader(TensorDataset(spk_data, targets), batch_size=16, shuffle=False)
opt2 = torch.optim.Adam(seq_net.parameters(), lr=2e-3)
for epoch in range(2):
    avg = backprop.BPTT(seq_net, bptt_loader, optimizer=opt2, criterion=SF.mse_count_loss(),
                        time_var=True, time_first=False, regularization=SF.l1_rate_sparsity())
    print(f"bptt epoch {epoch} loss {avg.item():.5f}")
utils.reset(seq_net)
spk_out, mem_out = seq_net(spk_data[:, 0])
show("seq_out_mem", mem_out)
print(seq_net)

# --- tutorial 6: a convolutional SNN (init_hidden) over a few steps
torch.manual_seed(1)
conv_net = nn.Sequential(
    nn.Conv2d(1, 4, 3), nn.MaxPool2d(2),
    snn.Leaky(beta=0.5, spike_grad=surrogate.fast_sigmoid(slope=25), init_hidden=True),
    nn.Flatten(), nn.Linear(4 * 2 * 2, 10),
    snn.Leaky(beta=0.5, spike_grad=surrogate.fast_sigmoid(slope=25), init_hidden=True, output=True),
)
copt = torch.optim.Adam(conv_net.parameters(), lr=1e-2)
for it in range(2):
    utils.reset(conv_net)
    spk_rec = []
    for step in range(num_steps):
        spk_out, mem_out = conv_net(data[:8] * 4)
        spk_rec.append(spk_out)
    spk_rec = torch.stack(spk_rec)
    loss = SF.ce_rate_loss()(spk_rec, targets[:8])
    copt.zero_grad()
    loss.backward()
    copt.step()
    print(f"conv iter {it} loss {loss.item():.5f} acc {SF.accuracy_rate(spk_rec, targets[:8]):.4f}")
print("conv grad", [f"{v:.5f}" for v in conv_net[0].weight.grad.reshape(-1)[:6].tolist()])

# --- recurrent / LSTM neurons and neuron options
xs = torch.rand(6, 2, 4)
slstm = snn.SLSTM(4, 3, spike_grad=surrogate.straight_through_estimator())
syn, mem = slstm.init_slstm()
rec = []
for step in range(6):
    spk, syn, mem = slstm(xs[step], syn, mem)
    rec.append(torch.cat([spk, mem], 1))
show("slstm", torch.stack(rec))
sconv = snn.SConv2dLSTM(1, 2, 3, max_pool=2)
syn, mem = sconv.init_sconv2dlstm()
for step in range(3):
    spk, syn, mem = sconv(data[:2] * 4, syn, mem)
show("sconv2dlstm_spk", spk)
show("sconv2dlstm_mem", mem)
rsyn = snn.RSynaptic(alpha=0.9, beta=0.8, linear_features=4, reset_mechanism="zero")
spk, syn, mem = rsyn.init_rsynaptic()
rec = []
for step in range(6):
    spk, syn, mem = rsyn(xs[step] * 2, spk, syn, mem)
    rec.append(mem)
show("rsynaptic", torch.stack(rec))

learn = snn.Leaky(beta=torch.full((4,), 0.7), threshold=torch.full((4,), 0.5), learn_beta=True,
                  learn_threshold=True, spike_grad=surrogate.atan())
inhib = snn.Leaky(beta=0.9, inhibition=True)
graded = snn.Leaky(beta=0.9, graded_spikes_factor=torch.full((4,), 0.5), learn_graded_spikes_factor=True)
quant = snn.Leaky(beta=0.9, state_quant=sq.state_quant(num_bits=4, uniform=True, threshold=1.0))
delay = snn.Synaptic(alpha=0.7, beta=0.8, reset_delay=False)
outs = {n: [] for n in ["learn", "inhib", "graded", "quant", "delay"]}
m1, m2, m3, m4 = [torch.zeros(2, 4) for _ in range(4)]
s5, m5 = torch.zeros(2, 4), torch.zeros(2, 4)
for step in range(6):
    spk, m1 = learn(xs[step] * 2, m1); outs["learn"].append(spk + m1)
    spk, m2 = inhib(xs[step] * 2, m2); outs["inhib"].append(spk + m2)
    spk, m3 = graded(xs[step] * 2, m3); outs["graded"].append(spk + m3)
    spk, m4 = quant(xs[step] * 2, m4); outs["quant"].append(spk + m4)
    spk, s5, m5 = delay(xs[step] * 2, s5, m5); outs["delay"].append(spk + m5)
for n, v in outs.items():
    show(n, torch.stack(v))
torch.stack(outs["learn"]).sum().backward()
print("learn grads", [f"{v:.5f}" for v in learn.beta.grad.tolist() + learn.threshold.grad.tolist()])

# --- temporal losses, population code
spk_t = (torch.rand(num_steps, 8, 10) > 0.7).float().requires_grad_()
tl = SF.mse_temporal_loss(target_is_time=False, on_target=0, off_target=num_steps - 1)(spk_t, targets[:8])
cl = SF.ce_temporal_loss()(spk_t, targets[:8])
(tl + cl).backward()
print(f"temporal mse {tl.item():.5f} ce {cl.item():.5f} grad {spk_t.grad.abs().sum().item():.5f}")
print(f"temporal acc {SF.accuracy_temporal(spk_t, targets[:8]):.4f}")
pop = (torch.rand(num_steps, 8, 20) > 0.5).float()
print(f"population acc {SF.accuracy_rate(pop, targets[:8], population_code=True, num_classes=10):.4f}")

# --- snntorch 1.0's parallel / state-space neurons and BatchNormTT
torch.manual_seed(3)
x = torch.rand(6, 2, 4)
lp = snn.LeakyParallel(input_size=4, hidden_size=3, beta=0.8, learn_beta=True)
y = lp(x * 3)
show("leakyparallel", y)
y.sum().backward()
show("leakyparallel grad", lp.rnn.weight_ih_l0.grad)
sl = snn.StateLeaky(beta=0.8, channels=4)
out = sl(x * 3)
show("stateleaky", out[0] if isinstance(out, tuple) else out)
ll = snn.LinearLeaky(beta=0.8, in_features=4, out_features=3)
out = ll(x * 3)
show("linearleaky", out[0] if isinstance(out, tuple) else out)
(out[0] if isinstance(out, tuple) else out).sum().backward()
show("linearleaky grad", ll.linear.weight.grad)
dl = snn.DeltaLeaky(delta_threshold=0.1, beta=0.9)
mem = (None, None)
rec = []
for t in range(6):
    spk, mem = dl(x[t] * 2, mem)
    rec.append(spk + mem[0])
show("deltaleaky", torch.stack(rec))
al = snn.AssociativeLeaky(in_dim=4, d_value=3, d_key=2, num_spiking_neurons=6)
out = al(x * 3)
show("associative", out[0] if isinstance(out, tuple) else out)
bn = snn.BatchNormTT1d(4, 6)
print(bn)
bn_out = [bn[t](x[t]) for t in range(6)]
show("bntt", torch.stack(bn_out).abs())
show("bntt running", torch.stack([m.running_var for m in bn]))

# --- backprop.TBPTT (K=2) and RTRL on time-static input
torch.manual_seed(7)
tdata = torch.rand(16, 1, 6, 6)
targets = torch.randint(0, 10, (16,))
tnet = nn.Sequential(nn.Flatten(), nn.Linear(36, 12),
                    snn.Leaky(beta=0.9, init_hidden=True, spike_grad=surrogate.atan()),
                    nn.Linear(12, 10), snn.Leaky(beta=0.9, init_hidden=True, output=True, spike_grad=surrogate.atan()))
loader = DataLoader(TensorDataset(tdata * 2, targets), batch_size=8)
topt = torch.optim.Adam(tnet.parameters(), lr=2e-3)
l = backprop.TBPTT(tnet, loader, optimizer=topt, criterion=SF.ce_rate_loss(), num_steps=6, time_var=False, K=2)
print(f"tbptt {l.item():.5f}")
l = backprop.RTRL(tnet, loader, optimizer=topt, criterion=SF.mse_count_loss(), num_steps=4, time_var=False)
print(f"rtrl {l.item():.5f}")
print([f"{v:.5f}" for v in tnet[1].weight.reshape(-1)[:4].tolist()])
