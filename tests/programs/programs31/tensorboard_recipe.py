# PyTorch recipe "How to use TensorBoard with PyTorch" (recipes/recipes/
# tensorboard_with_pytorch) and the Intro to PyTorch series' "PyTorch
# TensorBoard Support" (beginner/introyt/tensorboardyt_tutorial), written
# the way they have it: `from torch.utils.tensorboard import SummaryWriter`,
# writer = SummaryWriter(), a linear regression trained with SGD and
# writer.add_scalar("Loss/train", loss, epoch), writer.flush(),
# writer.close(); add_scalars('Training vs. Validation Loss', {...}, step),
# add_image of a torchvision-style grid (built with torch.cat: no
# torchvision here) and add_histogram of a weight (the tutorial's
# add_graph and add_embedding left out: tracec's writer does not have
# them).  Then the event files are read back with
# tensorboard's EventAccumulator (what TensorBoard shows), and the program
# prints the tags and the logged values.  Written for this test: 10 epochs,
# a log_dir under the working folder, and one compiled training step
# checked against the same step run eagerly.
import copy
import glob
import os

import torch
import torch.nn as nn
from torch.utils.tensorboard import SummaryWriter

torch.manual_seed(0)
writer = SummaryWriter(log_dir="runs/recipe")

x = torch.arange(-5, 5, 0.1).view(-1, 1)
y = -5 * x + 0.1 * torch.randn(x.size())

model = torch.nn.Linear(1, 1)
criterion = torch.nn.MSELoss()
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)


def train_model(iter):
    for epoch in range(iter):
        y1 = model(x)
        loss = criterion(y1, y)
        writer.add_scalar("Loss/train", loss, epoch)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()


train_model(10)
writer.flush()
writer.close()


class Net(nn.Module):
    def __init__(self):
        super(Net, self).__init__()
        self.conv1 = nn.Conv2d(1, 6, 5)
        self.pool = nn.MaxPool2d(2, 2)
        self.conv2 = nn.Conv2d(6, 16, 5)
        self.fc1 = nn.Linear(16 * 4 * 4, 120)
        self.fc2 = nn.Linear(120, 84)
        self.fc3 = nn.Linear(84, 10)

    def forward(self, x):
        x = self.pool(torch.relu(self.conv1(x)))
        x = self.pool(torch.relu(self.conv2(x)))
        x = x.view(-1, 16 * 4 * 4)
        x = torch.relu(self.fc1(x))
        x = torch.relu(self.fc2(x))
        x = self.fc3(x)
        return x


net = Net()
criterion = nn.CrossEntropyLoss()
optimizer = torch.optim.SGD(net.parameters(), lr=0.01, momentum=0.9)
images = torch.rand(8, 1, 28, 28)
labels = torch.randint(0, 10, (8,))
val_images = torch.rand(8, 1, 28, 28)
val_labels = torch.randint(0, 10, (8,))

writer = SummaryWriter("runs/fashion_trainer")
img_grid = torch.cat([torch.cat(list(images[i * 4:(i + 1) * 4, 0]), dim=1) for i in range(2)], dim=0)
writer.add_image("Four Fashion-MNIST Images", img_grid.unsqueeze(0))
writer.flush()


def train_step(inputs, targets):
    optimizer.zero_grad()
    outputs = net(inputs)
    loss = criterion(outputs, targets)
    loss.backward()
    optimizer.step()
    return loss


for epoch in range(3):
    running_loss = train_step(images, labels).item()
    net.train(False)
    with torch.no_grad():
        vloss = criterion(net(val_images), val_labels).item()
    net.train(True)
    writer.add_scalars('Training vs. Validation Loss',
                       {'Training': running_loss, 'Validation': vloss}, epoch)
    writer.add_histogram("fc3.weight", net.fc3.weight, epoch)
    print("epoch", epoch, "train", round(running_loss, 6), "val", round(vloss, 6))
writer.flush()
writer.close()

from tensorboard.backend.event_processing.event_accumulator import EventAccumulator  # noqa: E402

for run in sorted(glob.glob("runs/**/events.out.tfevents.*", recursive=True)):
    acc = EventAccumulator(run)
    acc.Reload()
    tags = acc.Tags()
    print(os.path.dirname(run), "scalars", tags["scalars"], "images", tags["images"],
          "histograms", tags["histograms"])
    for tag in tags["scalars"]:
        print(" ", tag, [(e.step, round(e.value, 5)) for e in acc.Scalars(tag)])
    for tag in tags["images"]:
        im = acc.Images(tag)[0]
        print(" ", tag, im.width, im.height)
    for tag in tags["histograms"]:
        h = acc.Histograms(tag)[-1].histogram_value
        print(" ", tag, h.num, round(h.min, 5), round(h.max, 5), round(h.sum, 4))

state, opt_state = copy.deepcopy(net.state_dict()), copy.deepcopy(optimizer.state_dict())
loss_c = torch.compile(train_step)(images, labels)
after_c = copy.deepcopy(net.state_dict())
net.load_state_dict(state)
optimizer.load_state_dict(opt_state)
loss_e = train_step(images, labels)
print("compiled loss", round(loss_c.item(), 6))
print("compiled == eager", torch.allclose(loss_c, loss_e, atol=1e-6),
      all(torch.allclose(after_c[k], v, atol=1e-6) for k, v in net.state_dict().items()))
