# A BERT-style sequence-classification fine-tuning loop the way the Hugging
# Face run_glue.py / "BERT fine-tuning with PyTorch" tutorials write it
# without the transformers library: a small BERT encoder (word + position +
# token-type embeddings, LayerNorm(eps=1e-12), the extended attention mask
# (1.0 - mask) * torch.finfo(dtype).min, GELU intermediate, a tanh pooler),
# AdamW with the no_decay groups for biases and LayerNorm weights,
# get_linear_schedule_with_warmup as a LambdaLR, gradient accumulation with
# the loss divided by the accumulation steps, clip_grad_norm_ before each
# optimizer step, scheduler.step() after it, then evaluation with
# argmax accuracy and the scheduler's state_dict round trip.
# Changes for a CPU test: weights and data from numpy, a tiny model; then
# one training step under torch.compile against the same step eagerly.
import copy
import math

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.optim.lr_scheduler import LambdaLR
from torch.utils.data import DataLoader, SequentialSampler, TensorDataset


def get_linear_schedule_with_warmup(optimizer, num_warmup_steps, num_training_steps, last_epoch=-1):
    def lr_lambda(current_step: int):
        if current_step < num_warmup_steps:
            return float(current_step) / float(max(1, num_warmup_steps))
        return max(0.0, float(num_training_steps - current_step)
                   / float(max(1, num_training_steps - num_warmup_steps)))
    return LambdaLR(optimizer, lr_lambda, last_epoch)


class Config:
    vocab_size, hidden_size, num_hidden_layers, num_attention_heads = 30, 32, 2, 4
    intermediate_size, max_position_embeddings, type_vocab_size = 64, 16, 2
    hidden_dropout_prob = attention_probs_dropout_prob = 0.0
    layer_norm_eps, num_labels = 1e-12, 3


