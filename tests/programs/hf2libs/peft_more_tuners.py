"""peft's newer tuners on a user's small model (an embedding-bag MLP with a
LayerNorm), each built by get_peft_model, trained two Adam steps and run:
BOFT (its Python path: the CUDA kernel build fails and it falls back, as
on torch's CPU build), C3A (FFT circular convolution), FourierFT, HRA
(Householder reflections), MiSS, RandLoRA, SHiRA (a sparse COO delta from
int32 indices), VB-LoRA (top-k over a vector bank), LN tuning, trainable
tokens, LoRA with rank / alpha patterns and lora_bias, LoRA on a bare
parameter (target_parameters), DeLoRA, RoAd, WaveFT, GraLoRA, OSF, PVeRA,
TinyLoRA, UniLoRA, Lily and HiRA."""
import random

import peft
import torch
import torch.nn as nn
from peft import get_peft_model

random.seed(0)


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(30, 16)
        self.seq = nn.Sequential(nn.Linear(16, 16), nn.ReLU(), nn.Linear(16, 16), nn.ReLU())
        self.ln = nn.LayerNorm(16)
        self.head = nn.Linear(16, 3)

    def forward(self, ids):
        return self.head(self.ln(self.seq(self.emb(ids).mean(1))))


torch.manual_seed(0)
ids = torch.randint(0, 30, (6, 5))
y = torch.randint(0, 3, (6,))
T = ["seq.0", "seq.2"]
cfgs = {
    "boft": lambda: peft.BOFTConfig(boft_block_size=4, target_modules=T,
                                    boft_n_butterfly_factor=1),
    "c3a": lambda: peft.C3AConfig(block_size=4, target_modules=T, init_weights="gaussian"),
    "fourierft": lambda: peft.FourierFTConfig(n_frequency=20, target_modules=T,
                                              init_weights=False),
    "hra": lambda: peft.HRAConfig(r=4, target_modules=T, init_weights=False),
    "miss": lambda: peft.MissConfig(r=4, target_modules=T),
    "randlora": lambda: peft.RandLoraConfig(r=4, target_modules=T),
    "shira": lambda: peft.ShiraConfig(r=2, target_modules=T),
    "vblora": lambda: peft.VBLoRAConfig(r=2, target_modules=T, num_vectors=8, vector_length=4,
                                        topk=2, init_logits_std=0.5),
    "ln_tuning": lambda: peft.LNTuningConfig(target_modules=["ln"]),
    "trainable_tokens": lambda: peft.TrainableTokensConfig(target_modules=["emb"],
                                                           token_indices=[1, 3, 5]),
    "lora_pattern": lambda: peft.LoraConfig(r=4, target_modules=T, rank_pattern={"seq.2": 2},
                                            alpha_pattern={"seq.0": 16}, lora_bias=True,
                                            init_lora_weights=False),
    "lora_param": lambda: peft.LoraConfig(r=2, target_parameters=["seq.0.weight"],
                                          init_lora_weights=False),
    "delora": lambda: peft.DeloraConfig(r=4, target_modules=T),
    "road": lambda: peft.RoadConfig(target_modules=T, group_size=4),
    "waveft": lambda: peft.WaveFTConfig(target_modules=T, n_frequency=16),
    "gralora": lambda: peft.GraloraConfig(r=4, gralora_k=2, target_modules=T),
    "osf": lambda: peft.OSFConfig(target_modules=T),
    "pvera": lambda: peft.PveraConfig(r=4, target_modules=T),
    "tinylora": lambda: peft.TinyLoraConfig(target_modules=T),
    "unilora": lambda: peft.UniLoraConfig(target_modules=T),
    "lily": lambda: peft.LilyConfig(target_modules=T),
    "hira": lambda: peft.HiraConfig(r=4, target_modules=T),
}
for name, mk in cfgs.items():
    torch.manual_seed(1)
    m = get_peft_model(MLP(), mk())
    opt = torch.optim.Adam([p for p in m.parameters() if p.requires_grad], lr=1e-2)
    losses = []
    for step in range(2):
        loss = nn.functional.cross_entropy(m(ids), y)
        loss.backward()
        opt.step()
        opt.zero_grad()
        losses.append(f"{loss.item():.5f}")
    with torch.no_grad():
        out = m(ids)
    print(name, m.get_nb_trainable_parameters(), losses,
          " ".join(f"{v:.5f}" for v in out.flatten()[:4].tolist()))
