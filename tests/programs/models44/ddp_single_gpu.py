# pytorch/examples distributed/ddp-tutorial-series/single_gpu.py (with its
# datautils.py's MyTrainDataset inlined): the Trainer class (_run_batch,
# _run_epoch printing "[GPU..] Epoch .. | Batchsize: .. | Steps: .." from
# len(next(iter(self.train_data))[0]), _save_checkpoint writing
# self.model.state_dict() with torch.save), load_train_objs (a dataset of
# 2048 (torch.rand(20), torch.rand(1)) pairs, torch.nn.Linear(20, 1), SGD
# lr=1e-3), prepare_dataloader (pin_memory=True, shuffle=True), and
# F.cross_entropy on the (B, 1) output against (B, 1) float targets (class
# probabilities over one class: the loss is always 0, its gradient 0, as in
# the original).
# Changes for a CPU test: the device comes from the command line (--device
# cpu) instead of the hard-coded 0 (cuda:0); the command line is given to
# parse_args; a 256-sample dataset and 3 epochs; the loss is printed per
# epoch, the checkpoint reloaded; then a variant with F.mse_loss (the loss
# the example means) whose _run_batch step runs under torch.compile against
# the same step eagerly.
import copy

import torch
import torch.nn.functional as F
from torch.utils.data import Dataset, DataLoader


# datautils.py
class MyTrainDataset(Dataset):
    def __init__(self, size):
        self.size = size
        self.data = [(torch.rand(20), torch.rand(1)) for _ in range(size)]

    def __len__(self):
        return self.size

    def __getitem__(self, index):
        return self.data[index]


class Trainer:
    def __init__(
        self,
        model: torch.nn.Module,
        train_data: DataLoader,
        optimizer: torch.optim.Optimizer,
        gpu_id: int,
        save_every: int,
    ) -> None:
        self.gpu_id = gpu_id
        self.model = model.to(gpu_id)
        self.train_data = train_data
        self.optimizer = optimizer
        self.save_every = save_every
        self.loss_fn = F.cross_entropy

    def _run_batch(self, source, targets):
        self.optimizer.zero_grad()
        output = self.model(source)
        loss = self.loss_fn(output, targets)
        loss.backward()
        self.optimizer.step()
        return loss

    def _run_epoch(self, epoch):
        b_sz = len(next(iter(self.train_data))[0])
        print(f"[GPU{self.gpu_id}] Epoch {epoch} | Batchsize: {b_sz} | Steps: {len(self.train_data)}")
        total = 0.0
        for source, targets in self.train_data:
            source = source.to(self.gpu_id)
            targets = targets.to(self.gpu_id)
            total += self._run_batch(source, targets).item()
        print(f"[GPU{self.gpu_id}] Epoch {epoch} | mean loss {total / len(self.train_data):.6f}")

    def _save_checkpoint(self, epoch):
        ckp = self.model.state_dict()
        PATH = "checkpoint.pt"
        torch.save(ckp, PATH)
        print(f"Epoch {epoch} | Training checkpoint saved at {PATH}")

    def train(self, max_epochs: int):
        for epoch in range(max_epochs):
            self._run_epoch(epoch)
            if epoch % self.save_every == 0:
                self._save_checkpoint(epoch)


def load_train_objs():
    train_set = MyTrainDataset(256)  # load your dataset
    model = torch.nn.Linear(20, 1)  # load your model
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-3)
    return train_set, model, optimizer


def prepare_dataloader(dataset: Dataset, batch_size: int):
    return DataLoader(
        dataset,
        batch_size=batch_size,
        pin_memory=True,
        shuffle=True
    )


def main(device, total_epochs, save_every, batch_size):
    dataset, model, optimizer = load_train_objs()
    train_data = prepare_dataloader(dataset, batch_size)
    trainer = Trainer(model, train_data, optimizer, device, save_every)
    trainer.train(total_epochs)
    return trainer


if __name__ == "__main__":
    import argparse
    parser = argparse.ArgumentParser(description='simple distributed training job')
    parser.add_argument('total_epochs', type=int, help='Total epochs to train the model')
    parser.add_argument('save_every', type=int, help='How often to save a snapshot')
    parser.add_argument('--batch_size', default=32, type=int, help='Input batch size on each device (default: 32)')
    parser.add_argument('--device', default='cpu', help='device to train on')
    args = parser.parse_args(["3", "2", "--batch_size", "32", "--device", "cpu"])

    torch.manual_seed(0)
    trainer = main(args.device, args.total_epochs, args.save_every, args.batch_size)
    state = torch.load("checkpoint.pt")
    print("checkpoint", list(state.keys()), [tuple(v.shape) for v in state.values()],
          torch.equal(state["weight"], trainer.model.weight), trainer.model.weight.grad.abs().sum().item())
    src, tgt = trainer.train_data.dataset[0]
    print("sample", src.shape, tgt.shape, f"{src.sum().item():.4f}", f"{tgt.item():.4f}",
          "one-class cross entropy", F.cross_entropy(trainer.model(src[None]), tgt[None]).item())

    # the regression loss the example means, one _run_batch under torch.compile
    trainer.loss_fn = F.mse_loss
    trainer._run_epoch(3)
    source, targets = next(iter(trainer.train_data))
    state, opt_state = copy.deepcopy(trainer.model.state_dict()), copy.deepcopy(trainer.optimizer.state_dict())
    eager = [trainer._run_batch(source, targets).item() for _ in range(2)]
    after = {k: v.clone() for k, v in trainer.model.state_dict().items()}
    trainer.model.load_state_dict(state)
    trainer.optimizer.load_state_dict(opt_state)
    cstep = torch.compile(trainer._run_batch)
    compiled = [cstep(source, targets).item() for _ in range(2)]
    print("compiled losses", [f"{v:.6f}" for v in compiled])
    print("compiled == eager:", all(abs(a - b) <= 1e-5 * max(1.0, abs(b)) for a, b in zip(compiled, eager)),
          all(torch.allclose(trainer.model.state_dict()[k], after[k], rtol=1e-5, atol=1e-6) for k in after))
