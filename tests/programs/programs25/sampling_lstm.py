# Modelled on labmlai/annotated_deep_learning_paper_implementations:
# labml_nn/sampling (GreedySampler: argmax; TemperatureSampler:
# torch.distributions.Categorical(logits=logits / temperature).sample();
# TopKSampler: torch.topk, logits.new_ones(...) * float('-inf'), scatter of the
# top values; NucleusSampler: softmax, torch.sort(descending=True), cumsum,
# the shifted nucleus mask with new_ones + torch.cat, sorted_log_probs[~nucleus]
# = float('-inf'), then indices.gather of the sampled sorted index) and
# sampling/experiment.py (sampling a prompt continuation from a language model
# one token at a time, with torch.no_grad and the state carried).
# Written for this test (not copied): a small nn.LSTM language model in place
# of GPT-2, trained 3 steps on an inline text, then every sampler drawing 8
# tokens under torch.manual_seed; the training step compiled against eager.
import copy

import torch
from torch import nn
from torch.distributions import Categorical


class Sampler:
    def __call__(self, logits: torch.Tensor):
        raise NotImplementedError()


class GreedySampler(Sampler):
    def __call__(self, logits):
        return logits.argmax(dim=-1)


class TemperatureSampler(Sampler):
    def __init__(self, temperature: float = 1.0):
        self.temperature = temperature

    def __call__(self, logits):
        dist = Categorical(logits=logits / self.temperature)
        return dist.sample()


class TopKSampler(Sampler):
    def __init__(self, k: int, sampler: Sampler):
        self.k = k
        self.sampler = sampler

    def __call__(self, logits):
        zeros = logits.new_ones(logits.shape) * float('-inf')
        values, indices = torch.topk(logits, self.k, dim=-1)
        zeros.scatter_(-1, indices, values)
        return self.sampler(zeros)


class NucleusSampler(Sampler):
    def __init__(self, p: float, sampler: Sampler):
        self.p = p
        self.sampler = sampler
        self.softmax = nn.Softmax(dim=-1)

    def __call__(self, logits):
        probs = self.softmax(logits)
        sorted_probs, indices = torch.sort(probs, dim=-1, descending=True)
        cum_sum_probs = torch.cumsum(sorted_probs, dim=-1)
        nucleus = cum_sum_probs < self.p
        nucleus = torch.cat([nucleus.new_ones(nucleus.shape[:-1] + (1,)), nucleus[..., :-1]], dim=-1)
        sorted_log_probs = torch.log(sorted_probs)
        sorted_log_probs[~nucleus] = float('-inf')
        sampled_sorted_indexes = self.sampler(sorted_log_probs)
        res = indices.gather(-1, sampled_sorted_indexes.unsqueeze(-1))
        return res.squeeze(-1)


class LM(nn.Module):
    def __init__(self, n_vocab, d_model, n_layers):
        super().__init__()
        self.emb = nn.Embedding(n_vocab, d_model)
        self.lstm = nn.LSTM(d_model, d_model, n_layers)
        self.fc = nn.Linear(d_model, n_vocab)

    def forward(self, x, state=None):
        out, state = self.lstm(self.emb(x), state)
        return self.fc(out), state


text = "the quick brown fox jumps over the lazy dog and the cat naps "
chars = sorted(set(text))
stoi = {c: i for i, c in enumerate(chars)}
data = torch.tensor([stoi[c] for c in text])
seq_len, batch = 8, 3
torch.manual_seed(0)
model = LM(len(chars), 16, 2)
optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)


def batch_at(i):
    xs = torch.stack([data[i + j * seq_len: i + j * seq_len + seq_len] for j in range(batch)], dim=1)
    ys = torch.stack([data[i + j * seq_len + 1: i + j * seq_len + seq_len + 1] for j in range(batch)], dim=1)
    return xs, ys


for step in range(3):
    xs, ys = batch_at(step)
    logits, _ = model(xs)
    loss = nn.functional.cross_entropy(logits.view(-1, logits.shape[-1]), ys.reshape(-1))
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    print(f"step {step} loss {loss.item():.6f}")


def sample(sampler, prompt, n_tokens, n_samples):
    with torch.no_grad():
        x = torch.tensor([stoi[c] for c in prompt])[:, None].repeat(1, n_samples)
        logits, state = model(x)
        res = [prompt] * n_samples
        for _ in range(n_tokens):
            nxt = sampler(logits[-1])
            res = [r + chars[t] for r, t in zip(res, nxt.tolist())]
            logits, state = model(nxt[None, :], state)
    return res


samplers = [("greedy", GreedySampler()), ("temperature 1.0", TemperatureSampler(1.0)),
            ("temperature 0.5", TemperatureSampler(0.5)), ("top-k 3", TopKSampler(3, TemperatureSampler(1.0))),
            ("nucleus 0.9", NucleusSampler(0.9, TemperatureSampler(1.0))),
            ("nucleus 0.5 greedy", NucleusSampler(0.5, GreedySampler()))]
for name, sampler in samplers:
    torch.manual_seed(1)
    print(name, sample(sampler, "the ", 8, 3))

# the samplers' intermediate tensors on one row of logits
logits = torch.tensor([[2.0, 1.0, 0.5, -1.0, 0.0], [0.1, 0.2, 0.3, 0.4, 0.5]])
zeros = logits.new_ones(logits.shape) * float('-inf')
values, indices = torch.topk(logits, 2, dim=-1)
print("topk", values.tolist(), indices.tolist(), zeros.scatter(-1, indices, values).tolist())
sp, ix = torch.sort(torch.softmax(logits, -1), dim=-1, descending=True)
print("sorted", [round(v, 6) for v in sp.flatten().tolist()], ix.tolist())
d = Categorical(logits=logits)
print("categorical", d.probs.sum(-1).tolist(), d.entropy().tolist(), d.log_prob(torch.tensor([0, 4])).tolist())


def train_step(xs, ys):
    logits, _ = model(xs)
    loss = nn.functional.cross_entropy(logits.view(-1, logits.shape[-1]), ys.reshape(-1))
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    return loss


xs, ys = batch_at(4)
state, opt_state = copy.deepcopy(model.state_dict()), copy.deepcopy(optimizer.state_dict())
loss_c = torch.compile(train_step)(xs, ys)
after_c = copy.deepcopy(model.state_dict())
model.load_state_dict(state)
optimizer.load_state_dict(opt_state)
loss_e = train_step(xs, ys)
print("compiled loss", round(loss_c.item(), 5))
print("compiled == eager", torch.allclose(loss_c, loss_e, atol=1e-6),
      all(torch.allclose(after_c[k], v, atol=1e-6) for k, v in model.state_dict().items()))
