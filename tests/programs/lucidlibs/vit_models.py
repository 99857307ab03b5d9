"""lucidrains/vit-pytorch (the pip package, unmodified): ViT, SimpleViT and
CaiT classifiers, MAE pretraining of a SimpleViT and DINO self-distillation
of a ViT (its torchvision augmentations included), tiny configurations,
seeded as a user seeds them: forward, loss, backward, optimizer steps."""
import random

import torch
import torch.nn.functional as F
from vit_pytorch import MAE, SimpleViT, ViT
from vit_pytorch.cait import CaiT
from vit_pytorch.dino import Dino

torch.manual_seed(0)
random.seed(0)          # CaiT's layer dropout and DINO's RandomApply use Python's random

images = torch.randn(4, 3, 16, 16)
labels = torch.tensor([0, 1, 2, 4])


def train(name, model, steps=2, lr=1e-3):
    opt = torch.optim.AdamW(model.parameters(), lr=lr)
    for step in range(steps):
        logits = model(images)
        loss = F.cross_entropy(logits, labels)
        opt.zero_grad()
        loss.backward()
        opt.step()
        print(f"{name} step {step} loss {loss.item():.6f}")
    grads = sum(p.grad.abs().sum() for p in model.parameters() if p.grad is not None)
    print(f"{name} grad l1 {grads.item():.5f}")
    model.eval()
    with torch.no_grad():
        print(name, "eval logits", model(images[:2]))
    model.train()


vit = ViT(image_size=16, patch_size=4, num_classes=5, dim=16, depth=2, heads=2, dim_head=8,
          mlp_dim=32, dropout=0.1, emb_dropout=0.1)
train("vit", vit)
vit_mean = ViT(image_size=16, patch_size=8, num_classes=5, dim=16, depth=1, heads=2, dim_head=8,
               mlp_dim=32, pool="mean", channels=3)
train("vit-mean-pool", vit_mean, steps=1)

simple = SimpleViT(image_size=16, patch_size=4, num_classes=5, dim=16, depth=2, heads=2,
                   dim_head=8, mlp_dim=32)
train("simple-vit", simple)

cait = CaiT(image_size=16, patch_size=4, num_classes=5, dim=16, depth=2, cls_depth=1, heads=2,
            dim_head=8, mlp_dim=32, dropout=0.1, emb_dropout=0.1, layer_dropout=0.05)
train("cait", cait)

# masked autoencoder pretraining of a SimpleViT encoder
encoder = SimpleViT(image_size=16, patch_size=4, num_classes=5, dim=16, depth=2, heads=2,
                    dim_head=8, mlp_dim=32)
mae = MAE(encoder=encoder, masking_ratio=0.5, decoder_dim=8, decoder_depth=1, decoder_heads=2,
          decoder_dim_head=4)
opt = torch.optim.AdamW(mae.parameters(), lr=1e-3)
for step in range(2):
    loss = mae(images)
    opt.zero_grad()
    loss.backward()
    opt.step()
    print(f"mae step {step} loss {loss.item():.6f}")
print("mae decoder pos emb", mae.decoder_pos_emb.weight[0])

# DINO: student / EMA teacher, centering, augmentations (torchvision's)
student = ViT(image_size=16, patch_size=4, num_classes=5, dim=16, depth=1, heads=2, dim_head=8,
              mlp_dim=32)
dino = Dino(student, image_size=16, hidden_layer="to_latent", projection_hidden_size=16,
            projection_layers=2, num_classes_K=32, local_upper_crop_scale=0.4,
            global_lower_crop_scale=0.5, moving_average_decay=0.9, center_moving_average_decay=0.9)
opt = torch.optim.Adam(dino.parameters(), lr=1e-3)
unlabeled = torch.rand(2, 3, 16, 16)
for step in range(2):
    loss = dino(unlabeled)
    opt.zero_grad()
    loss.backward()
    opt.step()
    dino.update_moving_average()
    print(f"dino step {step} loss {loss.item():.6f}")
print("dino teacher centers", dino.teacher_centers[0, :6])
print("dino student logits", student(images[:1]))
