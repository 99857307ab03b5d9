# PyTorch "Learn the Basics" tutorials: "Optimizing Model Parameters"
# (FashionMNIST-shaped synthetic data), "Save and Load the Model", and the
# "Transfer Learning" tutorial's fine-tuning / fixed-feature-extractor setup
# (a small conv net stands in for the pretrained resnet18), with
# lr_scheduler.StepLR, copy.deepcopy of the best weights, requires_grad_(False).
import copy
import os
import time
import torch
from torch import nn
from torch.optim import lr_scheduler
from torch.utils.data import DataLoader, TensorDataset

torch.manual_seed(0)
protos = torch.rand(10, 1, 28, 28)
ty = torch.randint(0, 10, (128,))
tx = protos[ty] + 0.2 * torch.randn(128, 1, 28, 28)
training_data = TensorDataset(tx, ty)
test_data = TensorDataset(tx[:64], ty[:64])
train_dataloader = DataLoader(training_data, batch_size=64)
test_dataloader = DataLoader(test_data, batch_size=64)

class NeuralNetwork(nn.Module):
    def __init__(self):
        super().__init__()
        self.flatten = nn.Flatten()
        self.linear_relu_stack = nn.Sequential(
            nn.Linear(28*28, 512),
            nn.ReLU(),
            nn.Linear(512, 512),
            nn.ReLU(),
            nn.Linear(512, 10),
        )

    def forward(self, x):
        x = self.flatten(x)
        logits = self.linear_relu_stack(x)
        return logits

model = NeuralNetwork()
print(model)
learning_rate = 1e-3
batch_size = 64
epochs = 2
loss_fn = nn.CrossEntropyLoss()
optimizer = torch.optim.SGD(model.parameters(), lr=learning_rate)

def train_loop(dataloader, model, loss_fn, optimizer):
    size = len(dataloader.dataset)
    model.train()
    for batch, (X, y) in enumerate(dataloader):
        pred = model(X)
        loss = loss_fn(pred, y)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        if batch % 1 == 0:
            loss, current = loss.item(), batch * batch_size + len(X)
            print(f"loss: {loss:>7f}  [{current:>5d}/{size:>5d}]")

def test_loop(dataloader, model, loss_fn):
    model.eval()
    size = len(dataloader.dataset)
    num_batches = len(dataloader)
    test_loss, correct = 0, 0
    with torch.no_grad():
        for X, y in dataloader:
            pred = model(X)
            test_loss += loss_fn(pred, y).item()
            correct += (pred.argmax(1) == y).type(torch.float).sum().item()
    test_loss /= num_batches
    correct /= size
    print(f"Test Error: \n Accuracy: {(100*correct):>0.1f}%, Avg loss: {test_loss:>8f} \n")

for t in range(epochs):
    print(f"Epoch {t+1}\n-------------------------------")
    train_loop(train_dataloader, model, loss_fn, optimizer)
    test_loop(test_dataloader, model, loss_fn)
print("Done!")

# ---- Save and Load the Model ----
torch.save(model.state_dict(), 'model_weights.pth')
model2 = NeuralNetwork()
model2.load_state_dict(torch.load('model_weights.pth', weights_only=True))
model2.eval()
print(all(torch.equal(a, b) for a, b in zip(model.state_dict().values(), model2.state_dict().values())))
print(list(model2.state_dict().keys()))
checkpoint = {'epoch': epochs, 'model_state_dict': model.state_dict(),
              'optimizer_state_dict': optimizer.state_dict(), 'loss': 0.5}
torch.save(checkpoint, 'checkpoint.pt')
ck = torch.load('checkpoint.pt', weights_only=True)
optimizer2 = torch.optim.SGD(model2.parameters(), lr=0.5)
optimizer2.load_state_dict(ck['optimizer_state_dict'])
print(ck['epoch'], ck['loss'], optimizer2.param_groups[0]['lr'])
result = model2.load_state_dict({k: v for k, v in ck['model_state_dict'].items() if 'linear_relu_stack.4' not in k}, strict=False)
print(result.missing_keys, result.unexpected_keys)
try:
    model2.load_state_dict({'bogus': torch.zeros(1)})
except RuntimeError as e:
    print(str(e).splitlines()[0])

