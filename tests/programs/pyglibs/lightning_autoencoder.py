# Lightning's README example (Lightning-AI/pytorch-lightning: "LitAutoEncoder"),
# with pytorch-lightning itself from PyPI: a LightningModule with
# training_step / validation_step / test_step / predict_step /
# configure_optimizers, self.log, save_hyperparameters, Trainer.fit /
# validate / test / predict, ModelCheckpoint and EarlyStopping callbacks, and
# load_from_checkpoint.  Changed for a CPU test: random 28x28 "images"
# instead of MNIST (a download), 3 epochs, no progress bar or logger output.
import os
import tempfile

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, TensorDataset, random_split

import pytorch_lightning as pl
from pytorch_lightning.callbacks import EarlyStopping, ModelCheckpoint


class LitAutoEncoder(pl.LightningModule):
    def __init__(self, hidden=16, lr=1e-3):
        super().__init__()
        self.save_hyperparameters()
        self.encoder = nn.Sequential(nn.Linear(28 * 28, 64), nn.ReLU(), nn.Linear(64, hidden))
        self.decoder = nn.Sequential(nn.Linear(hidden, 64), nn.ReLU(), nn.Linear(64, 28 * 28))

    def forward(self, x):
        # in lightning, forward defines the prediction/inference actions
        embedding = self.encoder(x)
        return embedding

    def _loss(self, batch):
        x, _ = batch
        x = x.view(x.size(0), -1)
        z = self.encoder(x)
        x_hat = self.decoder(z)
        return F.mse_loss(x_hat, x)

    def training_step(self, batch, batch_idx):
        # training_step defines the train loop. It is independent of forward
        loss = self._loss(batch)
        self.log("train_loss", loss)
        return loss

    def validation_step(self, batch, batch_idx):
        self.log("val_loss", self._loss(batch))

    def test_step(self, batch, batch_idx):
        self.log("test_loss", self._loss(batch))

    def predict_step(self, batch, batch_idx, dataloader_idx=0):
        x, _ = batch
        return self(x.view(x.size(0), -1))

    def configure_optimizers(self):
        optimizer = torch.optim.Adam(self.parameters(), lr=self.hparams.lr)
        scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=1, gamma=0.5)
        return {"optimizer": optimizer, "lr_scheduler": scheduler}


pl.seed_everything(42)
images = torch.rand(96, 1, 28, 28)
labels = torch.randint(0, 10, (96,))
dataset = TensorDataset(images, labels)
train_set, val_set = random_split(dataset, [64, 32], generator=torch.Generator().manual_seed(42))
train_loader = DataLoader(train_set, batch_size=16, shuffle=True)
val_loader = DataLoader(val_set, batch_size=16)

autoencoder = LitAutoEncoder()
print(autoencoder)
print(autoencoder.hparams)

with tempfile.TemporaryDirectory() as tmp:
    checkpoint = ModelCheckpoint(dirpath=tmp, monitor="val_loss", save_top_k=1, filename="best")
    trainer = pl.Trainer(max_epochs=3, accelerator="cpu", devices=1, logger=False,
                         enable_progress_bar=False, enable_model_summary=False,
                         callbacks=[checkpoint, EarlyStopping(monitor="val_loss", patience=2)])
    trainer.fit(model=autoencoder, train_dataloaders=train_loader, val_dataloaders=val_loader)
    print("epochs run", trainer.current_epoch, "global step", trainer.global_step)
    print({k: round(float(v), 5) for k, v in sorted(trainer.callback_metrics.items())})
    print("best", os.path.basename(checkpoint.best_model_path), round(float(checkpoint.best_model_score), 5))
    print("lr now", trainer.optimizers[0].param_groups[0]["lr"])
    print(trainer.validate(autoencoder, val_loader, verbose=False))
    print(trainer.test(autoencoder, val_loader, verbose=False))
    embeddings = trainer.predict(autoencoder, val_loader)
    print(len(embeddings), embeddings[0].shape, embeddings[0][0, :4])

    restored = LitAutoEncoder.load_from_checkpoint(checkpoint.best_model_path)
    print(restored.hparams)
    ckpt = torch.load(checkpoint.best_model_path, weights_only=False)
    print(sorted(ckpt.keys()))
    print(ckpt["epoch"], ckpt["global_step"], list(ckpt["state_dict"].keys())[:2])
    restored.eval()
    with torch.no_grad():
        print("restored == best", torch.allclose(restored(images[:4].view(4, -1)),
                                                 restored.encoder(images[:4].view(4, -1))))
