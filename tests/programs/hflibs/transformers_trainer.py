"""transformers' Trainer (through accelerate) on a tiny GPT-2: a map-style
Dataset of seeded token ids, two epochs with the linear schedule and one
warmup step, gradient clipping, evaluation; the logged losses, gradient
norms and learning rates (log_history, timings left out) and the
evaluation loss.  Trainer seeds torch itself (``seed=0``), so its
DataLoader's shuffled order is PyTorch's."""
import tempfile

import torch
from torch.utils.data import Dataset
from transformers import (GPT2Config, GPT2LMHeadModel, PrinterCallback, Trainer,
                          TrainingArguments, set_seed)


class Tokens(Dataset):
    def __init__(self, n):
        g = torch.Generator().manual_seed(n)
        self.x = torch.randint(0, 40, (n, 6), generator=g)

    def __len__(self):
        return len(self.x)

    def __getitem__(self, i):
        return {"input_ids": self.x[i], "labels": self.x[i]}


set_seed(0)
model = GPT2LMHeadModel(GPT2Config(vocab_size=40, n_positions=16, n_embd=16, n_layer=1, n_head=2))
with tempfile.TemporaryDirectory() as out:
    args = TrainingArguments(output_dir=out, per_device_train_batch_size=4, num_train_epochs=2,
                             learning_rate=1e-3, logging_steps=1, report_to=[], use_cpu=True,
                             save_strategy="no", seed=0, disable_tqdm=True, warmup_steps=1,
                             lr_scheduler_type="linear", max_grad_norm=0.5)
    trainer = Trainer(model=model, args=args, train_dataset=Tokens(8), eval_dataset=Tokens(4))
    trainer.remove_callback(PrinterCallback)
    result = trainer.train()
    print("trained", round(result.training_loss, 5), result.global_step)
    for entry in trainer.state.log_history:
        print({k: v for k, v in entry.items() if "runtime" not in k and "per_second" not in k
               and k != "total_flos"})
    metrics = trainer.evaluate()
    print("eval loss", metrics["eval_loss"], "epoch", metrics["epoch"])
    print("model", model.training, model.transformer.wte.weight[0, :4])
