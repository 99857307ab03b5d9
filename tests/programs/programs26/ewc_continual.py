# Elastic weight consolidation on permuted "MNIST", after moskomule/ewc.pytorch
# (https://github.com/moskomule/ewc.pytorch, utils.py and demo.ipynb): the
# EWC class (named_parameters dict, deepcopy'd parameters zeroed in place
# through .data as the Fisher accumulators, the diagonal Fisher from each
# sample's squared gradient of the NLL of the model's own argmax label,
# Variable-wrapped means) and its penalty added to the cross-entropy with an
# importance weight; the tasks are pixel permutations drawn by torch.randperm.
# Written for this test: 16-pixel synthetic images, a 3-layer MLP, 2 tasks,
# 3 SGD steps each (plain SGD, then EWC); one EWC step compiled against eager.
import copy
from copy import deepcopy

import numpy as np
import torch
from torch import nn
from torch.autograd import Variable
import torch.nn.functional as F


def variable(t: torch.Tensor, use_cuda=True, **kwargs):
    if torch.cuda.is_available() and use_cuda:
        t = t.cuda()
    return Variable(t, **kwargs)


class EWC(object):
    def __init__(self, model: nn.Module, dataset: list):

        self.model = model
        self.dataset = dataset

        self.params = {n: p for n, p in self.model.named_parameters() if p.requires_grad}
        self._means = {}
        self._precision_matrices = self._diag_fisher()

        for n, p in deepcopy(self.params).items():
            self._means[n] = variable(p.data)

    def _diag_fisher(self):
        precision_matrices = {}
        for n, p in deepcopy(self.params).items():
            p.data.zero_()
            precision_matrices[n] = variable(p.data)

        self.model.eval()
        for input in self.dataset:
            self.model.zero_grad()
            input = variable(input)
            output = self.model(input).view(1, -1)
            label = output.max(1)[1].view(-1)
            loss = F.nll_loss(F.log_softmax(output, dim=1), label)
            loss.backward()

            for n, p in self.model.named_parameters():
                precision_matrices[n].data += p.grad.data ** 2 / len(self.dataset)

        precision_matrices = {n: p for n, p in precision_matrices.items()}
        return precision_matrices

    def penalty(self, model: nn.Module):
        loss = 0
        for n, p in model.named_parameters():
            _loss = self._precision_matrices[n] * (p - self._means[n]) ** 2
            loss += _loss.sum()
        return loss


class MLP(nn.Module):
    def __init__(self, hidden_size=24):
        super(MLP, self).__init__()
        self.fc1 = nn.Linear(16, hidden_size)
        self.fc2 = nn.Linear(hidden_size, hidden_size)
        self.fc3 = nn.Linear(hidden_size, hidden_size)
        self.fc4 = nn.Linear(hidden_size, 4)

    def forward(self, input):
        x = F.relu(self.fc1(input))
        x = F.relu(self.fc2(x))
        x = F.relu(self.fc3(x))
        x = self.fc4(x)
        return x


def normal_train(model, optimizer, data_loader):
    model.train()
    epoch_loss = 0
    for input, target in data_loader:
        input, target = variable(input), variable(target)
        optimizer.zero_grad()
        output = model(input)
        loss = F.cross_entropy(output, target)
        epoch_loss += loss.item()
        loss.backward()
        optimizer.step()
    return epoch_loss / len(data_loader)


def ewc_train(model, optimizer, data_loader, ewc, importance):
    model.train()
    epoch_loss = 0
    for input, target in data_loader:
        input, target = variable(input), variable(target)
        optimizer.zero_grad()
        output = model(input)
        loss = F.cross_entropy(output, target) + importance * ewc.penalty(model)
        epoch_loss += loss.item()
        loss.backward()
        optimizer.step()
    return epoch_loss / len(data_loader)


def test(model, data_loader):
    model.eval()
    correct = 0
    for input, target in data_loader:
        input, target = variable(input), variable(target)
        output = model(input)
        correct += (F.softmax(output, dim=1).max(dim=1)[1] == target).data.sum()
    return correct / len(data_loader.dataset)


rng = np.random.RandomState(0)
images = torch.from_numpy(rng.rand(24, 16).astype(np.float32))
labels = torch.from_numpy(rng.randint(0, 4, size=24))
torch.manual_seed(0)
permutations = [torch.arange(16)] + [torch.randperm(16) for _ in range(1)]
print("permutation", permutations[1].tolist())


def loader(perm):
    ds = torch.utils.data.TensorDataset(images[:, perm], labels)
    return torch.utils.data.DataLoader(ds, batch_size=8, shuffle=False)


model = MLP()
optimizer = torch.optim.SGD(params=model.parameters(), lr=0.05)
print("task 0 loss", round(normal_train(model, optimizer, loader(permutations[0])), 6),
      "acc", round(test(model, loader(permutations[0])).item(), 4))

old_tasks = [images[i, permutations[0]] for i in range(12)]
ewc = EWC(model, old_tasks)
print("fisher", {n: round(m.sum().item(), 6) for n, m in ewc._precision_matrices.items()})
print("means equal", all(torch.equal(ewc._means[n], p) for n, p in model.named_parameters()),
      "fisher is a leaf", ewc._precision_matrices["fc1.weight"].requires_grad)
importance = 10
for epoch in range(2):
    loss = ewc_train(model, optimizer, loader(permutations[1]), ewc, importance)
    print(f"epoch {epoch} ewc loss {loss:.6f} penalty {ewc.penalty(model).item():.6f}",
          "acc", [round(test(model, loader(p)).item(), 4) for p in permutations])


def train_step(input, target):
    optimizer.zero_grad()
    loss = F.cross_entropy(model(input), target) + importance * ewc.penalty(model)
    loss.backward()
    optimizer.step()
    return loss


x, y = images[:8, permutations[1]], labels[:8]
state, opt_state = copy.deepcopy(model.state_dict()), copy.deepcopy(optimizer.state_dict())
loss_c = torch.compile(train_step)(x, y)
after_c = copy.deepcopy(model.state_dict())
model.load_state_dict(state)
optimizer.load_state_dict(opt_state)
loss_e = train_step(x, y)
print("compiled loss", round(loss_c.item(), 5))
print("compiled == eager", torch.allclose(loss_c, loss_e, atol=1e-6),
      all(torch.allclose(after_c[k], v, atol=1e-6) for k, v in model.state_dict().items()))
