# lucidrains/byol-pytorch (byol_pytorch/byol_pytorch.py: default, flatten,
# singleton, get_module_device, set_requires_grad, MaybeSyncBatchnorm,
# loss_fn, RandomApply, EMA, update_moving_average, MLP with BatchNorm1d,
# NetWrapper with its forward hook on the hidden layer and the lazily built
# projector, BYOL with the deep-copied target encoder and the mock forward in
# __init__; the README's training loop).  Changes for a CPU test: the
# torchvision augmentations are the augment_fn / augment_fn2 arguments (a
# flip and a fixed brightness change, the README's way to pass your own),
# the resnet is a small CNN with an `avgpool` child, the sizes are tiny,
# images come from numpy, and after construction every parameter and buffer
# (target encoder's too) comes from numpy, so tracec and torch compute the
# same numbers (the mock forward's torch.randn draws differ).  Then the
# training step under torch.compile against the same step run eagerly.
import copy
import random
from functools import wraps

import numpy as np
import torch
from torch import nn
import torch.nn.functional as F
import torch.distributed as dist

# helper functions

def default(val, def_val):
    return def_val if val is None else val

def flatten(t):
    return t.reshape(t.shape[0], -1)

def singleton(cache_key):
    def inner_fn(fn):
        @wraps(fn)
        def wrapper(self, *args, **kwargs):
            instance = getattr(self, cache_key)
            if instance is not None:
                return instance

            instance = fn(self, *args, **kwargs)
            setattr(self, cache_key, instance)
            return instance
        return wrapper
    return inner_fn

def get_module_device(module):
    return next(module.parameters()).device

def set_requires_grad(model, val):
    for p in model.parameters():
        p.requires_grad = val

def MaybeSyncBatchnorm(is_distributed = None):
    is_distributed = default(is_distributed, dist.is_initialized() and dist.get_world_size() > 1)
    return nn.SyncBatchNorm if is_distributed else nn.BatchNorm1d

# loss fn

def loss_fn(x, y):
    x = F.normalize(x, dim=-1, p=2)
    y = F.normalize(y, dim=-1, p=2)
    return 2 - 2 * (x * y).sum(dim=-1)

# augmentation utils

class RandomApply(nn.Module):
    def __init__(self, fn, p):
        super().__init__()
        self.fn = fn
        self.p = p
    def forward(self, x):
        if random.random() > self.p:
            return x
        return self.fn(x)

# exponential moving average

class EMA():
    def __init__(self, beta):
        super().__init__()
        self.beta = beta

    def update_average(self, old, new):
        if old is None:
            return new
        return old * self.beta + (1 - self.beta) * new

def update_moving_average(ema_updater, ma_model, current_model):
    for current_params, ma_params in zip(current_model.parameters(), ma_model.parameters()):
        old_weight, up_weight = ma_params.data, current_params.data
        ma_params.data = ema_updater.update_average(old_weight, up_weight)

# MLP class for projector and predictor

def MLP(dim, projection_size, hidden_size=4096, sync_batchnorm=None):
    return nn.Sequential(
        nn.Linear(dim, hidden_size),
        MaybeSyncBatchnorm(sync_batchnorm)(hidden_size),
        nn.ReLU(inplace=True),
        nn.Linear(hidden_size, projection_size)
    )

def SimSiamMLP(dim, projection_size, hidden_size=4096, sync_batchnorm=None):
    return nn.Sequential(
        nn.Linear(dim, hidden_size, bias=False),
        MaybeSyncBatchnorm(sync_batchnorm)(hidden_size),
        nn.ReLU(inplace=True),
        nn.Linear(hidden_size, hidden_size, bias=False),
        MaybeSyncBatchnorm(sync_batchnorm)(hidden_size),
        nn.ReLU(inplace=True),
        nn.Linear(hidden_size, projection_size, bias=False),
        MaybeSyncBatchnorm(sync_batchnorm)(projection_size, affine=False)
    )

# a wrapper class for the base neural network
# will manage the interception of the hidden layer output
# and pipe it into the projecter and predictor nets

