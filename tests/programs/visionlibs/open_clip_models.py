"""open_clip (open_clip_torch) as its README uses it, on tiny model configs
registered with ``add_model_config`` (no pretrained weights, no network):
create_model_and_transforms + the eval preprocess on synthetic PIL images,
get_tokenizer, encode_image / encode_text, logit_scale, a zero-shot
classification (build_zero_shot_classifier with its templates), a ViT and
a ModifiedResNet (attention-pool) CLIP trained two steps with ClipLoss, the
train-time augmentations, a state_dict save / load round trip, SigLIP's
sigmoid loss (SigLipLoss, learnable logit bias) for a step, and a CoCa
(attentional pooler, multimodal text decoder) trained a step with CoCaLoss.
(CoCa.generate needs transformers' BeamSearchScorer, which transformers 5
removed, so captioning is left out.)"""
import json
import os
import random

import numpy as np
import torch
from PIL import Image

import open_clip
from open_clip.loss import SigLipLoss

torch.manual_seed(0)
random.seed(0)
rng = np.random.default_rng(0)

TEXT = {"context_length": 77, "vocab_size": 49408, "width": 32, "heads": 2, "layers": 2}
CONFIGS = {
    "tiny-vit": {"embed_dim": 24,
                 "vision_cfg": {"image_size": 32, "layers": 2, "width": 32,
                                "head_width": 16, "patch_size": 8},
                 "text_cfg": TEXT},
    "tiny-rn": {"embed_dim": 24,
                "vision_cfg": {"image_size": 32, "layers": [1, 1, 1, 1], "width": 8,
                               "head_width": 16, "patch_size": None},
                "text_cfg": TEXT},
    "tiny-coca": {"embed_dim": 32,
                  "vision_cfg": {"image_size": 32, "layers": 1, "width": 32, "head_width": 16,
                                 "patch_size": 8, "attentional_pool": True,
                                 "attn_pooler_heads": 2, "attn_pooler_queries": 9,
                                 "output_tokens": True},
                  "text_cfg": {**TEXT, "context_length": 76, "layers": 1, "embed_cls": True,
                               "output_tokens": True},
                  "multimodal_cfg": {**TEXT, "context_length": 76, "layers": 1,
                                     "attn_pooler_heads": 2},
                  "custom_text": True},
}
os.makedirs("cfgs", exist_ok=True)
for name, cfg in CONFIGS.items():
    with open(f"cfgs/{name}.json", "w") as f:
        json.dump(cfg, f)
open_clip.add_model_config("cfgs")
print("registered", [m for m in open_clip.list_models() if m.startswith("tiny")])


def fmt(t, n=6):
    return " ".join(f"{v:.5f}" for v in t.detach().flatten()[:n].tolist())


images = [Image.fromarray(rng.integers(0, 256, (40 + 4 * i, 48, 3), dtype=np.uint8))
          for i in range(4)]
classnames = ["cat", "dog", "diagram", "car"]
tokenizer = open_clip.get_tokenizer("tiny-vit")
text = tokenizer(["a diagram", "a dog", "a cat", "a photo of a car"])
print("tokens", tuple(text.shape), text.dtype, text[0, :6].tolist(), text[3, :8].tolist())

