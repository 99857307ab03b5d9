# The original AlexNet, after dansuh17/alexnet-pytorch
# (https://github.com/dansuh17/alexnet-pytorch, model.py): nn.Sequential
# features with nn.LocalResponseNorm(size=5, alpha=0.0001, beta=0.75, k=2)
# after the first two convolutions (the paper's section 3.3), overlapping
# 3x3 / stride-2 max pooling, weights from nn.init.normal_(std=0.01) and
# biases of 1 on the 2nd, 4th and 5th convolutions (init_bias), the
# classifier's nn.Dropout(p=0.5, inplace=True) (the second one not in place:
# it follows a ReLU, whose saved result PyTorch 2 refuses to see changed),
# SGD with momentum and weight
# decay under lr_scheduler.StepLR, and the accuracy print of its train loop.
# Written for this test: widths divided by 8 (12 / 32 / 48 / 48 / 32, a
# 256-unit classifier), 99x99 inputs instead of 227x227, 4 classes, 3 steps;
# one training step compiled against eager (with the dropout probability
# set to 0 for it: compiled draws do not follow PyTorch's generator).
import copy

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim

NUM_EPOCHS = 3
BATCH_SIZE = 4
MOMENTUM = 0.9
LR_DECAY = 0.0005
LR_INIT = 0.01
IMAGE_DIM = 99
NUM_CLASSES = 4


class AlexNet(nn.Module):
    """
    Neural network model consisting of layers propsed by AlexNet paper.
    """
    def __init__(self, num_classes=1000):
        """
        Define and allocate layers for this neural net.

        Args:
            num_classes (int): number of classes to predict with this model
        """
        super().__init__()
        # input size should be : (b x 3 x 227 x 227)
        # The image in the original paper states that width and height are 224 pixels, but
        # the dimensions after first convolution layer do not lead to 55 x 55.
        self.net = nn.Sequential(
            nn.Conv2d(in_channels=3, out_channels=12, kernel_size=11, stride=4),  # (b x 96 x 55 x 55)
            nn.ReLU(),
            nn.LocalResponseNorm(size=5, alpha=0.0001, beta=0.75, k=2),  # section 3.3
            nn.MaxPool2d(kernel_size=3, stride=2),  # (b x 96 x 27 x 27)
            nn.Conv2d(12, 32, 5, padding=2),  # (b x 256 x 27 x 27)
            nn.ReLU(),
            nn.LocalResponseNorm(size=5, alpha=0.0001, beta=0.75, k=2),
            nn.MaxPool2d(kernel_size=3, stride=2),  # (b x 256 x 13 x 13)
            nn.Conv2d(32, 48, 3, padding=1),  # (b x 384 x 13 x 13)
            nn.ReLU(),
            nn.Conv2d(48, 48, 3, padding=1),  # (b x 384 x 13 x 13)
            nn.ReLU(),
            nn.Conv2d(48, 32, 3, padding=1),  # (b x 256 x 13 x 13)
            nn.ReLU(),
            nn.MaxPool2d(kernel_size=3, stride=2),  # (b x 256 x 6 x 6)
        )
        # classifier is just a name for linear layers
        self.classifier = nn.Sequential(
            nn.Dropout(p=0.5, inplace=True),
            nn.Linear(in_features=(32 * 2 * 2), out_features=256),
            nn.ReLU(),
            nn.Dropout(p=0.5),  # (the original's inplace=True: torch refuses it after ReLU)
            nn.Linear(in_features=256, out_features=256),
            nn.ReLU(),
            nn.Linear(in_features=256, out_features=num_classes),
        )
        self.init_bias()  # initialize bias

    def init_bias(self):
        for layer in self.net:
            if isinstance(layer, nn.Conv2d):
                nn.init.normal_(layer.weight, mean=0, std=0.01)
                nn.init.constant_(layer.bias, 0)
        # original paper = 1 for Conv2d layers 2nd, 4th, and 5th conv layers
        nn.init.constant_(self.net[4].bias, 1)
        nn.init.constant_(self.net[10].bias, 1)
        nn.init.constant_(self.net[12].bias, 1)

    def forward(self, x):
        """
        Pass the input through the net.

        Args:
            x (Tensor): input tensor

        Returns:
            output (Tensor): output tensor
        """
        x = self.net(x)
        x = x.view(-1, 32 * 2 * 2)  # reduce the dimensions for linear layer input
        return self.classifier(x)


if __name__ == '__main__':
    # seed value
    seed = torch.initial_seed()
    torch.manual_seed(0)
    print('Used seed : {}'.format(torch.initial_seed()))

    alexnet = AlexNet(num_classes=NUM_CLASSES)
    print(alexnet.net[2])
    rng = np.random.RandomState(0)
    imgs = torch.from_numpy(rng.randn(BATCH_SIZE, 3, IMAGE_DIM, IMAGE_DIM).astype(np.float32) * 10)
    classes = torch.from_numpy(rng.randint(0, NUM_CLASSES, size=BATCH_SIZE))
    print("lrn out", [round(v, 6) for v in alexnet.net[:3](imgs)[0, :3, 0, 0].tolist()])

    optimizer = optim.SGD(
        params=alexnet.parameters(),
        lr=LR_INIT,
        momentum=MOMENTUM,
        weight_decay=LR_DECAY)
    print('Optimizer created')
    # multiply LR by 1 / 10 after every 2 epochs
    lr_scheduler = optim.lr_scheduler.StepLR(optimizer, step_size=2, gamma=0.1)
    print('LR Scheduler created')

    total_steps = 1
    for epoch in range(NUM_EPOCHS):
        # calculate the loss
        output = alexnet(imgs)
        loss = F.cross_entropy(output, classes)

        # update the parameters
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()

        # log the information and add to tensorboard
        with torch.no_grad():
            _, preds = torch.max(output, 1)
            accuracy = torch.sum(preds == classes)

            print('Epoch: {} \tStep: {} \tLoss: {:.4f} \tAcc: {}'
                .format(epoch + 1, total_steps, loss.item(), accuracy.item()))
            print("grad norm", round(alexnet.net[0].weight.grad.norm().item(), 6))
        total_steps += 1
        lr_scheduler.step()
    print("lr", lr_scheduler.get_last_lr())

    alexnet.eval()
    with torch.no_grad():
        print("eval logits", [round(v, 5) for v in alexnet(imgs[:2]).flatten().tolist()])
    alexnet.train()

    def train_step(imgs, classes):
        loss = F.cross_entropy(alexnet(imgs), classes)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        return loss

    # compiled against eager, without dropout (compiled draws do not follow
    # PyTorch's generator, eager ones do)
    for m in alexnet.classifier:
        if isinstance(m, nn.Dropout):
            m.p = 0.0
    state, opt_state = copy.deepcopy(alexnet.state_dict()), copy.deepcopy(optimizer.state_dict())
    loss_c = torch.compile(train_step)(imgs, classes)
    after_c = copy.deepcopy(alexnet.state_dict())
    alexnet.load_state_dict(state)
    optimizer.load_state_dict(opt_state)
    loss_e = train_step(imgs, classes)
    print("compiled loss", round(loss_c.item(), 5))
    print("compiled == eager", torch.allclose(loss_c, loss_e, atol=1e-6),
          all(torch.allclose(after_c[k], v, atol=1e-6) for k, v in alexnet.state_dict().items()))
