# SegNet semantic segmentation, after vinceecws/SegNet_PyTorch
# (https://github.com/vinceecws/SegNet_PyTorch, Pavements/SegNet.py and
# train.py): the VGG-style encoder whose nn.MaxPool2d(2, stride=2,
# return_indices=True) layers hand their argmax indices (and sizes) to the
# decoder's nn.MaxUnpool2d(2, stride=2), Conv2d / BatchNorm2d(momentum=0.5)
# / ReLU stages, a class-weighted CrossEntropyLoss over the per-pixel
# logits, SGD with momentum, and the softmax / argmax prediction.
# Written for this test: two encoder stages of width 8 / 16 (the original's
# five of 64..512), 3 classes on synthetic 16x16 images, 3 steps; one
# training step compiled against eager.
import copy

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F


class SegNet(nn.Module):

    def __init__(self, in_chn=3, out_chn=32, BN_momentum=0.5):
        super(SegNet, self).__init__()

        #SegNet Architecture
        #Takes input of size in_chn = 3 (RGB images have 3 channels)
        #Outputs size label_chn (N # of classes)

        #ENCODING consists of 13 convolutional layers (here: 4)
        #Each encoder layer has a corresponding decoder layer

        self.in_chn = in_chn
        self.out_chn = out_chn

        self.MaxEn = nn.MaxPool2d(2, stride=2, return_indices=True)

        self.ConvEn11 = nn.Conv2d(self.in_chn, 8, kernel_size=3, padding=1)
        self.BNEn11 = nn.BatchNorm2d(8, momentum=BN_momentum)
        self.ConvEn12 = nn.Conv2d(8, 8, kernel_size=3, padding=1)
        self.BNEn12 = nn.BatchNorm2d(8, momentum=BN_momentum)

        self.ConvEn21 = nn.Conv2d(8, 16, kernel_size=3, padding=1)
        self.BNEn21 = nn.BatchNorm2d(16, momentum=BN_momentum)
        self.ConvEn22 = nn.Conv2d(16, 16, kernel_size=3, padding=1)
        self.BNEn22 = nn.BatchNorm2d(16, momentum=BN_momentum)

        #DECODING consists of 13 convolutional layers (here: 4)

        self.MaxDe = nn.MaxUnpool2d(2, stride=2)

        self.ConvDe22 = nn.Conv2d(16, 16, kernel_size=3, padding=1)
        self.BNDe22 = nn.BatchNorm2d(16, momentum=BN_momentum)
        self.ConvDe21 = nn.Conv2d(16, 8, kernel_size=3, padding=1)
        self.BNDe21 = nn.BatchNorm2d(8, momentum=BN_momentum)

        self.ConvDe12 = nn.Conv2d(8, 8, kernel_size=3, padding=1)
        self.BNDe12 = nn.BatchNorm2d(8, momentum=BN_momentum)
        self.ConvDe11 = nn.Conv2d(8, self.out_chn, kernel_size=3, padding=1)
        self.BNDe11 = nn.BatchNorm2d(self.out_chn, momentum=BN_momentum)

    def forward(self, x):

        #ENCODE LAYERS
        #Stage 1
        x = F.relu(self.BNEn11(self.ConvEn11(x)))
        x = F.relu(self.BNEn12(self.ConvEn12(x)))
        x, ind1 = self.MaxEn(x)
        size1 = x.size()

        #Stage 2
        x = F.relu(self.BNEn21(self.ConvEn21(x)))
        x = F.relu(self.BNEn22(self.ConvEn22(x)))
        x, ind2 = self.MaxEn(x)
        size2 = x.size()

        #DECODE LAYERS
        #Stage 2
        x = self.MaxDe(x, ind2, output_size=size1)
        x = F.relu(self.BNDe22(self.ConvDe22(x)))
        x = F.relu(self.BNDe21(self.ConvDe21(x)))

        #Stage 1
        x = self.MaxDe(x, ind1)
        x = F.relu(self.BNDe12(self.ConvDe12(x)))
        x = self.ConvDe11(x)

        x = F.softmax(x, dim=1)

        return x


rng = np.random.RandomState(0)
images = torch.from_numpy(rng.rand(4, 3, 16, 16).astype(np.float32))
masks = torch.from_numpy((images[:, 0] * 3).long().clamp(max=2).numpy())
torch.manual_seed(0)
model = SegNet(in_chn=3, out_chn=3)
pool_out, ind = model.MaxEn(images[:1, :1])
print("indices", ind.dtype, ind.shape, ind[0, 0, :2].tolist())
print("unpooled", model.MaxDe(pool_out, ind).shape, (model.MaxDe(pool_out, ind) != 0).sum().item())

weights = torch.tensor([1.0, 2.0, 0.5])
loss_fn = nn.CrossEntropyLoss(weight=weights)
optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
for epoch in range(3):
    optimizer.zero_grad()
    output = model(images)
    loss = loss_fn(output, masks)
    loss.backward()
    optimizer.step()
    print(f"epoch {epoch} loss {loss.item():.6f} "
          f"running mean {model.BNEn11.running_mean[:3].tolist()}")

model.eval()
with torch.no_grad():
    pred = torch.argmax(model(images), dim=1)
print("pixel accuracy", round((pred == masks).float().mean().item(), 4), pred.shape)
model.train()


def train_step(images, masks):
    optimizer.zero_grad()
    loss = loss_fn(model(images), masks)
    loss.backward()
    optimizer.step()
    return loss


state, opt_state = copy.deepcopy(model.state_dict()), copy.deepcopy(optimizer.state_dict())
loss_c = torch.compile(train_step)(images, masks)
after_c = copy.deepcopy(model.state_dict())
model.load_state_dict(state)
optimizer.load_state_dict(opt_state)
loss_e = train_step(images, masks)
print("compiled loss", round(loss_c.item(), 5))
print("compiled == eager", torch.allclose(loss_c, loss_e, atol=1e-6),
      all(torch.allclose(after_c[k].float(), v.float(), atol=1e-5) for k, v in model.state_dict().items()))
