"""peft's quickstart on tiny transformers models built from configs (no
downloads): LoraConfig + get_peft_model on a Llama (target_modules,
lora_dropout, bias), print_trainable_parameters, a training loop,
merge_and_unload (the merged model's logits equal the adapted one's),
save_pretrained / PeftModel.from_pretrained round-trip."""
import random
import tempfile

import torch
from peft import LoraConfig, PeftModel, TaskType, get_peft_model
from transformers import LlamaConfig, LlamaForCausalLM

torch.manual_seed(0)
random.seed(0)


def tiny_llama():
    torch.manual_seed(0)
    return LlamaForCausalLM(LlamaConfig(
        vocab_size=64, hidden_size=16, intermediate_size=32, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=32))


model = tiny_llama()
config = LoraConfig(task_type=TaskType.CAUSAL_LM, r=4, lora_alpha=8, lora_dropout=0.1,
                    target_modules=["q_proj", "v_proj"], bias="none")
model = get_peft_model(model, config)
model.print_trainable_parameters()
trainable, total = model.get_nb_trainable_parameters()
print("trainable", trainable, "total", total)
print(sorted(n for n, p in model.named_parameters() if p.requires_grad)[:4])

torch.manual_seed(1)
ids = torch.randint(0, 64, (2, 10))
opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
model.train()
for step in range(4):
    out = model(input_ids=ids, labels=ids)
    out.loss.backward()
    opt.step()
    opt.zero_grad()
    print("step", step, f"loss {out.loss.item():.5f}")

model.eval()
with torch.no_grad():
    adapted = model(input_ids=ids).logits
print("adapted logits", adapted[0, :2, :6])
b = model.base_model.model.model.layers[0].self_attn.q_proj.lora_B["default"].weight
print("lora_B norm", f"{b.norm().item():.6f}")

with tempfile.TemporaryDirectory() as d:
    model.save_pretrained(d)
    base = tiny_llama()
    loaded = PeftModel.from_pretrained(base, d)
    loaded.eval()
    with torch.no_grad():
        again = loaded(input_ids=ids).logits
    print("reloaded max diff", f"{(again - adapted).abs().max().item():.6f}")

merged = model.merge_and_unload()
print(type(merged).__name__)
with torch.no_grad():
    m = merged(input_ids=ids).logits
print("merged max diff", f"{(m - adapted).abs().max().item():.6f}")
print("merged logits", m[1, -1, :6])


# ----------------------------------------------------------------------------
# peft_custom (one program: the libraries are imported once)
# peft on a user's own torch model, as its "custom models" guide writes it:
# LoRA on Linear, Conv2d and Embedding layers of a small MLP / CNN with
# modules_to_save, the LoRA initializations that factor the base weight
# (PiSSA: torch.linalg.svd, OLoRA: torch.linalg.qr, rsLoRA scaling),
# get_peft_model_state_dict / set_peft_model_state_dict,
# inject_adapter_in_model, unload, and a transformers model under gradient
# checkpointing with enable_input_require_grads (a forward hook on the input
# embeddings).
# ----------------------------------------------------------------------------
import random

import torch
import torch.nn as nn
from peft import (LoraConfig, PeftModel, get_peft_model, get_peft_model_state_dict,
                  inject_adapter_in_model, set_peft_model_state_dict)
from transformers import LlamaConfig, LlamaForCausalLM

random.seed(0)


def fmt(t, n=5):
    return " ".join(f"{v:.5f}" for v in t.detach().flatten()[:n].tolist())


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(30, 8)
        self.seq = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 16), nn.ReLU())
        self.head = nn.Linear(16, 3)

    def forward(self, ids):
        return self.head(self.seq(self.emb(ids).mean(1)))


class CNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 6, 3, padding=1)
        self.conv2 = nn.Conv2d(6, 8, 3, stride=2)
        self.fc = nn.Linear(8 * 3 * 3, 4)

    def forward(self, x):
        return self.fc(torch.relu(self.conv2(torch.relu(self.conv1(x)))).flatten(1))


