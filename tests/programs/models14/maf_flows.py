# ikostrikov/pytorch-flows: flows.py (get_mask, MaskedLinear registered as
# nn.MaskedLinear, MADE with its direct pass and its column-by-column inverse,
# Sigmoid / Logit, BatchNormFlow with its running statistics and batch
# statistics kept on the module, ActNorm with its data-dependent init,
# InvertibleMM with torch.slogdet / torch.inverse, Shuffle, Reverse,
# CouplingLayer, FlowSequential with log_probs and sample) and main.py's
# training loop (TensorDataset, DataLoader, -log_probs(data).mean() under
# Adam with weight_decay, the momentum trick that sets the BatchNormFlow
# statistics from the whole training set, validate under no_grad,
# copy.deepcopy of the best model).
# Changes for a CPU test: LUInvertibleMM is left out (it needs scipy), a
# 4-dimensional two-moons-like data set from numpy, 16 hidden units, two
# blocks, two epochs of a few batches, no tqdm; weights from numpy after the
# orthogonal init (its draws differ in tracec: the init is checked by its
# property); Adam's eps is 1e-3: the biases of MADE's first outputs (m_0,
# a_0, the degree -1 row that sees no input) get gradients that are zero but
# for rounding (the BatchNormFlow after it removes them), which Adam with a
# tiny eps turns into full-size steps of either sign.  Then a MAF training step under torch.compile against the same
# steps run eagerly.
import copy
import math
import types

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim
import torch.utils.data


def get_mask(in_features, out_features, in_flow_features, mask_type=None):
    """
    mask_type: input | None | output

    See Figure 1 for a better illustration:
    https://arxiv.org/pdf/1502.03509.pdf
    """
    if mask_type == 'input':
        in_degrees = torch.arange(in_features) % in_flow_features
    else:
        in_degrees = torch.arange(in_features) % (in_flow_features - 1)

    if mask_type == 'output':
        out_degrees = torch.arange(out_features) % in_flow_features - 1
    else:
        out_degrees = torch.arange(out_features) % (in_flow_features - 1)

    return (out_degrees.unsqueeze(-1) >= in_degrees.unsqueeze(0)).float()


class MaskedLinear(nn.Module):
    def __init__(self,
                 in_features,
                 out_features,
                 mask,
                 cond_in_features=None,
                 bias=True):
        super(MaskedLinear, self).__init__()
        self.linear = nn.Linear(in_features, out_features)
        if cond_in_features is not None:
            self.cond_linear = nn.Linear(
                cond_in_features, out_features, bias=False)

        self.register_buffer('mask', mask)

    def forward(self, inputs, cond_inputs=None):
        output = F.linear(inputs, self.linear.weight * self.mask,
                          self.linear.bias)
        if cond_inputs is not None:
            output += self.cond_linear(cond_inputs)
        return output


nn.MaskedLinear = MaskedLinear


class MADE(nn.Module):
    """ An implementation of MADE
    (https://arxiv.org/abs/1502.03509s).
    """

    def __init__(self,
                 num_inputs,
                 num_hidden,
                 num_cond_inputs=None,
                 act='relu'):
        super(MADE, self).__init__()

        activations = {'relu': nn.ReLU, 'sigmoid': nn.Sigmoid, 'tanh': nn.Tanh}
        act_func = activations[act]

        input_mask = get_mask(
            num_inputs, num_hidden, num_inputs, mask_type='input')
        hidden_mask = get_mask(num_hidden, num_hidden, num_inputs)
        output_mask = get_mask(
            num_hidden, num_inputs * 2, num_inputs, mask_type='output')

        self.joiner = nn.MaskedLinear(num_inputs, num_hidden, input_mask,
                                      num_cond_inputs)

        self.trunk = nn.Sequential(act_func(),
                                   nn.MaskedLinear(num_hidden, num_hidden,
                                                   hidden_mask), act_func(),
                                   nn.MaskedLinear(num_hidden, num_inputs * 2,
                                                   output_mask))

    def forward(self, inputs, cond_inputs=None, mode='direct'):
        if mode == 'direct':
            h = self.joiner(inputs, cond_inputs)
            m, a = self.trunk(h).chunk(2, 1)
            u = (inputs - m) * torch.exp(-a)
            return u, -a.sum(-1, keepdim=True)

        else:
            x = torch.zeros_like(inputs)
            for i_col in range(inputs.shape[1]):
                h = self.joiner(x, cond_inputs)
                m, a = self.trunk(h).chunk(2, 1)
                x[:, i_col] = inputs[:, i_col] * torch.exp(
                    a[:, i_col]) + m[:, i_col]
            return x, -a.sum(-1, keepdim=True)


