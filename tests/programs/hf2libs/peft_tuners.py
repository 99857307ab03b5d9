"""peft's other tuners and adapter management on tiny transformers models
(no downloads): LoRA on a BERT classifier (modules_to_save, bias="lora_only",
DoRA) and on GPT-2's Conv1D layers (fan_in_fan_out), several adapters on one
model (add_adapter, set_adapter, disable_adapter, add_weighted_adapter,
delete_adapter), IA3, LoHa, LoKr, AdaLoRA's rank allocation, OFT, VeRA,
prompt tuning, prefix tuning and p-tuning, each trained a few steps; greedy
and top-k generate through LoRA, prefix and prompt tuning."""
import random

import torch
from peft import (AdaLoraConfig, IA3Config, LoHaConfig, LoKrConfig, LoraConfig, OFTConfig,
                  PrefixTuningConfig, PromptEncoderConfig, PromptTuningConfig, TaskType,
                  VeraConfig, get_peft_model)
from transformers import (BertConfig, BertForSequenceClassification, GPT2Config,
                          GPT2LMHeadModel, LlamaConfig, LlamaForCausalLM)

random.seed(0)


def fmt(t):
    return " ".join(f"{v:.5f}" for v in t.detach().flatten().tolist())


def train(name, model, steps, lr=1e-2, **batch):
    opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=lr)
    model.train()
    for step in range(steps):
        out = model(**batch)
        out.loss.backward()
        opt.step()
        opt.zero_grad()
        print(name, step, f"loss {out.loss.item():.5f}")
    model.eval()


def bert():
    torch.manual_seed(0)
    return BertForSequenceClassification(BertConfig(
        vocab_size=50, hidden_size=16, num_hidden_layers=2, num_attention_heads=2,
        intermediate_size=32, max_position_embeddings=32, num_labels=3))


def gpt2():
    torch.manual_seed(1)
    return GPT2LMHeadModel(GPT2Config(vocab_size=40, n_positions=32, n_embd=16, n_layer=2,
                                      n_head=2))


def llama():
    torch.manual_seed(2)
    return LlamaForCausalLM(LlamaConfig(
        vocab_size=64, hidden_size=16, intermediate_size=32, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=32))


torch.manual_seed(10)
bids = torch.randint(0, 50, (4, 8))
bmask = torch.ones(4, 8, dtype=torch.long)
bmask[2, 6:] = 0
labels = torch.tensor([0, 2, 1, 2])
gids = torch.randint(0, 40, (2, 9))
lids = torch.randint(0, 64, (2, 10))

# --- LoRA on a sequence classifier: the classifier head trained in full ---
model = get_peft_model(bert(), LoraConfig(task_type=TaskType.SEQ_CLS, r=4, lora_alpha=16,
                                          target_modules=["query", "value"], lora_dropout=0.0,
                                          bias="lora_only"))
model.print_trainable_parameters()
print("modules_to_save", sorted(model.modules_to_save))
train("bert-lora", model, 3, input_ids=bids, attention_mask=bmask, labels=labels)
with torch.no_grad():
    print("bert-lora logits", fmt(model(input_ids=bids, attention_mask=bmask).logits[0]))

model = get_peft_model(bert(), LoraConfig(task_type=TaskType.SEQ_CLS, r=2, use_dora=True,
                                          target_modules=["query", "key", "dense"]))
model.print_trainable_parameters()
train("bert-dora", model, 2, input_ids=bids, attention_mask=bmask, labels=labels)
with torch.no_grad():
    before = model(input_ids=bids, attention_mask=bmask).logits
    merged = model.merge_and_unload()
    after = merged(input_ids=bids, attention_mask=bmask).logits
print("dora merge equal", torch.allclose(before, after, atol=1e-5), fmt(after[1]))

# --- GPT-2's Conv1D layers ---
model = get_peft_model(gpt2(), LoraConfig(task_type=TaskType.CAUSAL_LM, r=4, lora_alpha=8,
                                          target_modules=["c_attn", "c_proj"],
                                          fan_in_fan_out=True, lora_dropout=0.1))
model.print_trainable_parameters()
torch.manual_seed(11)
train("gpt2-lora", model, 3, input_ids=gids, labels=gids)

# --- several adapters on one model ---
torch.manual_seed(12)
model = get_peft_model(llama(), LoraConfig(r=4, target_modules=["q_proj", "v_proj"],
                                           init_lora_weights=False), adapter_name="first")
model.add_adapter("second", LoraConfig(r=2, target_modules=["k_proj", "o_proj"],
                                       init_lora_weights=False))