def fit(name, model, x, y, steps=3, lr=1e-2):
    opt = torch.optim.Adam([p for p in model.parameters() if p.requires_grad], lr=lr)
    for step in range(steps):
        loss = nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad()
        print(name, step, f"loss {loss.item():.5f}")


torch.manual_seed(0)
ids = torch.randint(0, 30, (6, 5))
labels = torch.randint(0, 3, (6,))
images = torch.randn(4, 3, 7, 7)
img_labels = torch.tensor([0, 3, 1, 2])

for init in [True, "gaussian", "pissa", "pissa_niter_2", "olora"]:
    torch.manual_seed(1)
    base = MLP()
    with torch.no_grad():
        before = base(ids)
    cfg = LoraConfig(r=4, lora_alpha=8, target_modules=["seq.0", "seq.2", "emb"],
                     modules_to_save=["head"], init_lora_weights=init,
                     use_rslora=(init == "gaussian"))
    model = get_peft_model(base, cfg)
    with torch.no_grad():
        start = model(ids)
    print(init, "start equals base", torch.allclose(start, before, atol=1e-5),
          model.get_nb_trainable_parameters())
    a = model.base_model.model.seq[0].lora_A["default"].weight
    print(init, "lora_A", fmt(a.abs()), "base weight", fmt(model.base_model.model.seq[0]
                                                            .base_layer.weight.abs()))
    torch.manual_seed(2)
    fit(str(init), model, ids, labels)

torch.manual_seed(3)
cnn = get_peft_model(CNN(), LoraConfig(r=2, target_modules=["conv1", "conv2"],
                                       modules_to_save=["fc"], lora_dropout=0.1))
cnn.print_trainable_parameters()
torch.manual_seed(4)
fit("cnn", cnn, images, img_labels)
cnn.eval()
with torch.no_grad():
    out = cnn(images)
state = get_peft_model_state_dict(cnn)
print("state", sorted(state)[:3], len(state))
torch.manual_seed(3)
fresh = get_peft_model(CNN(), LoraConfig(r=2, target_modules=["conv1", "conv2"],
                                         modules_to_save=["fc"], lora_dropout=0.1))
res = set_peft_model_state_dict(fresh, state)
fresh.eval()
with torch.no_grad():
    print("restored max diff", f"{(fresh(images) - out).abs().max().item():.6f}",
          "unexpected", res.unexpected_keys)
    merged = cnn.merge_and_unload()
    print("merged cnn max diff", f"{(merged(images) - out).abs().max().item():.6f}")

torch.manual_seed(5)
plain = MLP()
plain = inject_adapter_in_model(LoraConfig(r=2, target_modules=["seq.2"],
                                           init_lora_weights=False), plain)
print("injected", type(plain.seq[2]).__name__, fmt(plain(ids)[0]))

# gradient checkpointing: the frozen embeddings' output must require grad
torch.manual_seed(6)
llama = LlamaForCausalLM(LlamaConfig(vocab_size=40, hidden_size=16, intermediate_size=32,
                                     num_hidden_layers=2, num_attention_heads=2,
                                     max_position_embeddings=32))
llama.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": True})
llama.enable_input_require_grads()
model = get_peft_model(llama, LoraConfig(r=4, target_modules=["q_proj", "v_proj"],
                                         task_type="CAUSAL_LM"))
tokens = torch.randint(0, 40, (2, 8))
model.train()
opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-2)
for step in range(2):
    out = model(input_ids=tokens, labels=tokens)
    out.loss.backward()
    g = model.base_model.model.model.layers[1].self_attn.q_proj.lora_B["default"].weight.grad
    opt.step()
    opt.zero_grad()
    print("checkpointed", step, f"loss {out.loss.item():.5f}", f"grad {g.norm().item():.6f}")
unloaded = model.unload()
print("unload", type(unloaded.model.layers[0].self_attn.q_proj).__name__)
print(isinstance(model, PeftModel))
