"""Architectures from timm's model zoo, built by timm.create_model at their
smallest variants (config kwargs shrink depth / width / image size; no
pretrained weights): a training-mode forward, cross entropy, backward and
one SGD step, then an eval-mode forward; seeded so the default
initialization (timm's trunc_normal_ and friends) draws what torch draws."""
import torch
import torch.nn.functional as F

import timm

MODELS = [
    ("test_resnet", {}, 32),
    ("mobilenetv3_small_050", {}, 32),
    ("regnetx_002", {}, 32),
    ("convnext_atto", {}, 32),
    ("densenet121", dict(growth_rate=8, block_config=(1, 2, 2, 1)), 32),
    ("vit_tiny_patch16_224", dict(img_size=32, patch_size=8, depth=2), 32),
    ("deit_tiny_distilled_patch16_224", dict(img_size=32, patch_size=8, depth=2), 32),
    ("swin_tiny_patch4_window7_224", dict(img_size=32, window_size=4, embed_dim=24, depths=(1, 1, 1, 1),
                                          num_heads=(1, 1, 1, 1)), 32),
    ("levit_128s", dict(img_size=32, embed_dim=(32, 48, 64), key_dim=8, num_heads=(2, 2, 2), depth=(1, 1, 1)), 32),
    ("test_coatnet", dict(img_size=32), 32),
    ("test_maxvit", dict(img_size=32), 32),
    ("test_mambaout", {}, 32),
    ("test_nfnet", {}, 32),
    ("test_byobnet", {}, 32),
    ("test_vit_relpos", dict(img_size=32), 32),
]


def r(v, n=5):
    return round(float(v), n)


for name, kw, size in MODELS:
    torch.manual_seed(0)
    m = timm.create_model(name, pretrained=False, num_classes=10, **kw)
    x = torch.randn(4, 3, size, size)
    y = torch.randint(0, 10, (4,))
    opt = torch.optim.SGD(m.parameters(), lr=0.01, momentum=0.9)
    out = m(x)
    loss = F.cross_entropy(out, y)
    loss.backward()
    gnorm = torch.nn.utils.clip_grad_norm_(m.parameters(), 1e9)
    opt.step()
    m.eval()
    with torch.no_grad():
        ev = m(x)
    print(name, sum(p.numel() for p in m.parameters()), [r(v) for v in out[0, :4].tolist()],
          r(loss.item()), r(gnorm.item(), 4), [r(v) for v in ev[0, :4].tolist()])
