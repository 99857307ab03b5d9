# Hugging Face Accelerate's README training loop and its "gradient
# accumulation" and "checkpointing" how-tos, with accelerate itself from PyPI:
# Accelerator(cpu=True, gradient_accumulation_steps=2), prepare() of the
# model, optimizer, data loader and scheduler, accelerator.accumulate /
# backward / sync_gradients / clip_grad_norm_, gather_for_metrics,
# wait_for_everyone, unwrap_model, accelerator.save and print.  Changed for
# a CPU test: a small MLP on random data instead of a transformer on GLUE.
import os
import tempfile

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset

from accelerate import Accelerator
from accelerate.utils import set_seed

set_seed(0)
accelerator = Accelerator(cpu=True, gradient_accumulation_steps=2)
X = torch.randn(64, 10)
y = (X.sum(1) > 0).long()
train_dataloader = DataLoader(TensorDataset(X, y), batch_size=8, shuffle=True)
eval_dataloader = DataLoader(TensorDataset(X[:24], y[:24]), batch_size=10)
model = nn.Sequential(nn.Linear(10, 32), nn.GELU(), nn.Dropout(0.1), nn.Linear(32, 2))
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: min(1.0, (s + 1) / 4))

model, optimizer, train_dataloader, eval_dataloader, scheduler = accelerator.prepare(
    model, optimizer, train_dataloader, eval_dataloader, scheduler)
print(accelerator.device, accelerator.num_processes, accelerator.is_main_process,
      accelerator.mixed_precision, accelerator.gradient_accumulation_steps)

for epoch in range(3):
    model.train()
    for step, (inputs, targets) in enumerate(train_dataloader):
        with accelerator.accumulate(model):
            outputs = model(inputs)
            loss = F.cross_entropy(outputs, targets)
            accelerator.backward(loss)
            if accelerator.sync_gradients:
                accelerator.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
            scheduler.step()
            optimizer.zero_grad()
    model.eval()
    correct = total = 0
    for inputs, targets in eval_dataloader:
        with torch.no_grad():
            predictions = model(inputs).argmax(dim=-1)
        predictions, references = accelerator.gather_for_metrics((predictions, targets))
        correct += (predictions == references).sum().item()
        total += references.numel()
    accelerator.print(f"epoch {epoch}: loss {loss.item():.4f} accuracy {correct / total:.4f} "
                      f"lr {scheduler.get_last_lr()[0]:.5f}")

accelerator.wait_for_everyone()
unwrapped_model = accelerator.unwrap_model(model)
print(type(unwrapped_model).__name__, unwrapped_model[0].weight.sum().item())
with tempfile.TemporaryDirectory() as tmp:
    path = os.path.join(tmp, "model.pt")
    accelerator.save(unwrapped_model.state_dict(), path)
    state = torch.load(path)
    print(sorted(state.keys()), torch.equal(state["0.weight"], unwrapped_model[0].weight))
