# gram-ai/capsule-networks capsule_network.py (CapsuleLayer with dynamic
# routing by agreement, its transposing softmax helper, squash, primary
# capsules as a ModuleList of Conv2d, the masked reconstruction decoder
# selecting capsules through torch.eye(...).index_select, CapsuleLoss with
# the legacy nn.MSELoss(size_average=False), the random-shift augmentation),
# without .cuda() (a CPU run), with .contiguous() before the decoder's view
# (torch 0.3 allowed that view; today's torch refuses it), and without
# torchnet's engine: its training loop written out.  Small MNIST-like random
# images (15x15, see the sizes below); weights and data come from numpy
# (route_weights' torch.randn is numpy's draw) so tracec and torch compute
# the same numbers.  Then the training step under torch.compile.
import copy
import sys
sys.setrecursionlimit(15000)

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn
from torch.autograd import Variable
from torch.optim import Adam

BATCH_SIZE = 4
NUM_CLASSES = 10
NUM_EPOCHS = 2
NUM_ROUTING_ITERATIONS = 3
# Sizes shrunk from the repository's (28x28 images, 9x9 kernels, 256 conv1
# channels, 32 channels per primary capsule, a 512-1024 decoder) so that the
# test runs in a few seconds (a cold compile of the training step dominates);
# the primary capsules' grid stays 6x6, and their col2im gradient still has
# more windows (8 x 3 x 3) than one padsum_blocked kernel takes.
IMAGE_SIZE = 15
KERNEL_SIZE = 3
CONV1_CHANNELS = 32
PRIMARY_CHANNELS = 8
DECODER_WIDTHS = (128, 256)


def softmax(input, dim=1):
    transposed_input = input.transpose(dim, len(input.size()) - 1)
    softmaxed_output = F.softmax(transposed_input.contiguous().view(-1, transposed_input.size(-1)), dim=-1)
    return softmaxed_output.view(*transposed_input.size()).transpose(dim, len(input.size()) - 1)


def augmentation(x, max_shift=2):
    _, _, height, width = x.size()

    h_shift, w_shift = np.random.randint(-max_shift, max_shift + 1, size=2)
    source_height_slice = slice(max(0, h_shift), h_shift + height)
    source_width_slice = slice(max(0, w_shift), w_shift + width)
    target_height_slice = slice(max(0, -h_shift), -h_shift + height)
    target_width_slice = slice(max(0, -w_shift), -w_shift + width)

    shifted_image = torch.zeros(*x.size())
    shifted_image[:, :, source_height_slice, source_width_slice] = x[:, :, target_height_slice, target_width_slice]
    return shifted_image.float()


class CapsuleLayer(nn.Module):
    def __init__(self, num_capsules, num_route_nodes, in_channels, out_channels, kernel_size=None, stride=None,
                 num_iterations=NUM_ROUTING_ITERATIONS):
        super(CapsuleLayer, self).__init__()

        self.num_route_nodes = num_route_nodes
        self.num_iterations = num_iterations

        self.num_capsules = num_capsules

        if num_route_nodes != -1:
            self.route_weights = nn.Parameter(torch.randn(num_capsules, num_route_nodes, in_channels, out_channels))
        else:
            self.capsules = nn.ModuleList(
                [nn.Conv2d(in_channels, out_channels, kernel_size=kernel_size, stride=stride, padding=0) for _ in
                 range(num_capsules)])

    def squash(self, tensor, dim=-1):
        squared_norm = (tensor ** 2).sum(dim=dim, keepdim=True)
        scale = squared_norm / (1 + squared_norm)
        return scale * tensor / torch.sqrt(squared_norm)

    def forward(self, x):
        if self.num_route_nodes != -1:
            priors = x[None, :, :, None, :] @ self.route_weights[:, None, :, :, :]

            logits = Variable(torch.zeros(*priors.size()))
            for i in range(self.num_iterations):
                probs = softmax(logits, dim=2)
                outputs = self.squash((probs * priors).sum(dim=2, keepdim=True))

                if i != self.num_iterations - 1:
                    delta_logits = (priors * outputs).sum(dim=-1, keepdim=True)
                    logits = logits + delta_logits
        else:
            outputs = [capsule(x).view(x.size(0), -1, 1) for capsule in self.capsules]
            outputs = torch.cat(outputs, dim=-1)
            outputs = self.squash(outputs)

        return outputs


