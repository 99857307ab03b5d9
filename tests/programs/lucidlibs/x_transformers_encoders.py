"""lucidrains/x-transformers (the pip package, unmodified): BERT-style
encoders (TransformerWrapper(Encoder)) with a padding mask under many of
the library's attention / feedforward / normalization / positional flags,
one training step each, seeded as a user seeds them."""
import random

import torch
import torch.nn.functional as F
from x_transformers import Encoder, TransformerWrapper


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
