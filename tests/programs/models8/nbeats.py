# ElementAI/N-BEATS (models/nbeats.py's NBeatsBlock, NBeats with its flipped residuals
# and input mask, GenericBasis, TrendBasis and SeasonalityBasis with their einsum basis
# products and fixed (requires_grad=False) Parameters; experiments' generic() and
# interpretable() builders, the latter repeating the same block module (shared
# weights); common/torch/losses.py's divide_no_nan, MAPE, sMAPE and MASE losses;
# common/sampler.py's TimeseriesSampler; common/torch/ops.py's to_tensor;
# experiments/trainer.py's training loop with clip_grad_norm_ and the lr decayed
# through param_groups).  Changes for a CPU test: np.float is np.float64 (removed from
# numpy), synthetic series, a small configuration (horizon 6, input 2H, layer size
# 32, 6 iterations, batch 16), and weights come from numpy.  Then the training step
# under torch.compile against the same step run eagerly (without the trainer's
# `if np.isnan(float(training_loss)): break`, which reads the loss in Python).
import copy
from typing import Iterator, Tuple

import numpy as np
import torch as t


# ---- common/torch/ops.py ----
def default_device() -> t.device:
    return t.device('cuda') if t.cuda.is_available() else t.device('cpu')


def to_tensor(array: np.ndarray) -> t.Tensor:
    return t.tensor(array, dtype=t.float32).to(default_device())


def divide_no_nan(a, b):
    """
    a/b where the resulted NaN or Inf are replaced by 0.
    """
    result = a / b
    result[result != result] = .0
    result[result == np.inf] = .0
    return result


# ---- common/torch/losses.py ----
def mape_loss(forecast: t.Tensor, target: t.Tensor, mask: t.Tensor) -> t.float:
    weights = divide_no_nan(mask, target)
    return t.mean(t.abs((forecast - target) * weights))


def smape_2_loss(forecast, target, mask) -> t.float:
    return 200 * t.mean(divide_no_nan(t.abs(forecast - target),
                                      t.abs(forecast.data) + t.abs(target.data)) * mask)


def mase_loss(insample: t.Tensor, freq: int,
              forecast: t.Tensor, target: t.Tensor, mask: t.Tensor) -> t.float:
    masep = t.mean(t.abs(insample[:, freq:] - insample[:, :-freq]), dim=1)
    masked_masep_inv = divide_no_nan(mask, masep[:, None])
    return t.mean(t.abs(target - forecast) * masked_masep_inv)


# ---- models/nbeats.py ----
class NBeatsBlock(t.nn.Module):
    """
    N-BEATS block which takes a basis function as an argument.
    """
    def __init__(self,
                 input_size,
                 theta_size: int,
                 basis_function: t.nn.Module,
                 layers: int,
                 layer_size: int):
        super().__init__()
        self.layers = t.nn.ModuleList([t.nn.Linear(in_features=input_size, out_features=layer_size)] +
                                      [t.nn.Linear(in_features=layer_size, out_features=layer_size)
                                       for _ in range(layers - 1)])
        self.basis_parameters = t.nn.Linear(in_features=layer_size, out_features=theta_size)
        self.basis_function = basis_function

    def forward(self, x: t.Tensor) -> Tuple[t.Tensor, t.Tensor]:
        block_input = x
        for layer in self.layers:
            block_input = t.relu(layer(block_input))
        basis_parameters = self.basis_parameters(block_input)
        return self.basis_function(basis_parameters)


class NBeats(t.nn.Module):
    """
    N-Beats Model.
    """
    def __init__(self, blocks: t.nn.ModuleList):
        super().__init__()
        self.blocks = blocks

    def forward(self, x: t.Tensor, input_mask: t.Tensor) -> t.Tensor:
        residuals = x.flip(dims=(1,))
        input_mask = input_mask.flip(dims=(1,))
        forecast = x[:, -1:]
        for i, block in enumerate(self.blocks):
            backcast, block_forecast = block(residuals)
            residuals = (residuals - backcast) * input_mask
            forecast = forecast + block_forecast
        return forecast


class GenericBasis(t.nn.Module):
    """
    Generic basis function.
    """
    def __init__(self, backcast_size: int, forecast_size: int):
        super().__init__()
        self.backcast_size = backcast_size
        self.forecast_size = forecast_size

    def forward(self, theta: t.Tensor):
        return theta[:, :self.backcast_size], theta[:, -self.forecast_size:]


