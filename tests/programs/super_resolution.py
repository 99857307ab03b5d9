# pytorch/examples super_resolution (model.py + the train/test loops of
# main.py), written from memory; only the import line is changed, and the
# BSDS300 download is replaced by random images.
from math import log10

import tracec as torch
import tracec.nn as nn
import tracec.nn.init as init
import tracec.optim as optim


class Net(nn.Module):
    def __init__(self, upscale_factor):
        super(Net, self).__init__()

        self.relu = nn.ReLU()
        self.conv1 = nn.Conv2d(1, 64, (5, 5), (1, 1), (2, 2))
        self.conv2 = nn.Conv2d(64, 64, (3, 3), (1, 1), (1, 1))
        self.conv3 = nn.Conv2d(64, 32, (3, 3), (1, 1), (1, 1))
        self.conv4 = nn.Conv2d(32, upscale_factor ** 2, (3, 3), (1, 1), (1, 1))
        self.pixel_shuffle = nn.PixelShuffle(upscale_factor)

        self._initialize_weights()

    def forward(self, x):
        x = self.relu(self.conv1(x))
        x = self.relu(self.conv2(x))
        x = self.relu(self.conv3(x))
        x = self.pixel_shuffle(self.conv4(x))
        return x

    def _initialize_weights(self):
        init.orthogonal_(self.conv1.weight, init.calculate_gain('relu'))
        init.orthogonal_(self.conv2.weight, init.calculate_gain('relu'))
        init.orthogonal_(self.conv3.weight, init.calculate_gain('relu'))
        init.orthogonal_(self.conv4.weight)


def main(steps=3, upscale_factor=3, compiled=False):
    torch.manual_seed(123)
    device = torch.device("cpu")
    model = Net(upscale_factor=upscale_factor).to(device)
    criterion = nn.MSELoss()
    optimizer = optim.Adam(model.parameters(), lr=0.01)
    hr = torch.rand(8, 1, 12, 12)
    lr = nn.functional.interpolate(hr, scale_factor=1 / upscale_factor, mode="bilinear")
    training_data_loader = [(lr[:4], hr[:4]), (lr[4:], hr[4:])]

    def step(input, target):
        optimizer.zero_grad()
        loss = criterion(model(input), target)
        loss.backward()
        optimizer.step()
        return loss
    if compiled:
        step = torch.compile(step)

    losses = []
    for epoch in range(1, steps + 1):
        epoch_loss = 0
        for iteration, batch in enumerate(training_data_loader, 1):
            input, target = batch[0].to(device), batch[1].to(device)
            loss = step(input, target)
            epoch_loss += loss.item()
            print("===> Epoch[{}]({}/{}): Loss: {:.4f}".format(epoch, iteration,
                                                             len(training_data_loader),
                                                             loss.item()))
        print("===> Epoch {} Complete: Avg. Loss: {:.4f}".format(
            epoch, epoch_loss / len(training_data_loader)))
        losses.append(epoch_loss)
    avg_psnr = 0
    with torch.no_grad():
        for batch in training_data_loader:
            input, target = batch[0].to(device), batch[1].to(device)
            prediction = model(input)
            mse = criterion(prediction, target)
            psnr = 10 * log10(1 / mse.item())
            avg_psnr += psnr
    print("===> Avg. PSNR: {:.4f} dB".format(avg_psnr / len(training_data_loader)))
    return losses


if __name__ == "__main__":
    import sys
    main(compiled="--compile" in sys.argv)
