# A fine-tuning loop in the style of Hugging Face's run_glue_no_trainer.py
# (https://github.com/huggingface/transformers/blob/main/examples/pytorch/
# text-classification/run_glue_no_trainer.py) written with PyTorch's own
# schedulers: AdamW with the no_decay parameter groups (bias and
# LayerNorm.weight), the embeddings frozen with requires_grad_(False),
# gradient accumulation (loss / gradient_accumulation_steps, step every
# N micro-batches), clip_grad_norm_, a warmup through
# SequentialLR([LinearLR, PolynomialLR], milestones=[warmup]) as in the
# torch.optim.lr_scheduler documentation, a ChainedScheduler of
# ConstantLR and ExponentialLR on a second optimizer, and the evaluation
# under model.eval() + torch.inference_mode(). Written for this test: a
# small Transformer encoder classifier, 2 epochs of 6 micro-batches; one
# compiled accumulation step (torch.compile on the model) against eager.
import copy
import math

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.optim.lr_scheduler import (ChainedScheduler, ConstantLR, ExponentialLR, LinearLR,
                                      PolynomialLR, SequentialLR)


class Classifier(nn.Module):
    def __init__(self, vocab=50, d=16, heads=2, classes=3):
        super().__init__()
        self.embeddings = nn.Embedding(vocab, d)
        self.position = nn.Parameter(torch.randn(1, 12, d) * 0.02)
        layer = nn.TransformerEncoderLayer(d, heads, 32, dropout=0.0, batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)
        self.LayerNorm = nn.LayerNorm(d)
        self.classifier = nn.Linear(d, classes)

    def forward(self, input_ids, attention_mask):
        h = self.embeddings(input_ids) + self.position[:, :input_ids.shape[1]]
        h = self.encoder(h, src_key_padding_mask=attention_mask == 0)
        h = self.LayerNorm(h)
        mask = attention_mask.unsqueeze(-1).to(h.dtype)
        pooled = (h * mask).sum(1) / mask.sum(1)
        return self.classifier(pooled)


rng = np.random.RandomState(0)
input_ids = torch.from_numpy(rng.randint(1, 50, size=(24, 12)))
lengths = torch.from_numpy(rng.randint(5, 13, size=24))
attention_mask = (torch.arange(12)[None, :] < lengths[:, None]).long()
input_ids = input_ids * attention_mask
labels = torch.from_numpy(rng.randint(0, 3, size=24))

torch.manual_seed(0)
model = Classifier()
model.embeddings.requires_grad_(False)

no_decay = ["bias", "LayerNorm.weight"]
optimizer_grouped_parameters = [
    {"params": [p for n, p in model.named_parameters()
                if not any(nd in n for nd in no_decay) and p.requires_grad], "weight_decay": 0.01},
    {"params": [p for n, p in model.named_parameters()
                if any(nd in n for nd in no_decay) and p.requires_grad], "weight_decay": 0.0},
]
print("groups", [len(g["params"]) for g in optimizer_grouped_parameters],
      "trainable", sum(p.numel() for p in model.parameters() if p.requires_grad))
optimizer = torch.optim.AdamW(optimizer_grouped_parameters, lr=3e-3)

gradient_accumulation_steps = 2
num_update_steps_per_epoch = math.ceil(6 / gradient_accumulation_steps)
max_train_steps = 2 * num_update_steps_per_epoch
warmup = 2
lr_scheduler = SequentialLR(optimizer, [LinearLR(optimizer, start_factor=0.1, total_iters=warmup),
                                        PolynomialLR(optimizer, total_iters=max_train_steps - warmup,
                                                     power=2.0)], milestones=[warmup])

# a second optimizer on the head only, its schedule chained
head_opt = torch.optim.SGD(model.classifier.parameters(), lr=0.05)
chained = ChainedScheduler([ConstantLR(head_opt, factor=0.5, total_iters=2),
                            ExponentialLR(head_opt, gamma=0.9)])
lrs = []
for _ in range(4):
    head_opt.step()
    chained.step()
    lrs.append(round(chained.get_last_lr()[0], 6))
print("chained lrs", lrs)


def evaluate():
    model.eval()
    with torch.inference_mode():
        logits = model(input_ids, attention_mask)
        predictions = logits.argmax(dim=-1)
    model.train()
    return (predictions == labels).float().mean().item(), logits


def micro_step(net, ids, mask, y):
    outputs = net(ids, mask)
    loss = F.cross_entropy(outputs, y) / gradient_accumulation_steps
    loss.backward()
    return loss


completed_steps = 0
for epoch in range(2):
    model.train()
    for step in range(6):
        sl = slice(step * 4, step * 4 + 4)
        loss = micro_step(model, input_ids[sl], attention_mask[sl], labels[sl])
        if step % gradient_accumulation_steps == gradient_accumulation_steps - 1:
            norm = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
            lr_scheduler.step()
            optimizer.zero_grad()
            completed_steps += 1
            print(f"epoch {epoch} step {completed_steps} loss {loss.item() * 2:.5f} "
                  f"norm {norm.item():.5f} lr {lr_scheduler.get_last_lr()[0]:.6f}")
    acc, logits = evaluate()
    print(f"epoch {epoch}: accuracy {acc:.4f}", logits.requires_grad, torch.is_inference(logits))

print("embeddings frozen", model.embeddings.weight.grad is None)

# one accumulation cycle compiled against eager
state, opt_state = copy.deepcopy(model.state_dict()), copy.deepcopy(optimizer.state_dict())
compiled = torch.compile(model)
for k in range(2):
    loss_c = micro_step(compiled, input_ids[k * 4:k * 4 + 4], attention_mask[k * 4:k * 4 + 4],
                        labels[k * 4:k * 4 + 4])
optimizer.step()
optimizer.zero_grad()
after_c = copy.deepcopy(model.state_dict())
model.load_state_dict(state)
optimizer.load_state_dict(opt_state)
for k in range(2):
    loss_e = micro_step(model, input_ids[k * 4:k * 4 + 4], attention_mask[k * 4:k * 4 + 4],
                        labels[k * 4:k * 4 + 4])
optimizer.step()
optimizer.zero_grad()
print("compiled loss", round(loss_c.item(), 5))
print("compiled == eager", torch.allclose(loss_c, loss_e, atol=1e-6),
      all(torch.allclose(after_c[k], v, atol=1e-5) for k, v in model.state_dict().items()))
