# lucidrains/lambda-networks, lambda_networks/lambda_networks.py: the
# LambdaLayer (LambdaNetworks, Bello 2021) as the file has it: 1x1 Conv2d
# query / key / value projections, BatchNorm2d on queries and values, einops
# rearrange into heads and the intra-depth dimension u, the key softmax, the
# content lambda and the position lambda by einsum, either from a global
# relative position embedding (n = h*w) or from local contexts (r: an
# F.conv3d of the values with R and padding (0, r//2, r//2)); then used as
# the README shows (LambdaLayer(dim=32, dim_out=32, r=23, dim_k=16, heads=4,
# dim_u=1) on an image) inside a small convolutional classifier.
# Changes for a CPU test: tiny sizes (8 channels, 8x8 images, r=5, dim_u 1
# and 2), a random batch for data, 3 SGD steps; and one training step under
# torch.compile checked against eager.
import copy

import torch
from torch import nn, einsum
import torch.nn.functional as F
from einops import rearrange

# helpers functions

def exists(val):
    return val is not None

def default(val, d):
    return val if exists(val) else d

# lambda layer

class LambdaLayer(nn.Module):
    def __init__(
        self,
        dim,
        *,
        dim_k,
        n = None,
        r = None,
        heads = 4,
        dim_out = None,
        dim_u = 1):
        super().__init__()
        dim_out = default(dim_out, dim)
        self.u = dim_u # intra-depth dimension
        self.heads = heads

        assert (dim_out % heads) == 0, 'values dimension must be divisible by number of heads for multi-head query'
        dim_v = dim_out // heads

        self.to_q = nn.Conv2d(dim, dim_k * heads, 1, bias = False)
        self.to_k = nn.Conv2d(dim, dim_k * dim_u, 1, bias = False)
        self.to_v = nn.Conv2d(dim, dim_v * dim_u, 1, bias = False)

        self.norm_q = nn.BatchNorm2d(dim_k * heads)
        self.norm_v = nn.BatchNorm2d(dim_v * dim_u)

        self.local_contexts = exists(r)
        if exists(r):
            assert (r % 2) == 1, 'Receptive kernel size should be odd'
            self.padding = r // 2
            self.R = nn.Parameter(torch.randn(dim_k, dim_u, 1, r, r))
        else:
            assert exists(n), 'You must specify the total sequence length (h x w)'
            self.pos_emb = nn.Parameter(torch.randn(n, n, dim_k, dim_u))


    def forward(self, x):
        b, c, hh, ww, u, h = *x.shape, self.u, self.heads

        q = self.to_q(x)
        k = self.to_k(x)
        v = self.to_v(x)

        q = self.norm_q(q)
        v = self.norm_v(v)

        q = rearrange(q, 'b (h k) hh ww -> b h k (hh ww)', h = h)
        k = rearrange(k, 'b (k u) hh ww -> b k u (hh ww)', u = u)
        v = rearrange(v, 'b (v u) hh ww -> b v u (hh ww)', u = u)

        k = k.softmax(dim=-1)

        λc = einsum('b k u m, b v u m -> b k v', k, v)
        Yc = einsum('b h k n, b k v -> b n h v', q, λc)

        if self.local_contexts:
            v = rearrange(v, 'b v u (hh ww) -> b u v hh ww', hh = hh, ww = ww)
            λp = F.conv3d(v, self.R, padding = (0, self.padding, self.padding))
            Yp = einsum('b h k n, b k v n -> b n h v', q, λp.flatten(3))
        else:
            λp = einsum('n m k u, b v u m -> b n k v', self.pos_emb, v)
            Yp = einsum('b h k n, b n k v -> b n h v', q, λp)

        Y = Yc + Yp
        out = rearrange(Y, 'b (hh ww) h v -> b (h v) hh ww', hh = hh, ww = ww)
        return out

λLayer = LambdaLayer

# --- usage (README), small sizes ---
torch.manual_seed(0)

layer = LambdaLayer(dim = 8, dim_out = 8, r = 5, dim_k = 4, heads = 4, dim_u = 1)
x = torch.randn(2, 8, 8, 8)
y = layer(x)
print('local lambda', tuple(y.shape), f'{y.sum().item():.6f}', f'{y.abs().mean().item():.6f}')

layer = LambdaLayer(dim = 8, dim_out = 16, n = 8 * 8, dim_k = 4, heads = 4, dim_u = 2)
y = layer(x)
print('global lambda', tuple(y.shape), f'{y.sum().item():.6f}', f'{y.abs().mean().item():.6f}')


class LambdaNet(nn.Module):
    def __init__(self, num_classes=10):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1, bias=False), nn.BatchNorm2d(8), nn.ReLU())
        self.block1 = nn.Sequential(λLayer(8, dim_out=8, r=5, dim_k=4, heads=2, dim_u=2),
                                    nn.BatchNorm2d(8), nn.ReLU())
        self.pool = nn.AvgPool2d(2)
        self.block2 = nn.Sequential(λLayer(8, dim_out=16, n=4 * 4, dim_k=4, heads=4),
                                    nn.BatchNorm2d(16), nn.ReLU())
        self.fc = nn.Linear(16, num_classes)

    def forward(self, x):
        x = self.stem(x)
        x = x + self.block1(x)
        x = self.pool(x)
        x = self.block2(x)
        x = F.adaptive_avg_pool2d(x, 1).flatten(1)
        return self.fc(x)


model = LambdaNet()
print('parameters', sum(p.numel() for p in model.parameters()))
optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9, weight_decay=1e-4)
images = torch.randn(4, 3, 8, 8)
labels = torch.tensor([1, 3, 5, 7])

for step in range(3):
    optimizer.zero_grad()
    loss = F.cross_entropy(model(images), labels)
    loss.backward()
    gnorm = torch.nn.utils.clip_grad_norm_(model.parameters(), 5.0)
    optimizer.step()
    print(f'step {step} loss {loss.item():.6f} grad norm {gnorm.item():.6f}')
print('R grad', f'{model.block1[0].R.grad.abs().sum().item():.6f}',
      'pos_emb grad', f'{model.block2[0].pos_emb.grad.abs().sum().item():.6f}')

model.eval()
with torch.no_grad():
    print('eval logits', model(images[:2]))

# compiled: one training step (model.train(): batch statistics) checked against eager
model.train()
state = copy.deepcopy(model.state_dict())
opt_state = copy.deepcopy(optimizer.state_dict())


def train_step(images, labels):
    optimizer.zero_grad()
    loss = F.cross_entropy(model(images), labels)
    loss.backward()
    optimizer.step()
    return loss


loss_c = torch.compile(train_step)(images, labels)
after_c = copy.deepcopy(model.state_dict())
model.load_state_dict(state)
optimizer.load_state_dict(opt_state)
loss_e = train_step(images, labels)
print('compiled == eager', torch.allclose(loss_c, loss_e, atol=1e-6),
      all(torch.allclose(after_c[k].float(), v.float(), atol=1e-6) for k, v in model.state_dict().items()))