for name in ["tiny-vit", "tiny-rn"]:
    torch.manual_seed(1)
    model, preprocess_train, preprocess = open_clip.create_model_and_transforms(name, pretrained=None)
    model.eval()
    print(name, type(model).__name__, type(model.visual).__name__,
          sum(p.numel() for p in model.parameters()))
    image = torch.stack([preprocess(im) for im in images])
    print(" pixels", tuple(image.shape), fmt(image.mean(dim=(1, 2, 3))))
    with torch.no_grad():
        image_features = model.encode_image(image)
        text_features = model.encode_text(text)
        image_features /= image_features.norm(dim=-1, keepdim=True)
        text_features /= text_features.norm(dim=-1, keepdim=True)
        text_probs = (100.0 * image_features @ text_features.T).softmax(dim=-1)
    print(" image_features", fmt(image_features))
    print(" text_features", fmt(text_features))
    print(" label probs", fmt(text_probs, 8), "scale", f"{model.logit_scale.exp().item():.5f}")
    # zero-shot classification as the README's evaluation does
    with torch.no_grad():
        classifier = open_clip.build_zero_shot_classifier(
            model, tokenizer=tokenizer, classnames=classnames,
            templates=open_clip.SIMPLE_IMAGENET_TEMPLATES[:3], num_classes_per_batch=2,
            device="cpu", use_tqdm=False)
        logits = 100.0 * image_features @ classifier
    print(" zero-shot", tuple(classifier.shape), logits.argmax(-1).tolist(), fmt(logits))
    out = model(image, text)
    print(" forward keys", sorted(out) if isinstance(out, dict) else len(out))

    # contrastive training: ClipLoss on (image, caption) pairs, train-time transforms
    model.train()
    loss_fn = open_clip.ClipLoss()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.1)
    random.seed(0)
    torch.manual_seed(2)
    batch = torch.stack([preprocess_train(im) for im in images])
    print(" train pixels", fmt(batch.mean(dim=(1, 2, 3))))
    for step in range(2):
        img_f, txt_f, scale = model(batch, text)
        loss = loss_fn(img_f, txt_f, scale)
        opt.zero_grad()
        loss.backward()
        opt.step()
        with torch.no_grad():
            model.logit_scale.clamp_(0, np.log(100))
        print(f" step {step} loss {loss.item():.5f} grad {model.logit_scale.grad.item():.5f}")

    if name != "tiny-vit":
        continue
    torch.save(model.state_dict(), f"{name}.pt")
    model2 = open_clip.create_model(name, pretrained=f"{name}.pt")
    model2.eval()
    model.eval()
    with torch.no_grad():
        same = torch.equal(model2.encode_text(text), model.encode_text(text))
    print(" reloaded equal", same)

# CoCa: a contrastive + captioning loss step, then its zero-shot probabilities
torch.manual_seed(3)
coca, _, preprocess = open_clip.create_model_and_transforms("tiny-coca", pretrained=None)
print("tiny-coca", type(coca).__name__, sum(p.numel() for p in coca.parameters()))
image = torch.stack([preprocess(im) for im in images])
coca.train()
loss_fn = open_clip.CoCaLoss(caption_loss_weight=2.0, clip_loss_weight=1.0)
opt = torch.optim.AdamW(coca.parameters(), lr=1e-3)
coca_text = tokenizer(["a diagram", "a dog", "a cat", "a photo of a car"], context_length=76)
print(" coca tokens", tuple(coca_text.shape))
out = coca(image, coca_text)
losses = loss_fn(**out, output_dict=True)
total = sum(losses.values())
opt.zero_grad()
total.backward()
opt.step()
print(" coca losses", " ".join(f"{k}={v.item():.5f}" for k, v in sorted(losses.items())))
coca.eval()
with torch.no_grad():
    img_f = coca.encode_image(image, normalize=True)
    txt_f = coca.encode_text(coca_text, normalize=True)
    probs = (100.0 * img_f @ txt_f.T).softmax(dim=-1)
print(" coca features", fmt(img_f), "|", fmt(txt_f), "| probs", fmt(probs, 8))

# SigLIP's sigmoid loss on a CLIP with a learnable logit bias
torch.manual_seed(4)
siglip = open_clip.create_model("tiny-vit", pretrained=None, init_logit_scale=np.log(10),
                                init_logit_bias=-10, output_dict=True)
siglip.train()
opt = torch.optim.SGD(siglip.parameters(), lr=0.1, momentum=0.9)
loss_fn = SigLipLoss()
pixels = torch.stack([preprocess(im) for im in images])
for step in range(1):
    out = siglip(pixels, text)
    loss = loss_fn(out["image_features"], out["text_features"], out["logit_scale"],
                   out["logit_bias"])
    opt.zero_grad()
    loss.backward()
    opt.step()
    print(f" siglip step {step} loss {loss.item():.5f} bias {siglip.logit_bias.item():.5f}")
