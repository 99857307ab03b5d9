"""The digits MLP of examples/c_train: a training step and an inference
function, each built by ``tracec build`` into a library that train.c drives.

The parameters are seeded, so both libraries embed the same initial
weights (the step's init_state sets them; the C program then passes the
trained ones to the inference library)."""
import tracec
from tracec import nn
import tracec.nn.functional as F

tracec.manual_seed(0)
model = nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 10))
opt = tracec.optim.Adam(model.parameters(), lr=3e-3)


def train_step(x, y):
    opt.zero_grad()
    loss = F.cross_entropy(model(x), y)
    loss.backward()
    opt.step()
    return loss


def predict(x):
    with tracec.no_grad():
        return model(x).argmax(dim=1)
