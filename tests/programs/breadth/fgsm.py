# PyTorch tutorial "Adversarial Example Generation" (FGSM): LeNet from the
# tutorial, synthetic MNIST-shaped data, data.requires_grad = True,
# data.grad.data, sign(), clamp, epsilons sweep; the model is trained a
# little first (the tutorial loads pretrained weights).
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim
import numpy as np

epsilons = [0, .05, .1, .15, .2, .25, .3]
use_cuda = True
torch.manual_seed(42)

class Net(nn.Module):
    def __init__(self):
        super(Net, self).__init__()
        self.conv1 = nn.Conv2d(1, 32, 3, 1)
        self.conv2 = nn.Conv2d(32, 64, 3, 1)
        self.dropout1 = nn.Dropout(0.25)
        self.dropout2 = nn.Dropout(0.5)
        self.fc1 = nn.Linear(9216, 128)
        self.fc2 = nn.Linear(128, 10)

    def forward(self, x):
        x = self.conv1(x)
        x = F.relu(x)
        x = self.conv2(x)
        x = F.relu(x)
        x = F.max_pool2d(x, 2)
        x = self.dropout1(x)
        x = torch.flatten(x, 1)
        x = self.fc1(x)
        x = F.relu(x)
        x = self.dropout2(x)
        x = self.fc2(x)
        output = F.log_softmax(x, dim=1)
        return output

rng = np.random.RandomState(0)
protos = rng.rand(10, 28, 28).astype(np.float32)
labels = rng.randint(0, 10, 40)
images = np.clip(protos[labels] + 0.2 * rng.randn(40, 28, 28), 0, 1).astype(np.float32)[:, None]
mean, std = 0.1307, 0.3081
dataset = torch.utils.data.TensorDataset(torch.from_numpy(images), torch.from_numpy(labels))
test_loader = torch.utils.data.DataLoader(dataset, batch_size=1, shuffle=True)

device = torch.device("cuda" if use_cuda and torch.cuda.is_available() else "cpu")
print("Using device: ", device)
model = Net().to(device)
opt = optim.Adadelta(model.parameters(), lr=1.0)
train_loader = torch.utils.data.DataLoader(dataset, batch_size=20, shuffle=True)
model.train()
for epoch in range(3):
    for data, target in train_loader:
        opt.zero_grad()
        loss = F.nll_loss(model((data - mean) / std), target)
        loss.backward()
        opt.step()
model.eval()

# FGSM attack code
def fgsm_attack(image, epsilon, data_grad):
    sign_data_grad = data_grad.sign()
    perturbed_image = image + epsilon*sign_data_grad
    perturbed_image = torch.clamp(perturbed_image, 0, 1)
    return perturbed_image

# restores the tensors to their original scale
def denorm(batch, mean=[0.1307], std=[0.3081]):
    if isinstance(mean, list):
        mean = torch.tensor(mean).to(device)
    if isinstance(std, list):
        std = torch.tensor(std).to(device)
    return batch * std.view(1, -1, 1, 1) + mean.view(1, -1, 1, 1)

def test( model, device, test_loader, epsilon ):
    correct = 0
    adv_examples = []
    for data, target in test_loader:
        data = (data - mean) / std
        data, target = data.to(device), target.to(device)
        data.requires_grad = True
        output = model(data)
        init_pred = output.max(1, keepdim=True)[1] # get the index of the max log-probability
        if init_pred.item() != target.item():
            continue
        loss = F.nll_loss(output, target)
        model.zero_grad()
        loss.backward()
        data_grad = data.grad.data
        data_denorm = denorm(data)
        perturbed_data = fgsm_attack(data_denorm, epsilon, data_grad)
        perturbed_data_normalized = (perturbed_data - mean) / std  # transforms.Normalize
        output = model(perturbed_data_normalized)
        final_pred = output.max(1, keepdim=True)[1] # get the index of the max log-probability
        if final_pred.item() == target.item():
            correct += 1
            if epsilon == 0 and len(adv_examples) < 5:
                adv_ex = perturbed_data.squeeze().detach().cpu().numpy()
                adv_examples.append( (init_pred.item(), final_pred.item(), adv_ex) )
        else:
            if len(adv_examples) < 5:
                adv_ex = perturbed_data.squeeze().detach().cpu().numpy()
                adv_examples.append( (init_pred.item(), final_pred.item(), adv_ex) )
    final_acc = correct/float(len(test_loader))
    print(f"Epsilon: {epsilon}\tTest Accuracy = {correct} / {len(test_loader)} = {final_acc}")
    return final_acc, adv_examples

accuracies = []
examples = []
for eps in epsilons:
    acc, ex = test(model, device, test_loader, eps)
    accuracies.append(acc)
    examples.append(ex)
print(len(accuracies), accuracies[0] >= accuracies[-1])
print(all(e[2].shape == (28, 28) for exs in examples for e in exs))
