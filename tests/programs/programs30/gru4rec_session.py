# GRU4Rec (Hidasi et al. 2016, "Session-based Recommendations with
# Recurrent Neural Networks") in the shape of hungthanhpham94/GRU4REC-
# pytorch (lib/model.py GRU4REC: one-hot input by scatter_ on a
# zero buffer (onehot_encoding), nn.GRU over a length-1 sequence,
# final_activation tanh over the Linear to all items; lib/dataset.py
# SessionParallelLoader: session-parallel mini-batches, sessions that end
# replaced by new ones, the mask of ended sessions used to zero their
# hidden rows (hidden[:, mask, :] = 0); lib/lossfunction.py TOP1Loss and
# BPRLoss over in-batch negatives (logit[:, target] sampled by
# logit[:, target] / the diagonal, torch.sigmoid(diff), -log(sigmoid)
# mean), lib/optimizer.py Adagrad; lib/evaluation.py recall@k and MRR@k
# from torch.topk and the reciprocal rank), hidden detached between
# steps. Written for this test: 40 items, 60 sessions of 3-6 clicks that
# follow an item cycle with noise (numpy), hidden 32, batch 8, 3 epochs,
# both losses; one compiled training step against eager.
import copy

import numpy as np
import torch
import torch.nn as nn

rng = np.random.RandomState(0)
torch.manual_seed(0)
N_ITEMS = 40


def make_sessions(n):
    out = []
    for _ in range(n):
        length = rng.randint(3, 7)
        start = rng.randint(0, N_ITEMS)
        s = [(start + 3 * k + (rng.rand() < 0.15)) % N_ITEMS for k in range(length)]
        out.append(s)
    return out


train_sessions, test_sessions = make_sessions(60), make_sessions(20)


class GRU4REC(nn.Module):
    def __init__(self, input_size, hidden_size, output_size, num_layers=1, final_act='tanh',
                 dropout_hidden=.0, batch_size=8):
        super(GRU4REC, self).__init__()
        self.input_size = input_size
        self.hidden_size = hidden_size
        self.output_size = output_size
        self.num_layers = num_layers
        self.dropout_hidden = dropout_hidden
        self.batch_size = batch_size
        self.onehot_buffer = self.init_emb()
        self.h2o = nn.Linear(hidden_size, output_size)
        self.final_activation = nn.Tanh()
        self.gru = nn.GRU(self.input_size, self.hidden_size, self.num_layers, dropout=self.dropout_hidden)

    def forward(self, input, hidden):
        embedded = self.onehot_encode(input)
        embedded = embedded.unsqueeze(0)
        output, hidden = self.gru(embedded, hidden)
        output = output.view(-1, output.size(-1))
        logit = self.final_activation(self.h2o(output))
        return logit, hidden

    def init_emb(self):
        onehot_buffer = torch.FloatTensor(self.batch_size, self.output_size)
        return onehot_buffer

    def onehot_encode(self, input):
        self.onehot_buffer.zero_()
        index = input.view(-1, 1)
        one_hot = self.onehot_buffer.scatter_(1, index, 1)
        return one_hot

    def init_hidden(self):
        return torch.zeros(self.num_layers, self.batch_size, self.hidden_size)


class TOP1Loss(nn.Module):
    def forward(self, logit):
        diff = -(logit.diag().view(-1, 1).expand_as(logit) - logit)
        loss = torch.sigmoid(diff).mean() + torch.sigmoid(logit ** 2).mean()
        return loss


class BPRLoss(nn.Module):
    def forward(self, logit):
        diff = logit.diag().view(-1, 1).expand_as(logit) - logit
        loss = -torch.mean(torch.nn.functional.logsigmoid(diff))
        return loss


def session_parallel(sessions, batch_size):
    """(input, target, mask) per step: session-parallel mini-batches; mask
    lists the rows whose session ended before this step."""
    iters = np.arange(batch_size)
    maxiter = batch_size - 1
    pos = np.zeros(batch_size, dtype=int)
    finished = False
    mask = []
    while not finished:
        idx_input = np.array([sessions[s][p] for s, p in zip(iters, pos)])
        idx_target = np.array([sessions[s][p + 1] for s, p in zip(iters, pos)])
        yield torch.LongTensor(idx_input), torch.LongTensor(idx_target), mask
        pos += 1
        mask = np.arange(batch_size)[np.array([p + 1 >= len(sessions[s]) for s, p in zip(iters, pos)])]
        for idx in mask:
            maxiter += 1
            if maxiter >= len(sessions):
                finished = True
                break
            iters[idx] = maxiter
            pos[idx] = 0


def get_recall_mrr(indices, targets):
    targets = targets.view(-1, 1).expand_as(indices)
    hits = (targets == indices).nonzero()
    recall = float(hits.size(0)) / targets.size(0)
    ranks = (hits[:, -1] + 1).float()
    mrr = torch.sum(torch.reciprocal(ranks)).item() / targets.size(0)
    return recall, mrr


def run(loss_type):
    torch.manual_seed(1)
    model = GRU4REC(N_ITEMS, 32, N_ITEMS, batch_size=8)
    loss_func = TOP1Loss() if loss_type == 'TOP1' else BPRLoss()
    optim = torch.optim.Adagrad(model.parameters(), lr=0.1)

    def step(input, target, hidden):
        optim.zero_grad()
        logit, hidden = model(input, hidden)
        logit_sampled = logit[:, target.view(-1)]
        loss = loss_func(logit_sampled)
        loss.backward()
        optim.step()
        return loss, hidden

    for epoch in range(3):
        hidden = model.init_hidden()
        losses = []
        for input, target, mask in session_parallel(train_sessions, 8):
            if len(mask) != 0:
                hidden[:, mask, :] = 0
            hidden = hidden.detach()
            loss, hidden = step(input, target, hidden)
            losses.append(loss.item())
        with torch.no_grad():
            hidden, recalls, mrrs = model.init_hidden(), [], []
            for input, target, mask in session_parallel(test_sessions, 8):
                if len(mask) != 0:
                    hidden[:, mask, :] = 0
                logit, hidden = model(input, hidden)
                _, indices = torch.topk(logit, 5, -1)
                r, m = get_recall_mrr(indices, target)
                recalls.append(r), mrrs.append(m)
        print(f"{loss_type} epoch {epoch} loss {np.mean(losses):.4f} recall@5 {np.mean(recalls):.4f} "
              f"mrr@5 {np.mean(mrrs):.4f}")
    return model, optim, step


for loss_type in ['TOP1', 'BPR']:
    model, optim, step = run(loss_type)

input, target, _ = next(session_parallel(train_sessions, 8))
hidden = torch.randn(1, 8, 32) * 0.1
state, opt_state = copy.deepcopy(model.state_dict()), copy.deepcopy(optim.state_dict())
loss_c, hidden_c = torch.compile(step)(input, target, hidden)
after_c = copy.deepcopy(model.state_dict())
model.load_state_dict(state)
optim.load_state_dict(opt_state)
loss_e, hidden_e = step(input, target, hidden)
print("compiled loss", round(loss_c.item(), 5))
print("compiled == eager", torch.allclose(loss_c, loss_e, atol=1e-6), torch.allclose(hidden_c, hidden_e, atol=1e-6),
      all(torch.allclose(after_c[k], v, atol=1e-6) for k, v in model.state_dict().items()))
