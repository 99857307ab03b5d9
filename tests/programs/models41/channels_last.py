# PyTorch tutorial "(beta) Channels Last Memory Format in PyTorch"
# (intermediate/memory_format_tutorial), written the way the tutorial has
# it: strides of torch.empty(N, C, H, W) before and after
# x.to(memory_format=torch.channels_last) and back to contiguous_format, the
# permute-then-contiguous(memory_format=...) alternative, torch.empty(...,
# memory_format=torch.channels_last), is_contiguous(memory_format=...) and
# its special cases (C == 1, H == W == 1), clone / empty_like / pointwise ops
# preserving the format, a Conv2d moved with model.to(memory_format=...)
# on channels_last input (the output's format, backward's gradient
# formats), and channels_last_3d on a 5-d tensor and a Conv3d.  Changes for
# a CPU test: torch.manual_seed(0) up front, the cudnn/half-precision
# block run on the CPU in float32, the AMP / apex / torchvision benchmark
# sections left out, and one conv + batchnorm training step on
# channels_last input under torch.compile checked against eager.
import torch
import torch.nn as nn

torch.manual_seed(0)

N, C, H, W = 10, 3, 32, 32
x = torch.empty(N, C, H, W)
print(x.stride())  # Outputs: (3072, 1024, 32, 1)

x = x.to(memory_format=torch.channels_last)
print(x.shape)  # Outputs: (10, 3, 32, 32) as dimensions order preserved
print(x.stride())  # Outputs: (3072, 1, 96, 3)

x = x.to(memory_format=torch.contiguous_format)
print(x.stride())  # Outputs: (3072, 1024, 32, 1)

x = x.permute(0, 2, 3, 1)
print(x.stride())
x = x.contiguous(memory_format=torch.channels_last)
print(x.stride())

x = torch.empty(N, C, H, W, memory_format=torch.channels_last)
print(x.stride())  # Outputs: (3072, 1, 96, 3)

x = torch.empty(N, C, H, W)
x = x.contiguous(memory_format=torch.channels_last)
print(x.stride())  # Outputs: (3072, 1, 96, 3)

print(x.is_contiguous(memory_format=torch.channels_last))  # Ouputs: True
print(x.is_contiguous())  # Outputs: False

# to and contiguous on an already channels_last tensor are no-ops
print(x.to(memory_format=torch.channels_last).data_ptr() == x.data_ptr())
print(x.contiguous(memory_format=torch.channels_last).data_ptr() == x.data_ptr())

special_x = torch.empty(4, 1, 4, 4)
print(special_x.is_contiguous(memory_format=torch.channels_last))  # Ouputs: True
print(special_x.is_contiguous(memory_format=torch.contiguous_format))  # Ouputs: True

special_x = torch.empty(4, 4, 1, 1)
print(special_x.is_contiguous(memory_format=torch.channels_last))
print(special_x.is_contiguous(memory_format=torch.contiguous_format))

# Permutation as a way to get channels last (NHWC) layout
x = torch.randn(N, C, H, W).permute(0, 2, 3, 1).permute(0, 3, 1, 2)
print(x.stride(), x.is_contiguous(memory_format=torch.channels_last))

x = torch.randn(N, C, H, W).to(memory_format=torch.channels_last)
# Operations that preserve the format
y = x.clone()
print(y.stride())  # Outputs: (3072, 1, 96, 3)
y = x.float()
print(y.stride())
y = x.to(torch.float64)
print(y.stride(), y.dtype)
y = torch.empty_like(x)
print(y.stride())  # Outputs: (3072, 1, 96, 3)
y = torch.zeros_like(x)
print(y.stride())
z = x + y
print(z.stride())  # Outputs: (3072, 1, 96, 3)
z = torch.relu(x) * 2.0
print(z.stride(), z.is_contiguous(memory_format=torch.channels_last))
# clone with an explicit format, and preserve_format
print(x.clone(memory_format=torch.contiguous_format).stride())
print(x.clone(memory_format=torch.preserve_format).stride())
print(torch.empty_like(x, memory_format=torch.contiguous_format).stride())
# values are unchanged by the layout
print(torch.equal(x, x.contiguous()), x.sum(dim=(0, 2, 3)))

# Conv, Batchnorm modules support channels last (run on the CPU in float32)
model = torch.nn.Conv2d(8, 4, 3)
model = model.to(memory_format=torch.channels_last)  # Module parameters need to be channels last
print(model.weight.stride(), model.weight.is_contiguous(memory_format=torch.channels_last))

input = torch.randint(1, 10, (2, 8, 4, 4), dtype=torch.float32, requires_grad=True)
input = input.to(memory_format=torch.channels_last)
out = model(input)
print(out.is_contiguous(memory_format=torch.channels_last))  # Ouputs: True
print(out.shape, out.stride())
out.sum().backward()
print(model.weight.grad.stride(), model.weight.grad.sum(dim=(1, 2, 3)))

# channels_last input, contiguous weights: the output is channels_last too
model2 = torch.nn.Conv2d(8, 4, 3)
x = torch.randn(2, 8, 5, 5).to(memory_format=torch.channels_last)
out2 = model2(x)
print(out2.is_contiguous(memory_format=torch.channels_last), out2.stride())
bn = nn.BatchNorm2d(4)
out3 = bn(out2)
print(out3.is_contiguous(memory_format=torch.channels_last))
pool = nn.MaxPool2d(2)
print(pool(out3).is_contiguous(memory_format=torch.channels_last))

# channels_last_3d
x3 = torch.randn(2, 3, 4, 5, 6)
x3 = x3.to(memory_format=torch.channels_last_3d)
print(x3.stride(), x3.is_contiguous(memory_format=torch.channels_last_3d))
conv3 = nn.Conv3d(3, 2, 3).to(memory_format=torch.channels_last_3d)
o3 = conv3(x3)
print(o3.shape, o3.is_contiguous(memory_format=torch.channels_last_3d), o3.sum())
try:
    torch.randn(2, 3, 4).to(memory_format=torch.channels_last)
except RuntimeError as e:
    print("RuntimeError:", e)


# Converting an existing model, and one compiled training step on
# channels_last input checked against the same step eagerly
class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 6, 3, padding=1, bias=False)
        self.bn = nn.BatchNorm2d(6)
        self.fc = nn.Linear(6, 2)

    def forward(self, x):
        x = torch.relu(self.bn(self.conv(x)))
        return self.fc(x.mean(dim=(2, 3)))


net = Net().to(memory_format=torch.channels_last)
ref = Net().to(memory_format=torch.channels_last)
ref.load_state_dict(net.state_dict())
opt = torch.optim.SGD(net.parameters(), lr=0.1, momentum=0.9)
ref_opt = torch.optim.SGD(ref.parameters(), lr=0.1, momentum=0.9)
data = torch.randn(4, 3, 8, 8).to(memory_format=torch.channels_last)
target = torch.randint(0, 2, (4,))


def step(model, optimizer, data, target):
    optimizer.zero_grad()
    loss = nn.functional.cross_entropy(model(data), target)
    loss.backward()
    optimizer.step()
    return loss


loss_c = torch.compile(step)(net, opt, data, target)
loss_e = step(ref, ref_opt, data, target)
print("loss", loss_e.item(), "compiled == eager:", torch.allclose(loss_c, loss_e, rtol=1e-5),
      all(torch.allclose(p, q, rtol=1e-4, atol=1e-6) for p, q in zip(net.parameters(), ref.parameters())))
print(ref.conv.weight.stride(), ref.conv.weight.is_contiguous(memory_format=torch.channels_last))
print(ref.bn.running_mean)
