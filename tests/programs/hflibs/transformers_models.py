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
BertForMaskedLM step; and lower precision: a Llama under
torch.autocast("cpu", dtype=torch.bfloat16) (loss, float32 gradients), a
bfloat16 Llama and a float16 GPT-2.  Then one training loss (and
backward) each of BART, CLIP (contrastive loss), wav2vec2 with CTC (conv
feature extractor, group norm, weight-normed positional conv), DeBERTa-v2
(relative attention), Whisper, ResNet, GPT-NeoX (partial rotary), Phi,
Gemma-2 (soft-capping, sliding window) and Mixtral (mixture of experts,
router auxiliary loss)."""
import torch
from transformers import (AutoConfig, AutoModelForCausalLM, AutoModelForMaskedLM, BartConfig,
                          BartForConditionalGeneration, CLIPConfig, CLIPModel, DebertaV2Config,
                          DebertaV2ForSequenceClassification, Gemma2Config, Gemma2ForCausalLM,
                          GPTNeoXConfig, GPTNeoXForCausalLM, MixtralConfig, MixtralForCausalLM,
                          PhiConfig, PhiForCausalLM, ResNetConfig, ResNetForImageClassification,
                          Wav2Vec2Config, Wav2Vec2ForCTC, WhisperConfig,
                          WhisperForConditionalGeneration, BertConfig,
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

torch.manual_seed(7)
lcfg = LlamaConfig(vocab_size=48, hidden_size=16, intermediate_size=32, num_hidden_layers=2,
                   num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64)
ids = torch.randint(0, 48, (2, 6))
amp_llama = LlamaForCausalLM(lcfg)
with torch.autocast("cpu", dtype=torch.bfloat16):
    out = amp_llama(ids, labels=ids)
out.loss.backward()
grad = amp_llama.model.layers[0].self_attn.q_proj.weight.grad
print("autocast", out.logits.dtype, out.loss.item(), grad.dtype, grad.norm().item())
bf16_llama = LlamaForCausalLM(lcfg).to(torch.bfloat16)
print("bfloat16 llama", bf16_llama(ids).logits[0, -1, :4])
half_gpt2 = GPT2LMHeadModel(GPT2Config(vocab_size=48, n_positions=16, n_embd=16, n_layer=1,
                                       n_head=2)).half().eval()
print("float16 gpt2", half_gpt2.dtype, half_gpt2(ids).logits[0, -1, :3])


def loss_of(name, model, **batch):
    out = model(**batch)
    out.loss.backward()
    grads = sum(p.grad.double().norm() ** 2 for p in model.parameters() if p.grad is not None)
    print(name, f"loss {out.loss.item():.5f} grad-norm {grads.sqrt().item():.5f}")
    return out


torch.manual_seed(8)
ids = torch.randint(3, 30, (2, 7))
loss_of("bart", BartForConditionalGeneration(BartConfig(
    vocab_size=32, d_model=16, encoder_layers=1, decoder_layers=1, encoder_attention_heads=2,
    decoder_attention_heads=2, encoder_ffn_dim=32, decoder_ffn_dim=32, max_position_embeddings=32)),
    input_ids=ids, labels=ids)
clip = loss_of("clip", CLIPModel(CLIPConfig(
    text_config=dict(vocab_size=32, hidden_size=16, intermediate_size=32, num_hidden_layers=1,
                     num_attention_heads=2, max_position_embeddings=16),
    vision_config=dict(hidden_size=16, intermediate_size=32, num_hidden_layers=1,
                       num_attention_heads=2, image_size=16, patch_size=8), projection_dim=8)),
    input_ids=ids, pixel_values=torch.randn(2, 3, 16, 16), return_loss=True)
print("clip logits", clip.logits_per_image)
loss_of("wav2vec2", Wav2Vec2ForCTC(Wav2Vec2Config(
    vocab_size=12, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
    intermediate_size=32, conv_dim=(8, 8), conv_stride=(5, 2), conv_kernel=(10, 3),
    num_conv_pos_embeddings=16, num_conv_pos_embedding_groups=2, mask_time_prob=0.0)),
    input_values=torch.randn(2, 400), labels=torch.randint(1, 12, (2, 5)))
loss_of("deberta-v2", DebertaV2ForSequenceClassification(DebertaV2Config(
    vocab_size=32, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
    intermediate_size=32, max_position_embeddings=32, relative_attention=True,
    pos_att_type=["p2c", "c2p"], num_labels=2, position_buckets=8)),
    input_ids=ids, labels=torch.tensor([0, 1]))
loss_of("whisper", WhisperForConditionalGeneration(WhisperConfig(
    vocab_size=40, num_mel_bins=8, d_model=16, encoder_layers=1, decoder_layers=1,
    encoder_attention_heads=2, decoder_attention_heads=2, encoder_ffn_dim=32, decoder_ffn_dim=32,
    max_source_positions=10, max_target_positions=16, decoder_start_token_id=1, pad_token_id=0)),
    input_features=torch.randn(2, 8, 20), labels=ids)
loss_of("resnet", ResNetForImageClassification(ResNetConfig(
    num_channels=3, embedding_size=8, hidden_sizes=[8, 16], depths=[1, 1], num_labels=3)),
    pixel_values=torch.randn(2, 3, 32, 32), labels=torch.tensor([0, 2]))
loss_of("gpt-neox", GPTNeoXForCausalLM(GPTNeoXConfig(
    vocab_size=32, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
    intermediate_size=32, max_position_embeddings=32, rotary_pct=0.5)), input_ids=ids, labels=ids)
loss_of("phi", PhiForCausalLM(PhiConfig(
    vocab_size=32, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
    intermediate_size=32, max_position_embeddings=32)), input_ids=ids, labels=ids)
loss_of("gemma-2", Gemma2ForCausalLM(Gemma2Config(
    vocab_size=32, hidden_size=16, num_hidden_layers=2, num_attention_heads=2,
    num_key_value_heads=1, head_dim=8, intermediate_size=32, max_position_embeddings=32,
    sliding_window=4)), input_ids=ids, labels=ids)
moe = loss_of("mixtral", MixtralForCausalLM(MixtralConfig(
    vocab_size=32, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
    num_key_value_heads=1, intermediate_size=32, max_position_embeddings=32, num_local_experts=4,
    num_experts_per_tok=2)), input_ids=ids, labels=ids, output_router_logits=True)
print("mixtral aux loss", moe.aux_loss.item())