class TrendBasis(t.nn.Module):
    """
    Polynomial function to model trend.
    """
    def __init__(self, degree_of_polynomial: int, backcast_size: int, forecast_size: int):
        super().__init__()
        self.polynomial_size = degree_of_polynomial + 1  # degree of polynomial with constant term
        self.backcast_time = t.nn.Parameter(
            t.tensor(np.concatenate([np.power(np.arange(backcast_size, dtype=np.float64) / backcast_size, i)[None, :]
                                     for i in range(self.polynomial_size)]), dtype=t.float32),
            requires_grad=False)
        self.forecast_time = t.nn.Parameter(
            t.tensor(np.concatenate([np.power(np.arange(forecast_size, dtype=np.float64) / forecast_size, i)[None, :]
                                     for i in range(self.polynomial_size)]), dtype=t.float32), requires_grad=False)

    def forward(self, theta: t.Tensor):
        backcast = t.einsum('bp,pt->bt', theta[:, self.polynomial_size:], self.backcast_time)
        forecast = t.einsum('bp,pt->bt', theta[:, :self.polynomial_size], self.forecast_time)
        return backcast, forecast


class SeasonalityBasis(t.nn.Module):
    """
    Harmonic functions to model seasonality.
    """
    def __init__(self, harmonics: int, backcast_size: int, forecast_size: int):
        super().__init__()
        self.frequency = np.append(np.zeros(1, dtype=np.float32),
                                   np.arange(harmonics, harmonics / 2 * forecast_size,
                                             dtype=np.float32) / harmonics)[None, :]
        backcast_grid = -2 * np.pi * (
                np.arange(backcast_size, dtype=np.float32)[:, None] / forecast_size) * self.frequency
        forecast_grid = 2 * np.pi * (
                np.arange(forecast_size, dtype=np.float32)[:, None] / forecast_size) * self.frequency
        self.backcast_cos_template = t.nn.Parameter(t.tensor(np.transpose(np.cos(backcast_grid)), dtype=t.float32),
                                                    requires_grad=False)
        self.backcast_sin_template = t.nn.Parameter(t.tensor(np.transpose(np.sin(backcast_grid)), dtype=t.float32),
                                                    requires_grad=False)
        self.forecast_cos_template = t.nn.Parameter(t.tensor(np.transpose(np.cos(forecast_grid)), dtype=t.float32),
                                                    requires_grad=False)
        self.forecast_sin_template = t.nn.Parameter(t.tensor(np.transpose(np.sin(forecast_grid)), dtype=t.float32),
                                                    requires_grad=False)

    def forward(self, theta: t.Tensor):
        params_per_harmonic = theta.shape[1] // 4
        backcast_harmonics_cos = t.einsum('bp,pt->bt', theta[:, 2 * params_per_harmonic:3 * params_per_harmonic],
                                          self.backcast_cos_template)
        backcast_harmonics_sin = t.einsum('bp,pt->bt', theta[:, 3 * params_per_harmonic:], self.backcast_sin_template)
        backcast = backcast_harmonics_sin + backcast_harmonics_cos
        forecast_harmonics_cos = t.einsum('bp,pt->bt',
                                          theta[:, :params_per_harmonic], self.forecast_cos_template)
        forecast_harmonics_sin = t.einsum('bp,pt->bt', theta[:, params_per_harmonic:2 * params_per_harmonic],
                                          self.forecast_sin_template)
        forecast = forecast_harmonics_sin + forecast_harmonics_cos

        return backcast, forecast


# ---- models/generic.py, models/interpretable.py ----
def generic(input_size: int, output_size: int,
            stacks: int, layers: int, layer_size: int):
    return NBeats(t.nn.ModuleList([NBeatsBlock(input_size=input_size,
                                               theta_size=input_size + output_size,
                                               basis_function=GenericBasis(backcast_size=input_size,
                                                                           forecast_size=output_size),
                                               layers=layers,
                                               layer_size=layer_size)
                                   for _ in range(stacks)]))


