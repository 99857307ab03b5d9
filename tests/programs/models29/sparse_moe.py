# The sparsely-gated mixture of experts the way davidmrau/mixture-of-experts
# (moe.py, example.py) writes it, after Shazeer et al.'s TensorFlow code:
# SparseDispatcher (torch.nonzero(gates).sort(0), sorted_experts.split(1,
# dim=1), the batch index gathered through index_sorted_experts[:, 1],
# (gates > 0).sum(0).tolist() part sizes, torch.gather of the nonzero gates,
# dispatch by inp[self._batch_index].squeeze(1) and torch.split, combine by
# stitched.mul(self._nonzero_gates) and torch.zeros(..., requires_grad=True)
# .index_add(0, self._batch_index, stitched.float())), MLP experts ending
# in nn.Softmax(1), MoE with zero-initialized w_gate / w_noise Parameters,
# `mean` / `std` buffers, noisy_top_k_gating (F.softplus noise std,
# torch.randn_like noise, softmax before logits.topk(min(k + 1,
# num_experts), dim=1), top-k gates renormalized with + 1e-6,
# torch.zeros_like(logits, requires_grad=True).scatter(1, top_k_indices,
# top_k_gates)), _prob_in_top_k (flattened top values gathered at
# arange(batch) * m + k, Normal(self.mean, self.std).cdf, torch.where),
# _gates_to_load, cv_squared (x.float().var() / (x.float().mean() ** 2 +
# eps)) and the example's train / eval with nn.CrossEntropyLoss on the
# experts' softmax outputs plus the auxiliary loss, stepped by Adam.
# Changes for a CPU test: data and weights from numpy instead of torch.rand
# / torch.randint, small sizes, a few steps; the gating noise comes from
# torch's generator, so the noisy steps print [rng] lines with their
# invariants and _prob_in_top_k is checked on noise drawn in numpy; the
# compared training runs with noisy_gating=False (the constructor's option);
# then one training step under torch.compile against the same step eagerly.
import copy

import numpy as np
import torch
import torch.nn as nn
from torch.distributions.normal import Normal
from torch.optim import Adam


class SparseDispatcher(object):
    """Helper for implementing a mixture of experts.
    The purpose of this class is to create input minibatches for the
    experts and to combine the results of the experts to form a unified
    output tensor.
    There are two functions:
    dispatch - take an input Tensor and create input Tensors for each expert.
    combine - take output Tensors from each expert and form a combined output
      Tensor.  Outputs from different experts for the same batch element are
      summed together, weighted by the provided "gates".
    The class is initialized with a "gates" Tensor, which specifies which
    batch elements go to which experts, and the weights to use when combining
    the outputs.  Batch element b is sent to expert e iff gates[b, e] != 0.
    """

    def __init__(self, num_experts, gates):
        """Create a SparseDispatcher."""

        self._gates = gates
        self._num_experts = num_experts
        # sort experts
        sorted_experts, index_sorted_experts = torch.nonzero(gates).sort(0)
        # drop indices
        _, self._expert_index = sorted_experts.split(1, dim=1)
        # get according batch index for each expert
        self._batch_index = torch.nonzero(gates)[index_sorted_experts[:, 1], 0]
        # calculate num samples that each expert gets
        self._part_sizes = (gates > 0).sum(0).tolist()
        # expand gates to match with self._batch_index
        gates_exp = gates[self._batch_index.flatten()]
        self._nonzero_gates = torch.gather(gates_exp, 1, self._expert_index)

    def dispatch(self, inp):
        """Create one input Tensor for each expert.
        The `Tensor` for a expert `i` contains the slices of `inp` corresponding
        to the batch elements `b` where `gates[b, i] > 0`.
        """

        # assigns samples to experts whose gate is nonzero

        # expand according to batch index so we can just split by _part_sizes
        inp_exp = inp[self._batch_index].squeeze(1)
        return torch.split(inp_exp, self._part_sizes, dim=0)

    def combine(self, expert_out, multiply_by_gates=True):
        """Sum together the expert output, weighted by the gates.
        The slice corresponding to a particular batch element `b` is computed
        as the sum over all experts `i` of the expert output, weighted by the
        corresponding gate values.  If `multiply_by_gates` is set to False, the
        gate values are ignored.
        """
        # apply exp to expert outputs, so we are not longer in log space
        stitched = torch.cat(expert_out, 0)

        if multiply_by_gates:
            stitched = stitched.mul(self._nonzero_gates)
        zeros = torch.zeros(self._gates.size(0), expert_out[-1].size(1), requires_grad=True, device=stitched.device)
        # combine samples that have been processed by the same k experts
        combined = zeros.index_add(0, self._batch_index, stitched.float())
        return combined

    def expert_to_gates(self):
        """Gate values corresponding to the examples in the per-expert `Tensor`s."""
        # split nonzero gates for each expert
        return torch.split(self._nonzero_gates, self._part_sizes, dim=0)


