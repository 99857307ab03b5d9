# labmlai/annotated_deep_learning_paper_implementations,
# labml_nn/adaptive_computation/ponder_net/__init__.py (PonderNet: the
# ParityPonderGRU step function, a GRUCell unrolled max_steps times with
# Sigmoid halting probabilities, torch.bernoulli halting, x.new_zeros /
# h.new_ones / p.new_tensor; ReconstructionLoss over BCEWithLogitsLoss(
# reduction='none'); RegularizationLoss, the KLDivLoss(reduction='batchmean')
# to a geometric prior held in a requires_grad=False nn.Parameter), the
# parity task's ParityDataset (labml_nn/adaptive_computation/parity.py:
# torch.randint / randperm per item) and ponder_net/experiment.py's step()
# (loss_rec + beta * loss_reg, expected steps, accuracy of the sampled
# prediction, clip_grad_norm_, Adam at 3e-4).  The classes define
# ``__call__`` as labml_helpers' Module lets them (its __init_subclass__
# turns ``__call__`` into ``forward``), included here.
# Changes for a CPU test: the labml trainer and tracker replaced by a plain
# loop running step() and printing what the tracker would record;
# n_elems=8, n_hidden=16, max_steps=5, batch_size=8, 3 batches; one
# training step under torch.compile checked against eager (its loss does
# not depend on the bernoulli draws).
import copy
from typing import Tuple

import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset


class Module(torch.nn.Module):
    # labml_helpers.module.Module
    def __init_subclass__(cls, **kwargs):
        if cls.__dict__.get('__call__', None) is None:
            return

        setattr(cls, 'forward', cls.__dict__['__call__'])
        delattr(cls, '__call__')

    @property
    def device(self):
        params = self.parameters()
        try:
            sample_param = next(params)
            return sample_param.device
        except StopIteration:
            raise RuntimeError(f"Unable to determine"
                               f" device of {self.__class__.__name__}") from None


class ParityDataset(Dataset):
    def __init__(self, n_samples: int, n_elems: int = 64):
        self.n_samples = n_samples
        self.n_elems = n_elems

    def __len__(self):
        return self.n_samples

    def __getitem__(self, idx: int) -> Tuple[torch.Tensor, torch.Tensor]:
        # Empty vector
        x = torch.zeros((self.n_elems,))
        # Number of non-zero elements - a random number between $1$ and total number of elements
        n_non_zero = torch.randint(1, self.n_elems + 1, (1,)).item()
        # Fill non-zero elements with $1$'s and $-1$'s
        x[:n_non_zero] = torch.randint(0, 2, (n_non_zero,)) * 2 - 1
        # Randomly permute the elements
        x = x[torch.randperm(self.n_elems)]

        # The parity
        y = (x == 1.).sum() % 2

        #
        return x, y


