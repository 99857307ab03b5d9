# Liquid time-constant and closed-form continuous-time networks the way
# mlech26l/ncps writes them for torch (ncps/torch/ltc_cell.py, cfc_cell.py,
# ltc.py, cfc.py, ncps/wirings): LTCCell with its _params dict of
# nn.Parameters registered by register_parameter (add_weight with
# init_ranges drawn by torch.rand * (maxval - minval) + minval), the
# wiring's sparsity masks as constant Parameters (requires_grad=False),
# make_positive_fn softplus, _sigmoid(v_pre, mu, sigma) with torch.unsqueeze,
# sensory / recurrent synapse activations summed over dim=1, the ODE
# unfolding loop (cm_t = cm / (elapsed_time / self._ode_unfolds), v_pre =
# numerator / (denominator + self._epsilon)), _map_inputs / _map_outputs,
# apply_weight_constraints with torch.nn.ReLU()(w).data under no_grad; an
# NCP-like fixed random wiring (inter / command / motor neurons) drawn from
# numpy; CfCCell (the backbone with LeCun tanh, ff1 / ff2 / time_a / time_b,
# t_interp = torch.sigmoid(t_a * ts + t_b), new_hidden = ff1 * (1.0 -
# t_interp) + t_interp * ff2, the "no_gate" and "minimal" modes with
# torch.exp(-ts * ...)), the LTC / CfC sequence wrappers (batch_first
# permutes, timespans, torch.stack(output_sequence, dim=seq_dim), an hx
# of zeros), and a sine-regression training loop with Adam and
# torch.nn.utils.clip_grad_norm_.  Changes for a CPU test: 8 neurons,
# sequences of 6 steps, 3 ODE unfolds, weights from numpy (the torch.rand
# init is checked by its ranges, [rng]); then one CfC step under
# torch.compile against eager.
import copy

import numpy as np
import torch
import torch.nn as nn


# ncps/wirings/wirings.py (an NCP-like wiring with a fixed numpy draw)
class Wiring:
    def __init__(self, units):
        self.units = units
        self.adjacency_matrix = np.zeros([units, units], dtype=np.int32)
        self.sensory_adjacency_matrix = None
        self.input_dim = None
        self.output_dim = None

    def is_built(self):
        return self.input_dim is not None

    def build(self, input_dim):
        self.input_dim = input_dim
        self.sensory_adjacency_matrix = np.zeros([input_dim, self.units], dtype=np.int32)

    def erev_initializer(self, shape=None, dtype=None):
        return np.copy(self.adjacency_matrix)

    def sensory_erev_initializer(self, shape=None, dtype=None):
        return np.copy(self.sensory_adjacency_matrix)

    def add_synapse(self, src, dest, polarity):
        self.adjacency_matrix[src, dest] = polarity

    def add_sensory_synapse(self, src, dest, polarity):
        self.sensory_adjacency_matrix[src, dest] = polarity

    @property
    def synapse_count(self):
        return np.sum(np.abs(self.adjacency_matrix))

    @property
    def sensory_synapse_count(self):
        return np.sum(np.abs(self.sensory_adjacency_matrix))


class TinyNCP(Wiring):
    """3 inter, 3 command, 2 motor neurons (motor neurons first, as NCP)."""

    def __init__(self, seed):
        super().__init__(8)
        self.output_dim = 2
        self._rng = np.random.RandomState(seed)
        self.motor, self.command, self.inter = [0, 1], [2, 3, 4], [5, 6, 7]

    def build(self, input_dim):
        super().build(input_dim)
        for src in range(input_dim):
            for dest in self._rng.choice(self.inter, size=2, replace=False):
                self.add_sensory_synapse(src, dest, self._rng.choice([-1, 1]))
        for src in self.inter:
            for dest in self._rng.choice(self.command, size=2, replace=False):
                self.add_synapse(src, dest, self._rng.choice([-1, 1]))
        for src in self.command:
            self.add_synapse(src, self._rng.choice(self.command), self._rng.choice([-1, 1]))
            for dest in self.motor:
                self.add_synapse(src, dest, self._rng.choice([-1, 1]))