class Sigmoid(nn.Module):
    def __init__(self):
        super(Sigmoid, self).__init__()

    def forward(self, inputs, cond_inputs=None, mode='direct'):
        if mode == 'direct':
            s = torch.sigmoid
            return s(inputs), torch.log(s(inputs) * (1 - s(inputs))).sum(
                -1, keepdim=True)
        else:
            return torch.log(inputs /
                             (1 - inputs)), -torch.log(inputs - inputs**2).sum(
                                 -1, keepdim=True)


class Logit(Sigmoid):
    def __init__(self):
        super(Logit, self).__init__()

    def forward(self, inputs, cond_inputs=None, mode='direct'):
        if mode == 'direct':
            return super(Logit, self).forward(inputs, 'inverse')
        else:
            return super(Logit, self).forward(inputs, 'direct')


class BatchNormFlow(nn.Module):
    """ An implementation of a batch normalization layer from
    Density estimation using Real NVP
    (https://arxiv.org/abs/1605.08803).
    """

    def __init__(self, num_inputs, momentum=0.0, eps=1e-5):
        super(BatchNormFlow, self).__init__()

        self.log_gamma = nn.Parameter(torch.zeros(num_inputs))
        self.beta = nn.Parameter(torch.zeros(num_inputs))
        self.momentum = momentum
        self.eps = eps

        self.register_buffer('running_mean', torch.zeros(num_inputs))
        self.register_buffer('running_var', torch.ones(num_inputs))

    def forward(self, inputs, cond_inputs=None, mode='direct'):
        if mode == 'direct':
            if self.training:
                self.batch_mean = inputs.mean(0)
                self.batch_var = (
                    inputs - self.batch_mean).pow(2).mean(0) + self.eps

                self.running_mean.mul_(self.momentum)
                self.running_var.mul_(self.momentum)

                self.running_mean.add_(self.batch_mean.data *
                                       (1 - self.momentum))
                self.running_var.add_(self.batch_var.data *
                                      (1 - self.momentum))

                mean = self.batch_mean
                var = self.batch_var
            else:
                mean = self.running_mean
                var = self.running_var

            x_hat = (inputs - mean) / var.sqrt()
            y = torch.exp(self.log_gamma) * x_hat + self.beta
            return y, (self.log_gamma - 0.5 * torch.log(var)).sum(
                -1, keepdim=True)
        else:
            if self.training:
                mean = self.batch_mean
                var = self.batch_var
            else:
                mean = self.running_mean
                var = self.running_var

            x_hat = (inputs - self.beta) / torch.exp(self.log_gamma)

            y = x_hat * var.sqrt() + mean

            return y, (-self.log_gamma + 0.5 * torch.log(var)).sum(
                -1, keepdim=True)


class ActNorm(nn.Module):
    """ An implementation of a activation normalization layer
    from Glow: Generative Flow with Invertible 1x1 Convolutions
    (https://arxiv.org/abs/1807.03039).
    """

    def __init__(self, num_inputs):
        super(ActNorm, self).__init__()
        self.weight = nn.Parameter(torch.ones(num_inputs))
        self.bias = nn.Parameter(torch.zeros(num_inputs))
        self.initialized = False

    def forward(self, inputs, cond_inputs=None, mode='direct'):
        if self.initialized == False:
            self.weight.data.copy_(torch.log(1.0 / (inputs.std(0) + 1e-12)))
            self.bias.data.copy_(inputs.mean(0))
            self.initialized = True

        if mode == 'direct':
            return (
                inputs - self.bias) * torch.exp(self.weight), self.weight.sum(
                    -1, keepdim=True).unsqueeze(0).repeat(inputs.size(0), 1)
        else:
            return inputs * torch.exp(
                -self.weight) + self.bias, -self.weight.sum(
                    -1, keepdim=True).unsqueeze(0).repeat(inputs.size(0), 1)


class InvertibleMM(nn.Module):
    """ An implementation of a invertible matrix multiplication
    layer from Glow: Generative Flow with Invertible 1x1 Convolutions
    (https://arxiv.org/abs/1807.03039).
    """

    def __init__(self, num_inputs):
        super(InvertibleMM, self).__init__()
        self.W = nn.Parameter(torch.Tensor(num_inputs, num_inputs))
        nn.init.orthogonal_(self.W)

    def forward(self, inputs, cond_inputs=None, mode='direct'):
        if mode == 'direct':
            return inputs @ self.W, torch.slogdet(
                self.W)[-1].unsqueeze(0).unsqueeze(0).repeat(
                    inputs.size(0), 1)
        else:
            return inputs @ torch.inverse(self.W), -torch.slogdet(
                self.W)[-1].unsqueeze(0).unsqueeze(0).repeat(
                    inputs.size(0), 1)


