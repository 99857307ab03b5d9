"""safetensors' torch API and transformers' save_pretrained /
from_pretrained (safetensors format) in a temporary directory: save_file /
load_file with metadata over float32 / float16 / bfloat16 / int64 / bool /
uint8 tensors, save / load through bytes, save_model / load_model of a GPT-2
(tied embeddings), safe_open's get_slice and metadata; a file torch wrote
(torch_written.safetensors, beside this program) read back; a file of this
program's own (written.safetensors in the working directory, which its
test reads with torch); a Llama saved and reloaded in eval mode, and as
bfloat16."""
import os
import pathlib
import tempfile

import torch
from safetensors import safe_open
from safetensors.torch import load, load_file, load_model, save, save_file, save_model
from transformers import GPT2Config, GPT2LMHeadModel, LlamaConfig, LlamaForCausalLM

HERE = pathlib.Path(__file__).resolve().parent

torch.manual_seed(0)
tensors = {"w": torch.randn(3, 4), "b": torch.arange(5, dtype=torch.int64),
           "h": torch.randn(2, 2).half(), "m": torch.tensor([True, False]),
           "bf": torch.randn(3).bfloat16(), "u": torch.arange(4, dtype=torch.uint8)}
save_file(tensors, "written.safetensors", metadata={"format": "pt", "by": "program"})

with tempfile.TemporaryDirectory() as d:
    path = os.path.join(d, "t.safetensors")
    save_file(tensors, path, metadata={"format": "pt"})
    back = load_file(path)
    for k in sorted(back):
        print(k, back[k].dtype, tuple(back[k].shape), torch.equal(back[k], tensors[k]))
    print("bf", back["bf"])
    with safe_open(path, framework="pt") as f:
        print("keys", sorted(f.keys()), f.metadata())
        print("slice", f.get_slice("w")[1:3, :2], f.get_tensor("u"))
    blob = save({"x": torch.ones(2, 3), "y": torch.tensor([1.5, -2.0]).bfloat16()})
    out = load(blob)
    print(type(blob).__name__, len(blob), out["x"].sum(), out["y"])

    cfg = GPT2Config(vocab_size=30, n_positions=16, n_embd=8, n_layer=1, n_head=2)
    model = GPT2LMHeadModel(cfg).eval()
    save_model(model, os.path.join(d, "m.safetensors"))
    torch.manual_seed(5)
    other = GPT2LMHeadModel(cfg).eval()
    missing, unexpected = load_model(other, os.path.join(d, "m.safetensors"))
    print("load_model", sorted(missing), sorted(unexpected))
    ids = torch.tensor([[1, 2, 3, 4]])
    print("same logits", torch.equal(model(ids).logits, other(ids).logits))

    torch.manual_seed(6)
    llama = LlamaForCausalLM(LlamaConfig(
        vocab_size=40, hidden_size=16, intermediate_size=32, num_hidden_layers=1,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=32))
    llama.save_pretrained(os.path.join(d, "ckpt"))
    print(sorted(os.listdir(os.path.join(d, "ckpt"))))
    again = LlamaForCausalLM.from_pretrained(os.path.join(d, "ckpt"))
    print(type(again).__name__, again.training, again.dtype)
    with torch.no_grad():
        a, b = llama.eval()(ids).logits, again(ids).logits
    print("reloaded equal", torch.equal(a, b), b[0, -1, :5])
    half = LlamaForCausalLM.from_pretrained(os.path.join(d, "ckpt"), dtype=torch.bfloat16)
    with torch.no_grad():
        print("bfloat16", half.dtype, half(ids).logits[0, -1, :5])

torch_written = load_file(HERE / "torch_written.safetensors")
for k in sorted(torch_written):
    print("torch wrote", k, torch_written[k].dtype, torch_written[k].flatten()[:4])