class CapsuleNet(nn.Module):
    def __init__(self):
        super(CapsuleNet, self).__init__()

        self.conv1 = nn.Conv2d(in_channels=1, out_channels=CONV1_CHANNELS, kernel_size=KERNEL_SIZE, stride=1)
        self.primary_capsules = CapsuleLayer(num_capsules=8, num_route_nodes=-1, in_channels=CONV1_CHANNELS, out_channels=PRIMARY_CHANNELS,
                                             kernel_size=KERNEL_SIZE, stride=2)
        self.digit_capsules = CapsuleLayer(num_capsules=NUM_CLASSES, num_route_nodes=PRIMARY_CHANNELS * 6 * 6, in_channels=8,
                                           out_channels=16)

        self.decoder = nn.Sequential(
            nn.Linear(16 * NUM_CLASSES, DECODER_WIDTHS[0]),
            nn.ReLU(inplace=True),
            nn.Linear(DECODER_WIDTHS[0], DECODER_WIDTHS[1]),
            nn.ReLU(inplace=True),
            nn.Linear(DECODER_WIDTHS[1], IMAGE_SIZE * IMAGE_SIZE),
            nn.Sigmoid()
        )

    def forward(self, x, y=None):
        x = F.relu(self.conv1(x), inplace=True)
        x = self.primary_capsules(x)
        x = self.digit_capsules(x).squeeze().transpose(0, 1)

        classes = (x ** 2).sum(dim=-1) ** 0.5
        classes = F.softmax(classes, dim=-1)

        if y is None:
            # In all batches, get the most active capsule.
            _, max_length_indices = classes.max(dim=1)
            y = Variable(torch.eye(NUM_CLASSES)).index_select(dim=0, index=max_length_indices.data)

        # .contiguous(): x is a transpose, and torch's product keeps its strides
        # (the repository's .view on it dates from torch 0.3)
        reconstructions = self.decoder((x * y[:, :, None]).contiguous().view(x.size(0), -1))

        return classes, reconstructions


class CapsuleLoss(nn.Module):
    def __init__(self):
        super(CapsuleLoss, self).__init__()
        self.reconstruction_loss = nn.MSELoss(size_average=False)

    def forward(self, images, labels, classes, reconstructions):
        left = F.relu(0.9 - classes, inplace=True) ** 2
        right = F.relu(classes - 0.1, inplace=True) ** 2

        margin_loss = labels * left + 0.5 * (1. - labels) * right
        margin_loss = margin_loss.sum()

        assert torch.numel(images) == torch.numel(reconstructions)
        images = images.view(reconstructions.size()[0], -1)
        reconstruction_loss = self.reconstruction_loss(reconstructions, images)

        return (margin_loss + 0.0005 * reconstruction_loss) / images.size(0)


