"""lucidrains/x-transformers (the pip package, unmodified), more of what
its README offers: decoders with flash attention (SDPA), cross-attention
to a masked context, adaptive layer norm conditioning, hyper-connections,
value residuals, laser / sigmoid / CoPE / talking-heads / sparse top-k
attention, memory tokens, polar and interpolated rotary positions, scaled
sinusoidal embeddings, dynamic tanh and layer scale, weight-tied layers;
ViTransformerWrapper, a NonAutoregressiveWrapper (masked-token training
and its iterative generation) and an XLAutoregressiveWrapper (segment
recurrence with memories).  Forward and backward each, seeded as a user
seeds them."""
import random

import torch
from x_transformers import (Decoder, Encoder, NonAutoregressiveWrapper, TransformerWrapper,
                            ViTransformerWrapper, XLAutoregressiveWrapper)

FEATURES = {
    "flash": dict(attn_flash=True),
    "cross": dict(cross_attend=True),
    "adaln": dict(use_adaptive_layernorm=True, dim_condition=4),
    "hyper": dict(num_residual_streams=4),
    "relu2": dict(ff_relu_squared=True, attn_gate_value_heads=True),
    "softclamp": dict(attn_softclamp_logits=True, attn_logit_softclamp_value=10.),
    "value-res": dict(add_value_residual=True),
    "zero-kv": dict(attn_add_zero_kv=True, attn_num_mem_kv=2),
    "laser": dict(attn_laser=True),
    "integrate": dict(integrate_layers=True, reinject_input=True),
    "kv-heads": dict(ff_swish=True, ff_no_bias=True, attn_kv_heads=1, attn_qk_norm=True,
                     attn_qk_norm_groups=2),
    "cope": dict(attn_use_cope=True),
    "sigmoid": dict(attn_sigmoid=True),
    "polar": dict(polar_pos_emb=True),
    "interp-rope": dict(rotary_emb_dim=4, rotary_pos_emb=True, rotary_interpolation_factor=2.),
    "gumbel": dict(attn_hard=True),
    "talking": dict(attn_pre_talking_heads=True, attn_post_talking_heads=True),
    "sinks": dict(attn_gate_values=True, attn_head_learned_sink=True),
    "topk-st": dict(attn_sparse_topk_straight_through=True, attn_sparse_topk=3),
    "scale-res": dict(scale_residual=True, scale_residual_constant=0.5, sandwich_coef=2),
    "custom": dict(custom_layers=("a", "f", "a", "a", "f")),
    "tied": dict(weight_tie_layers=True),
    "dyt": dict(use_dynamic_tanh=True, use_layerscale=True),
}


def extra_inputs(name):
    if name == "cross":
        mask = torch.ones(2, 5, dtype=torch.bool)
        mask[1, 3:] = False
        return dict(context=torch.randn(2, 5, 16), context_mask=mask)
    if name == "adaln":
        return dict(condition=torch.randn(2, 4))
    return {}


for name, flags in FEATURES.items():
    torch.manual_seed(0)
    random.seed(0)
    wrapper = dict(num_memory_tokens=2) if name == "sinks" else {}
    if name == "polar":
        wrapper = dict(use_abs_pos_emb=False)
    if name == "interp-rope":
        wrapper = dict(scaled_sinu_pos_emb=True, post_emb_norm=True, emb_frac_gradient=0.5)
    model = TransformerWrapper(num_tokens=20, max_seq_len=16, **wrapper,
                               attn_layers=Decoder(dim=16, depth=2, heads=2, attn_dim_head=8,
                                                   **flags))
    tokens = torch.randint(0, 20, (2, 10))
    logits = model(tokens, **extra_inputs(name))
    logits.sum().backward()
    grad = sum(p.grad.abs().sum() for p in model.parameters() if p.grad is not None)
    print(f"{name:12s} logits {logits.sum().item():.4f} grad l1 {grad.item():.3f}",
          logits[1, -1, :3])

torch.manual_seed(0)
vit = ViTransformerWrapper(image_size=16, patch_size=4, num_classes=5,
                           attn_layers=Encoder(dim=16, depth=1, heads=2))
logits = vit(torch.randn(2, 3, 16, 16))
logits.sum().backward()
print("vit", logits)

torch.manual_seed(0)
nar = NonAutoregressiveWrapper(TransformerWrapper(num_tokens=21, logits_dim=21, max_seq_len=16,
                                                  attn_layers=Encoder(dim=16, depth=1, heads=2)),
                               mask_id=20, steps=4)
out = nar(torch.randint(0, 20, (2, 16)))
out.loss.backward()
print("non-autoregressive loss", f"{out.loss.item():.6f}")
nar.eval()
print("non-autoregressive generate", nar.generate(batch_size=1, start_temperature=0.))

torch.manual_seed(0)
xl = XLAutoregressiveWrapper(TransformerWrapper(num_tokens=20, max_seq_len=8, max_mem_len=8,
                                                attn_layers=Decoder(dim=16, depth=1, heads=2,
                                                                    rel_pos_bias=True)))
loss = xl(torch.randint(0, 20, (2, 17)))
loss.backward()
print("transformer-xl loss", f"{loss.item():.6f}")
