"""PyTorch-Ignite as its quickstart writes it: create_supervised_trainer /
evaluator, metrics, event handlers, EarlyStopping, ModelCheckpoint, an LR
scheduler handler and the Engine's state."""
import tempfile

import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset

from ignite.contrib.handlers import PiecewiseLinear
from ignite.engine import Events, create_supervised_evaluator, create_supervised_trainer
from ignite.handlers import Checkpoint, DiskSaver, EarlyStopping, global_step_from_engine
from ignite.metrics import Accuracy, ConfusionMatrix, Loss, Precision, Recall, RunningAverage

torch.manual_seed(0)
x = torch.randn(64, 10)
y = (x[:, 0] + 0.5 * x[:, 1] > 0).long()
train_loader = DataLoader(TensorDataset(x[:48], y[:48]), batch_size=8, shuffle=True)
val_loader = DataLoader(TensorDataset(x[48:], y[48:]), batch_size=8)
model = nn.Sequential(nn.Linear(10, 16), nn.ReLU(), nn.Linear(16, 2))
optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
criterion = nn.CrossEntropyLoss()
trainer = create_supervised_trainer(model, optimizer, criterion)
metrics = {"accuracy": Accuracy(), "loss": Loss(criterion), "precision": Precision(average=True),
           "recall": Recall(average=True), "cm": ConfusionMatrix(num_classes=2)}
evaluator = create_supervised_evaluator(model, metrics=metrics)
RunningAverage(output_transform=lambda out: out).attach(trainer, "avg_loss")
scheduler = PiecewiseLinear(optimizer, "lr", milestones_values=[(0, 0.1), (12, 0.01)])
trainer.add_event_handler(Events.ITERATION_STARTED, scheduler)


@trainer.on(Events.ITERATION_COMPLETED(every=3))
def log_training_loss(engine):
    print(f"epoch {engine.state.epoch} iter {engine.state.iteration} "
          f"loss {engine.state.output:.5f} avg {engine.state.metrics['avg_loss']:.5f} "
          f"lr {optimizer.param_groups[0]['lr']:.5f}")


@trainer.on(Events.EPOCH_COMPLETED)
def log_validation(engine):
    evaluator.run(val_loader)
    m = evaluator.state.metrics
    print(f"val epoch {engine.state.epoch} acc {m['accuracy']:.4f} loss {m['loss']:.5f} "
          f"precision {m['precision']:.4f} recall {m['recall']:.4f} cm {m['cm'].tolist()}")


def score(engine):
    return -engine.state.metrics["loss"]


evaluator.add_event_handler(Events.COMPLETED, EarlyStopping(patience=2, score_function=score,
                                                            trainer=trainer))
with tempfile.TemporaryDirectory() as d:
    checkpoint = Checkpoint({"model": model, "optimizer": optimizer, "trainer": trainer},
                            DiskSaver(d, require_empty=False), n_saved=2,
                            score_function=score, score_name="neg_loss",
                            global_step_transform=global_step_from_engine(trainer))
    evaluator.add_event_handler(Events.COMPLETED, checkpoint)
    state = trainer.run(train_loader, max_epochs=4)
    print("done", state.epoch, state.iteration, checkpoint.last_checkpoint is not None)
    restored = nn.Sequential(nn.Linear(10, 16), nn.ReLU(), nn.Linear(16, 2))
    import os
    print("saved", sorted(os.listdir(d)))
    ck = torch.load(os.path.join(d, str(checkpoint.last_checkpoint)), weights_only=False)
    Checkpoint.load_objects({"model": restored}, ck)
    print("restored", f"{sum(p.sum().item() for p in restored.parameters()):.5f}",
          sorted(ck), ck["trainer"]["epoch"] if "epoch" in ck["trainer"] else ck["trainer"])
