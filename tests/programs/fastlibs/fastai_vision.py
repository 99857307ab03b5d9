"""fastai's vision quickstart on tiny generated images: ImageDataLoaders.from_name_func
over 64-pixel PNGs written to the working folder, vision_learner(resnet18, pretrained=False),
fine_tune / fit_one_cycle, predict, export / load_learner, save / load."""
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
    arr = rng.randint(0, 256, (64, 64, 3)).astype(np.uint8)
    if cat:
        arr[:, :, 0] = 255 - arr[:, :, 0] // 4
    name = ("Cat" if cat else "dog") + f"_{i}.png"
    Image.fromarray(arr).save(path / name)

files = get_image_files(path).sorted()
print(len(files), files[0].name, files[-1].name)

def is_cat(x): return x[0].isupper()

dls = ImageDataLoaders.from_name_func(
    path, files, valid_pct=0.25, seed=42,
    label_func=is_cat, item_tfms=Resize(64), bs=8, num_workers=0)
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
