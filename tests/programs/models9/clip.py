# OpenAI CLIP (clip/model.py: the fp16-safe LayerNorm subclass, QuickGELU,
# ResidualAttentionBlock over nn.MultiheadAttention with an attention mask,
# Transformer, VisionTransformer with class_embedding / positional_embedding / ln_pre /
# ln_post / proj, CLIP with build_attention_mask (a causal mask made with
# fill_(float("-inf")).triu_(1)), initialize_parameters, encode_image, encode_text
# (the EOT token found by text.argmax(dim=-1)), logit_scale =
# nn.Parameter(torch.ones([]) * np.log(1 / 0.07)) and forward's logits_per_image /
# logits_per_text; convert_weights) with the contrastive training loss of the paper's
# pseudocode (symmetric cross entropy over the labels torch.arange(n)).  Changes for a
# CPU test: a small configuration (16x16 images, patch 4, width 32, 2 layers; context
# 8, vocab 50), synthetic images and token ids from numpy (the EOT token the largest
# id, as in CLIP's tokenizer), weights copied from numpy after initialize_parameters,
# 6 Adam steps.  Then the training step under torch.compile against the same step run
# eagerly.
import copy
from collections import OrderedDict
from typing import Tuple, Union

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn


class LayerNorm(nn.LayerNorm):
    """Subclass torch's LayerNorm to handle fp16."""

    def forward(self, x: torch.Tensor):
        orig_type = x.dtype
        ret = super().forward(x.type(torch.float32))
        return ret.type(orig_type)


class QuickGELU(nn.Module):
    def forward(self, x: torch.Tensor):
        return x * torch.sigmoid(1.702 * x)


class ResidualAttentionBlock(nn.Module):
    def __init__(self, d_model: int, n_head: int, attn_mask: torch.Tensor = None):
        super().__init__()

        self.attn = nn.MultiheadAttention(d_model, n_head)
        self.ln_1 = LayerNorm(d_model)
        self.mlp = nn.Sequential(OrderedDict([
            ("c_fc", nn.Linear(d_model, d_model * 4)),
            ("gelu", QuickGELU()),
            ("c_proj", nn.Linear(d_model * 4, d_model))
        ]))
        self.ln_2 = LayerNorm(d_model)
        self.attn_mask = attn_mask

    def attention(self, x: torch.Tensor):
        self.attn_mask = self.attn_mask.to(dtype=x.dtype, device=x.device) if self.attn_mask is not None else None
        return self.attn(x, x, x, need_weights=False, attn_mask=self.attn_mask)[0]

    def forward(self, x: torch.Tensor):
        x = x + self.attention(self.ln_1(x))
        x = x + self.mlp(self.ln_2(x))
        return x


class Transformer(nn.Module):
    def __init__(self, width: int, layers: int, heads: int, attn_mask: torch.Tensor = None):
        super().__init__()
        self.width = width
        self.layers = layers
        self.resblocks = nn.Sequential(*[ResidualAttentionBlock(width, heads, attn_mask) for _ in range(layers)])

    def forward(self, x: torch.Tensor):
        return self.resblocks(x)


