"""lucidrains/x-transformers (the pip package, unmodified): a decoder-only
language model (TransformerWrapper(Decoder) in an AutoregressiveWrapper)
trained a few steps and sampled greedily (with and without its key/value
cache) and with top-k / top-p / top-a / min-p filtering, an end-of-sequence
token, variable-length prompts, contrastive decoding against an amateur
model and beam search, after training with token masking and the attention
z-loss; an XTransformer encoder-decoder
with a source mask and tied embeddings, trained and decoding; a continuous
autoregressive model.  Tiny configurations, seeded as a user seeds them."""
import random

import torch
from x_transformers import (AutoregressiveWrapper, ContinuousAutoregressiveWrapper,
                            ContinuousTransformerWrapper, Decoder, TransformerWrapper,
                            XTransformer)

torch.manual_seed(0)
random.seed(0)


def train(name, model, *args, steps=3, **kwargs):
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    for step in range(steps):
        loss = model(*args, **kwargs)
        opt.zero_grad()
        loss.backward()
        opt.step()
        print(f"{name} step {step} loss {loss.item():.6f}")


# decoder-only LM: rotary (xpos), memory tokens, memory key/values, head scale
lm = TransformerWrapper(num_tokens=20, max_seq_len=16, num_memory_tokens=2,
                        attn_layers=Decoder(dim=16, depth=2, heads=2, attn_dim_head=8,
                                            rotary_pos_emb=True, rotary_xpos=True,
                                            attn_head_scale=True, attn_num_mem_kv=2,
                                            ff_post_act_ln=True, attn_dropout=0.1,
                                            ff_dropout=0.1))
ar = AutoregressiveWrapper(lm)
seqs = torch.randint(0, 20, (2, 12))
train("lm", ar, seqs)
ar.eval()
prompt = seqs[:, :3]
print("greedy", ar.generate(prompt, 6, temperature=0.))
print("greedy no cache", ar.generate(prompt, 6, temperature=0., cache_kv=False))
torch.manual_seed(1)
print("top-k", ar.generate(prompt, 6, filter_logits_fn="top_k", filter_kwargs=dict(k=3)))
torch.manual_seed(2)
print("top-p", ar.generate(prompt, 6, filter_logits_fn="top_p", filter_kwargs=dict(thres=0.9)))
logits, cache = lm(prompt, return_intermediates=True)
print("logits", logits[0, -1, :6])

# sampling options, on a model trained with token masking and the z-loss
torch.manual_seed(0)
masked = AutoregressiveWrapper(TransformerWrapper(num_tokens=20, max_seq_len=16,
                                                  attn_layers=Decoder(dim=16, depth=2, heads=2,
                                                                      rotary_pos_emb=True)),
                               mask_prob=0.15, add_attn_z_loss=True)
amateur = TransformerWrapper(num_tokens=20, max_seq_len=16,
                             attn_layers=Decoder(dim=16, depth=1, heads=2))
train("masked lm", masked, seqs, steps=1)
masked.eval()
for name, kwargs in [("top_a", dict(min_p_pow=2.0, min_p_ratio=0.02)), ("min_p", dict(min_p=0.1)),
                     ("top_k", dict(frac_num_tokens=0.2)), ("top_p", dict(thres=0.5))]:
    torch.manual_seed(3)
    print(name, masked.generate(prompt, 5, filter_logits_fn=name, filter_kwargs=kwargs,
                                temperature=0.7).tolist())
torch.manual_seed(4)
print("eos", masked.generate(prompt, 8, eos_token=5, temperature=1.).tolist())
print("list prompts", masked.generate([seqs[0, :2], seqs[1, :4]], 4, temperature=0.).tolist())
print("contrastive", masked.generate(prompt, 4, temperature=0., amateur_model=amateur).tolist())
torch.manual_seed(7)
print("beam search", masked.beam_search(prompt, 4, beams=3).tolist())

# encoder-decoder
xt = XTransformer(dim=16, enc_num_tokens=20, enc_depth=1, enc_heads=2, enc_max_seq_len=12,
                  dec_num_tokens=20, dec_depth=1, dec_heads=2, dec_max_seq_len=12,
                  tie_token_emb=True, enc_ff_glu=True, dec_rotary_pos_emb=True)
src = torch.randint(0, 20, (2, 8))
src_mask = torch.ones_like(src).bool()
src_mask[0, 6:] = False
tgt = torch.randint(0, 20, (2, 9))
train("xtransformer", xt, src, tgt, mask=src_mask, steps=2)
xt.eval()
print("translate", xt.generate(src, tgt[:, :1], 5, mask=src_mask, temperature=0.))

# continuous values
cont = ContinuousTransformerWrapper(dim_in=6, dim_out=6, max_seq_len=16,
                                    attn_layers=Decoder(dim=16, depth=1, heads=2))
car = ContinuousAutoregressiveWrapper(cont)
series = torch.randn(2, 10, 6)
train("continuous", car, series, steps=2)
car.eval()
print("continuous generate", car.generate(series[:, :2], 3)[0])