# ---- Transfer learning ----
device = torch.device("cuda:0" if torch.cuda.is_available() else "cpu")
class TinyResNet(nn.Module):
    def __init__(self, num_classes=1000):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 8, 3, padding=1)
        self.bn1 = nn.BatchNorm2d(8)
        self.relu = nn.ReLU(inplace=True)
        self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
        self.fc = nn.Linear(8, num_classes)
    def forward(self, x):
        x = self.avgpool(self.relu(self.bn1(self.conv1(x))))
        return self.fc(torch.flatten(x, 1))

images = torch.rand(16, 3, 16, 16)
labels = torch.randint(0, 2, (16,))
dataloaders = {x: DataLoader(TensorDataset(images, labels), batch_size=4, shuffle=(x == 'train'))
               for x in ['train', 'val']}
dataset_sizes = {x: 16 for x in ['train', 'val']}

def train_model(model, criterion, optimizer, scheduler, num_epochs=2):
    since = time.time()
    best_model_params_path = os.path.join('.', 'best_model_params.pt')
    torch.save(model.state_dict(), best_model_params_path)
    best_acc = 0.0
    for epoch in range(num_epochs):
        print(f'Epoch {epoch}/{num_epochs - 1}')
        print('-' * 10)
        for phase in ['train', 'val']:
            if phase == 'train':
                model.train()
            else:
                model.eval()
            running_loss = 0.0
            running_corrects = 0
            for inputs, labels in dataloaders[phase]:
                inputs = inputs.to(device)
                labels = labels.to(device)
                optimizer.zero_grad()
                with torch.set_grad_enabled(phase == 'train'):
                    outputs = model(inputs)
                    _, preds = torch.max(outputs, 1)
                    loss = criterion(outputs, labels)
                    if phase == 'train':
                        loss.backward()
                        optimizer.step()
                running_loss += loss.item() * inputs.size(0)
                running_corrects += torch.sum(preds == labels.data)
            if phase == 'train':
                scheduler.step()
            epoch_loss = running_loss / dataset_sizes[phase]
            epoch_acc = running_corrects.double() / dataset_sizes[phase]
            print(f'{phase} Loss: {epoch_loss:.4f} Acc: {epoch_acc:.4f}')
            if phase == 'val' and epoch_acc > best_acc:
                best_acc = epoch_acc
                torch.save(model.state_dict(), best_model_params_path)
        print()
    time_elapsed = time.time() - since
    print(f'Best val Acc: {best_acc:4f}')
    model.load_state_dict(torch.load(best_model_params_path, weights_only=True))
    return model

model_ft = TinyResNet()
num_ftrs = model_ft.fc.in_features
model_ft.fc = nn.Linear(num_ftrs, 2)
model_ft = model_ft.to(device)
criterion = nn.CrossEntropyLoss()
optimizer_ft = torch.optim.SGD(model_ft.parameters(), lr=0.001, momentum=0.9)
exp_lr_scheduler = lr_scheduler.StepLR(optimizer_ft, step_size=7, gamma=0.1)
model_ft = train_model(model_ft, criterion, optimizer_ft, exp_lr_scheduler, num_epochs=2)

model_conv = TinyResNet()
for param in model_conv.parameters():
    param.requires_grad = False
num_ftrs = model_conv.fc.in_features
model_conv.fc = nn.Linear(num_ftrs, 2)
model_conv = model_conv.to(device)
optimizer_conv = torch.optim.SGD(model_conv.fc.parameters(), lr=0.001, momentum=0.9)
exp_lr_scheduler = lr_scheduler.StepLR(optimizer_conv, step_size=7, gamma=0.1)
before = copy.deepcopy(model_conv.conv1.weight.data)
model_conv = train_model(model_conv, criterion, optimizer_conv, exp_lr_scheduler, num_epochs=2)
print(torch.equal(before, model_conv.conv1.weight), model_conv.conv1.weight.grad is None)
print(sum(p.numel() for p in model_conv.parameters() if p.requires_grad))
# param groups with different learning rates (fine-tuning the head faster)
model_ft.requires_grad_(True)
opt = torch.optim.SGD([{'params': [p for n, p in model_ft.named_parameters() if not n.startswith('fc')]},
                       {'params': model_ft.fc.parameters(), 'lr': 1e-2}], lr=1e-3, momentum=0.9)
print([g['lr'] for g in opt.param_groups], [len(g['params']) for g in opt.param_groups])