def interpretable(input_size: int,
                  output_size: int,
                  trend_blocks: int,
                  trend_layers: int,
                  trend_layer_size: int,
                  degree_of_polynomial: int,
                  seasonality_blocks: int,
                  seasonality_layers: int,
                  seasonality_layer_size: int,
                  num_of_harmonics: int):
    trend_block = NBeatsBlock(input_size=input_size,
                              theta_size=2 * (degree_of_polynomial + 1),
                              basis_function=TrendBasis(degree_of_polynomial=degree_of_polynomial,
                                                        backcast_size=input_size,
                                                        forecast_size=output_size),
                              layers=trend_layers,
                              layer_size=trend_layer_size)

    seasonality_block = NBeatsBlock(input_size=input_size,
                                    theta_size=4 * int(
                                        np.ceil(num_of_harmonics / 2 * output_size) - (num_of_harmonics - 1)),
                                    basis_function=SeasonalityBasis(harmonics=num_of_harmonics,
                                                                    backcast_size=input_size,
                                                                    forecast_size=output_size),
                                    layers=seasonality_layers,
                                    layer_size=seasonality_layer_size)

    return NBeats(t.nn.ModuleList(
        [trend_block for _ in range(trend_blocks)] + [seasonality_block for _ in range(seasonality_blocks)]))


# ---- common/sampler.py ----
class TimeseriesSampler:
    def __init__(self,
                 timeseries: np.ndarray,
                 insample_size: int,
                 outsample_size: int,
                 window_sampling_limit: int,
                 batch_size: int = 1024):
        self.timeseries = [ts for ts in timeseries]
        self.window_sampling_limit = window_sampling_limit
        self.batch_size = batch_size
        self.insample_size = insample_size
        self.outsample_size = outsample_size

    def __iter__(self):
        while True:
            insample = np.zeros((self.batch_size, self.insample_size))
            insample_mask = np.zeros((self.batch_size, self.insample_size))
            outsample = np.zeros((self.batch_size, self.outsample_size))
            outsample_mask = np.zeros((self.batch_size, self.outsample_size))
            sampled_ts_indices = np.random.randint(len(self.timeseries), size=self.batch_size)
            for i, sampled_index in enumerate(sampled_ts_indices):
                sampled_timeseries = self.timeseries[sampled_index]
                cut_point = np.random.randint(low=max(1, len(sampled_timeseries) - self.window_sampling_limit),
                                              high=len(sampled_timeseries),
                                              size=1)[0]

                insample_window = sampled_timeseries[max(0, cut_point - self.insample_size):cut_point]
                insample[i, -len(insample_window):] = insample_window
                insample_mask[i, -len(insample_window):] = 1.0
                outsample_window = sampled_timeseries[
                                   cut_point:min(len(sampled_timeseries), cut_point + self.outsample_size)]
                outsample[i, :len(outsample_window)] = outsample_window
                outsample_mask[i, :len(outsample_window)] = 1.0
            yield insample, insample_mask, outsample, outsample_mask

    def last_insample_window(self):
        insample = np.zeros((len(self.timeseries), self.insample_size))
        insample_mask = np.zeros((len(self.timeseries), self.insample_size))
        for i, ts in enumerate(self.timeseries):
            ts_last_window = ts[-self.insample_size:]
            insample[i, -len(ts):] = ts_last_window
            insample_mask[i, -len(ts):] = 1.0
        return insample, insample_mask


# ---- experiments/trainer.py ----
def __loss_fn(loss_name: str):
    def loss(x, freq, forecast, target, target_mask):
        if loss_name == 'MAPE':
            return mape_loss(forecast, target, target_mask)
        elif loss_name == 'MASE':
            return mase_loss(x, freq, forecast, target, target_mask)
        elif loss_name == 'SMAPE':
            return smape_2_loss(forecast, target, target_mask)
        else:
            raise Exception(f'Unknown loss function: {loss_name}')

    return loss