# ncps/torch/ltc_cell.py
class LTCCell(nn.Module):
    def __init__(self, wiring, in_features=None, input_mapping="affine", output_mapping="affine",
                 ode_unfolds=6, epsilon=1e-8, implicit_param_constraints=False):
        super(LTCCell, self).__init__()
        if in_features is not None:
            wiring.build(in_features)
        if not wiring.is_built():
            raise ValueError("Wiring error! Unknown number of input features. Please pass the parameter "
                             "'in_features' or call the 'wiring.build()'.")
        self.make_positive_fn = nn.Softplus() if implicit_param_constraints else nn.Identity()
        self._implicit_param_constraints = implicit_param_constraints
        self._init_ranges = {
            "gleak": (0.001, 1.0),
            "vleak": (-0.2, 0.2),
            "cm": (0.4, 0.6),
            "w": (0.001, 1.0),
            "sigma": (3, 8),
            "mu": (0.3, 0.8),
            "sensory_w": (0.001, 1.0),
            "sensory_sigma": (3, 8),
            "sensory_mu": (0.3, 0.8),
        }
        self._wiring = wiring
        self._input_mapping = input_mapping
        self._output_mapping = output_mapping
        self._ode_unfolds = ode_unfolds
        self._epsilon = epsilon
        self._clip = torch.nn.ReLU()
        self._allocate_parameters()

    @property
    def state_size(self):
        return self._wiring.units

    @property
    def sensory_size(self):
        return self._wiring.input_dim

    @property
    def motor_size(self):
        return self._wiring.output_dim

    @property
    def output_size(self):
        return self.motor_size

    @property
    def synapse_count(self):
        return np.sum(np.abs(self._wiring.adjacency_matrix))

    @property
    def sensory_synapse_count(self):
        return np.sum(np.abs(self._wiring.adjacency_matrix))

    def add_weight(self, name, init_value, requires_grad=True):
        param = torch.nn.Parameter(init_value, requires_grad=requires_grad)
        self.register_parameter(name, param)
        return param

    def _get_init_value(self, shape, param_name):
        minval, maxval = self._init_ranges[param_name]
        if minval == maxval:
            return torch.ones(shape) * minval
        else:
            return torch.rand(*shape) * (maxval - minval) + minval

    def _allocate_parameters(self):
        self._params = {}
        self._params["gleak"] = self.add_weight(
            name="gleak", init_value=self._get_init_value((self.state_size,), "gleak"))
        self._params["vleak"] = self.add_weight(
            name="vleak", init_value=self._get_init_value((self.state_size,), "vleak"))
        self._params["cm"] = self.add_weight(
            name="cm", init_value=self._get_init_value((self.state_size,), "cm"))
        self._params["sigma"] = self.add_weight(
            name="sigma", init_value=self._get_init_value((self.state_size, self.state_size), "sigma"))
        self._params["mu"] = self.add_weight(
            name="mu", init_value=self._get_init_value((self.state_size, self.state_size), "mu"))
        self._params["w"] = self.add_weight(
            name="w", init_value=self._get_init_value((self.state_size, self.state_size), "w"))
        self._params["erev"] = self.add_weight(
            name="erev", init_value=torch.Tensor(self._wiring.erev_initializer()))
        self._params["sensory_sigma"] = self.add_weight(
            name="sensory_sigma",
            init_value=self._get_init_value((self.sensory_size, self.state_size), "sensory_sigma"))
        self._params["sensory_mu"] = self.add_weight(
            name="sensory_mu",
            init_value=self._get_init_value((self.sensory_size, self.state_size), "sensory_mu"))
        self._params["sensory_w"] = self.add_weight(
            name="sensory_w",
            init_value=self._get_init_value((self.sensory_size, self.state_size), "sensory_w"))
        self._params["sensory_erev"] = self.add_weight(
            name="sensory_erev",
            init_value=torch.Tensor(self._wiring.sensory_erev_initializer()))

        self._params["sparsity_mask"] = self.add_weight(
            "sparsity_mask",
            torch.Tensor(np.abs(self._wiring.adjacency_matrix)),
            requires_grad=False,
        )
        self._params["sensory_sparsity_mask"] = self.add_weight(
            "sensory_sparsity_mask",
            torch.Tensor(np.abs(self._wiring.sensory_adjacency_matrix)),
            requires_grad=False,
        )

        if self._input_mapping in ["affine", "linear"]:
            self._params["input_w"] = self.add_weight(
                name="input_w", init_value=torch.ones((self.sensory_size,)))
        if self._input_mapping == "affine":
            self._params["input_b"] = self.add_weight(
                name="input_b", init_value=torch.zeros((self.sensory_size,)))

        if self._output_mapping in ["affine", "linear"]:
            self._params["output_w"] = self.add_weight(
                name="output_w", init_value=torch.ones((self.motor_size,)))
        if self._output_mapping == "affine":
            self._params["output_b"] = self.add_weight(
                name="output_b", init_value=torch.zeros((self.motor_size,)))

    def _sigmoid(self, v_pre, mu, sigma):
        v_pre = torch.unsqueeze(v_pre, -1)  # For broadcasting
        mues = v_pre - mu
        x = sigma * mues
        return torch.sigmoid(x)

    def _ode_solver(self, inputs, state, elapsed_time):
        v_pre = state

        # We can pre-compute the effects of the sensory neurons here
        sensory_w_activation = self.make_positive_fn(self._params["sensory_w"]) * self._sigmoid(
            inputs, self._params["sensory_mu"], self._params["sensory_sigma"])
        sensory_w_activation = sensory_w_activation * self._params["sensory_sparsity_mask"]

        sensory_rev_activation = sensory_w_activation * self._params["sensory_erev"]

        # Reduce over dimension 1 (=source sensory neurons)
        w_numerator_sensory = torch.sum(sensory_rev_activation, dim=1)
        w_denominator_sensory = torch.sum(sensory_w_activation, dim=1)

        # cm/t is loop invariant
        cm_t = self.make_positive_fn(self._params["cm"]) / (elapsed_time / self._ode_unfolds)

        # Unfold the multiply ODE multiple times into one RNN step
        w_param = self.make_positive_fn(self._params["w"])
        for t in range(self._ode_unfolds):
            w_activation = w_param * self._sigmoid(v_pre, self._params["mu"], self._params["sigma"])

            w_activation = w_activation * self._params["sparsity_mask"]

            rev_activation = w_activation * self._params["erev"]

            # Reduce over dimension 1 (=source neurons)
            w_numerator = torch.sum(rev_activation, dim=1) + w_numerator_sensory
            w_denominator = torch.sum(w_activation, dim=1) + w_denominator_sensory

            gleak = self.make_positive_fn(self._params["gleak"])
            numerator = cm_t * v_pre + gleak * self._params["vleak"] + w_numerator
            denominator = cm_t + gleak + w_denominator

            # Avoid dividing by 0
            v_pre = numerator / (denominator + self._epsilon)

        return v_pre

    def _map_inputs(self, inputs):
        if self._input_mapping in ["affine", "linear"]:
            inputs = inputs * self._params["input_w"]
        if self._input_mapping == "affine":
            inputs = inputs + self._params["input_b"]
        return inputs

    def _map_outputs(self, state):
        output = state
        if self.motor_size < self.state_size:
            output = output[:, 0:self.motor_size]  # slice

        if self._output_mapping in ["affine", "linear"]:
            output = output * self._params["output_w"]
        if self._output_mapping == "affine":
            output = output + self._params["output_b"]
        return output

    def apply_weight_constraints(self):
        if not self._implicit_param_constraints:
            # In implicit mode, the parameter constraints are implemented via
            # a softplus function at runtime
            self._params["w"].data = self._clip(self._params["w"].data)
            self._params["sensory_w"].data = self._clip(self._params["sensory_w"].data)
            self._params["cm"].data = self._clip(self._params["cm"].data)
            self._params["gleak"].data = self._clip(self._params["gleak"].data)

    def forward(self, inputs, states, elapsed_time=1.0):
        # Regularly sampled mode (elapsed time = 1 second)
        inputs = self._map_inputs(inputs)

        next_state = self._ode_solver(inputs, states, elapsed_time)

        outputs = self._map_outputs(next_state)

        return outputs, next_state


