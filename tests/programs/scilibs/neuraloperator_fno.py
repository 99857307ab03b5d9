# neuraloperator/neuraloperator (pip neuraloperator), as its README and
# examples (plot_FNO_darcy.py, plot_UNO_darcy.py, ...) use it, on a tiny
# synthetic 2-D operator-learning problem (a random field -> its smoothed,
# squared version) instead of the downloaded Darcy data:
# FNO with its grid positional embedding, LpLoss / H1Loss, neuralop's AdamW
# with a StepLR, trained by hand a few steps and then by its Trainer
# (verbose off: its log lines carry timings) with eval losses, its training
# state checkpointed and resumed by a fresh Trainer; TFNO with
# Tucker / CP / dense factorized spectral weights (tensorly, tltorch), a
# 1-D FNO with domain padding and super-resolution output, count_model_params,
# save_checkpoint / from_checkpoint, evaluation at a finer resolution; a UNO
# on normalized data (DefaultDataProcessor, UnitGaussianNormalizer), its
# FiniteDiff / FourierDiff derivatives and BurgersEqnLoss, and its AdamW with
# tensor GaLore (Tucker projections of the complex spectral gradients); an
# FNO on complex-valued data.
import torch
from torch.utils.data import DataLoader, Dataset
from neuralop.models import FNO, TFNO
from neuralop import Trainer, LpLoss, H1Loss, BurgersEqnLoss, FiniteDiff, FourierDiff
from neuralop.training import AdamW
from neuralop.utils import count_model_params

torch.manual_seed(0)


def make_data(n, res):
    x = torch.randn(n, 1, res, res)
    k = torch.ones(1, 1, 3, 3) / 9
    y = torch.nn.functional.conv2d(torch.nn.functional.pad(x, (1, 1, 1, 1), mode='circular'), k)
    return x, y ** 2


class DictDataset(Dataset):
    def __init__(self, x, y):
        self.x, self.y = x, y

    def __len__(self):
        return len(self.x)

    def __getitem__(self, i):
        return {'x': self.x[i], 'y': self.y[i]}


def show(name, t, k=6):
    print(name, tuple(t.shape), [f"{v:.5f}" for v in t.detach().flatten()[:k].tolist()])


x_train, y_train = make_data(8, 16)
x_test, y_test = make_data(4, 16)

l2loss = LpLoss(d=2, p=2)
h1loss = H1Loss(d=2)
print('losses', f"{l2loss(y_train, x_train).item():.5f}", f"{h1loss(y_train, x_train).item():.5f}",
      f"{LpLoss(d=2, p=1, reduction='mean')(y_train, x_train).item():.5f}",
      f"{l2loss.abs(y_train, x_train).item():.5f}")

model = FNO(n_modes=(4, 4), hidden_channels=8, in_channels=1, out_channels=1, n_layers=2,
            projection_channel_ratio=2)
print('params', count_model_params(model))
out = model(x_train[:2])
show('fno out', out)

optimizer = AdamW(model.parameters(), lr=8e-3, weight_decay=1e-4)
scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=2, gamma=0.5)
for step in range(3):
    optimizer.zero_grad()
    loss = h1loss(model(x_train), y_train)
    loss.backward()
    optimizer.step()
    scheduler.step()
    print('step', step, f"{loss.item():.5f}", f"{scheduler.get_last_lr()[0]:.5f}")

# the Trainer, as examples/plot_FNO_darcy.py calls it
torch.manual_seed(1)
model = TFNO(n_modes=(4, 4), hidden_channels=8, in_channels=1, out_channels=1, n_layers=2,
             factorization='tucker', implementation='factorized', rank=0.42)
print('tfno params', count_model_params(model))
train_loader = DataLoader(DictDataset(x_train, y_train), batch_size=4, shuffle=True)
test_loaders = {16: DataLoader(DictDataset(x_test, y_test), batch_size=4, shuffle=False)}
optimizer = AdamW(model.parameters(), lr=8e-3, weight_decay=1e-4)
scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=30)
trainer = Trainer(model=model, n_epochs=2, device='cpu', data_processor=None,
                  wandb_log=False, eval_interval=1, use_distributed=False, verbose=False)