def trainer(model: t.nn.Module,
            training_set: Iterator,
            timeseries_frequency: int,
            loss_name: str,
            iterations: int,
            learning_rate: float = 0.001):
    model = model.to(default_device())
    optimizer = t.optim.Adam(model.parameters(), lr=learning_rate)

    training_loss_fn = __loss_fn(loss_name)

    lr_decay_step = iterations // 3
    if lr_decay_step == 0:
        lr_decay_step = 1

    for i in range(iterations):
        model.train()
        x, x_mask, y, y_mask = map(to_tensor, next(training_set))
        optimizer.zero_grad()
        forecast = model(x, x_mask)
        training_loss = training_loss_fn(x, timeseries_frequency, forecast, y, y_mask)

        if np.isnan(float(training_loss)):
            break

        training_loss.backward()
        t.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        for param_group in optimizer.param_groups:
            param_group["lr"] = learning_rate * 0.5 ** (i // lr_decay_step)
        print(f'iteration {i}: {loss_name} {float(training_loss):.5f} lr {optimizer.param_groups[0]["lr"]:.6f}')
    return model, optimizer, training_loss_fn


def numpy_init(model, seed):
    r = np.random.default_rng(seed)
    with t.no_grad():
        for p in model.parameters():
            if p.requires_grad:
                fan = p.shape[1] if p.dim() > 1 else 16
                p.copy_(t.from_numpy((r.standard_normal(tuple(p.shape)) / np.sqrt(fan)).astype(np.float32)))
    return model


# synthetic monthly-like series of different lengths (some shorter than the input
# window, so masks and zero padding matter), frequency 4
np.random.seed(0)
H, freq = 6, 4
g = np.random.default_rng(0)
series = [10 + 0.1 * np.arange(n) + 2 * np.sin(2 * np.pi * np.arange(n) / freq) + g.standard_normal(n) * 0.3
          for n in (40, 25, 9, 60, 33, 17)]
sampler = TimeseriesSampler(timeseries=np.array(series, dtype=object), insample_size=2 * H,
                            outsample_size=H, window_sampling_limit=10 * H, batch_size=16)
training_set = iter(sampler)

gen = numpy_init(generic(input_size=2 * H, output_size=H, stacks=3, layers=2, layer_size=32), 1)
print("generic", sum(p.numel() for p in gen.parameters()))
gen, _, _ = trainer(gen, training_set, freq, 'MASE', iterations=6)

interp = numpy_init(interpretable(input_size=2 * H, output_size=H, trend_blocks=2, trend_layers=2,
                                  trend_layer_size=32, degree_of_polynomial=2, seasonality_blocks=2,
                                  seasonality_layers=2, seasonality_layer_size=32, num_of_harmonics=1), 2)
print("interpretable", len(interp.blocks), sum(p.numel() for p in interp.parameters()),
      sum(p.numel() for p in interp.parameters() if p.requires_grad),
      interp.blocks[0] is interp.blocks[1], len(list(interp.named_parameters())))
print("frequency", interp.blocks[2].basis_function.frequency.tolist())
interp, optimizer, loss_fn = trainer(interp, training_set, freq, 'SMAPE', iterations=6)

# forecasts on the last insample windows, and the three losses
x, x_mask = map(to_tensor, sampler.last_insample_window())
with t.no_grad():
    f_gen = gen(x, x_mask)
    f_int = interp(x, x_mask)
print("forecast generic", [f"{v:.4f}" for v in f_gen[2].tolist()])
print("forecast interpretable", [f"{v:.4f}" for v in f_int[2].tolist()])
y = to_tensor(np.stack([np.r_[s[-H + 2:], np.zeros(2)] for s in series]))
y_mask = (y != 0).float()
print("MAPE {:.4f} SMAPE {:.4f} MASE {:.4f}".format(mape_loss(f_int, y, y_mask).item(),
      smape_2_loss(f_int, y, y_mask).item(), mase_loss(x, freq, f_int, y, y_mask).item()))
dnn = divide_no_nan(t.tensor([1., 0., -1., 2.]), t.tensor([0., 0., 0., 4.]))
print("divide_no_nan", dnn[[0, 1, 3]].tolist(), dnn[2].item() == -np.inf)

# the training step under torch.compile against the same step run eagerly
xb, xb_mask, yb, yb_mask = map(to_tensor, next(training_set))
lr_decay_step = 2


def train_step(i, x, x_mask, y, y_mask):
    optimizer.zero_grad()
    forecast = interp(x, x_mask)
    training_loss = loss_fn(x, freq, forecast, y, y_mask)
    training_loss.backward()
    t.nn.utils.clip_grad_norm_(interp.parameters(), 1.0)
    optimizer.step()
    for param_group in optimizer.param_groups:
        param_group["lr"] = 0.001 * 0.5 ** (i // lr_decay_step)
    return training_loss


state, opt_state = copy.deepcopy(interp.state_dict()), copy.deepcopy(optimizer.state_dict())
eager = [train_step(i, xb, xb_mask, yb, yb_mask).item() for i in range(3)]
after = copy.deepcopy(interp.state_dict())
interp.load_state_dict(state)
optimizer.load_state_dict(opt_state)
cstep = t.compile(train_step)
compiled = [cstep(i, xb, xb_mask, yb, yb_mask).item() for i in range(3)]
print("compiled losses", [f"{v:.5f}" for v in compiled], optimizer.param_groups[0]["lr"])
print("compiled == eager:", all(abs(a - b) <= 1e-4 * max(1.0, abs(b)) for a, b in zip(compiled, eager)),
      all(t.allclose(interp.state_dict()[k], after[k], rtol=1e-4, atol=1e-5) for k in after))