class Shuffle(nn.Module):
    """ An implementation of a shuffling layer from
    Density estimation using Real NVP
    (https://arxiv.org/abs/1605.08803).
    """

    def __init__(self, num_inputs):
        super(Shuffle, self).__init__()
        self.perm = np.random.permutation(num_inputs)
        self.inv_perm = np.argsort(self.perm)

    def forward(self, inputs, cond_inputs=None, mode='direct'):
        if mode == 'direct':
            return inputs[:, self.perm], torch.zeros(
                inputs.size(0), 1, device=inputs.device)
        else:
            return inputs[:, self.inv_perm], torch.zeros(
                inputs.size(0), 1, device=inputs.device)


class Reverse(nn.Module):
    """ An implementation of a reversing layer from
    Density estimation using Real NVP
    (https://arxiv.org/abs/1605.08803).
    """

    def __init__(self, num_inputs):
        super(Reverse, self).__init__()
        self.perm = np.array(np.arange(0, num_inputs)[::-1])
        self.inv_perm = np.argsort(self.perm)

    def forward(self, inputs, cond_inputs=None, mode='direct'):
        if mode == 'direct':
            return inputs[:, self.perm], torch.zeros(
                inputs.size(0), 1, device=inputs.device)
        else:
            return inputs[:, self.inv_perm], torch.zeros(
                inputs.size(0), 1, device=inputs.device)


class CouplingLayer(nn.Module):
    """ An implementation of a coupling layer
    from RealNVP (https://arxiv.org/abs/1605.08803).
    """

    def __init__(self,
                 num_inputs,
                 num_hidden,
                 mask,
                 s_act='tanh',
                 t_act='relu'):
        super(CouplingLayer, self).__init__()

        self.num_inputs = num_inputs
        self.mask = mask

        activations = {'relu': nn.ReLU, 'sigmoid': nn.Sigmoid, 'tanh': nn.Tanh}
        s_act_func = activations[s_act]
        t_act_func = activations[t_act]

        self.scale_net = nn.Sequential(
            nn.Linear(num_inputs, num_hidden), s_act_func(),
            nn.Linear(num_hidden, num_hidden), s_act_func(),
            nn.Linear(num_hidden, num_inputs))
        self.translate_net = nn.Sequential(
            nn.Linear(num_inputs, num_hidden), t_act_func(),
            nn.Linear(num_hidden, num_hidden), t_act_func(),
            nn.Linear(num_hidden, num_inputs))

        def init(m):
            if isinstance(m, nn.Linear):
                m.bias.data.fill_(0)
                nn.init.orthogonal_(m.weight.data)

    def forward(self, inputs, cond_inputs=None, mode='direct'):
        mask = self.mask
        if mode == 'direct':
            log_s = self.scale_net(inputs * mask) * (1 - mask)
            t = self.translate_net(inputs * mask) * (1 - mask)
            s = torch.exp(log_s)
            return inputs * s + t, log_s.sum(-1, keepdim=True)
        else:
            log_s = self.scale_net(inputs * mask) * (1 - mask)
            t = self.translate_net(inputs * mask) * (1 - mask)
            s = torch.exp(-log_s)
            return (inputs - t) * s, -log_s.sum(-1, keepdim=True)


class FlowSequential(nn.Sequential):
    """ A sequential container for flows.
    In addition to a forward pass it implements a backward pass and
    computes log jacobians.
    """

    def forward(self, inputs, cond_inputs=None, mode='direct', logdets=None):
        """ Performs a forward or backward pass for flow modules.
        Args:
            inputs: a tuple of inputs and logdets
            mode: to run direct computation or inverse
        """
        self.num_inputs = inputs.size(-1)

        if logdets is None:
            logdets = torch.zeros(inputs.size(0), 1, device=inputs.device)

        assert mode in ['direct', 'inverse']
        if mode == 'direct':
            for module in self._modules.values():
                inputs, logdet = module(inputs, cond_inputs, mode)
                logdets += logdet
        else:
            for module in reversed(self._modules.values()):
                inputs, logdet = module(inputs, cond_inputs, mode)
                logdets += logdet

        return inputs, logdets

    def log_probs(self, inputs):
        u, log_jacob = self(inputs)
        log_probs = (-0.5 * u.pow(2) - 0.5 * math.log(2 * math.pi)).sum(
            -1, keepdim=True)
        return (log_probs + log_jacob).sum(-1, keepdim=True)

    def sample(self, num_samples=None, noise=None):
        if noise is None:
            noise = torch.Tensor(num_samples, self.num_inputs).normal_()
        device = next(self.parameters()).device
        noise = noise.to(device)
        samples = self.forward(noise, mode='inverse')[0]
        return samples


