# Rectified flow / flow matching the way two public programs write it:
# lucidrains/rectified-flow-pytorch's rectified_flow.py (RectifiedFlow with
# the noise-to-data convention flow = data - noise, append_dims for the
# padded times, the logit-normal time sampler sigmoid(randn), the
# cosmap-free uniform times, PseudoHuberLoss sqrt(mse + c^2) - c with
# reduction through einops.reduce, the MSE loss, the Euler sampler over
# torch.linspace times under torch.no_grad with the model put in eval and
# restored, clamp_ of the data to [-1, 1], EMA of the model) and
# facebookresearch/flow_matching's examples/standalone_flow_matching.ipynb
# (the Flow MLP with its step() midpoint update, x_t = (1 - t) * x_0 + t *
# x_1 and dx_t = x_1 - x_0, t.view(-1, 1).expand(...) fed with
# torch.cat((t, x_t), -1)) and the same repository's mean_flow.py (MeanFlow:
# the average velocity between integral start time r and t, trained through
# torch.func.jvp(model, (z, t, r), (flow, 1, 0)) with the detached rate of
# change, the adaptive loss weight, one-step sampling). The net is lucidrains' small time-conditioned
# convolutional network with the sinusoidal time embedding (the
# math.log(10000) / (half_dim - 1) frequencies, rearrange(x, 'b -> b 1') *
# rearrange(emb, 'd -> 1 d'), cat of sin and cos), GroupNorm / SiLU blocks
# with the time as scale-shift through chunk(2, dim=1). EMA through
# torch.optim.swa_utils.AveragedModel(multi_avg_fn=get_ema_multi_avg_fn) and
# by hand with lerp_. Changes for a CPU test: 8x8 single-channel images and
# 2-D points, tiny widths, weights and data from numpy, the random draws
# (noise, times) from a numpy generator (torch's and tracec's generators
# differ); then one training step under torch.compile against the same step
# eagerly.
import copy
import math

import numpy as np
import torch
import torch.nn.functional as F
from einops import rearrange, reduce, repeat
from torch import nn
from torch.nn import Module, ModuleList
from torch.optim.swa_utils import AveragedModel, get_ema_multi_avg_fn


def fmt(x, n=4):
    return [f"{v:.4f}" for v in x.reshape(-1)[:n].tolist()]


npr = np.random.default_rng(1)    # the samplers' draws


def np_randn(*shape):
    return torch.from_numpy(npr.normal(size=shape).astype(np.float32))


def np_rand(*shape):
    return torch.from_numpy(npr.random(shape).astype(np.float32))


def exists(v):
    return v is not None


def default(v, d):
    return v if exists(v) else d


def identity(t):
    return t


def append_dims(t, dims):
    shape = t.shape
    return t.reshape(*shape, *((1,) * dims))


# ---- losses (rectified_flow.py)
class LossBreakdown:
    def __init__(self, total, main, data_match=None, velocity_match=None):
        self.total, self.main, self.data_match, self.velocity_match = total, main, data_match, velocity_match


class PseudoHuberLoss(Module):
    def __init__(self, data_dim: int = 3):
        super().__init__()
        self.data_dim = data_dim

    def forward(self, pred, target, **kwargs):
        data_dim = default(self.data_dim, kwargs.pop('data_dim', None))

        c = .00054 * self.data_dim
        loss = F.mse_loss(pred, target, reduction='none')
        loss = reduce(loss, 'b ... -> b', 'mean')
        loss = (loss + c * c).sqrt() - c
        return loss.mean()


class MSELoss(Module):
    def forward(self, pred, target, **kwargs):
        return F.mse_loss(pred, target)


# ---- the network
class SinusoidalPosEmb(Module):
    def __init__(self, dim, theta=10000):
        super().__init__()
        self.dim = dim
        self.theta = theta

    def forward(self, x):
        device = x.device
        half_dim = self.dim // 2
        emb = math.log(self.theta) / (half_dim - 1)
        emb = torch.exp(torch.arange(half_dim, device=device) * -emb)
        emb = rearrange(x, 'b -> b 1') * rearrange(emb, 'd -> 1 d')
        emb = torch.cat((emb.sin(), emb.cos()), dim=-1)
        return emb


