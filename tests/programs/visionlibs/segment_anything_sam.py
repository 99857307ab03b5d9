"""segment-anything (Meta's SAM) on a tiny model built the way its build_sam
does (ImageEncoderViT with windowed and global attention and relative
positions, PromptEncoder, MaskDecoder over a TwoWayTransformer), no
checkpoint: SamPredictor.set_image / predict with point, box and mask
prompts and batched predict_torch, SamAutomaticMaskGenerator over a small
point grid, and a fine-tuning step of the mask decoder as SAM tutorials
write it (frozen image encoder, BCE + dice loss)."""
import random
from functools import partial

import numpy as np
import torch
import torch.nn.functional as F

from segment_anything import SamAutomaticMaskGenerator, SamPredictor
from segment_anything.modeling import (ImageEncoderViT, MaskDecoder, PromptEncoder, Sam,
                                       TwoWayTransformer)

torch.manual_seed(0)
random.seed(0)
rng = np.random.default_rng(0)

prompt_embed_dim, image_size, vit_patch_size = 32, 64, 8
image_embedding_size = image_size // vit_patch_size
sam = Sam(
    image_encoder=ImageEncoderViT(
        depth=2, embed_dim=32, img_size=image_size, mlp_ratio=2,
        norm_layer=partial(torch.nn.LayerNorm, eps=1e-6), num_heads=2,
        patch_size=vit_patch_size, qkv_bias=True, use_rel_pos=True,
        global_attn_indexes=[1], window_size=3, out_chans=prompt_embed_dim),
    prompt_encoder=PromptEncoder(
        embed_dim=prompt_embed_dim,
        image_embedding_size=(image_embedding_size, image_embedding_size),
        input_image_size=(image_size, image_size), mask_in_chans=4),
    mask_decoder=MaskDecoder(
        num_multimask_outputs=3,
        transformer=TwoWayTransformer(depth=2, embedding_dim=prompt_embed_dim,
                                      mlp_dim=64, num_heads=2),
        transformer_dim=prompt_embed_dim, iou_head_depth=3, iou_head_hidden_dim=32),
    pixel_mean=[123.675, 116.28, 103.53],
    pixel_std=[58.395, 57.12, 57.375],
)
sam.eval()
print("params", sum(p.numel() for p in sam.parameters()))


def fmt(t, n=6):
    t = torch.as_tensor(t)
    return " ".join(f"{v:.5f}" for v in t.detach().float().flatten()[:n].tolist())


# a synthetic RGB image: a bright disc on a noisy background
yy, xx = np.mgrid[:40, :56]
image = rng.integers(0, 60, (40, 56, 3)).astype(np.uint8)
image[(yy - 20) ** 2 + (xx - 30) ** 2 < 100] = [220, 180, 40]

predictor = SamPredictor(sam)
predictor.set_image(image)
emb = predictor.get_image_embedding()
print("embedding", tuple(emb.shape), fmt(emb), predictor.input_size, predictor.original_size)

masks, scores, logits = predictor.predict(point_coords=np.array([[30, 20]]),
                                          point_labels=np.array([1]), multimask_output=True)
print("point", masks.shape, masks.dtype, masks.sum(axis=(1, 2)).tolist(),
      " ".join(f"{s:.5f}" for s in scores), logits.shape, fmt(logits[0, 10]))
best = logits[np.argmax(scores)]
masks, scores, logits = predictor.predict(point_coords=np.array([[30, 20], [5, 5]]),
                                          point_labels=np.array([1, 0]),
                                          mask_input=best[None, :, :], multimask_output=False)
print("points+mask", masks.shape, masks.sum().item(), " ".join(f"{s:.5f}" for s in scores))
masks, scores, logits = predictor.predict(box=np.array([18, 8, 44, 32]), multimask_output=False,
                                          return_logits=True)
print("box", masks.shape, fmt(masks[0, 20]), " ".join(f"{s:.5f}" for s in scores))

boxes = torch.tensor([[18, 8, 44, 32], [0, 0, 20, 20], [30, 10, 55, 39]], dtype=torch.float)
boxes = predictor.transform.apply_boxes_torch(boxes, image.shape[:2])
masks, iou, low = predictor.predict_torch(point_coords=None, point_labels=None,
                                          boxes=boxes, multimask_output=True)
print("batched boxes", tuple(masks.shape), masks.sum(dim=(2, 3)).tolist(), fmt(iou, 9),
      tuple(low.shape))

generator = SamAutomaticMaskGenerator(sam, points_per_side=3, points_per_batch=4,
                                      pred_iou_thresh=0.0, stability_score_thresh=0.0,
                                      box_nms_thresh=0.7)
anns = generator.generate(image)
print("automatic", len(anns), sorted(anns[0]))
for a in sorted(anns, key=lambda a: (-a["area"], a["bbox"]))[:5]:
    print(" ", a["area"], a["bbox"], f"{a['predicted_iou']:.4f}",
          f"{a['stability_score']:.4f}", [round(v, 2) for v in a["point_coords"][0]])

# fine-tune the mask decoder with a box prompt (the image encoder frozen)
target = torch.from_numpy(((yy - 20) ** 2 + (xx - 30) ** 2 < 100).astype(np.float32))
opt = torch.optim.Adam(sam.mask_decoder.parameters(), lr=1e-3)
sam.mask_decoder.train()
input_image = predictor.transform.apply_image(image)
input_t = torch.as_tensor(input_image).permute(2, 0, 1)[None].float()
with torch.no_grad():
    image_embedding = sam.image_encoder(sam.preprocess(input_t))
box = torch.as_tensor(predictor.transform.apply_boxes(np.array([[18, 8, 44, 32]]), (40, 56)),
                      dtype=torch.float)
for step in range(2):
    with torch.no_grad():
        sparse, dense = sam.prompt_encoder(points=None, boxes=box, masks=None)
    low_res, iou_pred = sam.mask_decoder(
        image_embeddings=image_embedding, image_pe=sam.prompt_encoder.get_dense_pe(),
        sparse_prompt_embeddings=sparse, dense_prompt_embeddings=dense,
        multimask_output=False)
    up = sam.postprocess_masks(low_res, tuple(input_t.shape[-2:]), (40, 56))
    prob = torch.sigmoid(up[0, 0])
    dice = 1 - (2 * (prob * target).sum() + 1) / (prob.sum() + target.sum() + 1)
    loss = F.binary_cross_entropy_with_logits(up[0, 0], target) + dice
    opt.zero_grad()
    loss.backward()
    opt.step()
    print(f"step {step} loss {loss.item():.5f} dice {dice.item():.5f} iou {iou_pred.item():.5f}")
