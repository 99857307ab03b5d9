# AutoInt (Song et al. 2019, "AutoInt: Automatic Feature Interaction
# Learning via Self-Attentive Neural Networks") for CTR prediction, in the
# shape of DeepCTR-Torch (deepctr_torch/layers/interaction.py
# InteractingLayer: W_Query / W_key / W_Value / W_Res as nn.Parameter
# matrices applied by torch.tensordot(inputs, W, dims=([-1], [0])), heads
# made by torch.stack(torch.split(querys, att_embedding_size, dim=2)),
# inner products by torch.einsum('bnik,bnjk->bnij'), scaled, softmax over
# the last axis, heads joined back by torch.cat(torch.split(result, 1),
# dim=-1).squeeze(dim=0), the residual projection and ReLU;
# deepctr_torch/models/autoint.py: stacked interacting layers over the
# field embeddings, the flattened attention output concatenated with a
# DNN's, a final Linear, sigmoid; the linear (first-order) part from
# per-field 1-dim embeddings; binary cross-entropy, Adam, a validation
# log loss and AUC from ranks). Written for this test: 5 sparse fields of
# vocabulary 8-16, clicks from a planted pairwise interaction (numpy),
# embedding 8, 2 heads, 2 layers, 4 epochs of 8 batches; one compiled
# training step against eager.
import copy

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

rng = np.random.RandomState(0)
torch.manual_seed(0)
VOCABS = [8, 10, 12, 14, 16]
N = 320
X = np.stack([rng.randint(0, v, N) for v in VOCABS], 1)
logit = 1.2 * ((X[:, 0] % 2) == (X[:, 2] % 2)) - 0.8 * ((X[:, 1] + X[:, 3]) % 3 == 0) - 0.2
y = (rng.rand(N) < 1 / (1 + np.exp(-3 * logit))).astype(np.float32)
X, y = torch.from_numpy(X).long(), torch.from_numpy(y)
X_train, y_train, X_val, y_val = X[:256], y[:256], X[256:], y[256:]


class InteractingLayer(nn.Module):
    def __init__(self, embedding_size, head_num=2, use_res=True, scaling=False, seed=1024):
        super(InteractingLayer, self).__init__()
        if head_num <= 0:
            raise ValueError('head_num must be a int > 0')
        if embedding_size % head_num != 0:
            raise ValueError('embedding_size is not an integer multiple of head_num!')
        self.att_embedding_size = embedding_size // head_num
        self.head_num = head_num
        self.use_res = use_res
        self.scaling = scaling
        self.seed = seed
        self.W_Query = nn.Parameter(torch.Tensor(embedding_size, embedding_size))
        self.W_key = nn.Parameter(torch.Tensor(embedding_size, embedding_size))
        self.W_Value = nn.Parameter(torch.Tensor(embedding_size, embedding_size))
        if self.use_res:
            self.W_Res = nn.Parameter(torch.Tensor(embedding_size, embedding_size))
        for tensor in self.parameters():
            nn.init.normal_(tensor, mean=0.0, std=0.05)

    def forward(self, inputs):
        if len(inputs.shape) != 3:
            raise ValueError("Unexpected inputs dimensions %d, expect to be 3 dimensions" % (len(inputs.shape)))
        querys = torch.tensordot(inputs, self.W_Query, dims=([-1], [0]))
        keys = torch.tensordot(inputs, self.W_key, dims=([-1], [0]))
        values = torch.tensordot(inputs, self.W_Value, dims=([-1], [0]))
        querys = torch.stack(torch.split(querys, self.att_embedding_size, dim=2))
        keys = torch.stack(torch.split(keys, self.att_embedding_size, dim=2))
        values = torch.stack(torch.split(values, self.att_embedding_size, dim=2))
        inner_product = torch.einsum('bnik,bnjk->bnij', querys, keys)
        if self.scaling:
            inner_product /= self.att_embedding_size ** 0.5
        self.normalized_att_scores = F.softmax(inner_product, dim=-1)
        result = torch.matmul(self.normalized_att_scores, values)
        result = torch.cat(torch.split(result, 1, ), dim=-1)
        result = torch.squeeze(result, dim=0)
        if self.use_res:
            result += torch.tensordot(inputs, self.W_Res, dims=([-1], [0]))
        result = F.relu(result)
        return result