class Block(Module):
    def __init__(self, dim, dim_out, groups=4):
        super().__init__()
        self.proj = nn.Conv2d(dim, dim_out, 3, padding=1)
        self.norm = nn.GroupNorm(groups, dim_out)
        self.act = nn.SiLU()

    def forward(self, x, scale_shift=None):
        x = self.proj(x)
        x = self.norm(x)

        if exists(scale_shift):
            scale, shift = scale_shift
            x = x * (scale + 1) + shift

        x = self.act(x)
        return x


class ResnetBlock(Module):
    def __init__(self, dim, dim_out, *, time_emb_dim=None, groups=4):
        super().__init__()
        self.mlp = nn.Sequential(
            nn.SiLU(),
            nn.Linear(time_emb_dim, dim_out * 2)
        ) if exists(time_emb_dim) else None

        self.block1 = Block(dim, dim_out, groups=groups)
        self.block2 = Block(dim_out, dim_out, groups=groups)
        self.res_conv = nn.Conv2d(dim, dim_out, 1) if dim != dim_out else nn.Identity()

    def forward(self, x, time_emb=None):
        scale_shift = None
        if exists(self.mlp) and exists(time_emb):
            time_emb = self.mlp(time_emb)
            time_emb = rearrange(time_emb, 'b c -> b c 1 1')
            scale_shift = time_emb.chunk(2, dim=1)

        h = self.block1(x, scale_shift=scale_shift)
        h = self.block2(h)
        return h + self.res_conv(x)


class Unet(Module):
    def __init__(self, dim, channels=1, dim_mults=(1, 2)):
        super().__init__()
        self.channels = channels
        self.init_conv = nn.Conv2d(channels, dim, 7, padding=3)
        time_dim = dim * 4
        self.time_mlp = nn.Sequential(
            SinusoidalPosEmb(dim),
            nn.Linear(dim, time_dim),
            nn.GELU(),
            nn.Linear(time_dim, time_dim)
        )
        dims = [dim, *map(lambda m: dim * m, dim_mults)]
        in_out = list(zip(dims[:-1], dims[1:]))
        self.downs = ModuleList([])
        self.ups = ModuleList([])
        for ind, (dim_in, dim_out) in enumerate(in_out):
            is_last = ind >= (len(in_out) - 1)
            self.downs.append(ModuleList([
                ResnetBlock(dim_in, dim_in, time_emb_dim=time_dim),
                nn.Conv2d(dim_in, dim_out, 4, 2, 1) if not is_last else nn.Conv2d(dim_in, dim_out, 3, padding=1)
            ]))
        mid_dim = dims[-1]
        self.mid_block = ResnetBlock(mid_dim, mid_dim, time_emb_dim=time_dim)
        for ind, (dim_in, dim_out) in enumerate(reversed(in_out)):
            is_last = ind == (len(in_out) - 1)
            self.ups.append(ModuleList([
                ResnetBlock(dim_out + dim_in, dim_out, time_emb_dim=time_dim),
                nn.Sequential(nn.Upsample(scale_factor=2, mode='nearest'), nn.Conv2d(dim_out, dim_in, 3, padding=1))
                if not is_last else nn.Conv2d(dim_out, dim_in, 3, padding=1)
            ]))
        self.final_res_block = ResnetBlock(dim * 2, dim, time_emb_dim=time_dim)
        self.final_conv = nn.Conv2d(dim, channels, 1)

    def forward(self, x, times):
        x = self.init_conv(x)
        r = x.clone()
        t = self.time_mlp(times)
        h = []
        for block1, downsample in self.downs:
            x = block1(x, t)
            h.append(x)
            x = downsample(x)
        x = self.mid_block(x, t)
        for block1, upsample in self.ups:
            x = torch.cat((x, h.pop()), dim=1)
            x = block1(x, t)
            x = upsample(x)
        x = torch.cat((x, r), dim=1)
        x = self.final_res_block(x, t)
        return self.final_conv(x)


