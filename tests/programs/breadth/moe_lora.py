# A sparse Mixture-of-Experts layer with top-k routing (as in the Mixtral /
# "MoE from scratch" write-ups) and LoRA wrapping of nn.Linear (microsoft/LoRA
# loralib style), trained together a few steps, eager and compiled.
import math
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)

class Expert(nn.Module):
    def __init__(self, n_embd):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(n_embd, 4 * n_embd), nn.ReLU(),
                                 nn.Linear(4 * n_embd, n_embd), nn.Dropout(0.0))
    def forward(self, x):
        return self.net(x)

class NoisyTopkRouter(nn.Module):
    def __init__(self, n_embed, num_experts, top_k):
        super(NoisyTopkRouter, self).__init__()
        self.top_k = top_k
        self.topkroute_linear = nn.Linear(n_embed, num_experts)
        self.noise_linear = nn.Linear(n_embed, num_experts)

    def forward(self, mh_output):
        logits = self.topkroute_linear(mh_output)
        noise_logits = self.noise_linear(mh_output)
        noise = torch.randn_like(logits) * F.softplus(noise_logits)
        noisy_logits = logits + noise
        top_k_logits, indices = noisy_logits.topk(self.top_k, dim=-1)
        zeros = torch.full_like(noisy_logits, float('-inf'))
        sparse_logits = zeros.scatter(-1, indices, top_k_logits)
        router_output = F.softmax(sparse_logits, dim=-1)
        return router_output, indices

class SparseMoE(nn.Module):
    def __init__(self, n_embed, num_experts, top_k):
        super(SparseMoE, self).__init__()
        self.router = NoisyTopkRouter(n_embed, num_experts, top_k)
        self.experts = nn.ModuleList([Expert(n_embed) for _ in range(num_experts)])
        self.top_k = top_k

    def forward(self, x):
        gating_output, indices = self.router(x)
        final_output = torch.zeros_like(x)
        flat_x = x.view(-1, x.size(-1))
        flat_gating_output = gating_output.view(-1, gating_output.size(-1))
        for i, expert in enumerate(self.experts):
            expert_mask = (indices == i).any(dim=-1)
            flat_mask = expert_mask.view(-1)
            if flat_mask.any():
                expert_input = flat_x[flat_mask]
                expert_output = expert(expert_input)
                gating_scores = flat_gating_output[flat_mask, i].unsqueeze(1)
                weighted_output = expert_output * gating_scores
                final_output[expert_mask] += weighted_output.squeeze(1)
        return final_output

# Mixtral-style dense-dispatch MoE (compiles: no data-dependent shapes)
class MoeLayer(nn.Module):
    def __init__(self, dim, num_experts, k):
        super().__init__()
        self.gate = nn.Linear(dim, num_experts, bias=False)
        self.experts = nn.ModuleList([Expert(dim) for _ in range(num_experts)])
        self.k = k
    def forward(self, x):
        logits = self.gate(x)
        weights, selected = torch.topk(logits, self.k)
        weights = F.softmax(weights, dim=-1, dtype=torch.float).to(x.dtype)
        out = torch.zeros_like(x)
        for i, expert in enumerate(self.experts):
            w = (weights * (selected == i)).sum(dim=-1, keepdim=True)
            out = out + w * expert(x)
        return out

class LoRALinear(nn.Linear):
    def __init__(self, in_features, out_features, r=4, lora_alpha=8, lora_dropout=0.0, **kwargs):
        nn.Linear.__init__(self, in_features, out_features, **kwargs)
        self.r = r
        self.lora_alpha = lora_alpha
        self.lora_dropout = nn.Dropout(p=lora_dropout) if lora_dropout > 0. else (lambda x: x)
        self.merged = False
        if r > 0:
            self.lora_A = nn.Parameter(self.weight.new_zeros((r, in_features)))
            self.lora_B = nn.Parameter(self.weight.new_zeros((out_features, r)))
            self.scaling = self.lora_alpha / self.r
            self.weight.requires_grad = False
        self.reset_parameters()

    def reset_parameters(self):
        nn.Linear.reset_parameters(self)
        if hasattr(self, 'lora_A'):
            nn.init.kaiming_uniform_(self.lora_A, a=math.sqrt(5))
            nn.init.zeros_(self.lora_B)

    def train(self, mode: bool = True):
        nn.Linear.train(self, mode)
        if mode:
            if self.merged:
                self.weight.data -= (self.lora_B @ self.lora_A) * self.scaling
                self.merged = False
        else:
            if not self.merged:
                self.weight.data += (self.lora_B @ self.lora_A) * self.scaling
                self.merged = True

    def forward(self, x: torch.Tensor):
        if self.r > 0 and not self.merged:
            result = F.linear(x, self.weight, bias=self.bias)
            result += (self.lora_dropout(x) @ self.lora_A.transpose(0, 1) @ self.lora_B.transpose(0, 1)) * self.scaling
            return result
        else:
            return F.linear(x, self.weight, bias=self.bias)

def mark_only_lora_as_trainable(model: nn.Module, bias: str = 'none') -> None:
    for n, p in model.named_parameters():
        if 'lora_' not in n:
            p.requires_grad = False
    if bias == 'lora_only':
        for m in model.modules():
            if isinstance(m, LoRALinear) and hasattr(m, 'bias') and m.bias is not None:
                m.bias.requires_grad = True

def lora_state_dict(model: nn.Module, bias: str = 'none'):
    my_state_dict = model.state_dict()
    return {k: my_state_dict[k] for k in my_state_dict if 'lora_' in k}

class Net(nn.Module):
    def __init__(self, moe):
        super().__init__()
        self.inp = LoRALinear(16, 32, r=4)
        self.moe = moe
        self.ln = nn.LayerNorm(32)
        self.out = LoRALinear(32, 5, r=4)
    def forward(self, x):
        h = self.inp(x)
        h = h + self.moe(self.ln(h))
        return self.out(h)

x = torch.randn(8, 6, 16)
y = torch.randint(0, 5, (8, 6))
for name, moe in (("sparse", SparseMoE(32, 4, 2)), ("dense", MoeLayer(32, 4, 2))):
    net = Net(moe)
    mark_only_lora_as_trainable(net.inp); mark_only_lora_as_trainable(net.out, bias='lora_only')
    trainable = [n for n, p in net.named_parameters() if p.requires_grad]
    print(name, len(trainable), sum(p.numel() for p in net.parameters() if p.requires_grad))
    opt = torch.optim.AdamW(filter(lambda p: p.requires_grad, net.parameters()), lr=1e-2)
    def step(x, y):
        logits = net(x)
        loss = F.cross_entropy(logits.view(-1, logits.size(-1)), y.view(-1))
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss
    run = torch.compile(step) if name == "dense" else step
    for i in range(4):
        print(name, i, f"{run(x, y).item():.4f}")
    print(net.inp.weight.grad is None, net.inp.lora_B.grad is not None)
    print(sorted(lora_state_dict(net).keys()))
    net.eval()
    with torch.no_grad():
        merged = net(x)
    net.train()
    with torch.no_grad():
        unmerged = net(x)
    if name == "dense":
        print("merge keeps outputs:", torch.allclose(merged, unmerged, atol=1e-5))