class MLP(nn.Module):
    def __init__(self, input_size, output_size, hidden_size):
        super(MLP, self).__init__()
        self.fc1 = nn.Linear(input_size, hidden_size)
        self.fc2 = nn.Linear(hidden_size, output_size)
        self.relu = nn.ReLU()
        self.soft = nn.Softmax(1)

    def forward(self, x):
        out = self.fc1(x)
        out = self.relu(out)
        out = self.fc2(out)
        out = self.soft(out)
        return out


class MoE(nn.Module):
    """Call a Sparsely gated mixture of experts layer with 1-layer Feed-Forward networks as experts.
    Args:
    input_size: integer - size of the input
    output_size: integer - size of the input
    num_experts: an integer - number of experts
    hidden_size: an integer - hidden size of the experts
    noisy_gating: a boolean
    k: an integer - how many experts to use for each batch element
    """

    def __init__(self, input_size, output_size, num_experts, hidden_size, noisy_gating=True, k=4):
        super(MoE, self).__init__()
        self.noisy_gating = noisy_gating
        self.num_experts = num_experts
        self.output_size = output_size
        self.input_size = input_size
        self.hidden_size = hidden_size
        self.k = k
        # instantiate experts
        self.experts = nn.ModuleList([MLP(self.input_size, self.output_size, self.hidden_size) for i in range(self.num_experts)])
        self.w_gate = nn.Parameter(torch.zeros(input_size, num_experts), requires_grad=True)
        self.w_noise = nn.Parameter(torch.zeros(input_size, num_experts), requires_grad=True)

        self.softplus = nn.Softplus()
        self.softmax = nn.Softmax(1)
        self.register_buffer("mean", torch.tensor([0.0]))
        self.register_buffer("std", torch.tensor([1.0]))
        assert(self.k <= self.num_experts)

    def cv_squared(self, x):
        """The squared coefficient of variation of a sample.
        Useful as a loss to encourage a positive distribution to be more uniform.
        Epsilons added for numerical stability.
        Returns 0 for an empty Tensor.
        Args:
        x: a `Tensor`.
        Returns:
        a `Scalar`.
        """
        eps = 1e-10
        # if only num_experts = 1

        if x.shape[0] == 1:
            return torch.tensor([0], device=x.device, dtype=x.dtype)
        return x.float().var() / (x.float().mean()**2 + eps)

    def _gates_to_load(self, gates):
        """Compute the true load per expert, given the gates.
        The load is the number of examples for which the corresponding gate is >0.
        Args:
        gates: a `Tensor` of shape [batch_size, n]
        Returns:
        a float32 `Tensor` of shape [n]
        """
        return (gates > 0).sum(0)

    def _prob_in_top_k(self, clean_values, noisy_values, noise_stddev, noisy_top_values):
        """Helper function to NoisyTopKGating.
        Computes the probability that value is in top k, given different random noise.
        This gives us a way of backpropagating from a loss that balances the number
        of times each expert is in the top k experts per example.
        In the case of no noise, pass in None for noise_stddev, and the result will
        not be differentiable.
        Args:
        clean_values: a `Tensor` of shape [batch, n].
        noisy_values: a `Tensor` of shape [batch, n].  Equal to clean values plus
          normally distributed noise with standard deviation noise_stddev.
        noise_stddev: a `Tensor` of shape [batch, n], or None
        noisy_top_values: a `Tensor` of shape [batch, m].
           "values" Output of tf.top_k(noisy_top_values, m).  m >= k+1
        Returns:
        a `Tensor` of shape [batch, n].
        """
        batch = clean_values.size(0)
        m = noisy_top_values.size(1)
        top_values_flat = noisy_top_values.flatten()

        threshold_positions_if_in = torch.arange(batch, device=clean_values.device) * m + self.k
        threshold_if_in = torch.unsqueeze(torch.gather(top_values_flat, 0, threshold_positions_if_in), 1)
        is_in = torch.gt(noisy_values, threshold_if_in)
        threshold_positions_if_out = threshold_positions_if_in - 1
        threshold_if_out = torch.unsqueeze(torch.gather(top_values_flat, 0, threshold_positions_if_out), 1)
        # is each value currently in the top k.
        normal = Normal(self.mean, self.std)
        prob_if_in = normal.cdf((clean_values - threshold_if_in)/noise_stddev)
        prob_if_out = normal.cdf((clean_values - threshold_if_out)/noise_stddev)
        prob = torch.where(is_in, prob_if_in, prob_if_out)
        return prob

    def noisy_top_k_gating(self, x, train, noise_epsilon=1e-2):
        """Noisy top-k gating.
          See paper: https://arxiv.org/abs/1701.06538.
          Args:
            x: input Tensor with shape [batch_size, input_size]
            train: a boolean - we only add noise at training time.
            noise_epsilon: a float
          Returns:
            gates: a Tensor with shape [batch_size, num_experts]
            load: a Tensor with shape [num_experts]
        """
        clean_logits = x @ self.w_gate
        if self.noisy_gating and train:
            raw_noise_stddev = x @ self.w_noise
            noise_stddev = ((self.softplus(raw_noise_stddev) + noise_epsilon))
            noisy_logits = clean_logits + (torch.randn_like(clean_logits) * noise_stddev)
            logits = noisy_logits
        else:
            logits = clean_logits

        # calculate topk + 1 that will be needed for the noisy gates
        logits = self.softmax(logits)
        top_logits, top_indices = logits.topk(min(self.k + 1, self.num_experts), dim=1)
        top_k_logits = top_logits[:, :self.k]
        top_k_indices = top_indices[:, :self.k]
        top_k_gates = top_k_logits / (top_k_logits.sum(1, keepdim=True) + 1e-6)  # normalization

        zeros = torch.zeros_like(logits, requires_grad=True)
        gates = zeros.scatter(1, top_k_indices, top_k_gates)

        if self.noisy_gating and self.k < self.num_experts and train:
            load = (self._prob_in_top_k(clean_logits, noisy_logits, noise_stddev, top_logits)).sum(0)
        else:
            load = self._gates_to_load(gates)
        return gates, load

    def forward(self, x, loss_coef=1e-2):
        """Args:
        x: tensor shape [batch_size, input_size]
        train: a boolean scalar.
        loss_coef: a scalar - multiplier on load-balancing losses

        Returns:
        y: a tensor with shape [batch_size, output_size].
        extra_training_loss: a scalar.  This should be added into the overall
        training loss of the model.  The backpropagation of this loss
        encourages all experts to be approximately equally used across a batch.
        """
        gates, load = self.noisy_top_k_gating(x, self.training)
        # calculate importance loss
        importance = gates.sum(0)
        #
        loss = self.cv_squared(importance) + self.cv_squared(load)
        loss *= loss_coef

        dispatcher = SparseDispatcher(self.num_experts, gates)
        expert_inputs = dispatcher.dispatch(x)
        gates = dispatcher.expert_to_gates()
        expert_outputs = [self.experts[i](expert_inputs[i]) for i in range(self.num_experts)]
        y = dispatcher.combine(expert_outputs)
        return y, loss