# ---- RectifiedFlow (lucidrains), the torchdiffeq odeint replaced by its Euler method
class RectifiedFlow(Module):
    def __init__(self, model, time_cond_kwarg='times', loss_fn=MSELoss(), data_shape=None,
                 clip_during_sampling=True, clip_values=(-1., 1.), immiscible=False,
                 noise_schedule=identity, use_logit_normal=False):
        super().__init__()
        self.model = model
        self.time_cond_kwarg = time_cond_kwarg
        self.loss_fn = loss_fn
        self.noise_schedule = noise_schedule
        self.data_shape = data_shape
        self.clip_during_sampling = clip_during_sampling
        self.clip_values = clip_values
        self.use_logit_normal = use_logit_normal

    @property
    def device(self):
        return next(self.model.parameters()).device

    def predict_flow(self, model, noised, *, times, eps=1e-10):
        batch = noised.shape[0]
        # prepare maybe time conditioning for model
        model_kwargs = dict()
        time_kwarg = self.time_cond_kwarg
        if exists(time_kwarg):
            times = rearrange(times, '... -> (...)')
            if times.numel() == 1:
                times = repeat(times, '1 -> b', b=batch)
            model_kwargs.update(**{time_kwarg: times})
        output = model(noised, **model_kwargs)
        return output

    @torch.no_grad()
    def sample(self, batch_size=1, steps=16, noise=None, data_shape=None, use_ema=False, **model_kwargs):
        use_ema = default(use_ema, self.use_consistency)
        assert not (use_ema and not exists(self.ema_model)), 'in order to sample from an ema model'

        was_training = self.training
        self.eval()

        model = self.ema_model if use_ema else self.model
        data_shape = default(data_shape, self.data_shape)
        assert exists(data_shape), 'you need to either pass in a `data_shape` or have trained at least with one forward'

        maybe_clip = (lambda t: t.clamp_(*self.clip_values)) if self.clip_during_sampling else identity

        noise = default(noise, np_randn(batch_size, *data_shape))
        times = torch.linspace(0., 1., steps, device=self.device)
        out = noise
        trajectory = [out]
        for t_prev, t_next in zip(times[:-1], times[1:]):
            flow = self.predict_flow(model, out, times=t_prev)
            out = out + (t_next - t_prev) * flow
            out = maybe_clip(out)
            trajectory.append(out)
        sampled_data = trajectory[-1]

        self.train(was_training)
        return sampled_data

    def forward(self, data, noise=None, return_loss_breakdown=False, **model_kwargs):
        batch, *data_shape = data.shape

        self.data_shape = default(self.data_shape, data_shape)

        # x0 - gaussian noise, x1 - data
        noise = default(noise, np_randn(*data.shape))

        # times, and times with dimension padding on right
        if self.use_logit_normal:
            times = np_randn(batch).sigmoid()
        else:
            times = np_rand(batch)
        padded_times = append_dims(times, data.ndim - 1)

        # time needs to be from [0, 1 - delta_t] if using consistency loss
        def get_noised_and_flows(model, t):
            # maybe noise schedule
            t = self.noise_schedule(t)
            # Algorithm 2 in paper
            # linear interpolation of noise with data using random times
            # x1 * t + x0 * (1 - t) - so from noise (time = 0) to data (time = 1.)
            noised = t * data + (1. - t) * noise
            # the model predicts the flow from the noised data
            flow = data - noise
            pred_flow = self.predict_flow(model, noised, times=t)
            # predicted data will be the noised xt + flow * (1. - t)
            pred_data = noised + pred_flow * (1. - t)
            return flow, pred_flow, pred_data

        flow, pred_flow, pred_data = get_noised_and_flows(self.model, padded_times)

        main_loss = self.loss_fn(pred_flow, flow, pred_data=pred_data, times=times, data=data)
        if not return_loss_breakdown:
            return main_loss
        return main_loss, LossBreakdown(main_loss, main_loss)


