"""captum on transformers models, as its BERT and LLM tutorials use it (tiny
models from configs, a BertTokenizer over an in-memory vocabulary):
LayerIntegratedGradients on a BERT classifier's embeddings (per-token
attributions, convergence delta), LayerConductance on a BERT layer,
LLMAttribution with FeatureAblation and TextTokenInput / TextTemplateInput,
LLMGradientAttribution with LayerIntegratedGradients on a Llama's embedding
layer; and captum.influence's TracInCP (per-sample gradients through its module
hooks) on a small classifier with its saved checkpoints."""
import os
import random
import tempfile

import numpy as np
import torch
import torch.nn as nn
from captum.attr import (FeatureAblation, LayerConductance, LayerIntegratedGradients,
                         LLMAttribution, LLMGradientAttribution, TextTemplateInput,
                         TextTokenInput)
from captum.influence import TracInCP
from torch.utils.data import DataLoader, TensorDataset
from transformers import (BertConfig, BertForSequenceClassification, BertTokenizer, LlamaConfig,
                          LlamaForCausalLM)

torch.manual_seed(0)
random.seed(0)
np.random.seed(0)


def fmt(t, n=6):
    return " ".join(f"{v:.5f}" for v in torch.as_tensor(t).detach().flatten()[:n].tolist())


words = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "a", "cat", "dog", "sat", "ran",
         "on", "mat", "park", "in", "good", "bad", "movie", "is", "was", "very", "not", "film",
         "great", "awful", "plot", "actor", "and", "i", "liked"]
tok = BertTokenizer(vocab={w: i for i, w in enumerate(words)})

torch.manual_seed(1)
bert = BertForSequenceClassification(BertConfig(
    vocab_size=len(words), hidden_size=16, num_hidden_layers=2, num_attention_heads=2,
    intermediate_size=32, max_position_embeddings=32, num_labels=2,
    initializer_range=0.2)).eval()
enc = tok(["the movie was very good", "i liked the plot and the actor"], padding=True,
          return_tensors="pt")
ids, mask = enc["input_ids"], enc["attention_mask"]
ref = torch.where((ids == tok.cls_token_id) | (ids == tok.sep_token_id), ids,
                  torch.full_like(ids, tok.pad_token_id))


def forward(input_ids, attention_mask):
    return bert(input_ids=input_ids, attention_mask=attention_mask).logits.softmax(-1)[:, 1]


lig = LayerIntegratedGradients(forward, bert.bert.embeddings)
attr, delta = lig.attribute(ids, ref, additional_forward_args=(mask,), n_steps=10,
                            internal_batch_size=5, return_convergence_delta=True)
per_token = attr.sum(-1)
per_token = per_token / per_token.norm(dim=-1, keepdim=True)
print("bert LIG", tuple(attr.shape), fmt(per_token[0], 7), "delta", fmt(delta))
print("tokens", tok.convert_ids_to_tokens(ids[0].tolist()))
lig_word = LayerIntegratedGradients(forward, bert.bert.embeddings.word_embeddings)
attr_w = lig_word.attribute(ids, ref, additional_forward_args=(mask,), n_steps=6)
words_attr = attr_w.sum(-1)
print("bert LIG words", fmt(words_attr[1] / words_attr[1].norm(), 9))
lc = LayerConductance(lambda e, m: bert(inputs_embeds=e, attention_mask=m).logits[:, 1],
                      bert.bert.encoder.layer[0])
emb = bert.bert.embeddings.word_embeddings(ids)
cond = lc.attribute(emb, additional_forward_args=(mask,), n_steps=6)
cond = cond[0] if isinstance(cond, tuple) else cond
cond = cond.sum(-1)[0]
print("bert layer conductance", tuple(cond.shape), fmt(cond / cond.norm(), 7))

# --- LLM attribution on a tiny Llama ---
torch.manual_seed(2)
llama = LlamaForCausalLM(LlamaConfig(
    vocab_size=len(words), hidden_size=16, intermediate_size=32, num_hidden_layers=2,
    num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
    pad_token_id=0)).eval()
fa = LLMAttribution(FeatureAblation(llama), tok)
inp = TextTokenInput("the cat sat on the mat", tok, skip_tokens=[tok.cls_token_id])
res = fa.attribute(inp, target="the dog ran")
print("llm ablation seq", fmt(res.seq_attr, 8))
print("llm ablation tokens", tuple(res.token_attr.shape), fmt(res.token_attr, 8))
print("llm input tokens", res.input_tokens, "output", res.output_tokens)
tmpl = TextTemplateInput("{} movie was {}", values=["the", "good"], baselines=["a", "bad"])
res = fa.attribute(tmpl, target="great film")
print("llm template", res.input_tokens, fmt(res.seq_attr))
lig_llm = LLMGradientAttribution(LayerIntegratedGradients(llama, llama.model.embed_tokens), tok)
res = lig_llm.attribute(inp, target="the dog ran", n_steps=5)
print("llm LIG seq", fmt(res.seq_attr, 8))
print("llm LIG tokens", tuple(res.token_attr.shape), fmt(res.token_attr, 8))

# --- TracInCP: which training examples influence a test prediction ---
torch.manual_seed(3)
net = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))
xs, ys = torch.randn(20, 4), torch.randint(0, 2, (20,))
train_set = TensorDataset(xs, ys)
opt = torch.optim.SGD(net.parameters(), lr=0.1)
with tempfile.TemporaryDirectory() as d:
    paths = []
    for epoch in range(3):
        for xb, yb in DataLoader(train_set, batch_size=5):
            opt.zero_grad()
            nn.functional.cross_entropy(net(xb), yb).backward()
            opt.step()
        paths.append(os.path.join(d, f"ckpt{epoch}.pt"))
        torch.save(net.state_dict(), paths[-1])

    def load(model, path):
        model.load_state_dict(torch.load(path))
        return 0.1

    tracin = TracInCP(net, train_set, paths, checkpoints_load_func=load,
                      loss_fn=nn.CrossEntropyLoss(reduction="sum"), batch_size=5,
                      sample_wise_grads_per_batch=True)   # per-sample gradients by hooks
    test = (torch.randn(3, 4), torch.tensor([0, 1, 1]))
    scores = tracin.influence(test)
    print("tracin scores", tuple(scores.shape), fmt(scores[0], 6))
    top = tracin.influence(test, k=3, proponents=True)
    print("tracin proponents", top.indices.tolist(), fmt(top.influence_scores, 9))
    print("tracin self influence", fmt(tracin.self_influence(), 6))
