"""timm's model API around a network: list_models / is_model / model
entrypoints, pretrained_cfg / default_cfg, forward_features +
forward_head(pre_logits=True), reset_classifier (new class count, no head,
pooling change), features_only=True feature maps (out_indices, feature_info
channels and reductions), forward_intermediates, get_classifier, and
timm.data's resolve_data_config; timm.layers pieces (trunc_normal_ and the
other initializers, attention / pooling / norm / conv / activation layers,
DropPath), set_grad_checkpointing, dispatch_clip_grad (norm and AGC),
get_state_dict through torch.save / torch.load."""
import io

import torch

import timm
from timm.data import resolve_data_config
from timm.layers import (Attention, BatchNormAct2d, BlurPool2d, DropPath, EffectiveSEModule,
                         GroupNorm1, LayerNorm2d, Mlp, PatchEmbed, SelectAdaptivePool2d,
                         SelectiveKernel, SplitAttn, SqueezeExcite, StdConv2d, create_act_layer,
                         create_attn, create_conv2d, get_act_layer, lecun_normal_,
                         resample_abs_pos_embed, trunc_normal_, variance_scaling_)
from timm.utils import dispatch_clip_grad, get_state_dict, unwrap_model

print(len(timm.list_models("resnet1*")) > 3, timm.list_models("convnext_at*"),
      timm.is_model("vit_tiny_patch16_224"), timm.list_models("test_vit*")[:2])
print(sorted(timm.list_modules())[:3])


def r(v, n=5):
    return round(float(v), n)


torch.manual_seed(0)
x = torch.randn(2, 3, 64, 64)

for name, kw in [("test_resnet", {}), ("test_convnext", {}), ("test_vit", dict(img_size=64)),
                 ("test_efficientnet", {})]:
    torch.manual_seed(0)
    m = timm.create_model(name, num_classes=7, **kw)
    m.eval()
    cfg = m.pretrained_cfg
    print(name, cfg["input_size"], cfg.get("num_classes"), m.default_cfg["architecture"],
          m.num_classes, m.num_features, type(m.get_classifier()).__name__)
    data_cfg = resolve_data_config({}, model=m)
    print(" data", data_cfg["input_size"], data_cfg["interpolation"], data_cfg["crop_pct"],
          [r(v, 4) for v in data_cfg["mean"]])
    with torch.no_grad():
        f = m.forward_features(x)
        pre = m.forward_head(f, pre_logits=True)
        y = m.forward_head(f)
        print(" features", tuple(f.shape), r(f.abs().sum().item(), 3), tuple(pre.shape),
              [r(v) for v in y[0].tolist()])
        m.reset_classifier(3)
        print(" reset 3", tuple(m(x).shape), r(m(x).sum().item(), 4))
        m.reset_classifier(0)
        print(" reset 0", tuple(m(x).shape), r(m(x).abs().sum().item(), 3))

for name, kw in [("test_resnet", {}), ("test_efficientnet", {}), ("test_convnext", {})]:
    torch.manual_seed(0)
    m = timm.create_model(name, features_only=True, out_indices=(1, 2, 3), **kw)
    print(name, type(m).__name__, m.feature_info.channels(), m.feature_info.reduction(),
          m.feature_info.module_name())
    feats = m(x)
    loss = sum(t.float().pow(2).mean() for t in feats)
    loss.backward()
    g = sum(p.grad.abs().sum() for p in m.parameters() if p.grad is not None)
    print(" maps", [tuple(t.shape) for t in feats], [r(t.abs().mean().item()) for t in feats],
          r(g.item(), 3))

torch.manual_seed(0)
m = timm.create_model("test_vit", img_size=64, num_classes=5).eval()
with torch.no_grad():
    final, inter = m.forward_intermediates(x, indices=2)
print("intermediates", tuple(final.shape), [tuple(t.shape) for t in inter],
      [r(t.abs().mean().item()) for t in inter])