class NetWrapper(nn.Module):
    def __init__(
        self,
        net,
        projection_size,
        projection_hidden_size,
        layer = -2,
        use_simsiam_mlp = False,
        sync_batchnorm = None
    ):
        super().__init__()
        self.net = net
        self.layer = layer

        self.projector = None
        self.projection_size = projection_size
        self.projection_hidden_size = projection_hidden_size

        self.use_simsiam_mlp = use_simsiam_mlp
        self.sync_batchnorm = sync_batchnorm

        self.hidden = {}
        self.hook_registered = False

    def _find_layer(self):
        if type(self.layer) == str:
            modules = dict([*self.net.named_modules()])
            return modules.get(self.layer, None)
        elif type(self.layer) == int:
            children = [*self.net.children()]
            return children[self.layer]
        return None

    def _hook(self, _, input, output):
        device = input[0].device
        self.hidden[device] = flatten(output)

    def _register_hook(self):
        layer = self._find_layer()
        assert layer is not None, f'hidden layer ({self.layer}) not found'
        handle = layer.register_forward_hook(self._hook)
        self.hook_registered = True

    @singleton('projector')
    def _get_projector(self, hidden):
        _, dim = hidden.shape
        create_mlp_fn = MLP if not self.use_simsiam_mlp else SimSiamMLP
        projector = create_mlp_fn(dim, self.projection_size, self.projection_hidden_size, sync_batchnorm = self.sync_batchnorm)
        return projector.to(hidden)

    def get_representation(self, x):
        if self.layer == -1:
            return self.net(x)

        if not self.hook_registered:
            self._register_hook()

        self.hidden.clear()
        _ = self.net(x)
        hidden = self.hidden[x.device]
        self.hidden.clear()

        assert hidden is not None, f'hidden layer {self.layer} never emitted an output'
        return hidden

    def forward(self, x, return_projection = True):
        representation = self.get_representation(x)

        if not return_projection:
            return representation

        projector = self._get_projector(representation)
        projection = projector(representation)
        return projection, representation

# main class

class BYOL(nn.Module):
    def __init__(
        self,
        net,
        image_size,
        hidden_layer = -2,
        projection_size = 256,
        projection_hidden_size = 4096,
        augment_fn = None,
        augment_fn2 = None,
        moving_average_decay = 0.99,
        use_momentum = True,
        sync_batchnorm = None
    ):
        super().__init__()
        self.net = net

        # default SimCLR augmentation (torchvision) is replaced by augment_fn here

        self.augment1 = augment_fn
        self.augment2 = default(augment_fn2, self.augment1)

        self.online_encoder = NetWrapper(
            net,
            projection_size,
            projection_hidden_size,
            layer = hidden_layer,
            use_simsiam_mlp = not use_momentum,
            sync_batchnorm = sync_batchnorm
        )

        self.use_momentum = use_momentum
        self.target_encoder = None
        self.target_ema_updater = EMA(moving_average_decay)

        self.online_predictor = MLP(projection_size, projection_size, projection_hidden_size)

        # get device of network and make wrapper same device
        device = get_module_device(net)
        self.to(device)

        # send a mock image tensor to instantiate singleton parameters
        self.forward(torch.randn(2, 3, image_size, image_size, device=device))

    @singleton('target_encoder')
    def _get_target_encoder(self):
        target_encoder = copy.deepcopy(self.online_encoder)
        set_requires_grad(target_encoder, False)
        return target_encoder

    def reset_moving_average(self):
        del self.target_encoder
        self.target_encoder = None

    def update_moving_average(self):
        assert self.use_momentum, 'you do not need to update the moving average, since you have turned off momentum for the target encoder'
        assert self.target_encoder is not None, 'target encoder has not been created yet'
        update_moving_average(self.target_ema_updater, self.target_encoder, self.online_encoder)

    def forward(
        self,
        x,
        return_embedding = False,
        return_projection = True
    ):
        assert not (self.training and x.shape[0] == 1), 'you must have greater than 1 sample when training, due to the batchnorm in the projection layer'

        if return_embedding:
            return self.online_encoder(x, return_projection = return_projection)

        image_one, image_two = self.augment1(x), self.augment2(x)

        images = torch.cat((image_one, image_two), dim = 0)

        online_projections, _ = self.online_encoder(images)
        online_predictions = self.online_predictor(online_projections)

        online_pred_one, online_pred_two = online_predictions.chunk(2, dim = 0)

        with torch.no_grad():
            target_encoder = self._get_target_encoder() if self.use_momentum else self.online_encoder

            target_projections, _ = target_encoder(images)
            target_projections = target_projections.detach()

            target_proj_one, target_proj_two = target_projections.chunk(2, dim = 0)

        loss_one = loss_fn(online_pred_one, target_proj_two.detach())
        loss_two = loss_fn(online_pred_two, target_proj_one.detach())

        loss = loss_one + loss_two
        return loss.mean()


