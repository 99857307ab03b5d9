# pytorch/examples distributed/ddp-tutorial-series/multigpu_torchrun.py, the
# CPU variant (the tutorial's notes: backend "gloo" instead of "nccl", no
# device ids, map_location "cpu"), launched with
#   torchrun --nproc_per_node=2 multigpu_torchrun.py 2 1 --batch_size 16
# Changes for a checkable run (each marked "tracec test:"): a seeded, tiny
# dataset; mse_loss (the published cross_entropy over one output is
# identically 0, so nothing would train); each rank's losses and the final
# weights printed; the snapshot loaded back by a second Trainer; every line
# written in one call (ranks share stdout: their lines interleave whole).
import os
import sys

import torch
import torch.nn.functional as F
from torch.utils.data import Dataset, DataLoader
from datautils import MyTrainDataset

from torch.utils.data.distributed import DistributedSampler
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.distributed import init_process_group, destroy_process_group, barrier


def log(msg):  # tracec test: one write per line
    sys.stdout.write(f"{msg}\n")


def ddp_setup():
    init_process_group(backend="gloo")


class Trainer:
    def __init__(
        self,
        model: torch.nn.Module,
        train_data: DataLoader,
        optimizer: torch.optim.Optimizer,
        save_every: int,
        snapshot_path: str,
    ) -> None:
        self.gpu_id = int(os.environ["LOCAL_RANK"])
        self.model = model
        self.train_data = train_data
        self.optimizer = optimizer
        self.save_every = save_every
        self.epochs_run = 0
        self.snapshot_path = snapshot_path
        if os.path.exists(snapshot_path):
            log(f"[GPU{self.gpu_id}] Loading snapshot")
            self._load_snapshot(snapshot_path)

        self.model = DDP(self.model)

    def _load_snapshot(self, snapshot_path):
        snapshot = torch.load(snapshot_path, map_location="cpu")
        self.model.load_state_dict(snapshot["MODEL_STATE"])
        self.epochs_run = snapshot["EPOCHS_RUN"]
        log(f"[GPU{self.gpu_id}] Resuming training from snapshot at Epoch {self.epochs_run}")

    def _run_batch(self, source, targets):
        self.optimizer.zero_grad()
        output = self.model(source)
        loss = F.mse_loss(output, targets)  # tracec test: see above
        loss.backward()
        self.optimizer.step()
        return loss.item()

    def _run_epoch(self, epoch):
        b_sz = len(next(iter(self.train_data))[0])
        log(f"[GPU{self.gpu_id}] Epoch {epoch} | Batchsize: {b_sz} | Steps: {len(self.train_data)}")
        self.train_data.sampler.set_epoch(epoch)
        losses = []
        for source, targets in self.train_data:
            losses.append(self._run_batch(source, targets))
        log(f"[GPU{self.gpu_id}] Epoch {epoch} | losses {' '.join(f'{v:.6f}' for v in losses)}")

    def _save_snapshot(self, epoch):
        snapshot = {
            "MODEL_STATE": self.model.module.state_dict(),
            "EPOCHS_RUN": epoch,
        }
        torch.save(snapshot, self.snapshot_path)
        log(f"Epoch {epoch} | Training snapshot saved at {self.snapshot_path}")

    def train(self, max_epochs: int):
        for epoch in range(self.epochs_run, max_epochs):
            self._run_epoch(epoch)
            if self.gpu_id == 0 and epoch % self.save_every == 0:
                self._save_snapshot(epoch)


def load_train_objs():
    torch.manual_seed(0)  # tracec test: the same data on every rank
    train_set = MyTrainDataset(128)  # load your dataset
    model = torch.nn.Linear(20, 1)  # load your model
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-1)
    return train_set, model, optimizer


def prepare_dataloader(dataset: Dataset, batch_size: int):
    return DataLoader(
        dataset,
        batch_size=batch_size,
        shuffle=False,
        sampler=DistributedSampler(dataset)
    )


def main(save_every: int, total_epochs: int, batch_size: int, snapshot_path: str = "snapshot.pt"):
    ddp_setup()
    dataset, model, optimizer = load_train_objs()
    train_data = prepare_dataloader(dataset, batch_size)
    trainer = Trainer(model, train_data, optimizer, save_every, snapshot_path)
    trainer.train(total_epochs)
    w = trainer.model.module.weight
    log(f"[GPU{trainer.gpu_id}] weight sum {w.sum().item():.6f} | bias {trainer.model.module.bias.item():.6f}")
    # tracec test: a restarted job resumes from the snapshot
    barrier()
    _, model, optimizer = load_train_objs()
    resumed = Trainer(model, train_data, optimizer, save_every, snapshot_path)
    resumed.train(total_epochs + 1)
    log(f"[GPU{resumed.gpu_id}] resumed weight sum {resumed.model.module.weight.sum().item():.6f}")
    destroy_process_group()


if __name__ == "__main__":
    import argparse
    parser = argparse.ArgumentParser(description='simple distributed training job')
    parser.add_argument('total_epochs', type=int, help='Total epochs to train the model')
    parser.add_argument('save_every', type=int, help='How often to save a snapshot')
    parser.add_argument('--batch_size', default=32, type=int, help='Input batch size on each device (default: 32)')
    args = parser.parse_args()

    main(args.save_every, args.total_epochs, args.batch_size)
