"""lucidrains/vector-quantize-pytorch (the pip package, unmodified): a tiny
VQ-VAE trained a few steps (VectorQuantize with EMA codebook updates and a
commitment loss, straight-through gradients), then the library's other
quantizers: cosine-similarity multi-head VQ with k-means init and dead-code
expiry, ResidualVQ with a learnable codebook and its in-place optimizer,
GroupedResidualVQ, FSQ (codes and indices back to codes) and LFQ (entropy
auxiliary loss); then, one forward and backward each, the rotation trick
(VectorQuantize, SimVQ, ResidualSimVQ), orthogonal regularization, affine
and stochastically sampled codes, image feature maps, masks, residual and
grouped FSQ / LFQ, FSP, spherical LFQ.  Seeded as a user seeds them."""
import random

import torch
import torch.nn as nn
import torch.nn.functional as F
from vector_quantize_pytorch import (FSP, FSQ, LFQ, GroupedResidualLFQ, GroupedResidualVQ,
                                     ResidualFSQ, ResidualSimVQ, ResidualVQ, SimVQ,
                                     VectorQuantize)

torch.manual_seed(0)
random.seed(0)

data = torch.randn(4, 12, 8)


class VQVAE(nn.Module):
    def __init__(self):
        super().__init__()
        self.enc = nn.Sequential(nn.Linear(8, 16), nn.GELU(), nn.Linear(16, 16))
        self.vq = VectorQuantize(dim=16, codebook_size=32, decay=0.8, commitment_weight=0.25)
        self.dec = nn.Sequential(nn.Linear(16, 16), nn.GELU(), nn.Linear(16, 8))

    def forward(self, x):
        quantized, indices, commit = self.vq(self.enc(x))
        return self.dec(quantized), indices, commit


model = VQVAE()
opt = torch.optim.Adam(model.parameters(), lr=3e-3)
for step in range(4):
    recon, indices, commit = model(data)
    loss = F.mse_loss(recon, data) + commit.sum()
    opt.zero_grad()
    loss.backward()
    opt.step()
    print(f"vqvae step {step} loss {loss.item():.6f} commit {commit.item():.6f}")
    print("  codes", indices[0, :8].tolist(), "used", indices.unique().numel())
print("codebook", model.vq.codebook[0, :5])
print("encoder grad", model.enc[0].weight.grad[0, :4])

x = torch.randn(2, 12, 16)
vq = VectorQuantize(dim=16, codebook_size=32, codebook_dim=8, heads=2,
                    separate_codebook_per_head=True, use_cosine_sim=True, kmeans_init=True,
                    kmeans_iters=3, threshold_ema_dead_code=2)
quantized, indices, loss = vq(x)
print("cosine vq", indices[0, :4].tolist(), f"{loss.item():.6f} {quantized.sum().item():.5f}")

rvq = ResidualVQ(dim=16, num_quantizers=3, codebook_size=16, learnable_codebook=True,
                 ema_update=False,
                 in_place_codebook_optimizer=lambda p: torch.optim.Adam(p, lr=1e-2))
for step in range(2):
    quantized, indices, losses = rvq(x)
    print(f"rvq step {step}", indices[0, :3].tolist(), losses.squeeze().tolist(),
          f"{quantized.sum().item():.5f}")
print("rvq codes back", rvq.get_output_from_indices(indices)[0, 0, :4])

grvq = GroupedResidualVQ(dim=16, groups=2, num_quantizers=2, codebook_size=16)
quantized, indices, losses = grvq(x)
print("grouped rvq", indices.shape, indices[:, 0, 0].tolist(), f"{quantized.sum().item():.5f}")

fsq = FSQ(levels=[8, 5, 5, 3], dim=16)
quantized, indices = fsq(x)
print("fsq", indices[0, :6].tolist(), f"{quantized.sum().item():.5f}")
print("fsq codes", fsq.indices_to_codes(indices)[0, 0, :6])

lfq = LFQ(codebook_size=64, dim=16, entropy_loss_weight=0.1, diversity_gamma=1.)
quantized, indices, aux = lfq(x)
aux.backward()
print("lfq", indices[0, :6].tolist(), f"{aux.item():.6f} {quantized.sum().item():.5f}")

QUANTIZERS = {
    "residual fsq": lambda: ResidualFSQ(dim=16, levels=[8, 5, 5], num_quantizers=2),
    "grouped rlfq": lambda: GroupedResidualLFQ(dim=16, codebook_size=32, num_quantizers=2,
                                               groups=2),
    "simvq": lambda: SimVQ(dim=16, codebook_size=32, rotation_trick=True),
    "residual simvq": lambda: ResidualSimVQ(dim=16, num_quantizers=2, codebook_size=32,
                                            rotation_trick=True),
    "rotation vq": lambda: VectorQuantize(dim=16, codebook_size=32, rotation_trick=True,
                                          orthogonal_reg_weight=0.1, orthogonal_reg_max_codes=16),
    "affine vq": lambda: VectorQuantize(dim=16, codebook_size=32, learnable_codebook=True,
                                        ema_update=False, sync_update_v=0.2, affine_param=True,
                                        stochastic_sample_codes=True, sample_codebook_temp=0.1),
    "fsp": lambda: FSP(levels=[8, 5, 5], dim=16),
    "spherical lfq": lambda: LFQ(dim=16, codebook_size=16, num_codebooks=2, spherical=True),
}
for name, build in QUANTIZERS.items():
    torch.manual_seed(0)
    random.seed(0)
    quantizer = build()
    inputs = torch.randn(2, 12, 16, requires_grad=True)
    quantized, indices, *rest = quantizer(inputs)
    total = quantized.sum() + sum(t.sum() for t in rest if torch.is_tensor(t) and t.requires_grad)
    total.backward()
    print(f"{name:14s} {quantized.sum().item():.5f}", indices.flatten()[:6].tolist(),
          f"input grad l1 {inputs.grad.abs().sum().item():.4f}")

torch.manual_seed(0)
image_vq = VectorQuantize(dim=16, codebook_size=32, accept_image_fmap=True)
fmap = torch.randn(2, 16, 4, 4)
quantized, indices, loss = image_vq(fmap)
print("image fmap vq", tuple(quantized.shape), indices[0, 0].tolist(), f"{loss.item():.6f}")
lengths_mask = torch.arange(12)[None] < torch.tensor([[12], [7]])
quantized, indices, loss = VectorQuantize(dim=16, codebook_size=32)(x, mask=lengths_mask)
print("masked vq", indices[1].tolist(), f"{loss.item():.6f}")