class VisionTransformer(nn.Module):
    def __init__(self, input_resolution: int, patch_size: int, width: int, layers: int, heads: int, output_dim: int):
        super().__init__()
        self.input_resolution = input_resolution
        self.output_dim = output_dim
        self.conv1 = nn.Conv2d(in_channels=3, out_channels=width, kernel_size=patch_size, stride=patch_size, bias=False)

        scale = width ** -0.5
        self.class_embedding = nn.Parameter(scale * torch.randn(width))
        self.positional_embedding = nn.Parameter(scale * torch.randn((input_resolution // patch_size) ** 2 + 1, width))
        self.ln_pre = LayerNorm(width)

        self.transformer = Transformer(width, layers, heads)

        self.ln_post = LayerNorm(width)
        self.proj = nn.Parameter(scale * torch.randn(width, output_dim))

    def forward(self, x: torch.Tensor):
        x = self.conv1(x)  # shape = [*, width, grid, grid]
        x = x.reshape(x.shape[0], x.shape[1], -1)  # shape = [*, width, grid ** 2]
        x = x.permute(0, 2, 1)  # shape = [*, grid ** 2, width]
        x = torch.cat([self.class_embedding.to(x.dtype) + torch.zeros(x.shape[0], 1, x.shape[-1], dtype=x.dtype, device=x.device), x], dim=1)  # shape = [*, grid ** 2 + 1, width]
        x = x + self.positional_embedding.to(x.dtype)
        x = self.ln_pre(x)

        x = x.permute(1, 0, 2)  # NLD -> LND
        x = self.transformer(x)
        x = x.permute(1, 0, 2)  # LND -> NLD

        x = self.ln_post(x[:, 0, :])

        if self.proj is not None:
            x = x @ self.proj

        return x


class CLIP(nn.Module):
    def __init__(self,
                 embed_dim: int,
                 # vision
                 image_resolution: int,
                 vision_layers: Union[Tuple[int, int, int, int], int],
                 vision_width: int,
                 vision_patch_size: int,
                 # text
                 context_length: int,
                 vocab_size: int,
                 transformer_width: int,
                 transformer_heads: int,
                 transformer_layers: int
                 ):
        super().__init__()

        self.context_length = context_length

        vision_heads = vision_width // 64 if vision_width >= 64 else 4
        self.visual = VisionTransformer(
            input_resolution=image_resolution,
            patch_size=vision_patch_size,
            width=vision_width,
            layers=vision_layers,
            heads=vision_heads,
            output_dim=embed_dim
        )

        self.transformer = Transformer(
            width=transformer_width,
            layers=transformer_layers,
            heads=transformer_heads,
            attn_mask=self.build_attention_mask()
        )

        self.vocab_size = vocab_size
        self.token_embedding = nn.Embedding(vocab_size, transformer_width)
        self.positional_embedding = nn.Parameter(torch.empty(self.context_length, transformer_width))
        self.ln_final = LayerNorm(transformer_width)

        self.text_projection = nn.Parameter(torch.empty(transformer_width, embed_dim))
        self.logit_scale = nn.Parameter(torch.ones([]) * np.log(1 / 0.07))

        self.initialize_parameters()

    def initialize_parameters(self):
        nn.init.normal_(self.token_embedding.weight, std=0.02)
        nn.init.normal_(self.positional_embedding, std=0.01)

        proj_std = (self.transformer.width ** -0.5) * ((2 * self.transformer.layers) ** -0.5)
        attn_std = self.transformer.width ** -0.5
        fc_std = (2 * self.transformer.width) ** -0.5
        for block in self.transformer.resblocks:
            nn.init.normal_(block.attn.in_proj_weight, std=attn_std)
            nn.init.normal_(block.attn.out_proj.weight, std=proj_std)
            nn.init.normal_(block.mlp.c_fc.weight, std=fc_std)
            nn.init.normal_(block.mlp.c_proj.weight, std=proj_std)

        if self.text_projection is not None:
            nn.init.normal_(self.text_projection, std=self.transformer.width ** -0.5)

    def build_attention_mask(self):
        # lazily create causal attention mask, with full attention between the vision tokens
        # pytorch uses additive attention mask; fill with -inf
        mask = torch.empty(self.context_length, self.context_length)
        mask.fill_(float("-inf"))
        mask.triu_(1)  # zero out the lower diagonal
        return mask

    @property
    def dtype(self):
        return self.visual.conv1.weight.dtype

    def encode_image(self, image):
        return self.visual(image.type(self.dtype))

    def encode_text(self, text):
        x = self.token_embedding(text).type(self.dtype)  # [batch_size, n_ctx, d_model]

        x = x + self.positional_embedding.type(self.dtype)
        x = x.permute(1, 0, 2)  # NLD -> LND
        x = self.transformer(x)
        x = x.permute(1, 0, 2)  # LND -> NLD
        x = self.ln_final(x).type(self.dtype)

        # x.shape = [batch_size, n_ctx, transformer.width]
        # take features from the eot embedding (eot_token is the highest number in each sequence)
        x = x[torch.arange(x.shape[0]), text.argmax(dim=-1)] @ self.text_projection

        return x

    def forward(self, image, text):
        image_features = self.encode_image(image)
        text_features = self.encode_text(text)

        # normalized features
        image_features = image_features / image_features.norm(dim=1, keepdim=True)
        text_features = text_features / text_features.norm(dim=1, keepdim=True)

        # cosine similarity as logits
        logit_scale = self.logit_scale.exp()
        logits_per_image = logit_scale * image_features @ text_features.t()
        logits_per_text = logits_per_image.t()

        # shape = [global_batch_size, global_batch_size]
        return logits_per_image, logits_per_text


def convert_weights(model: nn.Module):
    """Convert applicable model parameters to fp16"""

    def _convert_weights_to_fp16(l):
        if isinstance(l, (nn.Conv1d, nn.Conv2d, nn.Linear)):
            l.weight.data = l.weight.data.half()
            if l.bias is not None:
                l.bias.data = l.bias.data.half()

        if isinstance(l, nn.MultiheadAttention):
            for attr in [*[f"{s}_proj_weight" for s in ["in", "q", "k", "v"]], "in_proj_bias", "bias_k", "bias_v"]:
                tensor = getattr(l, attr)
                if tensor is not None:
                    tensor.data = tensor.data.half()

        for name in ["text_projection", "proj"]:
            if hasattr(l, name):
                attr = getattr(l, name)
                if attr is not None:
                    attr.data = attr.data.half()

    model.apply(_convert_weights_to_fp16)


# ---- a small CLIP and synthetic (image, caption) pairs ----
torch.manual_seed(0)
model = CLIP(embed_dim=16, image_resolution=16, vision_layers=2, vision_width=32, vision_patch_size=4,
             context_length=8, vocab_size=50, transformer_width=32, transformer_heads=4,
             transformer_layers=2)
print("logit_scale", model.logit_scale, model.logit_scale.exp())
print("attn_mask", model.transformer.resblocks[0].attn_mask)
r = np.random.default_rng(0)
with torch.no_grad():
    for name, p in model.named_parameters():
        if name == "logit_scale":
            continue
        std = 0.02 if p.dim() < 2 else p.shape[-1] ** -0.5
        if name.startswith("visual.ln") or ".ln_" in name or name.startswith("ln_"):
            p.copy_(torch.from_numpy((1.0 * name.endswith("weight") + 0.05 * r.standard_normal(tuple(p.shape))).astype(np.float32)))
        else:
            p.copy_(torch.from_numpy((std * r.standard_normal(tuple(p.shape))).astype(np.float32)))
print("parameters", sum(p.numel() for p in model.parameters()))

n = 6
images = torch.from_numpy(r.standard_normal((n, 3, 16, 16)).astype(np.float32))
lengths = [3, 5, 8, 4, 6, 2]
text = torch.zeros(n, 8, dtype=torch.long)
for i, L in enumerate(lengths):
    toks = r.integers(1, 48, L - 1)
    text[i, :L - 1] = torch.from_numpy(toks)
    text[i, L - 1] = 49                  # the EOT token, the largest id
print("eot positions", text.argmax(dim=-1))

with torch.no_grad():
    image_features = model.encode_image(images)
    text_features = model.encode_text(text)
    logits_per_image, logits_per_text = model(images, text)
    probs = logits_per_image.softmax(dim=-1).cpu().numpy()
print("image_features", image_features.shape, image_features[0, :4])
print("text_features", text_features.shape, text_features[0, :4])
print("logits_per_image", logits_per_image)
print("Label probs:", np.round(probs[:2], 4))

# the contrastive loss of the paper's pseudocode
optimizer = torch.optim.Adam(model.parameters(), lr=5e-4, betas=(0.9, 0.98), eps=1e-6, weight_decay=0.2)
loss_img = nn.CrossEntropyLoss()
loss_txt = nn.CrossEntropyLoss()


def train_step(images, text):
    optimizer.zero_grad()
    logits_per_image, logits_per_text = model(images, text)
    ground_truth = torch.arange(len(images), dtype=torch.long, device=images.device)
    total_loss = (loss_img(logits_per_image, ground_truth) + loss_txt(logits_per_text, ground_truth)) / 2
    total_loss.backward()
    optimizer.step()
    # clamp the logit scale as the paper does (at 100)
    with torch.no_grad():
        model.logit_scale.clamp_(0, np.log(100))
    return total_loss


for step in range(6):
    loss = train_step(images, text)
    print("step", step, "loss", round(loss.item(), 5), "logit_scale", round(model.logit_scale.item(), 5))

with torch.no_grad():
    logits_per_image, _ = model(images, text)
print("after training: argmax per image", logits_per_image.argmax(dim=-1).tolist())

# fp16 weights (convert_weights) and the fp16-safe LayerNorm
half = copy.deepcopy(model)
convert_weights(half)
print("dtypes", half.visual.conv1.weight.dtype, half.visual.proj.dtype, half.transformer.resblocks[0].attn.in_proj_weight.dtype,
      half.ln_final.weight.dtype, half.dtype)
x = torch.from_numpy(r.standard_normal((2, 5, 32)).astype(np.float16))
print("fp16 LayerNorm", half.ln_final(x).dtype, half.ln_final(x)[0, 0, :4])

# the training step under torch.compile against the same step run eagerly
state, opt_state = copy.deepcopy(model.state_dict()), copy.deepcopy(optimizer.state_dict())
eager = [train_step(images, text).item() for _ in range(3)]
after = copy.deepcopy(model.state_dict())
model.load_state_dict(state)
optimizer.load_state_dict(opt_state)
cstep = torch.compile(train_step)
compiled = [cstep(images, text).item() for _ in range(3)]
print("compiled losses", [f"{v:.5f}" for v in compiled])
print("compiled == eager:", all(abs(a - b) <= 1e-4 * max(1.0, abs(b)) for a, b in zip(compiled, eager)),
      all(torch.allclose(model.state_dict()[k], after[k], rtol=1e-4, atol=1e-5) for k in after))
