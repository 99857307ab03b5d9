# PyTorch tutorial "Transfer Learning for Computer Vision Tutorial", written
# the way the tutorial has it: cudnn.benchmark, the dataloaders /
# dataset_sizes / class_names dicts over ['train', 'val'], the
# torch.accelerator device line, train_model with its phases,
# model.train() / model.eval(), torch.set_grad_enabled(phase == 'train'),
# `_, preds = torch.max(outputs, 1)`, `running_corrects +=
# torch.sum(preds == labels.data)`, `running_corrects.double() /
# dataset_sizes[phase]`, scheduler.step() per training phase, the best
# weights saved with torch.save(model.state_dict(), ...) inside a
# TemporaryDirectory and reloaded with torch.load(..., weights_only=True);
# finetuning resnet18 with `model_ft.fc = nn.Linear(num_ftrs, 2)` and
# SGD(lr=0.001, momentum=0.9) + StepLR(step_size=7, gamma=0.1), then the
# ConvNet as fixed feature extractor (requires_grad = False on every
# parameter, SGD over model_conv.fc.parameters() only).  Changes for a CPU
# test: resnet18(weights=None) seeded with torch.manual_seed(0) instead of
# the ImageNet weights; a tiny ImageFolder-like dataset of random 32x32
# tensors (ants / bees, 4 train and 4 val images, batch 4, shuffle=True, no
# workers) instead of hymenoptera_data and its transforms; 2 epochs; the
# visualization left out and the elapsed-time line marked [rng]; then the
# fixed-feature-extractor's fc step under torch.compile checked against
# eager on features from the frozen backbone.
import copy
import os
import time
from tempfile import TemporaryDirectory

import torch
import torch.backends.cudnn as cudnn
import torch.nn as nn
import torch.optim as optim
import torchvision
from torch.optim import lr_scheduler
from torchvision import models

cudnn.benchmark = True
torch.manual_seed(0)


class RandomImageFolder(torch.utils.data.Dataset):
    """ImageFolder's interface (classes, class_to_idx, samples, targets)
    over random 3x32x32 "images", one class after the other."""

    def __init__(self, per_class, classes=('ants', 'bees')):
        self.classes = list(classes)
        self.class_to_idx = {c: i for i, c in enumerate(self.classes)}
        self.samples = [(torch.randn(3, 32, 32) + 0.5 * i, i)
                        for i in range(len(self.classes)) for _ in range(per_class)]
        self.targets = [s[1] for s in self.samples]

    def __len__(self):
        return len(self.samples)

    def __getitem__(self, index):
        return self.samples[index]


image_datasets = {x: RandomImageFolder(2) for x in ['train', 'val']}
dataloaders = {x: torch.utils.data.DataLoader(image_datasets[x], batch_size=4,
                                              shuffle=True, num_workers=0)
               for x in ['train', 'val']}
dataset_sizes = {x: len(image_datasets[x]) for x in ['train', 'val']}
class_names = image_datasets['train'].classes

# We want to be able to train our model on an `accelerator` such as CUDA,
# MPS, MTIA, or XPU. If the current accelerator is available, we will use
# it. Otherwise, we use the CPU.
device = torch.accelerator.current_accelerator().type if torch.accelerator.is_available() else "cpu"
print(f"Using {device} device")
print(class_names, dataset_sizes)


def train_model(model, criterion, optimizer, scheduler, num_epochs=25):
    since = time.time()

    # Create a temporary directory to save training checkpoints
    with TemporaryDirectory() as tempdir:
        best_model_params_path = os.path.join(tempdir, 'best_model_params.pt')

        torch.save(model.state_dict(), best_model_params_path)
        best_acc = 0.0

        for epoch in range(num_epochs):
            print(f'Epoch {epoch}/{num_epochs - 1}')
            print('-' * 10)

            # Each epoch has a training and validation phase
            for phase in ['train', 'val']:
                if phase == 'train':
                    model.train()  # Set model to training mode
                else:
                    model.eval()   # Set model to evaluate mode

                running_loss = 0.0
                running_corrects = 0

                # Iterate over data.
                for inputs, labels in dataloaders[phase]:
                    inputs = inputs.to(device)
                    labels = labels.to(device)

                    # zero the parameter gradients
                    optimizer.zero_grad()

                    # forward
                    # track history if only in train
                    with torch.set_grad_enabled(phase == 'train'):
                        outputs = model(inputs)
                        _, preds = torch.max(outputs, 1)
                        loss = criterion(outputs, labels)

                        # backward + optimize only if in training phase
                        if phase == 'train':
                            loss.backward()
                            optimizer.step()

                    # statistics
                    running_loss += loss.item() * inputs.size(0)
                    running_corrects += torch.sum(preds == labels.data)
                if phase == 'train':
                    scheduler.step()

                epoch_loss = running_loss / dataset_sizes[phase]
                epoch_acc = running_corrects.double() / dataset_sizes[phase]

                print(f'{phase} Loss: {epoch_loss:.4f} Acc: {epoch_acc:.4f}')

                # deep copy the model
                if phase == 'val' and epoch_acc > best_acc:
                    best_acc = epoch_acc
                    torch.save(model.state_dict(), best_model_params_path)

            print()

        time_elapsed = time.time() - since
        print(f'[rng] Training complete in {time_elapsed // 60:.0f}m {time_elapsed % 60:.0f}s')
        print(f'Best val Acc: {best_acc:4f}')

        # load best model weights
        model.load_state_dict(torch.load(best_model_params_path, weights_only=True))
    return model