class ParityPonderGRU(Module):
    def __init__(self, n_elems: int, n_hidden: int, max_steps: int):
        super().__init__()

        self.max_steps = max_steps
        self.n_hidden = n_hidden

        self.gru = nn.GRUCell(n_elems, n_hidden)
        self.output_layer = nn.Linear(n_hidden, 1)
        self.lambda_layer = nn.Linear(n_hidden, 1)
        self.lambda_prob = nn.Sigmoid()
        # An option to set during inference so that computation is actually halted at inference time
        self.is_halt = False

    def __call__(self, x: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        batch_size = x.shape[0]

        # We get initial state $h_1 = s_h(x)$
        h = x.new_zeros((x.shape[0], self.n_hidden))
        h = self.gru(x, h)

        p = []
        y = []
        un_halted_prob = h.new_ones((batch_size,))

        halted = h.new_zeros((batch_size,))
        p_m = h.new_zeros((batch_size,))
        y_m = h.new_zeros((batch_size,))

        for n in range(1, self.max_steps + 1):
            if n == self.max_steps:
                lambda_n = h.new_ones(h.shape[0])
            else:
                lambda_n = self.lambda_prob(self.lambda_layer(h))[:, 0]
            y_n = self.output_layer(h)[:, 0]

            p_n = un_halted_prob * lambda_n
            un_halted_prob = un_halted_prob * (1 - lambda_n)

            # Halt based on halting probability $\lambda_n$
            halt = torch.bernoulli(lambda_n) * (1 - halted)

            p.append(p_n)
            y.append(y_n)

            p_m = p_m * (1 - halt) + p_n * halt
            y_m = y_m * (1 - halt) + y_n * halt

            halted = halted + halt
            h = self.gru(x, h)

            # Stop the computation if all samples have halted
            if self.is_halt and halted.sum() == batch_size:
                break

        #
        return torch.stack(p), torch.stack(y), p_m, y_m


class ReconstructionLoss(Module):
    def __init__(self, loss_func: nn.Module):
        super().__init__()
        self.loss_func = loss_func

    def __call__(self, p: torch.Tensor, y_hat: torch.Tensor, y: torch.Tensor):
        total_loss = p.new_tensor(0.)
        for n in range(p.shape[0]):
            loss = (p[n] * self.loss_func(y_hat[n], y)).mean()
            total_loss = total_loss + loss

        #
        return total_loss


class RegularizationLoss(Module):
    def __init__(self, lambda_p: float, max_steps: int = 1_000):
        super().__init__()

        p_g = torch.zeros((max_steps,))
        not_halted = 1.
        for k in range(max_steps):
            p_g[k] = not_halted * lambda_p
            not_halted = not_halted * (1 - lambda_p)

        self.p_g = nn.Parameter(p_g, requires_grad=False)

        self.kl_div = nn.KLDivLoss(reduction='batchmean')

    def __call__(self, p: torch.Tensor):
        p = p.transpose(0, 1)
        p_g = self.p_g[None, :p.shape[1]].expand_as(p)

        return self.kl_div(p.log(), p_g)


# --- experiment.py's Configs and step(), in a plain loop ---
torch.manual_seed(0)
batch_size, n_batches = 8, 3
n_elems, n_hidden, max_steps = 8, 16, 5
lambda_p, beta, grad_norm_clip = 0.2, 0.01, 1.0

model = ParityPonderGRU(n_elems, n_hidden, max_steps)
loss_rec = ReconstructionLoss(nn.BCEWithLogitsLoss(reduction='none'))
loss_reg = RegularizationLoss(lambda_p, max_steps)
print('forward is __call__', ParityPonderGRU.forward.__name__, '__call__' in ParityPonderGRU.__dict__)
print('prior', loss_reg.p_g, [n for n, _ in loss_reg.named_parameters()], model.device)
optimizer = torch.optim.Adam(model.parameters(), lr=0.0003)
train_loader = DataLoader(ParityDataset(batch_size * n_batches, n_elems), batch_size=batch_size)
valid_loader = DataLoader(ParityDataset(batch_size * 2, n_elems), batch_size=batch_size)


def step(batch, is_train):
    model.train(is_train)
    data, target = batch[0], batch[1]
    p, y_hat, p_sampled, y_hat_sampled = model(data)
    lr = loss_rec(p, y_hat, target.to(torch.float))
    lg = loss_reg(p)
    loss = lr + beta * lg
    steps = torch.arange(1, p.shape[0] + 1, device=p.device)
    expected_steps = (p * steps[:, None]).sum(dim=0)
    correct = ((y_hat_sampled > 0) == target).sum().item()
    if is_train:
        loss.backward()
        norm = torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm=grad_norm_clip)
        optimizer.step()
        optimizer.zero_grad()
    else:
        norm = torch.tensor(0.)
    print(f'{"train" if is_train else "valid"} loss {lr.item():.6f} loss_reg {lg.item():.6f} '
          f'steps {expected_steps.mean().item():.5f} correct {correct} norm {norm.item():.6f}')


for batch in train_loader:
    step(batch, True)
with torch.no_grad():
    for batch in valid_loader:
        step(batch, False)

model.is_halt = True
model.eval()
with torch.no_grad():
    data, target = next(iter(valid_loader))
    p, y_hat, p_m, y_m = model(data)
    print('halting inference', tuple(p.shape), p.sum(0))

# compiled: one training step checked against eager
model.is_halt = False
model.train()
state, opt_state = copy.deepcopy(model.state_dict()), copy.deepcopy(optimizer.state_dict())
data, target = next(iter(train_loader))


def train_step(data, target):
    p, y_hat, _, _ = model(data)
    loss = loss_rec(p, y_hat, target.to(torch.float)) + beta * loss_reg(p)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm=grad_norm_clip)
    optimizer.step()
    optimizer.zero_grad()
    return loss


loss_c = torch.compile(train_step)(data, target)
after_c = copy.deepcopy(model.state_dict())
model.load_state_dict(state)
optimizer.load_state_dict(opt_state)
loss_e = train_step(data, target)
print('compiled == eager', torch.allclose(loss_c, loss_e, atol=1e-6),
      all(torch.allclose(after_c[k], v, atol=1e-6) for k, v in model.state_dict().items()))
