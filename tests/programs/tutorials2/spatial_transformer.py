# PyTorch tutorial "Spatial Transformer Networks Tutorial" (localization net
# -> affine_grid -> grid_sample in front of a small MNIST classifier), on
# random 28x28 "digits"; then every align_corners / mode / padding_mode of
# F.affine_grid and F.grid_sample that the STN could use, 4-D and 5-D.
# Weights and data come from numpy so tracec and torch run the same numbers;
# training (with its dropout) is compared by its printed shape only.
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim

device = torch.device("cuda" if torch.cuda.is_available() else "cpu")


class Net(nn.Module):
    def __init__(self):
        super(Net, self).__init__()
        self.conv1 = nn.Conv2d(1, 10, kernel_size=5)
        self.conv2 = nn.Conv2d(10, 20, kernel_size=5)
        self.conv2_drop = nn.Dropout2d()
        self.fc1 = nn.Linear(320, 50)
        self.fc2 = nn.Linear(50, 10)

        # Spatial transformer localization-network
        self.localization = nn.Sequential(
            nn.Conv2d(1, 8, kernel_size=7),
            nn.MaxPool2d(2, stride=2),
            nn.ReLU(True),
            nn.Conv2d(8, 10, kernel_size=5),
            nn.MaxPool2d(2, stride=2),
            nn.ReLU(True)
        )

        # Regressor for the 3 * 2 affine matrix
        self.fc_loc = nn.Sequential(
            nn.Linear(10 * 3 * 3, 32),
            nn.ReLU(True),
            nn.Linear(32, 3 * 2)
        )

        # Initialize the weights/bias with identity transformation
        self.fc_loc[2].weight.data.zero_()
        self.fc_loc[2].bias.data.copy_(torch.tensor([1, 0, 0, 0, 1, 0], dtype=torch.float))

    # Spatial transformer network forward function
    def stn(self, x):
        xs = self.localization(x)
        xs = xs.view(-1, 10 * 3 * 3)
        theta = self.fc_loc(xs)
        theta = theta.view(-1, 2, 3)

        grid = F.affine_grid(theta, x.size())
        x = F.grid_sample(x, grid)

        return x

    def forward(self, x):
        # transform the input
        x = self.stn(x)

        # Perform the usual forward pass
        x = F.relu(F.max_pool2d(self.conv1(x), 2))
        x = F.relu(F.max_pool2d(self.conv2_drop(self.conv2(x)), 2))
        x = x.view(-1, 320)
        x = F.relu(self.fc1(x))
        x = F.dropout(x, training=self.training)
        x = self.fc2(x)
        return F.log_softmax(x, dim=1)


rng = np.random.default_rng(0)
images = torch.from_numpy(rng.standard_normal((32, 1, 28, 28)).astype(np.float32))
labels = torch.from_numpy(rng.integers(0, 10, 32))
train_loader = torch.utils.data.DataLoader(
    torch.utils.data.TensorDataset(images[:24], labels[:24]), batch_size=8, shuffle=True)
test_loader = torch.utils.data.DataLoader(
    torch.utils.data.TensorDataset(images[24:], labels[24:]), batch_size=8, shuffle=False)

model = Net().to(device)
g = np.random.default_rng(1)
with torch.no_grad():
    for name, p in model.named_parameters():
        if not name.startswith("fc_loc.2"):
            p.copy_(torch.from_numpy(g.uniform(-0.2, 0.2, tuple(p.shape)).astype(np.float32)))
    # a transform a little off the identity, so the sampler interpolates
    model.fc_loc[2].bias.copy_(torch.tensor([0.913, 0.107, 0.0531, -0.0973, 1.087, -0.0419]))

optimizer = optim.SGD(model.parameters(), lr=0.01)


def test():
    with torch.no_grad():
        model.eval()
        test_loss = 0
        correct = 0
        for data, target in test_loader:
            data, target = data.to(device), target.to(device)
            output = model(data)

            # sum up batch loss
            test_loss += F.nll_loss(output, target, size_average=False).item()
            # get the index of the max log-probability
            pred = output.max(1, keepdim=True)[1]
            correct += pred.eq(target.view_as(pred)).sum().item()

        test_loss /= len(test_loader.dataset)
        print('Test set: Average loss: {:.4f}, Accuracy: {}/{}'
              .format(test_loss, correct, len(test_loader.dataset)))