# ---- README usage, with a small CNN standing in for torchvision's resnet50 ----
class SmallResNet(nn.Module):
    def __init__(self, num_classes=10):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 8, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(8)
        self.relu = nn.ReLU(inplace=True)
        self.layer1 = nn.Sequential(nn.Conv2d(8, 16, 3, stride=2, padding=1, bias=False),
                                    nn.BatchNorm2d(16), nn.ReLU(inplace=True))
        self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
        self.fc = nn.Linear(16, num_classes)

    def forward(self, x):
        x = self.relu(self.bn1(self.conv1(x)))
        x = self.layer1(x)
        x = self.avgpool(x)
        x = torch.flatten(x, 1)
        return self.fc(x)


def numpy_init(module, seed):
    r = np.random.default_rng(seed)
    with torch.no_grad():
        for name, p in list(module.named_parameters()) + list(module.named_buffers()):
            if p.dtype != torch.float32:
                continue
            if name.endswith("running_var") or (p.dim() == 1 and "bn" not in name and name.endswith("weight")):
                p.copy_(torch.from_numpy((1 + 0.1 * r.random(tuple(p.shape))).astype(np.float32)))
                continue
            std = 0.1 if p.dim() == 1 else p[0].numel() ** -0.5
            p.copy_(torch.from_numpy((std * r.standard_normal(tuple(p.shape))).astype(np.float32)))


resnet = SmallResNet()

learner = BYOL(
    resnet,
    image_size = 8,
    hidden_layer = 'avgpool',
    projection_size = 16,           # 256
    projection_hidden_size = 32,    # 4096
    augment_fn = lambda x: torch.flip(x, dims=(3,)),
    augment_fn2 = lambda x: x * 0.8 + 0.1,
)
print("target", type(learner.target_encoder).__name__, learner.target_encoder is not learner.online_encoder,
      all(not p.requires_grad for p in learner.target_encoder.parameters()),
      sum(1 for p in learner.parameters() if p.requires_grad), sum(1 for _ in learner.parameters()))
print("projector", learner.online_encoder.projector)
numpy_init(learner, 0)
# the target starts as the online network (its deep copy in the mock forward)
learner.target_encoder.load_state_dict(learner.online_encoder.state_dict())

opt = torch.optim.Adam(learner.parameters(), lr=3e-4)

g = np.random.default_rng(1)
def sample_unlabelled_images():
    return torch.from_numpy(g.standard_normal((6, 3, 8, 8)).astype(np.float32))

for i in range(4):
    images = sample_unlabelled_images()
    loss = learner(images)
    opt.zero_grad()
    loss.backward()
    opt.step()
    learner.update_moving_average() # update moving average of target encoder
    print("step", i, f"{loss.item():.6f}",
          f"{learner.target_encoder.net.fc.weight.sum().item():.6f}",
          f"{learner.target_encoder.net.bn1.running_mean.sum().item():.6f}")

# save your improved network
torch.save(resnet.state_dict(), './improved-net.pt')
state = torch.load('./improved-net.pt')
print("saved", sorted(state)[:3], len(state))

learner.eval()
projection, embedding = learner(images, return_embedding = True)
print("embedding", tuple(projection.shape), tuple(embedding.shape), f"{embedding.sum().item():.5f}")
learner.train()

# the training step under torch.compile against the same step run eagerly
def train_step(images):
    loss = learner(images)
    opt.zero_grad()
    loss.backward()
    opt.step()
    learner.update_moving_average()
    return loss


state, opt_state = copy.deepcopy(learner.state_dict()), copy.deepcopy(opt.state_dict())
eager = [train_step(images).item() for _ in range(3)]
after = copy.deepcopy(learner.state_dict())
learner.load_state_dict(state)
opt.load_state_dict(opt_state)
cstep = torch.compile(train_step)
compiled = [cstep(images).item() for _ in range(3)]
print("compiled losses", [f"{v:.6f}" for v in compiled])
# a bias feeding a BatchNorm1d (and the running mean it moves) gets a gradient
# of rounding noise only, which Adam scales to steps of up to lr: those may
# differ by a few lr between two summation orders
noise = ("online_encoder.projector.0.bias", "online_encoder.projector.1.running_mean",
         "online_encoder.projector.3.bias", "online_predictor.0.bias", "online_predictor.1.running_mean")
print("compiled == eager:", all(abs(a - b) <= 1e-4 * max(1.0, abs(b)) for a, b in zip(compiled, eager)),
      all(torch.allclose(learner.state_dict()[k], after[k], rtol=1e-4, atol=1e-5) for k in after if k not in noise),
      all(torch.allclose(learner.state_dict()[k], after[k], atol=6 * 3e-4) for k in noise))