print("adapters", sorted(model.peft_config), model.active_adapter)
with torch.no_grad():
    a = model(input_ids=lids).logits
    model.set_adapter("second")
    b = model(input_ids=lids).logits
    with model.disable_adapter():
        base = model(input_ids=lids).logits
print("first", fmt(a[0, 0, :4]), "second", fmt(b[0, 0, :4]), "base", fmt(base[0, 0, :4]))
model.set_adapter("first")
model.add_adapter("third", LoraConfig(r=4, target_modules=["q_proj", "v_proj"],
                                      init_lora_weights=False))
model.add_weighted_adapter(["first", "third"], [0.7, 0.3], "mix", combination_type="linear")
model.set_adapter("mix")
with torch.no_grad():
    mix = model(input_ids=lids).logits
print("mix", fmt(mix[1, -1, :4]), model.active_adapter)
model.delete_adapter("third")
print("after delete", sorted(model.peft_config))

# --- other tuners on the Llama ---
tuners = [
    ("ia3", IA3Config(task_type=TaskType.CAUSAL_LM, target_modules=["k_proj", "v_proj", "down_proj"],
                      feedforward_modules=["down_proj"])),
    ("loha", LoHaConfig(task_type=TaskType.CAUSAL_LM, r=2, alpha=4,
                        target_modules=["q_proj", "v_proj"])),
    ("lokr", LoKrConfig(task_type=TaskType.CAUSAL_LM, r=2, alpha=4,
                        target_modules=["q_proj", "v_proj"])),
    ("oft", OFTConfig(task_type=TaskType.CAUSAL_LM, r=0, oft_block_size=4,
                      target_modules=["q_proj", "v_proj"])),
    ("vera", VeraConfig(task_type=TaskType.CAUSAL_LM, r=8, target_modules=["q_proj", "v_proj"])),
    ("prompt", PromptTuningConfig(task_type=TaskType.CAUSAL_LM, num_virtual_tokens=4)),
    ("prefix", PrefixTuningConfig(task_type=TaskType.CAUSAL_LM, num_virtual_tokens=3)),
    ("ptuning", PromptEncoderConfig(task_type=TaskType.CAUSAL_LM, num_virtual_tokens=3,
                                    encoder_hidden_size=8)),
]
for name, cfg in tuners:
    torch.manual_seed(13)
    model = get_peft_model(llama(), cfg)
    trainable, total = model.get_nb_trainable_parameters()
    print(name, "trainable", trainable, "total", total)
    train(name, model, 2, lr=5e-2, input_ids=lids, labels=lids)
    with torch.no_grad():
        print(name, "logits", fmt(model(input_ids=lids).logits[0, -1, :4]))

# --- AdaLoRA: the rank budget shrinks as training goes ---
torch.manual_seed(14)
model = get_peft_model(llama(), AdaLoraConfig(
    task_type=TaskType.CAUSAL_LM, init_r=6, target_r=2, tinit=1, tfinal=1, deltaT=1,
    total_step=5, target_modules=["q_proj", "v_proj"], orth_reg_weight=0.5))
opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=2e-2)
model.train()
for step in range(5):
    out = model(input_ids=lids, labels=lids)
    out.loss.backward()
    opt.step()
    model.base_model.update_and_allocate(step)
    opt.zero_grad()
    ranks = [int(m.ranknum["default"].item()) for m in model.modules() if hasattr(m, "ranknum")]
    e = model.base_model.model.model.layers[0].self_attn.q_proj.lora_E["default"]
    print("adalora", step, f"loss {out.loss.item():.5f}", ranks,
          "kept", int((e != 0).sum().item()))

# --- generate through adapters: greedy and seeded top-k, a left-padded batch ---
torch.manual_seed(15)
prompt = torch.randint(2, 60, (2, 6))
pmask = torch.ones_like(prompt)
pmask[1, :2] = 0
for name, cfg in [("lora", LoraConfig(task_type=TaskType.CAUSAL_LM, r=4, init_lora_weights=False,
                                      target_modules=["q_proj", "v_proj"])),
                  ("prefix", PrefixTuningConfig(task_type=TaskType.CAUSAL_LM, num_virtual_tokens=3)),
                  ("prompt", PromptTuningConfig(task_type=TaskType.CAUSAL_LM, num_virtual_tokens=3))]:
    torch.manual_seed(16)
    model = get_peft_model(llama(), cfg).eval()
    greedy = model.generate(input_ids=prompt, attention_mask=pmask, max_new_tokens=5,
                            do_sample=False, pad_token_id=0)
    torch.manual_seed(17)
    sampled = model.generate(input_ids=prompt, attention_mask=pmask, max_new_tokens=4,
                             do_sample=True, top_k=10, pad_token_id=0)
    print(name, "generate", greedy[:, 6:].tolist(), "sampled", sampled[:, 6:].tolist())