metrics = trainer.train(train_loader=train_loader, test_loaders=test_loaders,
                        optimizer=optimizer, scheduler=scheduler, regularizer=False,
                        training_loss=h1loss, eval_losses={'h1': h1loss, 'l2': l2loss})
print('trainer', {k: f"{float(v):.5f}" for k, v in sorted(metrics.items())
                  if k != 'epoch_train_time' and v is not None})
errs = trainer.evaluate({'h1': h1loss, 'l2': l2loss}, test_loaders[16], log_prefix='16')
print('evaluate', {k: f"{float(v):.5f}" for k, v in sorted(errs.items())})
# checkpoint the training state, then resume it in a fresh Trainer for one
# more epoch (model, optimizer and scheduler state through torch.save / load)
trainer.checkpoint('state')
torch.manual_seed(1)
model_r = TFNO(n_modes=(4, 4), hidden_channels=8, in_channels=1, out_channels=1, n_layers=2,
               factorization='tucker', implementation='factorized', rank=0.42)
optimizer_r = AdamW(model_r.parameters(), lr=8e-3, weight_decay=1e-4)
scheduler_r = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer_r, T_max=30)
trainer_r = Trainer(model=model_r, n_epochs=3, device='cpu', verbose=False)
metrics = trainer_r.train(train_loader=train_loader, test_loaders=test_loaders,
                          optimizer=optimizer_r, scheduler=scheduler_r, regularizer=False,
                          training_loss=h1loss, eval_losses={'h1': h1loss, 'l2': l2loss},
                          resume_from_dir='state')
print('resumed', trainer_r.start_epoch, f"{scheduler_r.get_last_lr()[0]:.6f}",
      {k: f"{float(v):.5f}" for k, v in sorted(metrics.items())
       if k != 'epoch_train_time' and v is not None})

# a finer resolution: the same operator, more grid points
x_fine, y_fine = make_data(2, 24)
model.eval()
with torch.no_grad():
    show('tfno fine', model(x_fine))

# the other factorizations of the spectral weights
for fact, impl in (('cp', 'factorized'), ('tucker', 'reconstructed'), ('dense', 'reconstructed'),
                   (None, 'factorized')):
    torch.manual_seed(2)
    m = TFNO(n_modes=(4, 4), hidden_channels=6, in_channels=1, out_channels=1, n_layers=1,
             factorization=fact, implementation=impl, rank=0.5)
    loss = l2loss(m(x_train[:2]), y_train[:2])
    loss.backward()
    g = sum(p.grad.abs().sum().item() for p in m.parameters() if p.grad is not None)
    print('tfno', fact, impl, count_model_params(m), f"{loss.item():.5f}", f"{g:.5f}")

# 1-D FNO with domain padding and a super-resolution output
torch.manual_seed(3)
m1 = FNO(n_modes=(6,), hidden_channels=8, in_channels=2, out_channels=1, n_layers=2,
         domain_padding=0.25, norm='group_norm', fno_skip='soft-gating',
         channel_mlp_skip='linear')
x1 = torch.randn(3, 2, 20)
y1 = m1(x1)
show('fno1d', y1)
# (not with domain padding: its unpad does not know the scaled size)
sr = FNO(n_modes=(6,), hidden_channels=8, in_channels=2, out_channels=1, n_layers=2,
         resolution_scaling_factor=[1, 2])
show('fno1d x2', sr(x1))
loss = LpLoss(d=1, p=2)(y1, torch.zeros_like(y1) + 0.1)
loss.backward()
print('fno1d loss', f"{loss.item():.5f}",
      f"{sum(p.grad.abs().sum().item() for p in m1.parameters() if p.grad is not None):.5f}")

# save / load as its docs do
m1.save_checkpoint('ckpt', 'fno1d')
m2 = FNO.from_checkpoint('ckpt', 'fno1d')
print('reloaded', type(m2).__name__, torch.allclose(m2(x1), y1))

# a U-shaped neural operator (examples/plot_UNO_darcy.py's configuration,
# smaller), its data normalized by a DefaultDataProcessor of
# UnitGaussianNormalizers fitted on the training set
from neuralop.models import UNO
from neuralop.data.transforms.data_processors import DefaultDataProcessor
from neuralop.data.transforms.normalizers import UnitGaussianNormalizer