model_ft = models.resnet18(weights=None)
num_ftrs = model_ft.fc.in_features
# Here the size of each output sample is set to 2.
# Alternatively, it can be generalized to ``nn.Linear(num_ftrs, len(class_names))``.
model_ft.fc = nn.Linear(num_ftrs, 2)

model_ft = model_ft.to(device)

criterion = nn.CrossEntropyLoss()

# Observe that all parameters are being optimized
optimizer_ft = optim.SGD(model_ft.parameters(), lr=0.001, momentum=0.9)

# Decay LR by a factor of 0.1 every 7 epochs
exp_lr_scheduler = lr_scheduler.StepLR(optimizer_ft, step_size=7, gamma=0.1)

model_ft = train_model(model_ft, criterion, optimizer_ft, exp_lr_scheduler, num_epochs=2)
print('fc after finetuning', model_ft.fc.weight[:, :4], model_ft.fc.bias)
print('bn1 running_mean', model_ft.bn1.running_mean[:4], model_ft.bn1.num_batches_tracked)

model_conv = torchvision.models.resnet18(weights=None)
for param in model_conv.parameters():
    param.requires_grad = False

# Parameters of newly constructed modules have requires_grad=True by default
num_ftrs = model_conv.fc.in_features
model_conv.fc = nn.Linear(num_ftrs, 2)

model_conv = model_conv.to(device)

criterion = nn.CrossEntropyLoss()

# Observe that only parameters of final layer are being optimized as
# opposed to before.
optimizer_conv = optim.SGD(model_conv.fc.parameters(), lr=0.001, momentum=0.9)

# Decay LR by a factor of 0.1 every 7 epochs
exp_lr_scheduler = lr_scheduler.StepLR(optimizer_conv, step_size=7, gamma=0.1)

model_conv = train_model(model_conv, criterion, optimizer_conv, exp_lr_scheduler, num_epochs=2)
print('trainable', sum(p.numel() for p in model_conv.parameters() if p.requires_grad),
      'frozen grads', all(p.grad is None for n, p in model_conv.named_parameters() if not n.startswith('fc')))
print('fc after training', model_conv.fc.weight[:, :4], model_conv.fc.bias)
print('lr', exp_lr_scheduler.get_last_lr())

# compiled: the fixed feature extractor's fc step on features from the
# frozen backbone, checked against eager
model_conv.eval()
backbone = nn.Sequential(*list(model_conv.children())[:-1])
inputs, labels = next(iter(dataloaders['train']))
with torch.no_grad():
    feats = torch.flatten(backbone(inputs), 1)


def fc_step(feats, labels):
    optimizer_conv.zero_grad()
    loss = criterion(model_conv.fc(feats), labels)
    loss.backward()
    optimizer_conv.step()
    return loss


fc_init = copy.deepcopy(model_conv.fc.state_dict())
opt_init = copy.deepcopy(optimizer_conv.state_dict())
loss_c = torch.compile(fc_step)(feats, labels)
fc_c = copy.deepcopy(model_conv.fc.state_dict())
model_conv.fc.load_state_dict(fc_init)
optimizer_conv.load_state_dict(opt_init)
loss_e = fc_step(feats, labels)
print('compiled == eager', torch.allclose(loss_c, loss_e, atol=1e-6),
      all(torch.allclose(fc_c[k], v, atol=1e-6) for k, v in model_conv.fc.state_dict().items()))
print('loss', loss_e.item())