# --- timm.layers -----------------------------------------------------------------------
torch.manual_seed(0)
w = torch.empty(64, 32)
trunc_normal_(w, std=.02)
print("trunc_normal_", r(w.sum().item(), 6), r(w.std().item(), 6))
lecun_normal_(w)
print("lecun_normal_", r(w.sum().item(), 6))
variance_scaling_(w, scale=2.0, mode="fan_out", distribution="uniform")
print("variance_scaling_", r(w.sum().item(), 6))

x = torch.randn(2, 8, 6, 6)
layers = [LayerNorm2d(8), SelectAdaptivePool2d(pool_type="catavgmax", flatten=True), BlurPool2d(8),
          SqueezeExcite(8), StdConv2d(8, 4, 3), create_conv2d(8, 4, 3, padding="same", stride=2),
          create_conv2d(8, 8, 3, depthwise=True, padding=""), GroupNorm1(8), EffectiveSEModule(8),
          SplitAttn(8, 8), SelectiveKernel(8, 8), BatchNormAct2d(8, act_layer="silu"),
          create_attn("eca", 8), create_act_layer("hard_swish"), create_act_layer("gelu_tanh"),
          get_act_layer("prelu")(), create_act_layer("mish")]
for mod in layers:
    y = mod(x)
    print(type(mod).__name__, tuple(y.shape), r(y.abs().sum().item(), 4))

t = torch.randn(2, 10, 16)
dp = DropPath(0.5)
dp.train()
torch.manual_seed(3)
print("DropPath", r(dp(t).sum().item(), 4))
print("Mlp", r(Mlp(16, 32)(t).sum().item(), 4),
      "Attention", r(Attention(16, num_heads=2, qkv_bias=True)(t).sum().item(), 4))
pe = PatchEmbed(img_size=16, patch_size=4, in_chans=3, embed_dim=16)
print("PatchEmbed", tuple(pe(torch.randn(1, 3, 16, 16)).shape))
pos = resample_abs_pos_embed(torch.randn(1, 17, 16), (6, 6), (4, 4), num_prefix_tokens=1)
print("resample_abs_pos_embed", tuple(pos.shape), r(pos.sum().item(), 4))

# --- stochastic depth, gradient checkpointing, clipping, checkpoints -------------------
m = timm.create_model("test_vit", img_size=32, num_classes=4, drop_path_rate=0.2, drop_rate=0.1)
torch.manual_seed(5)
print("drop_path_rate", r(m(torch.randn(2, 3, 32, 32)).sum().item(), 5))
m.set_grad_checkpointing(True)
torch.manual_seed(5)
y = m(torch.randn(2, 3, 32, 32))
y.sum().backward()


def grad_sum(model):
    return r(sum(p.grad.abs().sum() for p in model.parameters()).item(), 4)


print("grad checkpointing", r(y.sum().item(), 5), grad_sum(m))
dispatch_clip_grad(m.parameters(), 0.01, mode="agc")
print("agc", grad_sum(m))
dispatch_clip_grad(m.parameters(), 1.0, mode="norm")
print("clip norm", grad_sum(m))
buf = io.BytesIO()
torch.save(get_state_dict(m, unwrap_model), buf)
buf.seek(0)
m2 = timm.create_model("test_vit", img_size=32, num_classes=4)
print(m2.load_state_dict(torch.load(buf)))
torch.manual_seed(1)
mf = timm.create_model("test_vit", img_size=32, features_only=True, out_indices=(0, 1))
print(type(mf).__name__, [tuple(f.shape) for f in mf(torch.randn(1, 3, 32, 32))])

# features through torch.fx (torchvision's create_feature_extractor)
for name, kw in [("test_resnet", {}), ("test_byobnet", {}), ("test_vit", dict(img_size=64))]:
    torch.manual_seed(0)
    mf = timm.create_model(name, features_only=True, feature_cls="fx", out_indices=(1, 2, 3), **kw)
    feats = mf(torch.randn(2, 3, 64, 64))
    print(type(mf).__name__, mf.feature_info.channels(), [tuple(f.shape) for f in feats],
          [r(f.abs().mean().item()) for f in feats])
