# Deep & Cross Network V2 (Wang et al. 2021, "DCN V2") for CTR prediction
# in the shape of DeepCTR-Torch's DCN (deepctr_torch/layers/interaction.py
# CrossNet with parameterization='matrix' and 'vector', and DCNMix's
# low-rank mixture of experts CrossNetMix): per-field nn.Embedding tables
# in an nn.ModuleDict, dense features concatenated, the cross layer
# x_{l+1} = x_0 * (W_l x_l + b_l) + x_l computed with torch.matmul on
# unsqueezed columns (B, d, 1) and torch.tensordot for the vector form,
# the low-rank experts (torch.einsum of U, V, C with tanh between),
# softmax gating over experts, a parallel DNN, the combined logit through
# a sigmoid, BCELoss, L2 on the embeddings added to the loss, Adagrad,
# and roc_auc-style accuracy. Written for this test: 6 sparse fields of
# vocabulary 10-20, 3 dense features, synthetic clicks from a planted
# second-order rule (numpy), 3 epochs of 8 batches; one compiled training
# step against eager.
import copy

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

rng = np.random.RandomState(0)
torch.manual_seed(0)
VOCABS = [10, 12, 14, 16, 18, 20]
EMB, DENSE = 4, 3
N = 256
sparse = np.stack([rng.randint(0, v, N) for v in VOCABS], 1)
dense = rng.randn(N, DENSE).astype(np.float32)
score = (sparse[:, 0] % 3 == sparse[:, 1] % 3) * 1.5 + dense[:, 0] * dense[:, 1] - 0.5
label = (score + 0.3 * rng.randn(N) > 0).astype(np.float32)
X_sparse, X_dense, y = torch.from_numpy(sparse), torch.from_numpy(dense), torch.from_numpy(label)


class CrossNet(nn.Module):
    """The Cross Network part of Deep&Cross (DCN) and DCN-M."""

    def __init__(self, in_features, layer_num=2, parameterization='vector'):
        super(CrossNet, self).__init__()
        self.layer_num = layer_num
        self.parameterization = parameterization
        if self.parameterization == 'vector':
            self.kernels = nn.Parameter(torch.Tensor(self.layer_num, in_features, 1))
        elif self.parameterization == 'matrix':
            self.kernels = nn.Parameter(torch.Tensor(self.layer_num, in_features, in_features))
        else:
            raise ValueError("parameterization should be 'vector' or 'matrix'")
        self.bias = nn.Parameter(torch.Tensor(self.layer_num, in_features, 1))
        for i in range(self.kernels.shape[0]):
            nn.init.xavier_normal_(self.kernels[i])
        for i in range(self.bias.shape[0]):
            nn.init.zeros_(self.bias[i])

    def forward(self, inputs):
        x_0 = inputs.unsqueeze(2)
        x_l = x_0
        for i in range(self.layer_num):
            if self.parameterization == 'vector':
                xl_w = torch.tensordot(x_l, self.kernels[i], dims=([1], [0]))
                dot_ = torch.matmul(x_0, xl_w)
                x_l = dot_ + self.bias[i] + x_l
            elif self.parameterization == 'matrix':
                xl_w = torch.matmul(self.kernels[i], x_l)
                dot_ = xl_w + self.bias[i]
                x_l = x_0 * dot_ + x_l
        x_l = torch.squeeze(x_l, dim=2)
        return x_l


class CrossNetMix(nn.Module):
    """DCN-Mix: low-rank cross layers mixed by a softmax gate over experts."""

    def __init__(self, in_features, low_rank=4, num_experts=2, layer_num=2):
        super(CrossNetMix, self).__init__()
        self.layer_num = layer_num
        self.num_experts = num_experts
        self.U_list = nn.Parameter(torch.Tensor(self.layer_num, num_experts, in_features, low_rank))
        self.V_list = nn.Parameter(torch.Tensor(self.layer_num, num_experts, in_features, low_rank))
        self.C_list = nn.Parameter(torch.Tensor(self.layer_num, num_experts, low_rank, low_rank))
        self.gating = nn.ModuleList([nn.Linear(in_features, 1, bias=False) for i in range(self.num_experts)])
        self.bias = nn.Parameter(torch.Tensor(self.layer_num, in_features, 1))
        init_para_list = [self.U_list, self.V_list, self.C_list]
        for para in init_para_list:
            for i in range(self.layer_num):
                nn.init.xavier_normal_(para[i])
        for i in range(len(self.bias)):
            nn.init.zeros_(self.bias[i])

    def forward(self, inputs):
        x_0 = inputs.unsqueeze(2)
        x_l = x_0
        for i in range(self.layer_num):
            output_of_experts = []
            gating_score_of_experts = []
            for expert_id in range(self.num_experts):
                gating_score_of_experts.append(self.gating[expert_id](x_l.squeeze(2)))
                v_x = torch.matmul(self.V_list[i][expert_id].t(), x_l)
                v_x = torch.tanh(v_x)
                v_x = torch.matmul(self.C_list[i][expert_id], v_x)
                v_x = torch.tanh(v_x)
                uv_x = torch.matmul(self.U_list[i][expert_id], v_x)
                dot_ = uv_x + self.bias[i]
                dot_ = x_0 * dot_
                output_of_experts.append(dot_.squeeze(2))
            output_of_experts = torch.stack(output_of_experts, 2)
            gating_score_of_experts = torch.stack(gating_score_of_experts, 1)
            moe_out = torch.matmul(output_of_experts, gating_score_of_experts.softmax(1))
            x_l = moe_out + x_l
        x_l = x_l.squeeze()
        return x_l