# ---- main.py, small ----
def make_data(n, seed):
    r = np.random.default_rng(seed)
    t = r.uniform(0, np.pi, n)
    side = r.integers(0, 2, n)
    x = np.stack([np.cos(t) + side * 1.0, np.sin(t) * (1 - 2 * side) + side * 0.5], 1)
    x = np.concatenate([x, x[:, :1] * x[:, 1:] , np.tanh(x[:, :1])], 1) + 0.05 * r.standard_normal((n, 4))
    return ((x - x.mean(0)) / x.std(0)).astype(np.float32)


def numpy_init(model, seed):
    r = np.random.default_rng(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if p.dim() > 1:
                p.copy_(torch.from_numpy((0.5 * r.standard_normal(tuple(p.shape)) / np.sqrt(p.shape[1])).astype(np.float32)))
            elif name.endswith("bias"):
                p.copy_(torch.from_numpy((0.05 * r.standard_normal(tuple(p.shape))).astype(np.float32)))
    return model


torch.manual_seed(1)
np.random.seed(1)
print("input mask", get_mask(4, 6, 4, mask_type='input').int().tolist())
print("output mask", get_mask(6, 8, 4, mask_type='output').sum(1).tolist())

train_tensor = torch.from_numpy(make_data(96, 0))
train_dataset = torch.utils.data.TensorDataset(train_tensor)
valid_dataset = torch.utils.data.TensorDataset(torch.from_numpy(make_data(40, 1)))
test_dataset = torch.utils.data.TensorDataset(torch.from_numpy(make_data(40, 2)))
train_loader = torch.utils.data.DataLoader(train_dataset, batch_size=32, shuffle=False)
valid_loader = torch.utils.data.DataLoader(valid_dataset, batch_size=25, shuffle=False, drop_last=False)
test_loader = torch.utils.data.DataLoader(test_dataset, batch_size=25, shuffle=False, drop_last=False)
print("loaders", len(train_loader), len(valid_loader), type(next(iter(train_loader))).__name__)

num_inputs, num_hidden, num_blocks = 4, 16, 2
device = torch.device("cpu")


def build(flow):
    modules = []
    if flow == 'glow':
        mask = torch.arange(0, num_inputs) % 2
        mask = mask.to(device).float()
        for _ in range(num_blocks):
            modules += [
                BatchNormFlow(num_inputs),
                InvertibleMM(num_inputs),
                CouplingLayer(num_inputs, num_hidden, mask, s_act='tanh', t_act='relu')
            ]
        mask = 1 - mask
    elif flow == 'realnvp':
        mask = torch.arange(0, num_inputs) % 2
        mask = mask.to(device).float()
        for _ in range(num_blocks):
            modules += [
                CouplingLayer(num_inputs, num_hidden, mask, s_act='tanh', t_act='relu'),
                BatchNormFlow(num_inputs)
            ]
            mask = 1 - mask
    elif flow == 'maf':
        for _ in range(num_blocks):
            modules += [
                MADE(num_inputs, num_hidden, act='relu'),
                BatchNormFlow(num_inputs),
                Reverse(num_inputs)
            ]
    model = FlowSequential(*modules)
    for module in model.modules():
        if isinstance(module, nn.Linear):
            nn.init.orthogonal_(module.weight)
            module.bias.data.fill_(0)
    model.to(device)
    return model


model = build('maf')
w = model[0].joiner.linear.weight
print("orthogonal", tuple(w.shape), torch.allclose(w.t() @ w, torch.eye(4), atol=1e-5),
      float(model[0].joiner.linear.bias.abs().sum()))
numpy_init(model, 3)
optimizer = optim.Adam(model.parameters(), lr=1e-2, weight_decay=1e-6, eps=1e-3)


def train(epoch):
    model.train()
    train_loss = 0
    for batch_idx, data in enumerate(train_loader):
        if isinstance(data, list):
            data = data[0]
        data = data.to(device)
        optimizer.zero_grad()
        loss = -model.log_probs(data).mean()
        train_loss += loss.item()
        loss.backward()
        optimizer.step()
    print('Train, Log likelihood in nats: {:.6f}'.format(-train_loss / (batch_idx + 1)))

    for module in model.modules():
        if isinstance(module, BatchNormFlow):
            module.momentum = 0

    with torch.no_grad():
        model(train_loader.dataset.tensors[0].to(data.device))

    for module in model.modules():
        if isinstance(module, BatchNormFlow):
            module.momentum = 1


def validate(epoch, model, loader, prefix='Validation'):
    model.eval()
    val_loss = 0
    n = 0
    for batch_idx, data in enumerate(loader):
        if isinstance(data, list):
            data = data[0]
        data = data.to(device)
        with torch.no_grad():
            val_loss += -model.log_probs(data).sum().item()  # sum up batch loss
        n += data.size(0)
    print('{}, Log likelihood in nats: {:.6f}'.format(prefix, -val_loss / n))
    return val_loss / len(loader.dataset)


best_validation_loss = float('inf')
best_validation_epoch = 0
best_model = model
for epoch in range(2):
    print('\nEpoch: {}'.format(epoch))
    train(epoch)
    validation_loss = validate(epoch, model, valid_loader)
    if validation_loss < best_validation_loss:
        best_validation_epoch = epoch
        best_validation_loss = validation_loss
        best_model = copy.deepcopy(model)
    print('Best validation at epoch {}: Average Log Likelihood in nats: {:.4f}'.format(
        best_validation_epoch, -best_validation_loss))
validate(best_validation_epoch, best_model, test_loader, prefix='Test')
print("running stats", [f"{v:.4f}" for v in best_model[1].running_mean.tolist()],
      f"{best_model[1].running_var.sum().item():.4f}", best_model[1].momentum)

# the inverse: sampling from given noise and the round trip
noise = torch.from_numpy(np.random.default_rng(5).standard_normal((6, 4)).astype(np.float32))
with torch.no_grad():
    samples = best_model.sample(noise=noise)
    back, logdet = best_model(samples)
print("samples", tuple(samples.shape), f"{samples.sum().item():.4f}", "round trip",
      torch.allclose(back, noise, atol=1e-4))
with torch.no_grad():
    print("sample", tuple(best_model.sample(num_samples=5).shape))

# realnvp and glow flows (InvertibleMM: slogdet, inverse), Sigmoid / Logit,
# ActNorm and Shuffle
for flow in ('realnvp', 'glow'):
    m = numpy_init(build(flow), 7)
    m.train()
    x = train_tensor[:16]
    lp = m.log_probs(x)
    lp.mean().backward()
    g = sum(p.grad.abs().sum() for p in m.parameters() if p.grad is not None)
    m.eval()
    with torch.no_grad():
        z, ld = m(x)
        xr, ld_inv = m(z, mode='inverse')
    print(flow, tuple(lp.shape), f"{lp.mean().item():.4f}", f"{g.item():.4f}",
          torch.allclose(xr, x, atol=1e-4), torch.allclose(ld, -ld_inv, atol=1e-4))
seq = FlowSequential(Sigmoid(), Logit(), ActNorm(4), Shuffle(4))
x = train_tensor[:8] * 0.5
y, ld = seq(x)
xr, ld_inv = seq(y, mode='inverse')
print("sigmoid/logit/actnorm/shuffle", f"{y.pow(2).sum().item():.4f}", f"{ld.sum().item():.4f}",
      torch.allclose(xr, x, atol=1e-4), seq[2].initialized, f"{seq[2].weight.sum().item():.4f}")

# a one-block MAF's training step under torch.compile against the same
# steps eagerly
model = numpy_init(FlowSequential(MADE(num_inputs, num_hidden, act='relu'), BatchNormFlow(num_inputs),
                                  Reverse(num_inputs)), 11)
optimizer = optim.Adam(model.parameters(), lr=1e-2, weight_decay=1e-6, eps=1e-3)


def train_step(data):
    optimizer.zero_grad()
    loss = -model.log_probs(data).mean()
    loss.backward()
    optimizer.step()
    return loss


batches = [train_tensor[i:i + 32] for i in (0, 32, 64, 0)]
model.train()
train_step(batches[0])
state, opt_state = copy.deepcopy(model.state_dict()), copy.deepcopy(optimizer.state_dict())
eager = [train_step(b).item() for b in batches[1:]]
after = copy.deepcopy(model.state_dict())
model.load_state_dict(state)
optimizer.load_state_dict(opt_state)
cstep = torch.compile(train_step)
compiled = [cstep(b).item() for b in batches[1:]]
print("compiled losses", [f"{v:.4f}" for v in compiled])
print("compiled == eager:", all(abs(a - b) <= 1e-4 * max(1.0, abs(b)) for a, b in zip(compiled, eager)),
      all(torch.allclose(model.state_dict()[k], after[k], rtol=1e-4, atol=1e-5) for k in after))