# ncps/torch/ltc.py (the parts a plain LTC uses)
class LTC(nn.Module):
    def __init__(self, input_size, units, return_sequences=True, batch_first=True, ode_unfolds=6,
                 implicit_param_constraints=True):
        super(LTC, self).__init__()
        self.input_size = input_size
        self.wiring_or_units = units
        self.batch_first = batch_first
        self.return_sequences = return_sequences
        wiring = units
        self._wiring = wiring
        self.rnn_cell = LTCCell(wiring=wiring, in_features=input_size, ode_unfolds=ode_unfolds,
                                implicit_param_constraints=implicit_param_constraints)

    @property
    def state_size(self):
        return self._wiring.units

    @property
    def output_size(self):
        return self._wiring.output_dim

    def forward(self, input, hx=None, timespans=None):
        device = input.device
        is_batched = input.dim() == 3
        batch_dim = 0 if self.batch_first else 1
        seq_dim = 1 if self.batch_first else 0
        if not is_batched:
            input = input.unsqueeze(batch_dim)
            if timespans is not None:
                timespans = timespans.unsqueeze(batch_dim)

        batch_size, seq_len = input.size(batch_dim), input.size(seq_dim)

        if hx is None:
            h_state = torch.zeros((batch_size, self.state_size), device=device)
        else:
            h_state = hx

        output_sequence = []
        for t in range(seq_len):
            if self.batch_first:
                inputs = input[:, t]
                ts = 1.0 if timespans is None else timespans[:, t].squeeze()
            else:
                inputs = input[t]
                ts = 1.0 if timespans is None else timespans[t].squeeze()

            h_out, h_state = self.rnn_cell.forward(inputs, h_state, ts)
            if self.return_sequences:
                output_sequence.append(h_out)

        if self.return_sequences:
            stack_dim = 1 if self.batch_first else 0
            readout = torch.stack(output_sequence, dim=stack_dim)
        else:
            readout = h_out
        hx = h_state
        if not is_batched:
            readout = readout.squeeze(batch_dim)
            hx = h_state[0]
        return readout, hx