class BertEmbeddings(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.word_embeddings = nn.Embedding(config.vocab_size, config.hidden_size, padding_idx=0)
        self.position_embeddings = nn.Embedding(config.max_position_embeddings, config.hidden_size)
        self.token_type_embeddings = nn.Embedding(config.type_vocab_size, config.hidden_size)
        self.LayerNorm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        self.dropout = nn.Dropout(config.hidden_dropout_prob)
        self.register_buffer("position_ids", torch.arange(config.max_position_embeddings).expand((1, -1)),
                             persistent=False)
        self.register_buffer("token_type_ids", torch.zeros(self.position_ids.size(), dtype=torch.long),
                             persistent=False)

    def forward(self, input_ids, token_type_ids=None):
        seq_length = input_ids.size(1)
        position_ids = self.position_ids[:, :seq_length]
        if token_type_ids is None:
            token_type_ids = self.token_type_ids[:, :seq_length].expand(input_ids.shape[0], seq_length)
        emb = (self.word_embeddings(input_ids) + self.token_type_embeddings(token_type_ids)
               + self.position_embeddings(position_ids))
        return self.dropout(self.LayerNorm(emb))


class BertSelfAttention(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.num_attention_heads = config.num_attention_heads
        self.attention_head_size = config.hidden_size // config.num_attention_heads
        self.all_head_size = self.num_attention_heads * self.attention_head_size
        self.query = nn.Linear(config.hidden_size, self.all_head_size)
        self.key = nn.Linear(config.hidden_size, self.all_head_size)
        self.value = nn.Linear(config.hidden_size, self.all_head_size)
        self.dropout = nn.Dropout(config.attention_probs_dropout_prob)

    def transpose_for_scores(self, x):
        new_x_shape = x.size()[:-1] + (self.num_attention_heads, self.attention_head_size)
        return x.view(new_x_shape).permute(0, 2, 1, 3)

    def forward(self, hidden_states, attention_mask):
        q = self.transpose_for_scores(self.query(hidden_states))
        k = self.transpose_for_scores(self.key(hidden_states))
        v = self.transpose_for_scores(self.value(hidden_states))
        scores = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(self.attention_head_size)
        scores = scores + attention_mask
        probs = self.dropout(nn.functional.softmax(scores, dim=-1))
        context = torch.matmul(probs, v).permute(0, 2, 1, 3).contiguous()
        return context.view(context.size()[:-2] + (self.all_head_size,))


class BertLayer(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.attention = BertSelfAttention(config)
        self.attn_out = nn.Linear(config.hidden_size, config.hidden_size)
        self.attn_norm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        self.intermediate = nn.Linear(config.hidden_size, config.intermediate_size)
        self.output = nn.Linear(config.intermediate_size, config.hidden_size)
        self.out_norm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)

    def forward(self, h, mask):
        h = self.attn_norm(self.attn_out(self.attention(h, mask)) + h)
        return self.out_norm(self.output(F.gelu(self.intermediate(h))) + h)


class BertForSequenceClassification(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.num_labels = config.num_labels
        self.embeddings = BertEmbeddings(config)
        self.layer = nn.ModuleList([BertLayer(config) for _ in range(config.num_hidden_layers)])
        self.pooler = nn.Linear(config.hidden_size, config.hidden_size)
        self.dropout = nn.Dropout(config.hidden_dropout_prob)
        self.classifier = nn.Linear(config.hidden_size, config.num_labels)

    def get_extended_attention_mask(self, attention_mask, dtype=torch.float32):
        extended = attention_mask[:, None, None, :].to(dtype=dtype)
        return (1.0 - extended) * torch.finfo(dtype).min

    def forward(self, input_ids, attention_mask=None, token_type_ids=None, labels=None):
        if attention_mask is None:
            attention_mask = torch.ones_like(input_ids)
        mask = self.get_extended_attention_mask(attention_mask)
        h = self.embeddings(input_ids, token_type_ids)
        for layer in self.layer:
            h = layer(h, mask)
        pooled = torch.tanh(self.pooler(h[:, 0]))
        logits = self.classifier(self.dropout(pooled))
        loss = None
        if labels is not None:
            loss = nn.CrossEntropyLoss()(logits.view(-1, self.num_labels), labels.view(-1))
        return loss, logits


config = Config()
r = np.random.default_rng(0)
model = BertForSequenceClassification(config)
with torch.no_grad():
    for name, p in model.named_parameters():
        if "LayerNorm" in name or "norm" in name:
            p.copy_(torch.ones_like(p) if name.endswith("weight") else torch.zeros_like(p))
        else:
            p.copy_(torch.from_numpy(r.normal(0, 0.02 if p.dim() > 1 else 0.01, tuple(p.shape)).astype(np.float32)))

# a toy "GLUE" task: the label is which of three tokens appears most often
n, T = 48, 10
lengths = r.integers(4, T + 1, n)
ids = r.integers(3, config.vocab_size, (n, T))
labels = np.array([int(np.argmax([np.sum(row[:l] == t) for t in (3, 4, 5)])) for row, l in zip(ids, lengths)])
ids[:, 0] = 1                                                   # [CLS]
mask = (np.arange(T)[None, :] < lengths[:, None]).astype(np.int64)
ids = ids * mask
types = (np.arange(T)[None, :] >= (lengths[:, None] // 2)).astype(np.int64) * mask
dataset = TensorDataset(torch.from_numpy(ids), torch.from_numpy(mask), torch.from_numpy(types),
                        torch.from_numpy(labels))
train_dataloader = DataLoader(dataset, sampler=SequentialSampler(dataset), batch_size=8)
print("data", len(dataset), len(train_dataloader), [tuple(t.shape) for t in dataset[0]], labels[:8].tolist())

gradient_accumulation_steps, num_train_epochs, max_grad_norm = 2, 3, 1.0
t_total = len(train_dataloader) // gradient_accumulation_steps * num_train_epochs
no_decay = ["bias", "LayerNorm.weight", "norm.weight"]
optimizer_grouped_parameters = [
    {"params": [p for nme, p in model.named_parameters() if not any(nd in nme for nd in no_decay)],
     "weight_decay": 0.01},
    {"params": [p for nme, p in model.named_parameters() if any(nd in nme for nd in no_decay)],
     "weight_decay": 0.0},
]
print("groups", [len(g["params"]) for g in optimizer_grouped_parameters])
optimizer = torch.optim.AdamW(optimizer_grouped_parameters, lr=5e-3, eps=1e-8)
scheduler = get_linear_schedule_with_warmup(optimizer, num_warmup_steps=2, num_training_steps=t_total)
print("t_total", t_total, "lr0", scheduler.get_last_lr(), optimizer.param_groups[1]["initial_lr"])

global_step, tr_loss, logging_loss = 0, 0.0, 0.0
model.zero_grad()
for epoch in range(num_train_epochs):
    for step, batch in enumerate(train_dataloader):
        model.train()
        inputs = {"input_ids": batch[0], "attention_mask": batch[1], "token_type_ids": batch[2],
                  "labels": batch[3]}
        loss = model(**inputs)[0]
        if gradient_accumulation_steps > 1:
            loss = loss / gradient_accumulation_steps
        loss.backward()
        tr_loss += loss.item()
        if (step + 1) % gradient_accumulation_steps == 0:
            norm = torch.nn.utils.clip_grad_norm_(model.parameters(), max_grad_norm)
            optimizer.step()
            scheduler.step()
            model.zero_grad()
            global_step += 1
            if global_step % 3 == 0:
                print(f"step {global_step} lr {scheduler.get_last_lr()[0]:.6f} "
                      f"loss {(tr_loss - logging_loss) / 3:.4f} norm {norm.item():.4f}")
                logging_loss = tr_loss
print("global_step", global_step, f"avg loss {tr_loss / global_step:.4f}", scheduler.last_epoch,
      scheduler.get_last_lr())

model.eval()
preds, out_label_ids, eval_loss = None, None, 0.0
with torch.no_grad():
    for batch in DataLoader(dataset, batch_size=16):
        tmp_eval_loss, logits = model(batch[0], batch[1], batch[2], labels=batch[3])
        eval_loss += tmp_eval_loss.mean().item()
        preds = logits.numpy() if preds is None else np.append(preds, logits.numpy(), axis=0)
        out_label_ids = (batch[3].numpy() if out_label_ids is None
                         else np.append(out_label_ids, batch[3].numpy(), axis=0))
print(f"eval loss {eval_loss / 3:.4f} acc {(np.argmax(preds, axis=1) == out_label_ids).mean():.4f}")

sd = scheduler.state_dict()
print("sched state", sorted(k for k in sd), sd["last_epoch"], sd["_step_count"], sd["lr_lambdas"])
sched2 = get_linear_schedule_with_warmup(optimizer, 2, t_total)
sched2.load_state_dict(sd)
print("reloaded", sched2.last_epoch, sched2.get_last_lr() == scheduler.get_last_lr())
# padding changes nothing: the extended mask removes the padded keys
ids1 = torch.tensor([[1, 7, 8, 9]])
a = model(ids1)[1]
b = model(torch.tensor([[1, 7, 8, 9, 0, 0]]), attention_mask=torch.tensor([[1, 1, 1, 1, 0, 0]]))[1]
print("mask", torch.allclose(a, b, atol=1e-5), torch.finfo(torch.float32).min)


# one training step under torch.compile against the same step eagerly
def train_step(input_ids, attention_mask, token_type_ids, labels):
    optimizer.zero_grad(set_to_none=True)
    loss = model(input_ids, attention_mask, token_type_ids, labels)[0]
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), max_grad_norm)
    optimizer.step()
    return loss


model.train()
for g in optimizer.param_groups:      # (the schedule ended at lr 0)
    g["lr"] = 1e-3
batch = [t[:4, :6] if t.dim() > 1 else t[:4] for t in dataset[:4]]
state, opt_state = copy.deepcopy(model.state_dict()), copy.deepcopy(optimizer.state_dict())
eager = [train_step(*batch).item() for _ in range(2)]
after = {k: v.clone() for k, v in model.state_dict().items()}
model.load_state_dict(state)
optimizer.load_state_dict(opt_state)
cstep = torch.compile(train_step)
compiled = [cstep(*batch).item() for _ in range(2)]
print("compiled losses", [f"{v:.5f}" for v in compiled])
print("compiled == eager:", all(abs(a - b) <= 1e-4 * max(1.0, abs(b)) for a, b in zip(compiled, eager)),
      all(torch.allclose(model.state_dict()[k], after[k], rtol=1e-4, atol=1e-5) for k in after))
