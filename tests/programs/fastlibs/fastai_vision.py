"""fastai's vision quickstart on tiny generated images: ImageDataLoaders.from_name_func
over 32-pixel PNGs written to the working folder, vision_learner(resnet18, pretrained=False),
fit_one_cycle, predict, get_preds, export / load_learner, save / load, and a WGAN
(GANLearner.wgan with basic_generator / basic_critic) on generated images."""
import random

import numpy as np
import torch
from PIL import Image
from fastai.vision.all import *

set_seed(0, reproducible=True)
torch.manual_seed(0)
random.seed(0)

path = Path("pets")
path.mkdir(exist_ok=True)
rng = np.random.RandomState(0)
for i in range(24):
    cat = i % 2 == 0
    arr = rng.randint(0, 256, (32, 32, 3)).astype(np.uint8)
    if cat:
        arr[:, :, 0] = 255 - arr[:, :, 0] // 4
    name = ("Cat" if cat else "dog") + f"_{i}.png"
    Image.fromarray(arr).save(path / name)

files = get_image_files(path).sorted()
print(len(files), files[0].name, files[-1].name)

def is_cat(x): return x[0].isupper()

dls = ImageDataLoaders.from_name_func(
    path, files, valid_pct=0.25, seed=42,
    label_func=is_cat, item_tfms=Resize(32), bs=8, num_workers=0)
print("vocab", dls.vocab, "train", len(dls.train_ds), "valid", len(dls.valid_ds))
xb, yb = dls.one_batch()
print(type(xb).__name__, tuple(xb.shape), xb.dtype, type(yb).__name__, yb.tolist())
print(f"batch mean {xb.mean().item():.5f} std {xb.std().item():.5f}")

learn = vision_learner(dls, resnet18, pretrained=False, metrics=error_rate)
learn.remove_cb(ProgressCallback)      # no progress bars, no timing table
learn.logger = noop
learn.fit_one_cycle(1, 1e-3)
for i, v in enumerate(learn.recorder.values):
    print("epoch", i, " ".join(f"{x:.5f}" for x in v))
print("lrs", " ".join(f"{x:.6f}" for x in learn.recorder.lrs))
print("losses", " ".join(f"{float(x):.5f}" for x in learn.recorder.losses))

pred, idx, probs = learn.predict(files[0])
print("predict", pred, int(idx), " ".join(f"{p:.5f}" for p in probs.tolist()))

preds, targs = learn.get_preds()
print("get_preds", tuple(preds.shape), " ".join(f"{p:.5f}" for p in preds[:, 1].tolist()),
      targs.tolist())

print("validate", " ".join(f"{x:.5f}" for x in learn.validate()))
w = learn.model[0][0].weight
learn.save("stage1")
with torch.no_grad():
    w.zero_()
learn.load("stage1")
print(f"reloaded weight sum {learn.model[0][0].weight.sum().item():.5f}",
      type(learn.opt).__name__, len(learn.opt.state))
learn.export("export.pkl")
learn2 = load_learner(path / "export.pkl")
learn2.remove_cb(ProgressCallback)
pred2, idx2, probs2 = learn2.predict(files[0])
print("loaded predict", pred2, int(idx2), " ".join(f"{p:.5f}" for p in probs2.tolist()))

# --- a WGAN (fastai.vision.gan) on the same kind of images ------------------------
from fastai.vision.gan import *

set_seed(1, reproducible=True)
gan_path = Path("gan")
gan_path.mkdir(exist_ok=True)
for i in range(12):
    Image.fromarray(rng.randint(0, 256, (16, 16, 3)).astype(np.uint8)).save(gan_path / f"i{i}.png")
half = torch.tensor([0.5, 0.5, 0.5])
gan_block = DataBlock(blocks=(TransformBlock, ImageBlock), get_x=generate_noise,
                      get_items=get_image_files, splitter=IndexSplitter([]), item_tfms=Resize(16),
                      batch_tfms=Normalize.from_stats(half, half))
gan_dls = gan_block.dataloaders(gan_path, path=gan_path, bs=4, num_workers=0)
noise, real = gan_dls.one_batch()
print("gan batch", tuple(noise.shape), tuple(real.shape), f"{real.mean().item():.5f}")
generator = basic_generator(16, n_channels=3, n_extra_layers=1, in_sz=100, n_features=8)
critic = basic_critic(16, n_channels=3, n_extra_layers=1, n_features=8,
                      act_cls=partial(nn.LeakyReLU, negative_slope=0.2))
gan = GANLearner.wgan(gan_dls, generator, critic, opt_func=partial(Adam, mom=0.))
gan.remove_cb(ProgressCallback)
gan.logger = noop
gan.recorder.train_metrics, gan.recorder.valid_metrics = True, False
gan.fit(1, 2e-4, wd=0.)
print("gan losses x 1e4", " ".join(f"{float(x) * 1e4:.5f}" for x in gan.recorder.losses))
print("generator", f"{sum(p.sum() for p in generator.parameters()).item():.5f}",
      "critic", f"{sum(p.sum() for p in critic.parameters()).item():.5f}")
fake = gan.predict(noise[0])[0]
print("gan predict", type(fake).__name__, tuple(fake.shape), f"{fake.float().mean().item():.5f}")