class DCN(nn.Module):
    def __init__(self, cross_parameterization='vector', cross_num=2, dnn_hidden_units=(32, 16)):
        super(DCN, self).__init__()
        self.embedding_dict = nn.ModuleDict(
            {f"C{i}": nn.Embedding(v, EMB) for i, v in enumerate(VOCABS)})
        for tensor in self.embedding_dict.values():
            nn.init.normal_(tensor.weight, mean=0, std=1e-2)
        in_features = len(VOCABS) * EMB + DENSE
        dims = [in_features] + list(dnn_hidden_units)
        self.dnn = nn.Sequential(*[m for a, b in zip(dims[:-1], dims[1:])
                                   for m in (nn.Linear(a, b), nn.ReLU())])
        if cross_parameterization == 'mix':
            self.crossnet = CrossNetMix(in_features, layer_num=cross_num)
        else:
            self.crossnet = CrossNet(in_features, layer_num=cross_num,
                                     parameterization=cross_parameterization)
        self.dnn_linear = nn.Linear(in_features + dims[-1], 1, bias=False)

    def forward(self, x_sparse, x_dense):
        sparse_embedding_list = [self.embedding_dict[f"C{i}"](x_sparse[:, i:i + 1]) for i in range(len(VOCABS))]
        dnn_input = torch.cat([torch.flatten(torch.cat(sparse_embedding_list, dim=-1), start_dim=1), x_dense], dim=-1)
        deep_out = self.dnn(dnn_input)
        cross_out = self.crossnet(dnn_input)
        stack_out = torch.cat((cross_out, deep_out), dim=-1)
        logit = self.dnn_linear(stack_out)
        return torch.sigmoid(logit).squeeze(1)

    def reg_loss(self, l2=1e-5):
        return l2 * sum(torch.sum(e.weight * e.weight) for e in self.embedding_dict.values())


def fit(model, optim, epochs=3, batch_size=32):
    loss_func = F.binary_cross_entropy

    def step(xs, xd, yb):
        y_pred = model(xs, xd)
        optim.zero_grad()
        loss = loss_func(y_pred, yb, reduction='sum')
        total_loss = loss + model.reg_loss()
        total_loss.backward()
        optim.step()
        return loss, y_pred

    for epoch in range(epochs):
        total = 0.0
        for b in range(N // batch_size):
            sl = slice(b * batch_size, (b + 1) * batch_size)
            loss, _ = step(X_sparse[sl], X_dense[sl], y[sl])
            total += loss.item()
        with torch.no_grad():
            acc = ((model(X_sparse, X_dense) > 0.5).float() == y).float().mean().item()
        print(f"  Epoch {epoch + 1}/{epochs} loss: {total / N:.4f} acc: {acc:.4f}")
    return step


for kind in ["vector", "matrix", "mix"]:
    torch.manual_seed(1)
    model = DCN(cross_parameterization=kind)
    optim = torch.optim.Adagrad(model.parameters(), lr=0.05)
    print(f"DCN-{kind}: {sum(p.numel() for p in model.parameters())} parameters")
    step = fit(model, optim)

xs, xd, yb = X_sparse[:32], X_dense[:32], y[:32]
state, opt_state = copy.deepcopy(model.state_dict()), copy.deepcopy(optim.state_dict())
loss_c, pred_c = torch.compile(step)(xs, xd, yb)
after_c = copy.deepcopy(model.state_dict())
model.load_state_dict(state)
optim.load_state_dict(opt_state)
loss_e, pred_e = step(xs, xd, yb)
print("compiled loss", round(loss_c.item(), 5))
print("compiled == eager", torch.allclose(loss_c, loss_e, atol=1e-4), torch.allclose(pred_c, pred_e, atol=1e-6),
      all(torch.allclose(after_c[k], v, atol=1e-6) for k, v in model.state_dict().items()))