def load_numpy(module, r, std=0.15):
    with torch.no_grad():
        for name, p in module.named_parameters():
            if name.endswith("norm.weight"):
                p.copy_(torch.from_numpy(1 + r.normal(0, 0.05, tuple(p.shape)).astype(np.float32)))
            else:
                p.copy_(torch.from_numpy(r.normal(0, std, tuple(p.shape)).astype(np.float32)))


r = np.random.default_rng(0)
model = Unet(dim=8, channels=1, dim_mults=(1, 2))
load_numpy(model, r)
print("params", sum(p.numel() for p in model.parameters()), len(model.downs), len(model.ups))
emb = SinusoidalPosEmb(8)(torch.tensor([0.0, 0.5, 1.0]))
print("time emb", tuple(emb.shape), fmt(emb[1], 8))

images = np.tanh(2 * r.normal(size=(16, 1, 8, 8)).astype(np.float32) * np.linspace(0.2, 1, 8, dtype=np.float32))
images = torch.from_numpy(images)
rectified_flow = RectifiedFlow(model, loss_fn=PseudoHuberLoss(data_dim=3), use_logit_normal=True)
rectified_flow.use_consistency = False
rectified_flow.ema_model = None
ema_model = AveragedModel(model, multi_avg_fn=get_ema_multi_avg_fn(0.9))
optimizer = torch.optim.Adam(rectified_flow.parameters(), lr=3e-3)
print("flow params", len(list(rectified_flow.parameters())), rectified_flow.device, ema_model.n_averaged.item())
for step in range(4):
    loss, breakdown = rectified_flow(images[(step % 2) * 8:(step % 2) * 8 + 8], return_loss_breakdown=True)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(rectified_flow.parameters(), 0.5)
    optimizer.step()
    optimizer.zero_grad()
    ema_model.update_parameters(model)
    print(f"step {step} loss {loss.item():.5f} main {breakdown.main.item():.5f}")
print("ema", ema_model.n_averaged.item(), fmt(ema_model.module.final_conv.weight, 3),
      fmt(model.final_conv.weight, 3), rectified_flow.data_shape)

rectified_flow.ema_model = ema_model.module
sampled = rectified_flow.sample(batch_size=2, steps=5, use_ema=True)
print("sampled", tuple(sampled.shape), fmt(sampled, 4), float(sampled.abs().max()) <= 1.0,
      rectified_flow.training, sampled.requires_grad)
sampled2 = rectified_flow.sample(batch_size=2, steps=3, use_ema=False)
print("sampled raw", fmt(sampled2, 4))

# the MSE loss and uniform times
rectified_flow.loss_fn = MSELoss()
rectified_flow.use_logit_normal = False
print("mse loss", f"{rectified_flow(images[:8]).item():.5f}")

# ---- flow_matching's standalone example: the Flow MLP with the midpoint step
class Flow(nn.Module):
    def __init__(self, dim: int = 2, h: int = 64):
        super().__init__()
        self.net = nn.Sequential(
            nn.Linear(dim + 1, h), nn.ELU(),
            nn.Linear(h, h), nn.ELU(),
            nn.Linear(h, h), nn.ELU(),
            nn.Linear(h, dim))

    def forward(self, t, x_t):
        return self.net(torch.cat((t, x_t), -1))

    def step(self, x_t, t_start, t_end):
        t_start = t_start.view(1, 1).expand(x_t.shape[0], 1)

        return x_t + (t_end - t_start) * self(t=t_start + (t_end - t_start) / 2,
                                              x_t=x_t + self(x_t=x_t, t=t_start) * (t_end - t_start) / 2)


