# Modelled on labmlai/annotated_deep_learning_paper_implementations:
# labml_nn/transformers/switch/__init__.py (SwitchFeedForward: a softmax
# router, torch.max for the top-1 route, the token indexes of each expert by
# torch.eq(...).nonzero(as_tuple=True)[0], expert capacity with the overflow
# dropped by torch.randperm, expert outputs written back with
# final_output[indexes, :] = ..., the dropped tokens passed through, outputs
# scaled by the route probability or by route_prob_max / route_prob_max.detach(),
# and the load-balancing loss from counts (x.new_tensor of the lengths) and
# route_prob.sum(0)).
# Written for this test (not copied): one switch feed-forward layer in a
# small regression model on synthetic data, SGD, 3 steps; the compiled
# step (data-dependent expert sizes) checked against eager.
import copy

import numpy as np
import torch
from torch import nn


class FeedForward(nn.Module):
    def __init__(self, d_model, d_ff):
        super().__init__()
        self.layer1 = nn.Linear(d_model, d_ff)
        self.layer2 = nn.Linear(d_ff, d_model)
        self.activation = nn.ReLU()

    def forward(self, x):
        return self.layer2(self.activation(self.layer1(x)))


class SwitchFeedForward(nn.Module):
    def __init__(self, *, capacity_factor, drop_tokens, is_scale_prob, n_experts, expert, d_model):
        super().__init__()
        self.capacity_factor = capacity_factor
        self.is_scale_prob = is_scale_prob
        self.n_experts = n_experts
        self.drop_tokens = drop_tokens
        self.experts = nn.ModuleList([copy.deepcopy(expert) for _ in range(n_experts)])
        self.switch = nn.Linear(d_model, n_experts)
        self.softmax = nn.Softmax(dim=-1)

    def forward(self, x):
        seq_len, batch_size, d_model = x.shape
        x = x.view(-1, d_model)
        route_prob = self.softmax(self.switch(x))
        route_prob_max, routes = torch.max(route_prob, dim=-1)
        indexes_list = [torch.eq(routes, i).nonzero(as_tuple=True)[0] for i in range(self.n_experts)]
        final_output = x.new_zeros(x.shape)
        capacity = int(self.capacity_factor * len(x) / self.n_experts)
        counts = x.new_tensor([len(indexes_list[i]) for i in range(self.n_experts)])
        dropped = []
        if self.drop_tokens:
            for i in range(self.n_experts):
                if len(indexes_list[i]) <= capacity:
                    continue
                indexes_list[i] = indexes_list[i][torch.randperm(len(indexes_list[i]))]
                dropped.append(indexes_list[i][capacity:])
                indexes_list[i] = indexes_list[i][:capacity]
        expert_output = [self.experts[i](x[indexes_list[i], :]) for i in range(self.n_experts)]
        for i in range(self.n_experts):
            final_output[indexes_list[i], :] = expert_output[i]
        if dropped:
            dropped = torch.cat(dropped)
            final_output[dropped, :] = x[dropped, :]
        if self.is_scale_prob:
            final_output = final_output * route_prob_max.view(-1, 1)
        else:
            final_output = final_output * (route_prob_max / route_prob_max.detach()).view(-1, 1)
        final_output = final_output.view(seq_len, batch_size, d_model)
        return final_output, counts, route_prob.sum(0), len(dropped), route_prob_max


class Model(nn.Module):
    def __init__(self, d_model, n_experts, drop_tokens, is_scale_prob):
        super().__init__()
        self.inp = nn.Linear(3, d_model)
        self.ff = SwitchFeedForward(capacity_factor=1.0, drop_tokens=drop_tokens, is_scale_prob=is_scale_prob,
                                    n_experts=n_experts, expert=FeedForward(d_model, 2 * d_model), d_model=d_model)
        self.norm = nn.LayerNorm(d_model)
        self.out = nn.Linear(d_model, 1)

    def forward(self, x):
        h = self.inp(x)
        f, counts, route_prob, n_dropped, route_prob_max = self.ff(self.norm(h))
        return self.out(h + f), counts, route_prob, n_dropped, route_prob_max


rng = np.random.RandomState(0)
seq_len, batch, d_model, n_experts = 5, 4, 8, 4
x = torch.from_numpy(rng.randn(seq_len, batch, 3).astype(np.float32))
y = torch.from_numpy(rng.randn(seq_len, batch, 1).astype(np.float32))
load_balancing_loss_ceof = 0.01

for drop_tokens, is_scale_prob in [(True, True), (False, False)]:
    torch.manual_seed(0)
    model = Model(d_model, n_experts, drop_tokens, is_scale_prob)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    for step in range(3):
        out, counts, route_prob, n_dropped, route_prob_max = model(x)
        mse = nn.functional.mse_loss(out, y)
        total = counts.sum(dim=-1, keepdims=True)
        route_frac = counts / total
        route_prob = route_prob / total
        load_balancing_loss = n_experts * (route_frac * route_prob).sum()
        loss = mse + load_balancing_loss_ceof * load_balancing_loss
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        print(f"drop {drop_tokens} scale {is_scale_prob} step {step} loss {loss.item():.6f} "
              f"lb {load_balancing_loss.item():.6f} counts {counts.tolist()} dropped {n_dropped} "
              f"switch grad {model.ff.switch.weight.grad.abs().sum().item():.6f}")


def train_step(x, y):
    out, counts, route_prob, n_dropped, _ = model(x)
    total = counts.sum(dim=-1, keepdims=True)
    loss = nn.functional.mse_loss(out, y) + load_balancing_loss_ceof * n_experts * (
        (counts / total) * (route_prob / total)).sum()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    return loss


state, opt_state = copy.deepcopy(model.state_dict()), copy.deepcopy(optimizer.state_dict())
loss_c = torch.compile(train_step)(x, y)
after_c = copy.deepcopy(model.state_dict())
model.load_state_dict(state)
optimizer.load_state_dict(opt_state)
loss_e = train_step(x, y)
print("compiled loss", round(loss_c.item(), 5))
print("compiled == eager", torch.allclose(loss_c, loss_e, atol=1e-6),
      all(torch.allclose(after_c[k], v, atol=1e-6) for k, v in model.state_dict().items()))