# ----------------------------------------------------------------------------
# peft_more_tuners (one program: the libraries are imported once)
# peft's newer tuners on a user's small model (an embedding-bag MLP with a
# LayerNorm), each built by get_peft_model, trained two Adam steps and run:
# BOFT (its Python path: the CUDA kernel build fails and it falls back, as
# on torch's CPU build), C3A (FFT circular convolution), FourierFT, HRA
# (Householder reflections), MiSS, RandLoRA, SHiRA (a sparse COO delta from
# int32 indices), VB-LoRA (top-k over a vector bank), LN tuning, trainable
# tokens, LoRA with rank / alpha patterns and lora_bias, LoRA on a bare
# parameter (target_parameters), DeLoRA, RoAd, WaveFT, GraLoRA, OSF, PVeRA,
# TinyLoRA, UniLoRA, Lily and HiRA.
# ----------------------------------------------------------------------------
import random

import peft
import torch
import torch.nn as nn
from peft import get_peft_model

random.seed(0)


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(30, 16)
        self.seq = nn.Sequential(nn.Linear(16, 16), nn.ReLU(), nn.Linear(16, 16), nn.ReLU())
        self.ln = nn.LayerNorm(16)
        self.head = nn.Linear(16, 3)

    def forward(self, ids):
        return self.head(self.ln(self.seq(self.emb(ids).mean(1))))


torch.manual_seed(0)
ids = torch.randint(0, 30, (6, 5))
y = torch.randint(0, 3, (6,))
T = ["seq.0", "seq.2"]
cfgs = {
    "boft": lambda: peft.BOFTConfig(boft_block_size=4, target_modules=T,
                                    boft_n_butterfly_factor=1),
    "c3a": lambda: peft.C3AConfig(block_size=4, target_modules=T, init_weights="gaussian"),
    "fourierft": lambda: peft.FourierFTConfig(n_frequency=20, target_modules=T,
                                              init_weights=False),
    "hra": lambda: peft.HRAConfig(r=4, target_modules=T, init_weights=False),
    "miss": lambda: peft.MissConfig(r=4, target_modules=T),
    "randlora": lambda: peft.RandLoraConfig(r=4, target_modules=T),
    "shira": lambda: peft.ShiraConfig(r=2, target_modules=T),
    "vblora": lambda: peft.VBLoRAConfig(r=2, target_modules=T, num_vectors=8, vector_length=4,
                                        topk=2, init_logits_std=0.5),
    "ln_tuning": lambda: peft.LNTuningConfig(target_modules=["ln"]),
    "trainable_tokens": lambda: peft.TrainableTokensConfig(target_modules=["emb"],
                                                           token_indices=[1, 3, 5]),
    "lora_pattern": lambda: peft.LoraConfig(r=4, target_modules=T, rank_pattern={"seq.2": 2},
                                            alpha_pattern={"seq.0": 16}, lora_bias=True,
                                            init_lora_weights=False),
    "lora_param": lambda: peft.LoraConfig(r=2, target_parameters=["seq.0.weight"],
                                          init_lora_weights=False),
    "delora": lambda: peft.DeloraConfig(r=4, target_modules=T),
    "road": lambda: peft.RoadConfig(target_modules=T, group_size=4),
    "waveft": lambda: peft.WaveFTConfig(target_modules=T, n_frequency=16),
    "gralora": lambda: peft.GraloraConfig(r=4, gralora_k=2, target_modules=T),
    "osf": lambda: peft.OSFConfig(target_modules=T),
    "pvera": lambda: peft.PveraConfig(r=4, target_modules=T),
    "tinylora": lambda: peft.TinyLoraConfig(target_modules=T),
    "unilora": lambda: peft.UniLoraConfig(target_modules=T),
    "lily": lambda: peft.LilyConfig(target_modules=T),
    "hira": lambda: peft.HiraConfig(r=4, target_modules=T),
}
for name, mk in cfgs.items():
    torch.manual_seed(1)
    m = get_peft_model(MLP(), mk())
    opt = torch.optim.Adam([p for p in m.parameters() if p.requires_grad], lr=1e-2)
    losses = []
    for step in range(2):
        loss = nn.functional.cross_entropy(m(ids), y)
        loss.backward()
        opt.step()
        opt.zero_grad()
        losses.append(f"{loss.item():.5f}")
    with torch.no_grad():
        out = m(ids)
    print(name, m.get_nb_trainable_parameters(), losses,
          " ".join(f"{v:.5f}" for v in out.flatten()[:4].tolist()))