# ncps/torch/cfc_cell.py
class LeCun(nn.Module):
    def __init__(self):
        super(LeCun, self).__init__()
        self.tanh = nn.Tanh()

    def forward(self, x):
        return 1.7159 * self.tanh(0.666 * x)


class CfCCell(nn.Module):
    def __init__(self, input_size, hidden_size, mode="default", backbone_activation="lecun_tanh",
                 backbone_units=128, backbone_layers=1, backbone_dropout=0.0, sparsity_mask=None):
        super(CfCCell, self).__init__()

        self.input_size = input_size
        self.hidden_size = hidden_size
        allowed_modes = ["default", "pure", "no_gate"]
        if mode not in allowed_modes:
            raise ValueError(f"Unknown mode '{mode}', valid options are {str(allowed_modes)}")
        self.sparsity_mask = (
            None if sparsity_mask is None
            else torch.nn.Parameter(data=torch.from_numpy(np.abs(sparsity_mask.T).astype(np.float32)),
                                    requires_grad=False)
        )

        self.mode = mode

        if backbone_activation == "silu":
            backbone_activation = nn.SiLU
        elif backbone_activation == "relu":
            backbone_activation = nn.ReLU
        elif backbone_activation == "tanh":
            backbone_activation = nn.Tanh
        elif backbone_activation == "gelu":
            backbone_activation = nn.GELU
        elif backbone_activation == "lecun_tanh":
            backbone_activation = LeCun
        else:
            raise ValueError(f"Unknown activation {backbone_activation}")

        self.backbone = None
        self.backbone_layers = backbone_layers
        if backbone_layers > 0:
            layer_list = [nn.Linear(input_size + hidden_size, backbone_units), backbone_activation()]
            for i in range(1, backbone_layers):
                layer_list.append(nn.Linear(backbone_units, backbone_units))
                layer_list.append(backbone_activation())
                if backbone_dropout > 0.0:
                    layer_list.append(torch.nn.Dropout(backbone_dropout))
            self.backbone = nn.Sequential(*layer_list)
        self.tanh = nn.Tanh()
        self.sigmoid = nn.Sigmoid()
        cat_shape = int(self.hidden_size + input_size if backbone_layers == 0 else backbone_units)

        self.ff1 = nn.Linear(cat_shape, hidden_size)
        if self.mode == "pure":
            self.w_tau = torch.nn.Parameter(data=torch.zeros(1, self.hidden_size), requires_grad=True)
            self.A = torch.nn.Parameter(data=torch.ones(1, self.hidden_size), requires_grad=True)
        else:
            self.ff2 = nn.Linear(cat_shape, hidden_size)
            self.time_a = nn.Linear(cat_shape, hidden_size)
            self.time_b = nn.Linear(cat_shape, hidden_size)
        self.init_weights()

    def init_weights(self):
        for w in self.parameters():
            if w.dim() == 2 and w.requires_grad:
                torch.nn.init.xavier_uniform_(w)

    def forward(self, input, hx, ts):
        x = torch.cat([input, hx], 1)
        if self.backbone_layers > 0:
            x = self.backbone(x)
        if self.sparsity_mask is not None:
            ff1 = nn.functional.linear(x, self.ff1.weight * self.sparsity_mask, self.ff1.bias)
        else:
            ff1 = self.ff1(x)
        if self.mode == "pure":
            if torch.is_tensor(ts) and ts.dim() == 1:
                ts = ts.view(-1, 1)
            # Solution
            new_hidden = (
                -self.A
                * torch.exp(-ts * (torch.abs(self.w_tau) + torch.abs(ff1)))
                * ff1
                + self.A
            )
        else:
            # Cfc
            if self.sparsity_mask is not None:
                ff2 = nn.functional.linear(x, self.ff2.weight * self.sparsity_mask, self.ff2.bias)
            else:
                ff2 = self.ff2(x)
            ff1 = self.tanh(ff1)
            ff2 = self.tanh(ff2)
            t_a = self.time_a(x)
            t_b = self.time_b(x)
            if torch.is_tensor(ts) and ts.dim() == 1:
                ts = ts.view(-1, 1)     # per-sample elapsed times
            t_interp = self.sigmoid(t_a * ts + t_b)
            if self.mode == "no_gate":
                new_hidden = ff1 + t_interp * ff2
            else:
                new_hidden = ff1 * (1.0 - t_interp) + t_interp * ff2
        return new_hidden, new_hidden