def make_moons(n, noise):
    t = np.pi * r.random(n)
    half = n // 2
    x = np.concatenate([np.stack([np.cos(t[:half]), np.sin(t[:half])], 1),
                        np.stack([1 - np.cos(t[half:]), 1 - np.sin(t[half:]) - .5], 1)])
    return (x + noise * r.normal(size=x.shape)).astype(np.float32)


flow = Flow(h=32)
load_numpy(flow, r, std=0.3)
ema = copy.deepcopy(flow)
ema.requires_grad_(False)
optimizer2 = torch.optim.Adam(flow.parameters(), 1e-2)
loss_fn = nn.MSELoss()
for it in range(5):
    x_1 = torch.Tensor(make_moons(32, noise=0.05))
    x_0 = np_randn(*x_1.shape)
    t = np_rand(len(x_1), 1)

    x_t = (1 - t) * x_0 + t * x_1
    dx_t = x_1 - x_0

    optimizer2.zero_grad()
    loss_fn(flow(t=t, x_t=x_t), dx_t).backward()
    optimizer2.step()
    with torch.no_grad():
        for ema_p, p in zip(ema.parameters(), flow.parameters()):
            ema_p.lerp_(p, 1. - 0.8)
    print(f"fm {it} {loss_fn(flow(t=t, x_t=x_t), dx_t).item():.5f}")

x = np_randn(6, 2)
n_steps = 8
time_steps = torch.linspace(0, 1.0, n_steps + 1)
with torch.no_grad():
    for i in range(n_steps):
        x = flow.step(x_t=x, t_start=time_steps[i], t_end=time_steps[i + 1])
        if i == n_steps // 2:
            print("mid", fmt(x, 4))
print("midpoint", fmt(x, 6), x.requires_grad, fmt(ema.net[0].weight, 3), ema.net[0].weight.requires_grad)


# ---- MeanFlow (rectified-flow-pytorch's mean_flow.py): the average velocity
# u(z, r, t) trained with the JVP identity through torch.func.jvp
from random import random as py_random
from torch.func import jvp


class MeanFlowNet(Module):
    def __init__(self, dim=2, h=32):
        super().__init__()
        self.time_emb = SinusoidalPosEmb(8)
        self.net = nn.Sequential(nn.Linear(dim + 16, h), nn.SiLU(), nn.Linear(h, h), nn.SiLU(), nn.Linear(h, dim))

    def forward(self, noised, times, integral_start_times):
        t = torch.cat((self.time_emb(times), self.time_emb(times - integral_start_times)), dim=-1)
        return self.net(torch.cat((noised, t), dim=-1))


