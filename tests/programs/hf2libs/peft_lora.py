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