# ncps/torch/cfc.py (no mixed memory, no wiring)
class CfC(nn.Module):
    def __init__(self, input_size, units, proj_size=None, return_sequences=True, batch_first=True,
                 mode="default", activation="lecun_tanh", backbone_units=None, backbone_layers=None,
                 backbone_dropout=None):
        super(CfC, self).__init__()
        self.input_size = input_size
        self.wiring_or_units = units
        self.proj_size = proj_size
        self.batch_first = batch_first
        self.return_sequences = return_sequences

        backbone_units = 128 if backbone_units is None else backbone_units
        backbone_layers = 1 if backbone_layers is None else backbone_layers
        backbone_dropout = 0.0 if backbone_dropout is None else backbone_dropout
        self.state_size = units
        self.output_size = self.state_size
        self.rnn_cell = CfCCell(input_size, self.wiring_or_units, mode, activation, backbone_units,
                                backbone_layers, backbone_dropout)
        if proj_size is None:
            self.fc = nn.Identity()
        else:
            self.fc = nn.Linear(self.output_size, self.proj_size)

    def forward(self, input, hx=None, timespans=None):
        device = input.device
        is_batched = input.dim() == 3
        batch_dim = 0 if self.batch_first else 1
        seq_dim = 1 if self.batch_first else 0
        if not is_batched:
            input = input.unsqueeze(batch_dim)
            if timespans is not None:
                timespans = timespans.unsqueeze(batch_dim)

        batch_size, seq_len = input.size(batch_dim), input.size(seq_dim)
        if hx is None:
            h_state = torch.zeros((batch_size, self.state_size), device=device)
        else:
            h_state = hx
            if is_batched and h_state.dim() != 2:
                msg = ("For batched 2-D input, hx and cx should also be 2-D but got "
                       f"({h_state.dim()}-D) tensor")
                raise RuntimeError(msg)

        output_sequence = []
        for t in range(seq_len):
            if self.batch_first:
                inputs = input[:, t]
                ts = 1.0 if timespans is None else timespans[:, t].squeeze()
            else:
                inputs = input[t]
                ts = 1.0 if timespans is None else timespans[t].squeeze()

            h_out, h_state = self.rnn_cell.forward(inputs, h_state, ts)
            if self.return_sequences:
                output_sequence.append(self.fc(h_out))

        if self.return_sequences:
            stack_dim = 1 if self.batch_first else 0
            readout = torch.stack(output_sequence, dim=stack_dim)
        else:
            readout = self.fc(h_out)
        hx = h_state
        if not is_batched:
            readout = readout.squeeze(batch_dim)
            hx = h_state[0]
        return readout, hx


