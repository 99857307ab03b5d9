"""Hugging Face transformers' own model code on tiny configurations (no
downloads): BertForSequenceClassification, GPT2LMHeadModel and
LlamaForCausalLM (rotary embeddings, RMSNorm, grouped-query attention)
trained a few AdamW steps with get_linear_schedule_with_warmup, and
T5ForConditionalGeneration; greedy generate() on GPT-2, Llama and T5;
train / eval modes (dropout on, then off).  Then the Auto classes
(from_config), eager attention with output_attentions / hidden states on a
left-padded batch, greedy and seeded top-k sampling generate, gradient
checkpointing, resize_token_embeddings (mean-resizing draws new rows from a
multivariate normal), DistilBERT, RoBERTa token classification, BERT masked
LM, ViT on images, Qwen2 and Mistral (sliding window).  Last, a
BertTokenizer from an in-memory vocabulary with return_tensors="pt",
DataCollatorWithPadding / DataCollatorForSeq2Seq, and
DataCollatorForLanguageModeling's seeded random masking feeding a
BertForMaskedLM step."""
import torch
from transformers import (AutoConfig, AutoModelForCausalLM, AutoModelForMaskedLM, BertConfig,
                          BertForMaskedLM, BertForSequenceClassification, BertTokenizer,
                          DataCollatorForLanguageModeling, DataCollatorForSeq2Seq,
                          DataCollatorWithPadding, DistilBertConfig,
                          DistilBertForSequenceClassification, GPT2Config, GPT2LMHeadModel,
                          LlamaConfig, LlamaForCausalLM, MistralConfig, Qwen2Config, RobertaConfig,
                          RobertaForTokenClassification, T5Config, T5ForConditionalGeneration,
                          ViTConfig, ViTForImageClassification, get_linear_schedule_with_warmup)


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

torch.manual_seed(4)
cfg = AutoConfig.for_model("gpt2", vocab_size=40, n_positions=32, n_embd=16, n_layer=2, n_head=2)
m = AutoModelForCausalLM.from_config(cfg, attn_implementation="eager").eval()
ids = torch.tensor([[0, 0, 5, 6, 7], [3, 4, 5, 6, 7]])
mask = torch.tensor([[0, 0, 1, 1, 1], [1, 1, 1, 1, 1]])
out = m(ids, attention_mask=mask, output_attentions=True, output_hidden_states=True)
print("attentions", len(out.attentions), tuple(out.attentions[0].shape), out.attentions[0][0, 0, -1],
      len(out.hidden_states))
print("greedy", m.generate(ids, attention_mask=mask, max_new_tokens=4, do_sample=False,
                           pad_token_id=0))
torch.manual_seed(3)
print("sampled", m.generate(ids, attention_mask=mask, max_new_tokens=4, do_sample=True, top_k=5,
                            temperature=0.8, pad_token_id=0))
m.train()
m.gradient_checkpointing_enable()
loss = m(ids, labels=ids).loss
loss.backward()
print("checkpointed", loss.item(), m.transformer.h[0].attn.c_attn.weight.grad.norm().item())
m.resize_token_embeddings(44)
print("resized", tuple(m.get_input_embeddings().weight.shape), tuple(m.lm_head.weight.shape),
      m.get_input_embeddings().weight[42:].std().item())

torch.manual_seed(5)
x = torch.randint(0, 30, (2, 6))
db = DistilBertForSequenceClassification(DistilBertConfig(
    vocab_size=30, dim=16, n_layers=2, n_heads=2, hidden_dim=32, max_position_embeddings=16,
    num_labels=2))
o = db(x, labels=torch.tensor([1, 0]))
o.loss.backward()
print("distilbert", o.loss.item(), o.logits)
rb = RobertaForTokenClassification(RobertaConfig(
    vocab_size=30, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
    intermediate_size=32, max_position_embeddings=20, num_labels=3))
o = rb(x, labels=torch.tensor([[0, 1, 2, 0, 1, 2]] * 2))
o.loss.backward()
print("roberta", o.loss.item())
mlm = AutoModelForMaskedLM.from_config(AutoConfig.for_model(
    "bert", vocab_size=30, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
    intermediate_size=32))
print("masked lm", mlm(x, labels=x).loss.item())
vit = ViTForImageClassification(ViTConfig(
    image_size=16, patch_size=8, num_channels=3, hidden_size=16, num_hidden_layers=1,
    num_attention_heads=2, intermediate_size=32, num_labels=4))
o = vit(pixel_values=torch.randn(2, 3, 16, 16), labels=torch.tensor([1, 3]))
o.loss.backward()
print("vit", o.loss.item(), o.logits[0])
qwen = AutoModelForCausalLM.from_config(Qwen2Config(
    vocab_size=40, hidden_size=16, intermediate_size=32, num_hidden_layers=2,
    num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=32))
o = qwen(x, labels=x)
o.loss.backward()
print("qwen2", o.loss.item())
mistral = AutoModelForCausalLM.from_config(MistralConfig(
    vocab_size=40, hidden_size=16, intermediate_size=32, num_hidden_layers=2,
    num_attention_heads=4, num_key_value_heads=1, sliding_window=4,
    max_position_embeddings=32)).eval()
print("mistral", mistral.generate(x[:1], max_new_tokens=4, do_sample=False, pad_token_id=0))

words = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "cat", "sat", "on", "mat", "a", "dog",
         "ran", "##s"]
tok = BertTokenizer(vocab={w: i for i, w in enumerate(words)})
enc = tok(["the cats sat on the mat", "a dog ran"], padding=True, return_tensors="pt")
print("tokens", enc["input_ids"], enc["attention_mask"], tok.decode(enc["input_ids"][1]))
feats = [tok("the cat sat on the mat a dog"), tok("a dog ran on the mat")]
print("padded", DataCollatorWithPadding(tok)(feats)["input_ids"])
print("seq2seq", DataCollatorForSeq2Seq(tok)([{"input_ids": [5, 6], "labels": [7]},
                                              {"input_ids": [5], "labels": [8, 9, 10]}]))
torch.manual_seed(6)
batch = DataCollatorForLanguageModeling(tok, mlm_probability=0.3)(feats)
print("masked", batch["input_ids"], batch["labels"])
bert_mlm = BertForMaskedLM(BertConfig(vocab_size=len(words), hidden_size=16, num_hidden_layers=1,
                                      num_attention_heads=2, intermediate_size=32))
train("bert-mlm", bert_mlm, 2, **batch)