if __name__ == "__main__":
    import warnings
    warnings.simplefilter("ignore")

    model = CapsuleNet()
    g = np.random.RandomState(1)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name == "digit_capsules.route_weights":
                p.copy_(torch.from_numpy((0.5 * g.randn(10, 1, 8, 16) + 0.05 * g.randn(*p.shape)).astype(np.float32)))
            elif p.dim() > 1:
                bound = 1 / np.sqrt(p[0].numel())
                p.copy_(torch.from_numpy(g.uniform(-bound, bound, p.shape).astype(np.float32)))
            else:
                p.copy_(torch.from_numpy(g.uniform(-0.05, 0.05, p.shape).astype(np.float32)))

    print("# parameters:", sum(param.numel() for param in model.parameters()))

    optimizer = Adam(model.parameters())
    capsule_loss = CapsuleLoss()

    np.random.seed(0)
    data = torch.from_numpy((np.random.rand(12, IMAGE_SIZE, IMAGE_SIZE) < 0.2).astype(np.float32) * 255).byte()
    labels_all = torch.from_numpy(np.random.randint(0, 10, 12))

    def processor(sample):
        data, labels, training = sample

        data = augmentation(data.unsqueeze(1).float() / 255.0)
        labels = torch.LongTensor(labels)

        labels = torch.eye(NUM_CLASSES).index_select(dim=0, index=labels)

        data = Variable(data)
        labels = Variable(labels)

        if training:
            classes, reconstructions = model(data, labels)
        else:
            classes, reconstructions = model(data)

        loss = capsule_loss(data, labels, classes, reconstructions)

        return loss, classes

    # one forward / backward, compared
    loss, classes = processor((data[:BATCH_SIZE], labels_all[:BATCH_SIZE], True))
    loss.backward()
    print("classes", tuple(classes.shape), [f"{v:.5f}" for v in classes[0].tolist()])
    print(f"loss {loss.item():.6f}")
    for name, p in model.named_parameters():
        print(f"grad {name} {tuple(p.shape)} {p.grad.norm().item():.5e}")
    optimizer.zero_grad()

    # torchnet's engine.train / engine.test, written out
    for epoch in range(1, NUM_EPOCHS + 1):
        model.train()
        meter_loss, correct = [], 0
        for b in range(0, 8, BATCH_SIZE):
            optimizer.zero_grad()
            loss, classes = processor((data[b:b + BATCH_SIZE], labels_all[b:b + BATCH_SIZE], True))
            loss.backward()
            optimizer.step()
            meter_loss.append(loss.item())
            correct += (classes.max(1)[1] == labels_all[b:b + BATCH_SIZE]).sum().item()
        print('[Epoch %d] Training Loss: %.4f (Accuracy: %.2f%%)' % (
            epoch, np.mean(meter_loss), 100.0 * correct / 8))

        model.eval()
        with torch.no_grad():
            loss, classes = processor((data[8:], labels_all[8:], False))
        print('[Epoch %d] Testing Loss: %.4f (Accuracy: %.2f%%)' % (
            epoch, loss.item(), 100.0 * (classes.max(1)[1] == labels_all[8:]).float().mean().item()))

    # reconstruction from the predicted capsule (y=None path)
    ground_truth = (data[8:].unsqueeze(1).float() / 255.0)
    _, reconstructions = model(Variable(ground_truth))
    reconstruction = reconstructions.cpu().view_as(ground_truth).data
    print("reconstruction", tuple(reconstruction.shape), f"{reconstruction.mean().item():.5f}")
    x = torch.ones(1, 1, 4, 4)
    print("augmentation keeps the mass:", augmentation(x, max_shift=0).sum().item())

    def train_step(images, labels):
        optimizer.zero_grad()
        classes, reconstructions = model(images, labels)
        loss = capsule_loss(images, labels, classes, reconstructions)
        loss.backward()
        optimizer.step()
        return loss

    images = data[:BATCH_SIZE].unsqueeze(1).float() / 255.0
    onehot = torch.eye(NUM_CLASSES).index_select(dim=0, index=labels_all[:BATCH_SIZE])
    state, opt_state = copy.deepcopy(model.state_dict()), copy.deepcopy(optimizer.state_dict())
    eager = [train_step(images, onehot).item() for _ in range(2)]
    after = copy.deepcopy(model.state_dict())
    model.load_state_dict(state)
    optimizer.load_state_dict(opt_state)
    cstep = torch.compile(train_step)
    compiled = [cstep(images, onehot).item() for _ in range(2)]
    print("compiled losses", [f"{v:.6f}" for v in compiled])
    print("compiled == eager:", all(abs(a - b) <= 1e-4 * max(1.0, abs(b)) for a, b in zip(compiled, eager)),
          all(torch.allclose(model.state_dict()[k], after[k], rtol=1e-4, atol=1e-5) for k in after))