def fmt(t, n=4):
    return [f"{v:.4f}" for v in torch.as_tensor(t).reshape(-1)[:n].tolist()]


def load_numpy(model, seed, lo=0.1, hi=0.9):
    r = np.random.default_rng(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if not p.requires_grad or "erev" in name:
                continue        # wiring masks and reversal potentials stay
            if name.endswith("sigma"):
                p.copy_(torch.from_numpy(r.uniform(3, 8, tuple(p.shape)).astype(np.float32)))
            else:
                p.copy_(torch.from_numpy(r.uniform(lo, hi, tuple(p.shape)).astype(np.float32)))


# sine regression data (ncps' examples: 2 input features, 1-2 targets)
N = 6
data_x = np.stack([np.sin(np.linspace(0, 3 * np.pi, N)), np.cos(np.linspace(0, 3 * np.pi, N))], axis=1)
data_x = np.expand_dims(data_x, axis=0).astype(np.float32)  # Add batch dimension
data_y = np.sin(np.linspace(0, 6 * np.pi, N)).reshape([1, N, 1]).astype(np.float32)
data_x = torch.Tensor(np.concatenate([data_x, data_x[:, ::-1] * 0.5], 0))
data_y = torch.Tensor(np.concatenate([data_y, -data_y], 0))
print("data", tuple(data_x.shape), tuple(data_y.shape), data_x.dtype)

# the LTC with a tiny NCP wiring
wiring = TinyNCP(seed=3)
torch.manual_seed(0)
ltc = LTC(2, wiring, batch_first=True, ode_unfolds=3, implicit_param_constraints=False)
cell = ltc.rnn_cell
print("synapses", int(wiring.synapse_count), int(wiring.sensory_synapse_count),
      "params", [n for n, p in cell.named_parameters() if p.requires_grad])
print("masks", [(n, p.requires_grad) for n, p in cell.named_parameters() if not p.requires_grad],
      cell._params["sparsity_mask"].sum().item(), cell._params["erev"].sum().item())
print("init ranges", bool(((cell._params["sigma"] >= 3) & (cell._params["sigma"] <= 8)).all()),
      bool(((cell._params["cm"] >= 0.4) & (cell._params["cm"] <= 0.6)).all()))
load_numpy(ltc, 1)
print("dict aliases parameter", cell._params["w"] is cell.w, len(list(ltc.parameters())))
out, hx = ltc(data_x)
print("ltc out", tuple(out.shape), fmt(out[0, :, 0], 6), "hx", fmt(hx[1], 8))
ts = torch.Tensor(np.linspace(0.5, 1.5, N).reshape(1, N, 1).repeat(2, 0))
out_t, _ = ltc(data_x[1], timespans=ts[1])       # unbatched: 0-d elapsed times
print("ltc timespans", tuple(out_t.shape), fmt(out_t[:, 1], 6))
single, h1 = ltc(data_x[0])
print("unbatched", tuple(single.shape), tuple(h1.shape), torch.allclose(single, out[0], atol=1e-6))

optimizer = torch.optim.Adam(ltc.parameters(), lr=0.05)
cell._params["w"].data[0, 2] = -0.3       # a constraint to clip
for step in range(4):
    optimizer.zero_grad()
    y_hat, _ = ltc(data_x)
    loss = nn.functional.mse_loss(y_hat[:, :, :1], data_y)
    loss.backward()
    gn = torch.nn.utils.clip_grad_norm_(ltc.parameters(), 1.0)
    optimizer.step()
    w_before = cell._params["w"].detach().clone()
    cell.apply_weight_constraints()
    print("ltc step", step, f"{loss.item():.5f}", f"gn {gn.item():.4f}", "clipped",
          int((w_before < 0).sum()), bool((cell._params["w"] >= 0).all()), fmt(cell.cm, 3))
print("mask grads", cell.sparsity_mask.grad, cell.erev.grad is None or fmt(cell.erev.grad))

# implicit constraints: softplus
torch.manual_seed(0)
ltc2 = LTC(2, TinyNCP(seed=3), ode_unfolds=3, implicit_param_constraints=True)
load_numpy(ltc2, 1)
print("softplus ltc", fmt(ltc2(data_x)[0][0, :, 1], 6))

# CfC in its three modes, with timespans and batch_first=False
for mode in ["default", "no_gate", "pure"]:
    torch.manual_seed(0)
    cfc = CfC(2, 8, proj_size=1, mode=mode, backbone_units=16, backbone_layers=1)
    load_numpy(cfc, 2, lo=-0.4, hi=0.4)
    y, h = cfc(data_x, timespans=ts)
    print("cfc", mode, tuple(y.shape), fmt(y[0, :, 0], 6), fmt(h[1], 4))
torch.manual_seed(0)
cfc_tm = CfC(2, 8, batch_first=False, return_sequences=False, backbone_layers=0)
load_numpy(cfc_tm, 3, lo=-0.4, hi=0.4)
y, h = cfc_tm(data_x.permute(1, 0, 2))
print("cfc seq-first", tuple(y.shape), fmt(y[0]), "backbone", cfc_tm.rnn_cell.backbone)
try:
    cfc_tm(data_x.permute(1, 0, 2), hx=torch.zeros(1, 2, 8))
except RuntimeError as e:
    print("hx error:", e)
try:
    CfCCell(2, 4, mode="minimal")
except ValueError as e:
    print("mode error:", e)
masked = CfCCell(2, 4, backbone_layers=0, sparsity_mask=np.array([[1, 0, -1, 0, 1, 1], [0, 1, 1, 0, 0, -1],
                                                                   [1, 1, 0, 0, 1, 0], [0, 0, 1, 1, 1, 1]]).T)
load_numpy(masked, 4, lo=-0.5, hi=0.5)
hm, _ = masked(data_x[:, 0], torch.zeros(2, 4), 1.0)
print("masked cell", fmt(hm[0]), masked.sparsity_mask.requires_grad, tuple(masked.sparsity_mask.shape))

# training the default CfC, clip_grad_norm_
torch.manual_seed(0)
model = CfC(2, 8, proj_size=1, backbone_units=16)
load_numpy(model, 5, lo=-0.4, hi=0.4)
opt = torch.optim.Adam(model.parameters(), lr=0.01)
for step in range(5):
    opt.zero_grad()
    y_hat, _ = model(data_x)
    loss = nn.functional.mse_loss(y_hat, data_y)
    loss.backward()
    gn = torch.nn.utils.clip_grad_norm_(model.parameters(), 0.5)
    opt.step()
    print("cfc step", step, f"{loss.item():.5f}", f"gn {gn.item():.4f}")


# one CfC cell step under torch.compile against the same step eagerly
def cfc_step(x, y, h0):
    opt.zero_grad()
    h_new, _ = model.rnn_cell(x, h0, 0.7)
    loss = nn.functional.mse_loss(model.fc(h_new), y)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 0.5)
    opt.step()
    return loss


xs, ys, h0 = data_x[:, 2], data_y[:, 2], torch.full((2, 8), 0.1)
state, opt_state = copy.deepcopy(model.state_dict()), copy.deepcopy(opt.state_dict())
eager = [cfc_step(xs, ys, h0).item() for _ in range(2)]
after = {k: v.clone() for k, v in model.state_dict().items()}
model.load_state_dict(state)
opt.load_state_dict(opt_state)
cstep = torch.compile(cfc_step)
compiled = [cstep(xs, ys, h0).item() for _ in range(2)]
print("compiled losses", [f"{v:.5f}" for v in compiled])
print("compiled == eager:", all(abs(a - b) <= 1e-4 * max(1.0, abs(b)) for a, b in zip(compiled, eager)),
      all(torch.allclose(model.state_dict()[k], after[k], rtol=1e-4, atol=1e-5) for k in after))