torch.manual_seed(4)
in_norm = UnitGaussianNormalizer(dim=[0, 2, 3], eps=1e-6)
out_norm = UnitGaussianNormalizer(dim=[0, 2, 3], eps=1e-6)
in_norm.fit(x_train)
out_norm.fit(y_train)
processor = DefaultDataProcessor(in_normalizer=in_norm, out_normalizer=out_norm)
uno = UNO(1, 1, hidden_channels=8, projection_channels=8, lifting_channels=8, n_layers=3,
          uno_out_channels=[8, 8, 8], uno_n_modes=[[4, 4], [2, 2], [4, 4]],
          uno_scalings=[[1.0, 1.0], [0.5, 0.5], [2, 2]], horizontal_skips_map={2: 0},
          channel_mlp_skip='linear', domain_padding=0.1)
batch = processor.preprocess({'x': x_train[:4], 'y': y_train[:4]})
out = uno(batch['x'])
out, batch = processor.postprocess(out, batch)
loss = l2loss(out, batch['y'])
loss.backward()
print('uno', tuple(out.shape), f"{loss.item():.5f}",
      f"{sum(p.grad.abs().sum().item() for p in uno.parameters() if p.grad is not None):.5f}")
print('normalizer', [f"{v:.5f}" for v in in_norm.mean.flatten()[:3].tolist()],
      [f"{v:.5f}" for v in out_norm.std.flatten()[:3].tolist()])

# derivatives on the grid: FiniteDiff, FourierDiff (spectral), BurgersEqnLoss
xs = torch.linspace(0, 2 * torch.pi, 33)[:-1]
u = torch.sin(xs)[None, :].repeat(3, 1) * torch.cos(xs)[:, None][None, :3].squeeze(-1).T
u2 = torch.sin(xs)[:, None] * torch.cos(2 * xs)[None, :]
fd = FiniteDiff(dim=2, h=(xs[1] - xs[0]).item())
fo = FourierDiff(dim=2, L=(2 * torch.pi, 2 * torch.pi))
for name, d in (('finite', fd), ('fourier', fo)):
    print(name, [f"{v:.5f}" for v in d.dx(u2)[3, :4].tolist()],
          [f"{v:.5f}" for v in d.laplacian(u2)[5, :4].tolist()])
burgers = BurgersEqnLoss(visc=0.01, method='fdm')
ub = torch.randn(2, 1, 8, 16, requires_grad=True)
lb = burgers(ub)
lb.backward()
print('burgers', f"{lb.item():.5f}", f"{ub.grad.abs().sum().item():.5f}")

# tensor GaLore: the spectral weights' gradients projected onto a Tucker
# subspace of their own (neuralop's AdamW with galore_params)
torch.manual_seed(5)
gm = FNO(n_modes=(4, 4), hidden_channels=4, in_channels=1, out_channels=1, n_layers=1)
spectral = [p for n, p in gm.named_parameters() if 'convs' in n and 'weight' in n]
others = [p for n, p in gm.named_parameters() if not ('convs' in n and 'weight' in n)]
gopt = AdamW(others, lr=1e-2, galore_params=spectral, galore_rank=0.5, galore_update_proj_gap=2)
for step in range(3):
    gopt.zero_grad()
    loss = l2loss(gm(x_train[:4]), y_train[:4])
    loss.backward()
    gopt.step()
    print('galore', step, f"{loss.item():.5f}")

# complex-valued data (complex_data=True: complex lifting / projection and
# the ComplexValued activations)
torch.manual_seed(6)
cm = FNO(n_modes=(6,), hidden_channels=6, in_channels=1, out_channels=1, n_layers=2,
         complex_data=True)
xc = torch.randn(3, 1, 16, dtype=torch.cfloat)
yc = cm(xc)
print('complex fno', yc.dtype, tuple(yc.shape),
      [f"{v:.5f}" for v in torch.view_as_real(yc).flatten()[:6].tolist()])
yc.abs().pow(2).mean().backward()
print('complex grad', f"{sum(p.grad.abs().sum().item() for p in cm.parameters() if p.grad is not None):.5f}")