class MeanFlow(Module):
    def __init__(self, model, data_shape=None, use_adaptive_loss_weight=True, adaptive_loss_weight_p=0.5,
                 prob_default_flow_obj=0.5, eps=1e-3):
        super().__init__()
        self.model = model
        self.data_shape = data_shape
        self.use_adaptive_loss_weight = use_adaptive_loss_weight
        self.adaptive_loss_weight_p = adaptive_loss_weight_p
        self.prob_default_flow_obj = prob_default_flow_obj
        self.eps = eps

    @torch.no_grad()
    def sample(self, batch_size=None, data_shape=None, noise=None, steps=1):
        data_shape = default(data_shape, self.data_shape)
        if not exists(noise):
            noise = np_randn(batch_size, *data_shape)
        times = torch.linspace(1., 0., steps + 1)
        denoised = noise
        for time, next_time in zip(times[:-1], times[1:]):
            batch_times = repeat(time, '-> b', b=noise.shape[0])
            batch_next = repeat(next_time, '-> b', b=noise.shape[0])
            pred = self.model(denoised, batch_times, batch_next)
            denoised = denoised - append_dims(batch_times - batch_next, denoised.ndim - 1) * pred
        return denoised

    def forward(self, data, noise=None, return_loss_breakdown=False):
        shape, ndim = data.shape, data.ndim
        self.data_shape = default(self.data_shape, shape[1:])
        batch = shape[0]

        times = np_rand(batch)
        # some set prob of the time, normal flow matching training (times == start integral times)
        normal_flow_match_obj = self.prob_default_flow_obj > 0. and py_random() < self.prob_default_flow_obj
        if normal_flow_match_obj:
            integral_start_times = times  # r = t for regular flow matching
        else:
            integral_start_times = np_rand(batch) * times

        noise = default(noise, np_randn(*data.shape))
        flow = noise - data  # the velocity from data (time 0) to noise (time 1)
        padded_times = append_dims(times, ndim - 1)
        noised_data = data.lerp(noise, padded_times)

        delta_times = times - integral_start_times
        padded_delta_times = append_dims(delta_times, ndim - 1)

        inputs = (noised_data, times, integral_start_times)
        if normal_flow_match_obj:
            pred = self.model(*inputs)
            target = flow
        else:
            tangents = (flow, torch.ones_like(times), torch.zeros_like(integral_start_times))
            pred, rate_avg_vel_change = jvp(self.model, inputs, tangents)
            integral = padded_delta_times * rate_avg_vel_change.detach()
            target = flow - integral

        flow_loss = F.mse_loss(pred, target, reduction='none')
        if self.use_adaptive_loss_weight:
            flow_loss = reduce(flow_loss, 'b ... -> b', 'mean')
            adaptive_loss_weight = 1. / (flow_loss + self.eps).pow(self.adaptive_loss_weight_p)
            flow_loss = flow_loss * adaptive_loss_weight.detach()
        loss = flow_loss.mean()
        if not return_loss_breakdown:
            return loss
        return loss, (normal_flow_match_obj, pred.requires_grad, rate_avg_vel_change.requires_grad
                      if not normal_flow_match_obj else None)


import random as _random
_random.seed(3)
mean_flow = MeanFlow(MeanFlowNet())
load_numpy(mean_flow, r, std=0.3)
mf_opt = torch.optim.Adam(mean_flow.parameters(), lr=3e-3)
for it in range(4):
    x1 = torch.Tensor(make_moons(16, noise=0.05))
    loss, (plain_fm, pred_grad, jvp_grad) = mean_flow(x1, return_loss_breakdown=True)
    mf_opt.zero_grad()
    loss.backward()
    mf_opt.step()
    print(f"meanflow {it} loss {loss.item():.5f}", plain_fm, pred_grad, jvp_grad,
          fmt(mean_flow.model.net[0].weight.grad, 2))
one_step = mean_flow.sample(batch_size=4)
print("meanflow sample", tuple(one_step.shape), fmt(one_step, 4), fmt(mean_flow.sample(noise=one_step * 0 + 1, steps=2), 2))
def train_step(data, noise, times):
    padded = append_dims(times, data.ndim - 1)
    noised = padded * data + (1. - padded) * noise
    pred = rectified_flow.predict_flow(model, noised, times=padded)
    loss = PseudoHuberLoss(data_dim=3)(pred, data - noise)
    loss.backward()
    optimizer.step()
    optimizer.zero_grad()
    return loss


data, noise, times = images[:4], np_randn(4, 1, 8, 8), np_rand(4)
state, opt_state = copy.deepcopy(model.state_dict()), copy.deepcopy(optimizer.state_dict())
eager = [train_step(data, noise, times).item() for _ in range(2)]
after = {k: v.clone() for k, v in model.state_dict().items()}
model.load_state_dict(state)
optimizer.load_state_dict(opt_state)
cstep = torch.compile(train_step)
compiled = [cstep(data, noise, times).item() for _ in range(2)]
print("compiled losses", [f"{v:.5f}" for v in compiled])
print("compiled == eager:", all(abs(a - b) <= 1e-4 * max(1.0, abs(b)) for a, b in zip(compiled, eager)),
      all(torch.allclose(model.state_dict()[k], after[k], rtol=1e-4, atol=1e-5) for k in after))
