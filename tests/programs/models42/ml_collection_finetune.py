# aladdinpersson/Machine-Learning-Collection, ML/Pytorch/Basics:
# pytorch_init_weights.py, pytorch_pretrain_finetune.py and
# pytorch_lr_ratescheduler.py, written the way the repo has them: CNN with
# initialize_weights() looping over self.modules() (nn.init.kaiming_uniform_
# on Conv2d / Linear weights, constant_ biases, BatchNorm2d weight 1 / bias 0)
# and every parameter printed; the Identity module swapped in for
# model.avgpool, every parameter frozen (param.requires_grad = False) and a
# new model.classifier = nn.Sequential(nn.Linear(512, 100), nn.ReLU(),
# nn.Linear(100, num_classes)) trained alone; and the ReduceLROnPlateau run
# (factor=0.1, patience) stepped with each epoch's mean loss, the learning
# rate printed from optimizer.param_groups.
# Changes for a CPU test: the CNN's parameters printed as shapes and sums
# (the full tensors are ~8000 numbers); a small VGG-shaped network with
# features / avgpool / classifier attributes (512 channels at 1x1 before the
# classifier) in place of torchvision.models.vgg16(pretrained=True), trained
# on random CIFAR-shaped 32x32 images (torchvision is not used); for the
# scheduler, MNIST-shaped random data, patience=0 and 6 epochs so the plateau
# is reached, lr=0.1 (the repo's large rate, which plateaus quickly).
# PyTorch 2.13 removed ReduceLROnPlateau's verbose argument, so the repo's
# verbose=True is tried first and its TypeError printed; one classifier
# training step under torch.compile is checked against eager.
import copy

import torch
import torch.nn as nn
import torch.optim as optim
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset

torch.manual_seed(0)
device = torch.device("cuda" if torch.cuda.is_available() else "cpu")

# ---- pytorch_init_weights.py ----


class CNN(nn.Module):
    def __init__(self, in_channels, num_classes):
        super(CNN, self).__init__()
        self.conv1 = nn.Conv2d(
            in_channels=in_channels,
            out_channels=6,
            kernel_size=(3, 3),
            stride=(1, 1),
            padding=(1, 1),
        )
        self.pool = nn.MaxPool2d(kernel_size=(2, 2), stride=(2, 2))
        self.conv2 = nn.Conv2d(
            in_channels=6,
            out_channels=16,
            kernel_size=(3, 3),
            stride=(1, 1),
            padding=(1, 1),
        )
        self.fc1 = nn.Linear(16 * 7 * 7, num_classes)
        self.initialize_weights()

    def forward(self, x):
        x = F.relu(self.conv1(x))
        x = self.pool(x)
        x = F.relu(self.conv2(x))
        x = self.pool(x)
        x = x.reshape(x.shape[0], -1)
        x = self.fc1(x)

        return x

    def initialize_weights(self):
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_uniform_(m.weight)

                if m.bias is not None:
                    nn.init.constant_(m.bias, 0)

            elif isinstance(m, nn.BatchNorm2d):
                nn.init.constant_(m.weight, 1)
                nn.init.constant_(m.bias, 0)

            elif isinstance(m, nn.Linear):
                nn.init.kaiming_uniform_(m.weight)
                nn.init.constant_(m.bias, 0)


model = CNN(in_channels=3, num_classes=10)

for param in model.parameters():
    print(tuple(param.shape), param.sum().item(), param.abs().max().item())

# ---- pytorch_pretrain_finetune.py ----

# Hyperparameters
num_classes = 10
learning_rate = 1e-3
batch_size = 8
num_epochs = 2


# Simple Identity class that let's input pass without changes
class Identity(nn.Module):
    def __init__(self):
        super(Identity, self).__init__()

    def forward(self, x):
        return x


class VGG(nn.Module):
    """A small network shaped like torchvision's VGG: features, avgpool
    (AdaptiveAvgPool2d((7, 7))) and a classifier on the flattened output."""

    def __init__(self):
        super(VGG, self).__init__()
        cfg = [16, "M", 32, "M", 64, "M", 128, "M", 512, "M"]
        layers, in_channels = [], 3
        for v in cfg:
            if v == "M":
                layers += [nn.MaxPool2d(kernel_size=2, stride=2)]
            else:
                layers += [nn.Conv2d(in_channels, v, kernel_size=3, padding=1), nn.ReLU(inplace=True)]
                in_channels = v
        self.features = nn.Sequential(*layers)
        self.avgpool = nn.AdaptiveAvgPool2d((7, 7))
        self.classifier = nn.Sequential(
            nn.Linear(512 * 7 * 7, 64), nn.ReLU(True), nn.Dropout(), nn.Linear(64, 1000))

    def forward(self, x):
        x = self.features(x)
        x = self.avgpool(x)
        x = torch.flatten(x, 1)
        x = self.classifier(x)
        return x