class AutoInt(nn.Module):
    def __init__(self, att_layer_num=2, att_head_num=2, att_res=True, dnn_hidden_units=(32, 16), emb=8):
        super(AutoInt, self).__init__()
        self.embedding_dict = nn.ModuleDict({f"f{i}": nn.Embedding(v, emb) for i, v in enumerate(VOCABS)})
        self.linear_dict = nn.ModuleDict({f"f{i}": nn.Embedding(v, 1) for i, v in enumerate(VOCABS)})
        for t in list(self.embedding_dict.values()) + list(self.linear_dict.values()):
            nn.init.normal_(t.weight, mean=0, std=1e-4 if t.embedding_dim == 1 else 1e-2)
        dims = [len(VOCABS) * emb] + list(dnn_hidden_units)
        self.dnn = nn.Sequential(*[m for a, b in zip(dims[:-1], dims[1:]) for m in (nn.Linear(a, b), nn.ReLU())])
        self.int_layers = nn.ModuleList(
            [InteractingLayer(emb, att_head_num, att_res, scaling=True) for _ in range(att_layer_num)])
        self.dnn_linear = nn.Linear(len(VOCABS) * emb + dims[-1], 1, bias=False)
        self.bias = nn.Parameter(torch.zeros((1,)))

    def forward(self, X):
        sparse_embedding_list = [self.embedding_dict[f"f{i}"](X[:, i:i + 1]) for i in range(len(VOCABS))]
        logit = torch.sum(torch.cat([self.linear_dict[f"f{i}"](X[:, i:i + 1]) for i in range(len(VOCABS))],
                                    dim=-1), dim=-1, keepdim=False) + self.bias
        att_input = torch.cat(sparse_embedding_list, dim=1)
        for layer in self.int_layers:
            att_input = layer(att_input)
        att_output = torch.flatten(att_input, start_dim=1)
        dnn_input = torch.flatten(torch.cat(sparse_embedding_list, dim=-1), start_dim=1)
        deep_out = self.dnn(dnn_input)
        stack_out = torch.cat((att_output, deep_out), dim=-1)
        logit = logit + self.dnn_linear(stack_out)
        return torch.sigmoid(logit).squeeze(-1)


def auc(pred, label):
    order = torch.argsort(pred)
    ranks = torch.empty_like(pred)
    ranks[order] = torch.arange(1, len(pred) + 1, dtype=pred.dtype)
    pos = label > 0.5
    n_pos, n_neg = pos.sum().item(), (~pos).sum().item()
    return (ranks[pos].sum().item() - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg)


model = AutoInt()
optim = torch.optim.Adam(model.parameters(), lr=0.01)


def train_step(x, t):
    optim.zero_grad()
    y_pred = model(x)
    loss = F.binary_cross_entropy(y_pred, t, reduction='sum')
    (loss / len(t)).backward()
    optim.step()
    return loss


for epoch in range(4):
    total = 0.0
    for b in range(0, 256, 32):
        total += train_step(X_train[b:b + 32], y_train[b:b + 32]).item()
    with torch.no_grad():
        p = model(X_val)
    print(f"Epoch {epoch + 1}/4 - loss: {total / 256:.4f} - val_binary_crossentropy: "
          f"{F.binary_cross_entropy(p, y_val).item():.4f} - val_auc: {auc(p, y_val):.4f}")

print("attention scores", tuple(model.int_layers[0].normalized_att_scores.shape),
      "row sums", round(model.int_layers[0].normalized_att_scores.sum(-1).mean().item(), 5))
state, opt_state = copy.deepcopy(model.state_dict()), copy.deepcopy(optim.state_dict())
loss_c = torch.compile(train_step)(X_train[:32], y_train[:32])
after_c = copy.deepcopy(model.state_dict())
model.load_state_dict(state)
optim.load_state_dict(opt_state)
loss_e = train_step(X_train[:32], y_train[:32])
print("compiled loss", round(loss_c.item(), 4))
print("compiled == eager", torch.allclose(loss_c, loss_e, atol=1e-4),
      all(torch.allclose(after_c[k], v, atol=1e-6) for k, v in model.state_dict().items()))
