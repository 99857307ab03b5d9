"""Hugging Face transformers' own model code on tiny configurations (no
downloads): BertForSequenceClassification, GPT2LMHeadModel and
LlamaForCausalLM (rotary embeddings, RMSNorm, grouped-query attention)
trained a few AdamW steps with get_linear_schedule_with_warmup, and
T5ForConditionalGeneration; greedy generate() on GPT-2, Llama and T5;
train / eval modes (dropout on, then off)."""
import torch
from transformers import (BertConfig, BertForSequenceClassification, GPT2Config, GPT2LMHeadModel,
                          LlamaConfig, LlamaForCausalLM, T5Config, T5ForConditionalGeneration,
                          get_linear_schedule_with_warmup)


def train(name, model, steps, **batch):
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.01)
    sched = get_linear_schedule_with_warmup(opt, num_warmup_steps=1, num_training_steps=steps + 1)
    model.train()
    for step in range(steps):
        out = model(**batch)
        out.loss.backward()
        norm = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        opt.zero_grad()
        print(name, step, f"loss {out.loss.item():.5f} grad-norm {norm.item():.5f}",
              f"lr {sched.get_last_lr()[0]:.6f}", tuple(out.logits.shape))


torch.manual_seed(0)
bert = BertForSequenceClassification(BertConfig(
    vocab_size=50, hidden_size=16, num_hidden_layers=2, num_attention_heads=2,
    intermediate_size=32, max_position_embeddings=32, num_labels=3))
print("bert parameters", bert.num_parameters(), bert.training)
ids = torch.randint(0, 50, (2, 7))
mask = torch.ones(2, 7, dtype=torch.long)
mask[1, 5:] = 0
train("bert", bert, 3, input_ids=ids, attention_mask=mask, labels=torch.tensor([0, 2]))
bert.eval()
with torch.no_grad():
    logits = bert(input_ids=ids, attention_mask=mask).logits
print("bert eval logits", logits, logits.argmax(-1))

torch.manual_seed(1)
gpt2 = GPT2LMHeadModel(GPT2Config(vocab_size=40, n_positions=32, n_embd=16, n_layer=2, n_head=2,
                                  bos_token_id=0, eos_token_id=39))
ids = torch.randint(0, 40, (2, 8))
train("gpt2", gpt2, 2, input_ids=ids, labels=ids)
gpt2.eval()
print("gpt2 generate", gpt2.generate(ids[:1, :4], max_new_tokens=5, do_sample=False,
                                      pad_token_id=0))
print("gpt2 tied", gpt2.lm_head.weight is gpt2.transformer.wte.weight)

torch.manual_seed(2)
llama = LlamaForCausalLM(LlamaConfig(
    vocab_size=48, hidden_size=16, intermediate_size=32, num_hidden_layers=2,
    num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
    bos_token_id=1, eos_token_id=2))
ids = torch.randint(3, 48, (2, 6))
train("llama", llama, 3, input_ids=ids, labels=ids)
llama.eval()
with torch.no_grad():
    print("llama logits", llama(ids).logits[0, -1, :6])
print("llama generate", llama.generate(ids[:1], max_new_tokens=5, do_sample=False, pad_token_id=0))

torch.manual_seed(3)
t5 = T5ForConditionalGeneration(T5Config(
    vocab_size=32, d_model=16, d_kv=8, d_ff=32, num_layers=2, num_decoder_layers=2, num_heads=2,
    relative_attention_num_buckets=8, relative_attention_max_distance=16,
    decoder_start_token_id=0, pad_token_id=0, eos_token_id=1))
src, tgt = torch.randint(2, 32, (2, 7)), torch.randint(2, 32, (2, 5))
train("t5", t5, 2, input_ids=src, labels=tgt)
t5.eval()
with torch.no_grad():
    print("t5 logits", t5(input_ids=src, decoder_input_ids=tgt[:, :3]).logits[1, -1, :6])
print("t5 generate", t5.generate(src, max_new_tokens=5, do_sample=False))