# Load pretrain model & modify it
model = VGG()

# If you want to do finetuning then set requires_grad = False
# Remove these two lines if you want to train entire model,
# and only want to load the pretrain weights.
for param in model.parameters():
    param.requires_grad = False

model.avgpool = Identity()
model.classifier = nn.Sequential(
    nn.Linear(512, 100), nn.ReLU(), nn.Linear(100, num_classes)
)
model.to(device)
print(model)

# Load Data (CIFAR-shaped random images)
train_dataset = TensorDataset(torch.randn(32, 3, 32, 32), torch.randint(0, num_classes, (32,)))
train_loader = DataLoader(dataset=train_dataset, batch_size=batch_size, shuffle=True)

# Loss and optimizer
criterion = nn.CrossEntropyLoss()
optimizer = optim.Adam(model.parameters(), lr=learning_rate)

# Train Network
for epoch in range(num_epochs):
    losses = []

    for batch_idx, (data, targets) in enumerate(train_loader):
        # Get data to cuda if possible
        data = data.to(device=device)
        targets = targets.to(device=device)

        # forward
        scores = model(data)
        loss = criterion(scores, targets)

        losses.append(loss.item())
        # backward
        optimizer.zero_grad()
        loss.backward()

        # gradient descent or adam step
        optimizer.step()

    print(f"Cost at epoch {epoch} is {sum(losses)/len(losses):.5f}")


# Check accuracy on training & test to see how good our model
def check_accuracy(loader, model):
    print("Checking accuracy on training data")  # the repo: if loader.dataset.train
    num_correct = 0
    num_samples = 0
    model.eval()

    with torch.no_grad():
        for x, y in loader:
            x = x.to(device=device)
            y = y.to(device=device)

            scores = model(x)
            _, predictions = scores.max(1)
            num_correct += (predictions == y).sum()
            num_samples += predictions.size(0)

        print(
            f"Got {num_correct} / {num_samples} with accuracy {float(num_correct)/float(num_samples)*100:.2f}"
        )

    model.train()


check_accuracy(train_loader, model)
print("frozen features have no grad:", all(p.grad is None for p in model.features.parameters()))

# compiled: one classifier training step checked against eager
data, targets = next(iter(train_loader))


def train_step(data, targets):
    loss = criterion(model(data), targets)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    return loss


state = copy.deepcopy((model.state_dict(), optimizer.state_dict()))
loss_c = torch.compile(train_step)(data, targets)
after_c = copy.deepcopy(model.state_dict())
model.load_state_dict(state[0])
optimizer.load_state_dict(state[1])
loss_e = train_step(data, targets)
print('compiled == eager', torch.allclose(loss_c, loss_e, atol=1e-6),
      all(torch.allclose(after_c[k], v, atol=1e-6) for k, v in model.state_dict().items()))

# ---- pytorch_lr_ratescheduler.py ----

# Hyperparameters
num_classes = 10
learning_rate = 0.1
batch_size = 16
num_epochs = 7

# Define a very simple model
model = nn.Sequential(nn.Linear(784, 50), nn.ReLU(), nn.Linear(50, 10)).to(device)

# Load Data (MNIST-shaped random images)
train_dataset = TensorDataset(torch.rand(64, 1, 28, 28), torch.randint(0, 10, (64,)))
train_loader = DataLoader(dataset=train_dataset, batch_size=batch_size, shuffle=True)

# Loss and optimizer
criterion = nn.CrossEntropyLoss()
optimizer = optim.Adam(model.parameters(), lr=learning_rate)

# Define Scheduler
try:
    scheduler = optim.lr_scheduler.ReduceLROnPlateau(
        optimizer, factor=0.1, patience=0, verbose=True
    )
except TypeError as e:
    print("TypeError:", e)
    scheduler = optim.lr_scheduler.ReduceLROnPlateau(
        optimizer, factor=0.1, patience=0
    )

# Train Network
for epoch in range(1, num_epochs):
    losses = []

    for batch_idx, (data, targets) in enumerate(train_loader):
        # Get data to cuda if possible
        data = data.reshape(data.shape[0], -1)
        data = data.to(device=device)
        targets = targets.to(device=device)

        # forward
        scores = model(data)
        loss = criterion(scores, targets)

        losses.append(loss.item())

        # backward
        loss.backward()

        # gradient descent or adam step
        optimizer.step()
        optimizer.zero_grad()

    mean_loss = sum(losses) / len(losses)

    # After each epoch do scheduler.step, note in this scheduler we need to send
    # in loss for that epoch!
    scheduler.step(mean_loss)
    print(f"Cost at epoch {epoch} is {mean_loss}", "lr", optimizer.param_groups[0]["lr"],
          scheduler.get_last_lr(), scheduler.num_bad_epochs)
