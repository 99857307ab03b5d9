"""ultralytics YOLOv8 as its README's Python usage writes it, offline: the
'yolov8n.yaml' detection model built from its config with no weights,
model.info(), a forward pass, and a one-epoch train on a tiny synthetic
YOLO-format dataset written into the working folder (imgsz=64, workers=0,
no plots, no val), then predict on an image."""
import os
import random

os.environ["YOLO_OFFLINE"] = "1"
os.environ["YOLO_VERBOSE"] = "False"
os.environ["YOLO_CONFIG_DIR"] = os.path.abspath("ultralytics_cfg")

import numpy as np
import torch
from PIL import Image

from ultralytics import YOLO

torch.manual_seed(0)
random.seed(0)
rng = np.random.default_rng(0)

# a tiny dataset: 4 images of coloured rectangles with their boxes
root = os.path.abspath("shapes")
for split in ("train", "val"):
    os.makedirs(f"{root}/images/{split}", exist_ok=True)
    os.makedirs(f"{root}/labels/{split}", exist_ok=True)
    for i in range(4):
        img = rng.integers(0, 40, (64, 64, 3), dtype=np.uint8)
        x0, y0 = int(rng.integers(4, 30)), int(rng.integers(4, 30))
        w, h = int(rng.integers(12, 30)), int(rng.integers(12, 30))
        cls = i % 2
        img[y0:y0 + h, x0:x0 + w] = [200, 40, 40] if cls == 0 else [40, 200, 40]
        Image.fromarray(img).save(f"{root}/images/{split}/{i}.png")
        with open(f"{root}/labels/{split}/{i}.txt", "w") as f:
            f.write(f"{cls} {(x0 + w / 2) / 64:.6f} {(y0 + h / 2) / 64:.6f} {w / 64:.6f} {h / 64:.6f}\n")
with open("shapes.yaml", "w") as f:
    f.write(f"path: {root}\ntrain: images/train\nval: images/val\nnames:\n  0: red\n  1: green\n")

model = YOLO("yolov8n.yaml")
print(type(model.model).__name__, model.task, len(model.model.model))
layers, params, grads, flops = model.info()
print("info", layers, params, grads, f"{flops:.3f}")

model.model.eval()
x = torch.rand(1, 3, 64, 64)
with torch.no_grad():
    y = model.model(x)
pred = y[0] if isinstance(y, (list, tuple)) else y
print("forward", tuple(pred.shape), f"{pred.abs().mean().item():.5f}",
      " ".join(f"{v:.4f}" for v in pred[0, :, 0].tolist()[:6]))

results = model.train(data="shapes.yaml", epochs=1, imgsz=64, batch=4, workers=0, device="cpu",
                      plots=False, val=False, project=os.path.abspath("runs"), name="train",
                      exist_ok=True, seed=0, deterministic=True, amp=False, verbose=False,
                      mosaic=0.0)
trainer = model.trainer
tloss = trainer.tloss
print("trained epochs", trainer.epochs, "loss",
      " ".join(f"{k}={float(v):.4f}" for k, v in (tloss.items() if isinstance(tloss, dict)
                                                  else enumerate(tloss.tolist()))))
print("saved", sorted(os.listdir(trainer.wdir)))
print("val metrics", " ".join(f"{k}={v:.4f}" for k, v in sorted(trainer.metrics.items())))

# inference as the README does, on the trained model (best.pt reloaded)
best = YOLO(os.path.join(trainer.wdir, "best.pt"))
results = best.predict(f"{root}/images/val/0.png", imgsz=64, conf=1e-4, verbose=False)
r = results[0]
print("predict", type(r).__name__, r.orig_shape, len(r.boxes), r.names)
conf = r.boxes.conf
print(" conf", " ".join(f"{v:.6f}" for v in conf[:5].tolist()),
      "xyxy", " ".join(f"{v:.2f}" for v in r.boxes.xyxy[:2].flatten().tolist()),
      "cls", r.boxes.cls[:5].tolist())
