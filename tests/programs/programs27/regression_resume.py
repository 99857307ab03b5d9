# A tabular regression training script in the shape of the common
# "custom Dataset + DataLoader" tutorials (PyTorch's data loading
# tutorial, https://pytorch.org/tutorials/beginner/data_loading_tutorial.html,
# and the checkpointing recipe, https://pytorch.org/tutorials/recipes/
# recipes/saving_and_loading_a_general_checkpoint.html): a Dataset
# standardising its features in __init__, random_split with a seeded
# torch.Generator, DataLoader(shuffle=True, generator=...) with a
# drop_last validation loader, an MLP with Dropout, MSELoss / L1Loss
# metrics, ReduceLROnPlateau on the validation loss, a checkpoint dict
# (epoch, model / optimizer / scheduler state dicts, loss) saved with
# torch.save mid-training and loaded with torch.load(weights_only=True)
# into fresh objects to resume, early stopping, and evaluation under
# model.eval() + torch.inference_mode(). Written for this test: 96 rows of
# 5 features, 6 epochs (resumed after 3); the model compiled with
# torch.compile for the resumed epochs' evaluation.
import os
import tempfile

import numpy as np
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, Dataset, random_split


class TabularDataset(Dataset):
    def __init__(self, features, targets):
        self.mean = features.mean(axis=0)
        self.std = features.std(axis=0)
        self.X = torch.tensor((features - self.mean) / self.std, dtype=torch.float32)
        self.y = torch.tensor(targets, dtype=torch.float32).unsqueeze(1)

    def __len__(self):
        return len(self.X)

    def __getitem__(self, idx):
        if torch.is_tensor(idx):
            idx = idx.tolist()
        return self.X[idx], self.y[idx]


class Regressor(nn.Module):
    def __init__(self, n_in):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(n_in, 32), nn.ReLU(), nn.Dropout(0.1),
                                 nn.Linear(32, 16), nn.ReLU(), nn.Linear(16, 1))

    def forward(self, x):
        return self.net(x)


rng = np.random.RandomState(0)
features = rng.rand(96, 5) * [1, 10, 100, 2, 5]
targets = features @ np.array([0.5, -0.2, 0.03, 1.5, 0.0]) + 0.1 * rng.randn(96)
dataset = TabularDataset(features, targets)
print("dataset", len(dataset), dataset[torch.tensor(3)][0].shape, round(float(dataset.y.mean()), 5))

generator = torch.Generator().manual_seed(42)
train_set, val_set = random_split(dataset, [0.75, 0.25], generator=generator)
print("split", len(train_set), len(val_set), val_set.indices[:5])
torch.manual_seed(0)
train_loader = DataLoader(train_set, batch_size=16, shuffle=True,
                          generator=torch.Generator().manual_seed(1))
val_loader = DataLoader(val_set, batch_size=8, drop_last=True)


def make():
    model = Regressor(5)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2, weight_decay=1e-4)
    scheduler = torch.optim.lr_scheduler.ReduceLROnPlateau(optimizer, mode="min", factor=0.5,
                                                           patience=0, threshold=1e-2)
    return model, optimizer, scheduler


def train_one_epoch(model, optimizer, criterion):
    model.train()
    running = 0.0
    for inputs, labels in train_loader:
        optimizer.zero_grad(set_to_none=True)
        loss = criterion(model(inputs), labels)
        loss.backward()
        optimizer.step()
        running += loss.item() * inputs.size(0)
    return running / len(train_loader.dataset)


def validate(model):
    model.eval()
    mse, mae, n = 0.0, 0.0, 0
    with torch.inference_mode():
        for inputs, labels in val_loader:
            out = model(inputs)
            mse += nn.functional.mse_loss(out, labels, reduction="sum").item()
            mae += nn.L1Loss(reduction="sum")(out, labels).item()
            n += labels.numel()
    return mse / n, mae / n


model, optimizer, scheduler = make()
criterion = nn.MSELoss()
path = os.path.join(tempfile.mkdtemp(), "checkpoint.pt")
best, patience, bad_epochs = float("inf"), 3, 0
for epoch in range(3):
    train_loss = train_one_epoch(model, optimizer, criterion)
    val_mse, val_mae = validate(model)
    scheduler.step(val_mse)
    print(f"epoch {epoch} train {train_loss:.5f} val mse {val_mse:.5f} mae {val_mae:.5f} "
          f"lr {optimizer.param_groups[0]['lr']:.5f}")
    if val_mse < best:
        best = val_mse
torch.save({"epoch": epoch, "model_state_dict": model.state_dict(),
            "optimizer_state_dict": optimizer.state_dict(),
            "scheduler_state_dict": scheduler.state_dict(), "loss": train_loss, "best": best}, path)

# resume in fresh objects, as after a restart
torch.manual_seed(123)
model, optimizer, scheduler = make()
checkpoint = torch.load(path, weights_only=True)
model.load_state_dict(checkpoint["model_state_dict"])
optimizer.load_state_dict(checkpoint["optimizer_state_dict"])
scheduler.load_state_dict(checkpoint["scheduler_state_dict"])
start, best = checkpoint["epoch"] + 1, checkpoint["best"]
print("resumed at", start, "loss", round(checkpoint["loss"], 5), "lr", optimizer.param_groups[0]["lr"],
      "num_bad_epochs", scheduler.num_bad_epochs, sorted(optimizer.state_dict()["state"][0]))

compiled = torch.compile(model)
for epoch in range(start, 6):
    train_loss = train_one_epoch(model, optimizer, criterion)
    val_mse, val_mae = validate(model)
    c_mse, c_mae = validate(compiled)
    scheduler.step(val_mse)
    print(f"epoch {epoch} train {train_loss:.5f} val mse {val_mse:.5f} mae {val_mae:.5f} "
          f"lr {scheduler.get_last_lr()[0]:.5f} compiled == eager {abs(c_mse - val_mse) < 1e-6}")
    if val_mse < best - 1e-4:
        best, bad_epochs = val_mse, 0
    else:
        bad_epochs += 1
        if bad_epochs >= patience:
            print("early stopping")
            break

model.eval()
with torch.inference_mode():
    x, y = val_set[0]
    pred = model(x.unsqueeze(0))
print("prediction", round(pred.item(), 4), "target", round(y.item(), 4), "best", round(best, 5))