# example.py
def train(x, y, model, loss_fn, optim):
    model.train()
    y_hat, aux_loss = model(x.float())
    loss = loss_fn(y_hat, y)
    total_loss = loss + aux_loss
    optim.zero_grad()
    total_loss.backward()
    print("Training Results - loss: {:.4f}, aux_loss: {:.5f}".format(loss.item(), aux_loss.item()))
    optim.step()
    return model


def eval(x, y, model, loss_fn):
    model.eval()
    y_hat, aux_loss = model(x.float())
    loss = loss_fn(y_hat, y)
    total_loss = loss + aux_loss
    print("Evaluation Results - loss: {:.4f}, aux_loss: {:.5f}".format(loss.item(), aux_loss.item()))


def fmt(t, n=4):
    return [f"{v:.4f}" for v in t.reshape(-1)[:n].tolist()]


def load_numpy(model, seed, gate_std=0.5):
    r = np.random.default_rng(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            std = gate_std if name.startswith("w_") else 0.4
            p.copy_(torch.from_numpy(r.normal(0, std, tuple(p.shape)).astype(np.float32)))


rng = np.random.default_rng(0)
input_size, num_classes, num_experts, hidden_size, batch_size, k = 12, 5, 6, 10, 24, 2

# the dispatcher on hand-made gates (expert 3 gets no example)
gates = torch.tensor([[0.0, 0.7, 0.0, 0.0, 0.3, 0.0],
                      [0.5, 0.0, 0.0, 0.0, 0.0, 0.5],
                      [0.0, 0.6, 0.4, 0.0, 0.0, 0.0],
                      [0.2, 0.0, 0.0, 0.0, 0.8, 0.0]])
d = SparseDispatcher(num_experts, gates)
print("batch index", d._batch_index.tolist(), "expert index", d._expert_index.flatten().tolist(),
      "part sizes", d._part_sizes, "nonzero gates", fmt(d._nonzero_gates, 8))
inp = torch.arange(8.0).reshape(4, 2)
parts = d.dispatch(inp)
print("dispatch", [tuple(p.shape) for p in parts], parts[1].tolist(), [tuple(g.shape) for g in d.expert_to_gates()])
out = d.combine([p * 10 for p in parts])
print("combine", out.tolist(), out.requires_grad, d.combine([p for p in parts], multiply_by_gates=False).tolist())

# gating, in eval (no noise) and with the zero initialization
torch.manual_seed(0)
model = MoE(input_size, num_classes, num_experts, hidden_size, k=k, noisy_gating=True)
print("buffers", [n for n, _ in model.named_buffers()], "params", sum(p.numel() for p in model.parameters()))
x = torch.from_numpy(rng.uniform(0, 1, (batch_size, input_size)).astype(np.float32))
y = torch.from_numpy(rng.integers(0, num_classes, batch_size))
g0, load0 = model.noisy_top_k_gating(x, False)
print("zero-init gates", fmt(g0[0], 6), g0.requires_grad, "load", load0.tolist(), load0.dtype)
load_numpy(model, 1)
g, load = model.noisy_top_k_gating(x, False)
print("gates", fmt(g[0], 6), fmt(g[5], 6), "load", load.tolist(), "importance", fmt(g.sum(0), 6))
print("cv_squared", f"{model.cv_squared(g.sum(0)).item():.5f}", f"{model.cv_squared(load).item():.5f}",
      model.cv_squared(torch.tensor([3.0])).tolist())

# _prob_in_top_k on noise drawn in numpy
clean = x @ model.w_gate
noise_stddev = model.softplus(x @ model.w_noise) + 1e-2
noisy = clean + torch.from_numpy(rng.normal(0, 1, clean.shape).astype(np.float32)) * noise_stddev
top_logits, _ = model.softmax(noisy).topk(min(k + 1, num_experts), dim=1)
prob = model._prob_in_top_k(clean, noisy, noise_stddev, top_logits)
print("prob in top k", tuple(prob.shape), fmt(prob[0], 6), fmt(prob.sum(0), 6))
prob.sum().backward()
print("prob grads", fmt(model.w_gate.grad[0], 6), fmt(model.w_noise.grad[0], 6))
model.zero_grad()

# the example's training with noisy gating: the noise is torch's generator's
loss_fn = nn.CrossEntropyLoss()
optim = Adam(model.parameters())
model.train()
torch.manual_seed(1)
y_hat, aux = model(x)
gates_n, load_n = model.noisy_top_k_gating(x, True)
print("noisy", tuple(y_hat.shape), bool(torch.allclose(y_hat.sum(1), torch.ones(batch_size), atol=1e-5)),
      f"{aux.item():.4f}", "gates per row", (gates_n > 0).sum(1).unique().tolist(),
      bool(torch.allclose(gates_n.sum(1), torch.ones(batch_size), atol=1e-5)),
      tuple(load_n.shape), bool(((load_n >= 0) & (load_n <= batch_size)).all()))

# the compared training: noisy_gating=False, k=2 and k=4
for kk in (2, 4):
    torch.manual_seed(0)
    model = MoE(input_size, num_classes, num_experts, hidden_size, k=kk, noisy_gating=False)
    load_numpy(model, 2, gate_std=1.0)
    optim = Adam(model.parameters(), lr=0.01)
    for step in range(4):
        model = train(x, y, model, loss_fn, optim)
    eval(x, y, model, loss_fn)
    g, load = model.noisy_top_k_gating(x, False)
    print("k", kk, "load", load.tolist(), "w_noise grad", model.w_noise.grad,
          "w_gate grad", fmt(model.w_gate.grad[3], 6), "expert0 fc2", fmt(model.experts[0].fc2.weight.grad, 3))

# zero-initialized gates train too (all logits tie at the first step)
torch.manual_seed(0)
zmodel = MoE(input_size, num_classes, num_experts, hidden_size, k=2, noisy_gating=False)
load_numpy(zmodel, 3)
with torch.no_grad():
    zmodel.w_gate.zero_()
zopt = Adam(zmodel.parameters(), lr=0.01)
for step in range(3):
    zmodel = train(x, y, zmodel, loss_fn, zopt)
print("untied", zmodel.noisy_top_k_gating(x, False)[1].tolist(), [f"{v:.3f}" for v in zmodel.w_gate[0].tolist()])


# one training step under torch.compile against the same step eagerly
def train_step(x, y):
    model.train()
    y_hat, aux_loss = model(x.float())
    total_loss = loss_fn(y_hat, y) + aux_loss
    optim.zero_grad()
    total_loss.backward()
    optim.step()
    return total_loss


state, opt_state = copy.deepcopy(model.state_dict()), copy.deepcopy(optim.state_dict())
eager = [train_step(x, y).item() for _ in range(2)]
after = {k: v.clone() for k, v in model.state_dict().items()}
model.load_state_dict(state)
optim.load_state_dict(opt_state)
cstep = torch.compile(train_step)
compiled = [cstep(x, y).item() for _ in range(2)]
print("compiled losses", [f"{v:.5f}" for v in compiled])
print("compiled == eager:", all(abs(a - b) <= 1e-4 * max(1.0, abs(b)) for a, b in zip(compiled, eager)),
      all(torch.allclose(model.state_dict()[k].float(), after[k].float(), rtol=1e-4, atol=1e-5) for k in after))
