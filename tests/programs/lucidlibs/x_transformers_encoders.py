"""lucidrains/x-transformers (the pip package, unmodified): BERT-style
encoders (TransformerWrapper(Encoder)) with a padding mask under many of
the library's attention / feedforward / normalization / positional flags,
one training step each; then its other wrappers, forward and backward
(BeliefStateWrapper, MultiInputTransformerWrapper, NeoMLP, PrefixDecoder,
a probabilistic ContinuousAutoregressiveWrapper and its sampling, the
XVal wrappers, CrossAttender).  Seeded as a user seeds them."""
import random

import torch
import torch.nn.functional as F
from x_transformers import (BeliefStateWrapper, ContinuousAutoregressiveWrapper,
                            ContinuousTransformerWrapper, CrossAttender, Decoder, Encoder,
                            MultiInputTransformerWrapper, NeoMLP, PrefixDecoder,
                            TransformerWrapper, XValAutoregressiveWrapper, XValTransformerWrapper)


def run(name, **flags):
    torch.manual_seed(0)
    random.seed(0)          # layer_dropout draws from Python's random
    model = TransformerWrapper(num_tokens=20, max_seq_len=16, emb_dropout=0.1,
                               attn_layers=Encoder(dim=16, depth=2, heads=2, attn_dim_head=8,
                                                   **flags))
    x = torch.randint(0, 20, (2, 10))
    mask = torch.ones(2, 10, dtype=torch.bool)
    mask[1, 7:] = False
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    logits = model(x, mask=mask)
    loss = F.cross_entropy(logits.transpose(1, 2), x)
    opt.zero_grad()
    loss.backward()
    opt.step()
    grad = sum(p.grad.abs().sum() for p in model.parameters() if p.grad is not None)
    print(f"{name:10s} loss {loss.item():.6f} grad l1 {grad.item():.4f}")
    model.eval()
    with torch.no_grad():
        print(" " * 10, model(x, mask=mask)[1, 0, :4])
        embeds = model(x, mask=mask, return_embeddings=True)
        print(" " * 10, "embeddings", embeds.shape, embeds[0, 0, :3])


run("plain")
run("rotary", rotary_pos_emb=True, ff_glu=True, use_rmsnorm=True, attn_flash=False)
run("resattn", residual_attn=True, pre_norm=False, attn_gate_values=True)
run("qknorm", attn_qk_norm=True, attn_qk_norm_dim_scale=True, ff_swish=True, ff_glu=True,
    use_simple_rmsnorm=True)
run("alibi", alibi_pos_bias=True, alibi_num_heads=1, sandwich_norm=True)
run("relpos", rel_pos_bias=True, use_scalenorm=True, macaron=True, shift_tokens=1)
run("dynpos", dynamic_pos_bias=True, gate_residual=True, attn_sparse_topk=4)
run("dropouts", attn_dropout=0.1, ff_dropout=0.1, layer_dropout=0.2, attn_on_attn=True,
    attn_one_kv_head=True)


def decoder(**kwargs):
    return Decoder(dim=16, depth=1, heads=2, **kwargs)


def wrapper(name, build):
    torch.manual_seed(0)
    random.seed(0)
    print(name, build())


def belief_state():
    model = BeliefStateWrapper(
        forward_decoder=TransformerWrapper(num_tokens=20, max_seq_len=16, attn_layers=decoder()),
        backward_decoder=TransformerWrapper(num_tokens=20, max_seq_len=16, attn_layers=decoder()))
    loss = model(torch.randint(0, 20, (2, 8)))
    loss.backward()
    return f"{loss.item():.6f}"


def multi_input():
    model = MultiInputTransformerWrapper(num_tokens=dict(note=20, pitch=8), max_seq_len=16,
                                         attn_layers=decoder())
    out = model(dict(note=torch.randint(0, 20, (2, 6)), pitch=torch.randint(0, 8, (2, 6))))
    total = sum(v.sum() for v in out.values())
    total.backward()
    return {k: tuple(v.shape) for k, v in out.items()}, f"{total.item():.5f}"


def neo_mlp():
    out = NeoMLP(dim_in=5, dim_hidden=8, dim_out=3, dim_model=16, depth=1)(torch.randn(4, 5))
    out.sum().backward()
    return out[0]


def prefix_lm():
    model = TransformerWrapper(num_tokens=20, max_seq_len=16,
                               attn_layers=PrefixDecoder(dim=16, depth=1, heads=2))
    out = model(torch.randint(0, 20, (2, 10)), prefix_attn_len=3)
    out.sum().backward()
    return out[0, -1, :4]


def probabilistic():
    model = ContinuousAutoregressiveWrapper(ContinuousTransformerWrapper(
        dim_in=4, dim_out=4, max_seq_len=16, probabilistic=True, attn_layers=decoder()))
    loss = model(torch.randn(2, 8, 4))
    loss.backward()
    model.eval()
    return f"{loss.item():.6f}", model.generate(torch.randn(2, 2, 4), 2, cache_kv=True)[0]


def xval():
    model = XValAutoregressiveWrapper(XValTransformerWrapper(
        num_tokens=20, numerical_token_id=3, max_seq_len=16, attn_layers=decoder()))
    loss = model(torch.randint(0, 20, (2, 10)), torch.randn(2, 10))
    loss.backward()
    return f"{loss.item():.6f}"


def cross_attender():
    out = CrossAttender(dim=16, depth=1, heads=2)(torch.randn(2, 4, 16),
                                                  context=torch.randn(2, 6, 16))
    out.sum().backward()
    return out[0, 0, :4]


for name, build in [("belief state", belief_state), ("multi input", multi_input),
                    ("neo mlp", neo_mlp), ("prefix lm", prefix_lm),
                    ("probabilistic", probabilistic), ("xval", xval),
                    ("cross attender", cross_attender)]:
    wrapper(name, build)