# the same numbers before training: eval forward and the gradients through the sampler
test()
model.eval()
out = model(images[:8])
loss = F.nll_loss(out, labels[:8])
loss.backward()
print('eval loss %.5f' % loss.item())
print('grad fc_loc.2.weight %.6f' % model.fc_loc[2].weight.grad.abs().sum().item())
print('grad localization.0.weight %.6f' % model.localization[0].weight.grad.abs().sum().item())
optimizer.zero_grad()


def train(epoch):
    model.train()
    for batch_idx, (data, target) in enumerate(train_loader):
        data, target = data.to(device), target.to(device)

        optimizer.zero_grad()
        output = model(data)
        loss = F.nll_loss(output, target)
        loss.backward()
        optimizer.step()
        if batch_idx % 2 == 0:
            print('[rng] Train Epoch: {} [{}/{} ({:.0f}%)]\tLoss: {:.6f}'.format(
                epoch, batch_idx * len(data), len(train_loader.dataset),
                100. * batch_idx / len(train_loader), loss.item()))


for epoch in range(1, 3):
    train(epoch)


def convert_image_np(inp):
    """Convert a Tensor to numpy image."""
    inp = inp.numpy().transpose((1, 2, 0))
    mean = np.array([0.485, 0.456, 0.406])
    std = np.array([0.229, 0.224, 0.225])
    inp = std * inp + mean
    inp = np.clip(inp, 0, 1)
    return inp


with torch.no_grad():
    data = images[:4].to(device)
    input_tensor = data.cpu()
    transformed_input_tensor = model.stn(data).cpu()
    print('visualized', convert_image_np(input_tensor[0]).shape,
          convert_image_np(transformed_input_tensor[0]).shape)

# every option of the sampler, forward and backward
theta = torch.from_numpy(rng.uniform(-0.3, 0.3, (2, 2, 3)).astype(np.float32)) + \
    torch.tensor([[1., 0., 0.], [0., 1., 0.]])
theta.requires_grad_(True)
x = torch.from_numpy(rng.standard_normal((2, 3, 5, 7)).astype(np.float32)).requires_grad_(True)
for align_corners in (False, True):
    grid = F.affine_grid(theta, (2, 3, 4, 6), align_corners=align_corners)
    print('grid', tuple(grid.shape), align_corners, '%.5f' % grid.sum().item())
    for mode in ('bilinear', 'nearest', 'bicubic'):
        for padding_mode in ('zeros', 'border', 'reflection'):
            y = F.grid_sample(x, grid, mode=mode, padding_mode=padding_mode,
                              align_corners=align_corners)
            gx, gt = torch.autograd.grad((y * y).sum(), (x, theta))
            print(mode, padding_mode, align_corners, tuple(y.shape), '%.5f' % y.sum().item(),
                  '%.5f' % gx.abs().sum().item(), '%.5f' % gt.abs().sum().item())

theta3 = torch.from_numpy(rng.uniform(-0.2, 0.2, (2, 3, 4)).astype(np.float32)) + torch.eye(3, 4)
theta3.requires_grad_(True)
v = torch.from_numpy(rng.standard_normal((2, 2, 3, 4, 5)).astype(np.float32)).requires_grad_(True)
for align_corners in (False, True):
    grid = F.affine_grid(theta3, [2, 2, 3, 3, 4], align_corners=align_corners)
    for mode in ('bilinear', 'nearest'):
        for padding_mode in ('zeros', 'border', 'reflection'):
            y = F.grid_sample(v, grid, mode=mode, padding_mode=padding_mode,
                              align_corners=align_corners)
            gv, gt = torch.autograd.grad(y.pow(2).sum(), (v, theta3))
            print('3d', mode, padding_mode, align_corners, tuple(y.shape), '%.5f' % y.sum().item(),
                  '%.5f' % gv.abs().sum().item(), '%.5f' % gt.abs().sum().item())

for bad in [lambda: F.affine_grid(theta, (2, 3, 4)),
            lambda: F.affine_grid(theta[:, :1], (2, 3, 4, 6)),
            lambda: F.grid_sample(x, grid[..., :2], mode='cubic'),
            lambda: F.grid_sample(v, torch.zeros(2, 3, 3, 4, 3), mode='bicubic'),
            lambda: F.grid_sample(x, torch.zeros(2, 4, 6, 2), padding_mode='wrap')]:
    try:
        bad()
        print('no error')
    except (ValueError, RuntimeError, NotImplementedError) as e:
        print(type(e).__name__, str(e).split('\n')[0])
