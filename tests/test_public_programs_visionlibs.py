"""Real published vision-model packages run unmodified on tracec
(``tests/programs/visionlibs``):

- open_clip_torch: tiny ViT and ModifiedResNet CLIP configs registered with
  ``add_model_config`` (no weights, no network), create_model_and_transforms
  with its preprocessing of PIL images, get_tokenizer, encode_image /
  encode_text, a zero-shot classifier built from its templates, two ClipLoss
  training steps with the train-time augmentations, save / reload, a CoCa
  trained a step with CoCaLoss, a SigLipLoss step (``open_clip_models.py``);
- segment-anything: a tiny SAM built as its build_sam does (windowed and
  global attention with relative positions, prompt encoder, two-way
  transformer mask decoder), SamPredictor with point, box, mask and batched
  box prompts, SamAutomaticMaskGenerator over a small point grid, and a
  fine-tuning step of the mask decoder (``segment_anything_sam.py``);
- ultralytics: YOLOv8n built from 'yolov8n.yaml' (no weights, offline),
  model.info(), a forward pass, a one-epoch train (with its final
  validation) on a tiny YOLO-format dataset written in the working folder
  (``ultralytics_yolo.py``).

Each program runs under ``tracec run`` (the packages' own ``import torch``
is tracec) and, as the reference, under torch 2.13 (recorded, keyed by the
packages' installed versions; torchvision's compiled ``nms``, which SAM's
automatic masks and YOLO's validation call, is Python there:
``vision_oracle._NMS``)."""
import pathlib

import pytest

from library_programs import check_library_program

ROOT = pathlib.Path(__file__).resolve().parent.parent
PROGS = ROOT / "tests" / "programs" / "visionlibs"

#: program -> the pip packages it imports (pinned in pyproject's test extra)
CASES = {
    "open_clip_models.py": ("open_clip_torch",),
    "segment_anything_sam.py": ("segment-anything",),
    "ultralytics_yolo.py": ("ultralytics",),
}
#: programs whose libraries call torchvision's compiled ``nms``, which the
#: reference runs get as Python (``vision_oracle._NMS``)
NMS = {"segment_anything_sam.py", "ultralytics_yolo.py"}


@pytest.mark.parametrize("script", [pytest.param(c, id=c[:-3]) for c in CASES])
def test_visionlibs_program_matches_torch(script, tmp_path):
    check_library_program(PROGS / script, CASES[script], tmp_path, nms=script in NMS)
