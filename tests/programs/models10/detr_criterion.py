# facebookresearch/detr's set prediction loss: models/matcher.py (HungarianMatcher:
# softmax class cost, torch.cdist L1 box cost, -GIoU cost, C.view(bs, q, -1).cpu()
# split by target sizes and scipy.optimize.linear_sum_assignment), util/box_ops.py
# (box_cxcywh_to_xyxy, box_xyxy_to_cxcywh, box_iou, generalized_box_iou, with
# torchvision.ops.boxes.box_area), models/detr.py (SetCriterion: loss_labels with
# the eos empty_weight buffer and class_error, loss_cardinality, loss_boxes with L1
# and GIoU, _get_src_permutation_idx, aux losses; DETR's class / MLP box heads with
# query_embed and _set_aux_loss; PostProcess), util/misc.py's accuracy and
# engine.py's train_one_epoch step (weighted sum of the loss dict, clip_grad_norm_
# with max_norm 0.1, AdamW with a lower backbone lr, StepLR).  Changes for a CPU
# test: the transformer is replaced by a tiny transformer-free decoder (each query
# attends to a small CNN's feature map, two layers for the aux outputs), synthetic
# images and boxes from numpy, weights from numpy, and, as scipy is not installed
# here, linear_sum_assignment falls back to a Hungarian algorithm written out below
# (same optimal assignment, rows in ascending order, as scipy returns).  Then the
# training step under torch.compile against the same step run eagerly.
import copy

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

try:
    from scipy.optimize import linear_sum_assignment
except ImportError:
    def linear_sum_assignment(cost_matrix):
        cost = np.asarray(cost_matrix, dtype=np.float64)
        transposed = cost.shape[0] > cost.shape[1]
        if transposed:
            cost = cost.T
        n, m = cost.shape
        u, v = np.zeros(n + 1), np.zeros(m + 1)
        p, way = np.zeros(m + 1, dtype=np.int64), np.zeros(m + 1, dtype=np.int64)
        for i in range(1, n + 1):
            p[0], j0 = i, 0
            minv, used = np.full(m + 1, np.inf), np.zeros(m + 1, dtype=bool)
            while True:
                used[j0] = True
                i0, delta, j1 = p[j0], np.inf, 0
                for j in range(1, m + 1):
                    if not used[j]:
                        cur = cost[i0 - 1, j - 1] - u[i0] - v[j]
                        if cur < minv[j]:
                            minv[j], way[j] = cur, j0
                        if minv[j] < delta:
                            delta, j1 = minv[j], j
                for j in range(m + 1):
                    if used[j]:
                        u[p[j]] += delta
                        v[j] -= delta
                    else:
                        minv[j] -= delta
                j0 = j1
                if p[j0] == 0:
                    break
            while True:
                j1 = way[j0]
                p[j0] = p[j1]
                j0 = j1
                if j0 == 0:
                    break
        rows = np.array([p[j] - 1 for j in range(1, m + 1) if p[j] != 0], dtype=np.int64)
        cols = np.array([j - 1 for j in range(1, m + 1) if p[j] != 0], dtype=np.int64)
        if transposed:
            rows, cols = cols, rows
        order = np.argsort(rows)
        return rows[order], cols[order]


# ---- torchvision/ops/boxes.py ----
def box_area(boxes):
    return (boxes[:, 2] - boxes[:, 0]) * (boxes[:, 3] - boxes[:, 1])


# ---- util/box_ops.py ----
def box_cxcywh_to_xyxy(x):
    x_c, y_c, w, h = x.unbind(-1)
    b = [(x_c - 0.5 * w), (y_c - 0.5 * h),
         (x_c + 0.5 * w), (y_c + 0.5 * h)]
    return torch.stack(b, dim=-1)


def box_xyxy_to_cxcywh(x):
    x0, y0, x1, y1 = x.unbind(-1)
    b = [(x0 + x1) / 2, (y0 + y1) / 2,
         (x1 - x0), (y1 - y0)]
    return torch.stack(b, dim=-1)


# modified from torchvision to also return the union
def box_iou(boxes1, boxes2):
    area1 = box_area(boxes1)
    area2 = box_area(boxes2)

    lt = torch.max(boxes1[:, None, :2], boxes2[:, :2])  # [N,M,2]
    rb = torch.min(boxes1[:, None, 2:], boxes2[:, 2:])  # [N,M,2]

    wh = (rb - lt).clamp(min=0)  # [N,M,2]
    inter = wh[:, :, 0] * wh[:, :, 1]  # [N,M]

    union = area1[:, None] + area2 - inter

    iou = inter / union
    return iou, union


def generalized_box_iou(boxes1, boxes2):
    """
    Generalized IoU from https://giou.stanford.edu/

    The boxes should be in [x0, y0, x1, y1] format

    Returns a [N, M] pairwise matrix, where N = len(boxes1)
    and M = len(boxes2)
    """
    # degenerate boxes gives inf / nan results
    # so do an early check
    assert (boxes1[:, 2:] >= boxes1[:, :2]).all()
    assert (boxes2[:, 2:] >= boxes2[:, :2]).all()
    iou, union = box_iou(boxes1, boxes2)

    lt = torch.min(boxes1[:, None, :2], boxes2[:, :2])
    rb = torch.max(boxes1[:, None, 2:], boxes2[:, 2:])

    wh = (rb - lt).clamp(min=0)  # [N,M,2]
    area = wh[:, :, 0] * wh[:, :, 1]

    return iou - (area - union) / area


# ---- util/misc.py ----
@torch.no_grad()
def accuracy(output, target, topk=(1,)):
    """Computes the precision@k for the specified values of k"""
    if target.numel() == 0:
        return [torch.zeros([], device=output.device)]
    maxk = max(topk)
    batch_size = target.size(0)

    _, pred = output.topk(maxk, 1, True, True)
    pred = pred.t()
    correct = pred.eq(target.view(1, -1).expand_as(pred))

    res = []
    for k in topk:
        correct_k = correct[:k].view(-1).float().sum(0)
        res.append(correct_k.mul_(100.0 / batch_size))
    return res


def is_dist_avail_and_initialized():
    if not torch.distributed.is_available():
        return False
    if not torch.distributed.is_initialized():
        return False
    return True


def get_world_size():
    if not is_dist_avail_and_initialized():
        return 1
    return torch.distributed.get_world_size()


# ---- models/matcher.py ----
class HungarianMatcher(nn.Module):
    """This class computes an assignment between the targets and the predictions of the network

    For efficiency reasons, the targets don't include the no_object. Because of this, in general,
    there are more predictions than targets. In this case, we do a 1-to-1 matching of the best predictions,
    while the others are un-matched (and thus treated as non-objects).
    """

    def __init__(self, cost_class: float = 1, cost_bbox: float = 1, cost_giou: float = 1):
        """Creates the matcher

        Params:
            cost_class: This is the relative weight of the classification error in the matching cost
            cost_bbox: This is the relative weight of the L1 error of the bounding box coordinates in the matching cost
            cost_giou: This is the relative weight of the giou loss of the bounding box in the matching cost
        """
        super().__init__()
        self.cost_class = cost_class
        self.cost_bbox = cost_bbox
        self.cost_giou = cost_giou
        assert cost_class != 0 or cost_bbox != 0 or cost_giou != 0, "all costs cant be 0"

    @torch.no_grad()
    def forward(self, outputs, targets):
        bs, num_queries = outputs["pred_logits"].shape[:2]

        # We flatten to compute the cost matrices in a batch
        out_prob = outputs["pred_logits"].flatten(0, 1).softmax(-1)  # [batch_size * num_queries, num_classes]
        out_bbox = outputs["pred_boxes"].flatten(0, 1)  # [batch_size * num_queries, 4]

        # Also concat the target labels and boxes
        tgt_ids = torch.cat([v["labels"] for v in targets])
        tgt_bbox = torch.cat([v["boxes"] for v in targets])

        # Compute the classification cost. Contrary to the loss, we don't use the NLL,
        # but approximate it in 1 - proba[target class].
        # The 1 is a constant that doesn't change the matching, it can be ommitted.
        cost_class = -out_prob[:, tgt_ids]

        # Compute the L1 cost between boxes
        cost_bbox = torch.cdist(out_bbox, tgt_bbox, p=1)

        # Compute the giou cost betwen boxes
        cost_giou = -generalized_box_iou(box_cxcywh_to_xyxy(out_bbox), box_cxcywh_to_xyxy(tgt_bbox))

        # Final cost matrix
        C = self.cost_bbox * cost_bbox + self.cost_class * cost_class + self.cost_giou * cost_giou
        C = C.view(bs, num_queries, -1).cpu()

        sizes = [len(v["boxes"]) for v in targets]
        indices = [linear_sum_assignment(c[i]) for i, c in enumerate(C.split(sizes, -1))]
        return [(torch.as_tensor(i, dtype=torch.int64), torch.as_tensor(j, dtype=torch.int64)) for i, j in indices]


# ---- models/detr.py ----
class SetCriterion(nn.Module):
    """ This class computes the loss for DETR.
    The process happens in two steps:
        1) we compute hungarian assignment between ground truth boxes and the outputs of the model
        2) we supervise each pair of matched ground-truth / prediction (supervise class and box)
    """
    def __init__(self, num_classes, matcher, weight_dict, eos_coef, losses):
        super().__init__()
        self.num_classes = num_classes
        self.matcher = matcher
        self.weight_dict = weight_dict
        self.eos_coef = eos_coef
        self.losses = losses
        empty_weight = torch.ones(self.num_classes + 1)
        empty_weight[-1] = self.eos_coef
        self.register_buffer('empty_weight', empty_weight)

    def loss_labels(self, outputs, targets, indices, num_boxes, log=True):
        """Classification loss (NLL)
        targets dicts must contain the key "labels" containing a tensor of dim [nb_target_boxes]
        """
        assert 'pred_logits' in outputs
        src_logits = outputs['pred_logits']

        idx = self._get_src_permutation_idx(indices)
        target_classes_o = torch.cat([t["labels"][J] for t, (_, J) in zip(targets, indices)])
        target_classes = torch.full(src_logits.shape[:2], self.num_classes,
                                    dtype=torch.int64, device=src_logits.device)
        target_classes[idx] = target_classes_o

        loss_ce = F.cross_entropy(src_logits.transpose(1, 2), target_classes, self.empty_weight)
        losses = {'loss_ce': loss_ce}

        if log:
            # TODO this should probably be a separate loss, not hacked in this one here
            losses['class_error'] = 100 - accuracy(src_logits[idx], target_classes_o)[0]
        return losses

    @torch.no_grad()
    def loss_cardinality(self, outputs, targets, indices, num_boxes):
        """ Compute the cardinality error, ie the absolute error in the number of predicted non-empty boxes
        This is not really a loss, it is intended for logging purposes only. It doesn't propagate gradients
        """
        pred_logits = outputs['pred_logits']
        device = pred_logits.device
        tgt_lengths = torch.as_tensor([len(v["labels"]) for v in targets], device=device)
        # Count the number of predictions that are NOT "no-object" (which is the last class)
        card_pred = (pred_logits.argmax(-1) != pred_logits.shape[-1] - 1).sum(1)
        card_err = F.l1_loss(card_pred.float(), tgt_lengths.float())
        losses = {'cardinality_error': card_err}
        return losses

    def loss_boxes(self, outputs, targets, indices, num_boxes):
        """Compute the losses related to the bounding boxes, the L1 regression loss and the GIoU loss
           targets dicts must contain the key "boxes" containing a tensor of dim [nb_target_boxes, 4]
           The target boxes are expected in format (center_x, center_y, w, h), normalized by the image size.
        """
        assert 'pred_boxes' in outputs
        idx = self._get_src_permutation_idx(indices)
        src_boxes = outputs['pred_boxes'][idx]
        target_boxes = torch.cat([t['boxes'][i] for t, (_, i) in zip(targets, indices)], dim=0)

        loss_bbox = F.l1_loss(src_boxes, target_boxes, reduction='none')

        losses = {}
        losses['loss_bbox'] = loss_bbox.sum() / num_boxes

        loss_giou = 1 - torch.diag(generalized_box_iou(
            box_cxcywh_to_xyxy(src_boxes),
            box_cxcywh_to_xyxy(target_boxes)))
        losses['loss_giou'] = loss_giou.sum() / num_boxes
        return losses

    def _get_src_permutation_idx(self, indices):
        # permute predictions following indices
        batch_idx = torch.cat([torch.full_like(src, i) for i, (src, _) in enumerate(indices)])
        src_idx = torch.cat([src for (src, _) in indices])
        return batch_idx, src_idx

    def _get_tgt_permutation_idx(self, indices):
        # permute targets following indices
        batch_idx = torch.cat([torch.full_like(tgt, i) for i, (_, tgt) in enumerate(indices)])
        tgt_idx = torch.cat([tgt for (_, tgt) in indices])
        return batch_idx, tgt_idx

    def get_loss(self, loss, outputs, targets, indices, num_boxes, **kwargs):
        loss_map = {
            'labels': self.loss_labels,
            'cardinality': self.loss_cardinality,
            'boxes': self.loss_boxes,
        }
        assert loss in loss_map, f'do you really want to compute {loss} loss?'
        return loss_map[loss](outputs, targets, indices, num_boxes, **kwargs)

    def forward(self, outputs, targets):
        """ This performs the loss computation.
        Parameters:
             outputs: dict of tensors, see the output specification of the model for the format
             targets: list of dicts, such that len(targets) == batch_size.
                      The expected keys in each dict depends on the losses applied, see each loss' doc
        """
        outputs_without_aux = {k: v for k, v in outputs.items() if k != 'aux_outputs'}

        # Retrieve the matching between the outputs of the last layer and the targets
        indices = self.matcher(outputs_without_aux, targets)

        # Compute the average number of target boxes accross all nodes, for normalization purposes
        num_boxes = sum(len(t["labels"]) for t in targets)
        num_boxes = torch.as_tensor([num_boxes], dtype=torch.float, device=next(iter(outputs.values())).device)
        if is_dist_avail_and_initialized():
            torch.distributed.all_reduce(num_boxes)
        num_boxes = torch.clamp(num_boxes / get_world_size(), min=1).item()

        # Compute all the requested losses
        losses = {}
        for loss in self.losses:
            losses.update(self.get_loss(loss, outputs, targets, indices, num_boxes))

        # In case of auxiliary losses, we repeat this process with the output of each intermediate layer.
        if 'aux_outputs' in outputs:
            for i, aux_outputs in enumerate(outputs['aux_outputs']):
                indices = self.matcher(aux_outputs, targets)
                for loss in self.losses:
                    kwargs = {}
                    if loss == 'labels':
                        # Logging is enabled only for the last layer
                        kwargs = {'log': False}
                    l_dict = self.get_loss(loss, aux_outputs, targets, indices, num_boxes, **kwargs)
                    l_dict = {k + f'_{i}': v for k, v in l_dict.items()}
                    losses.update(l_dict)

        return losses


class PostProcess(nn.Module):
    """ This module converts the model's output into the format expected by the coco api"""
    @torch.no_grad()
    def forward(self, outputs, target_sizes):
        out_logits, out_bbox = outputs['pred_logits'], outputs['pred_boxes']

        assert len(out_logits) == len(target_sizes)
        assert target_sizes.shape[1] == 2

        prob = F.softmax(out_logits, -1)
        scores, labels = prob[..., :-1].max(-1)

        # convert to [x0, y0, x1, y1] format
        boxes = box_cxcywh_to_xyxy(out_bbox)
        # and from relative [0, 1] to absolute [0, height] coordinates
        img_h, img_w = target_sizes.unbind(1)
        scale_fct = torch.stack([img_w, img_h, img_w, img_h], dim=1)
        boxes = boxes * scale_fct[:, None, :]

        results = [{'scores': s, 'labels': l, 'boxes': b} for s, l, b in zip(scores, labels, boxes)]

        return results


class MLP(nn.Module):
    """ Very simple multi-layer perceptron (also called FFN)"""

    def __init__(self, input_dim, hidden_dim, output_dim, num_layers):
        super().__init__()
        self.num_layers = num_layers
        h = [hidden_dim] * (num_layers - 1)
        self.layers = nn.ModuleList(nn.Linear(n, k) for n, k in zip([input_dim] + h, h + [output_dim]))

    def forward(self, x):
        for i, layer in enumerate(self.layers):
            x = F.relu(layer(x)) if i < self.num_layers - 1 else layer(x)
        return x


# ---- the tiny transformer-free stand-in for backbone + transformer ----
class TinyBackbone(nn.Module):
    def __init__(self, hidden_dim):
        super().__init__()
        self.body = nn.Sequential(nn.Conv2d(3, 16, 3, stride=2, padding=1), nn.ReLU(),
                                  nn.Conv2d(16, hidden_dim, 3, stride=2, padding=1), nn.ReLU())

    def forward(self, x):
        return self.body(x)


class QueryDecoder(nn.Module):
    """Each layer: the queries attend to the flattened feature map, then an FFN."""
    def __init__(self, hidden_dim, num_layers):
        super().__init__()
        self.layers = nn.ModuleList(nn.Linear(hidden_dim, hidden_dim) for _ in range(num_layers))
        self.norm = nn.LayerNorm(hidden_dim)

    def forward(self, memory, query_embed):
        # memory: [bs, hw, d], query_embed: [num_queries, d]
        tgt = torch.zeros_like(query_embed).unsqueeze(0).repeat(memory.shape[0], 1, 1)
        hs = []
        for layer in self.layers:
            q = tgt + query_embed
            attn = (q @ memory.transpose(1, 2) / memory.shape[-1] ** 0.5).softmax(-1)
            tgt = tgt + F.relu(layer(attn @ memory))
            hs.append(self.norm(tgt))
        return torch.stack(hs)


class DETR(nn.Module):
    """ This is the DETR module that performs object detection """
    def __init__(self, backbone, transformer, num_classes, num_queries, hidden_dim, aux_loss=False):
        super().__init__()
        self.num_queries = num_queries
        self.transformer = transformer
        self.class_embed = nn.Linear(hidden_dim, num_classes + 1)
        self.bbox_embed = MLP(hidden_dim, hidden_dim, 4, 3)
        self.query_embed = nn.Embedding(num_queries, hidden_dim)
        self.input_proj = nn.Conv2d(hidden_dim, hidden_dim, kernel_size=1)
        self.backbone = backbone
        self.aux_loss = aux_loss

    def forward(self, samples):
        src = self.backbone(samples)
        memory = self.input_proj(src).flatten(2).permute(0, 2, 1)
        hs = self.transformer(memory, self.query_embed.weight)

        outputs_class = self.class_embed(hs)
        outputs_coord = self.bbox_embed(hs).sigmoid()
        out = {'pred_logits': outputs_class[-1], 'pred_boxes': outputs_coord[-1]}
        if self.aux_loss:
            out['aux_outputs'] = self._set_aux_loss(outputs_class, outputs_coord)
        return out

    @torch.jit.unused
    def _set_aux_loss(self, outputs_class, outputs_coord):
        # this is a workaround to make torchscript happy, as torchscript
        # doesn't support dictionary with non-homogeneous values, such
        # as a dict having both a Tensor and a list.
        return [{'pred_logits': a, 'pred_boxes': b}
                for a, b in zip(outputs_class[:-1], outputs_coord[:-1])]


# ---- the test ----
def numpy_weights(model, seed):
    r = np.random.default_rng(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "norm" in name and p.dim() == 1:
                p.copy_(torch.from_numpy((1.0 + 0.1 * r.standard_normal(p.shape)).astype(np.float32)))
            else:
                fan = p[0].numel() if p.dim() > 1 else 16
                p.copy_(torch.from_numpy((r.standard_normal(tuple(p.shape)) / np.sqrt(fan)).astype(np.float32)))
    return model


g = np.random.default_rng(0)
num_classes, num_queries, hidden_dim = 5, 8, 32


def make_targets(counts):
    targets = []
    for n in counts:
        cxcy = g.uniform(0.2, 0.8, (n, 2))
        wh = g.uniform(0.1, 0.4, (n, 2))
        targets.append({"labels": torch.from_numpy(g.integers(0, num_classes, n)),
                        "boxes": torch.from_numpy(np.concatenate([cxcy, wh], 1).astype(np.float32))})
    return targets


# box ops and the assignment on their own
b1 = torch.tensor([[0.5, 0.5, 0.4, 0.2], [0.3, 0.6, 0.2, 0.2], [0.7, 0.3, 0.1, 0.5]])
b2 = torch.tensor([[0.5, 0.5, 0.2, 0.2], [0.35, 0.55, 0.3, 0.1]])
xyxy = box_cxcywh_to_xyxy(b1)
print("xyxy", [[round(v, 4) for v in r] for r in xyxy.tolist()],
      torch.allclose(box_xyxy_to_cxcywh(xyxy), b1))
iou, union = box_iou(box_cxcywh_to_xyxy(b1), box_cxcywh_to_xyxy(b2))
print("iou", [[round(v, 4) for v in r] for r in iou.tolist()])
print("giou", [[round(v, 4) for v in r] for r in generalized_box_iou(box_cxcywh_to_xyxy(b1), box_cxcywh_to_xyxy(b2)).tolist()])
print("cdist p=1", [[round(v, 4) for v in r] for r in torch.cdist(b1, b2, p=1).tolist()])
r, c = linear_sum_assignment(np.array([[4., 1., 3.], [2., 0., 5.], [3., 2., 2.], [1., 6., 9.]]))
print("assignment", r.tolist(), c.tolist())

model = numpy_weights(DETR(TinyBackbone(hidden_dim), QueryDecoder(hidden_dim, 2), num_classes=num_classes,
                           num_queries=num_queries, hidden_dim=hidden_dim, aux_loss=True), 1)
matcher = HungarianMatcher(cost_class=1, cost_bbox=5, cost_giou=2)
weight_dict = {'loss_ce': 1, 'loss_bbox': 5, 'loss_giou': 2}
aux_weight_dict = {}
for i in range(2 - 1):
    aux_weight_dict.update({k + f'_{i}': v for k, v in weight_dict.items()})
weight_dict.update(aux_weight_dict)
criterion = SetCriterion(num_classes, matcher=matcher, weight_dict=weight_dict, eos_coef=0.1,
                         losses=['labels', 'boxes', 'cardinality'])
print("empty_weight", criterion.empty_weight.tolist(), [k for k, _ in criterion.named_buffers()])

images = torch.from_numpy(g.standard_normal((3, 3, 16, 16)).astype(np.float32))
targets = make_targets([2, 3, 1])
outputs = model(images)
print("outputs", tuple(outputs["pred_logits"].shape), tuple(outputs["pred_boxes"].shape), len(outputs["aux_outputs"]))
indices = matcher({k: v for k, v in outputs.items() if k != 'aux_outputs'}, targets)
print("indices", [(i.tolist(), j.tolist(), i.dtype == torch.int64) for i, j in indices])
bidx, sidx = criterion._get_src_permutation_idx(indices)
print("src idx", bidx.tolist(), sidx.tolist(), "tgt idx", criterion._get_tgt_permutation_idx(indices)[1].tolist())
loss_dict = criterion(outputs, targets)
print("losses", {k: round(float(v), 4) for k, v in sorted(loss_dict.items())})
losses = sum(loss_dict[k] * weight_dict[k] for k in loss_dict.keys() if k in weight_dict)
print("total", f"{losses.item():.5f}", losses.requires_grad, loss_dict['cardinality_error'].requires_grad)
results = PostProcess()(outputs, torch.tensor([[16, 16], [32, 16], [16, 32]]))
print("postprocess", len(results), [f"{v:.4f}" for v in results[1]["scores"][:3].tolist()], results[1]["labels"].tolist(),
      [f"{v:.3f}" for v in results[2]["boxes"][0].tolist()])

# main.py's optimizer and scheduler, engine.py's train_one_epoch step
param_dicts = [
    {"params": [p for n, p in model.named_parameters() if "backbone" not in n and p.requires_grad]},
    {"params": [p for n, p in model.named_parameters() if "backbone" in n and p.requires_grad], "lr": 1e-4},
]
optimizer = torch.optim.AdamW(param_dicts, lr=1e-3, weight_decay=1e-4)
lr_scheduler = torch.optim.lr_scheduler.StepLR(optimizer, 2)
max_norm = 0.1
batches = [(torch.from_numpy(g.standard_normal((3, 3, 16, 16)).astype(np.float32)), make_targets([1, 2, 3]))
           for _ in range(2)]
model.train()
criterion.train()
for epoch in range(2):
    for samples, targets in batches:
        outputs = model(samples)
        loss_dict = criterion(outputs, targets)
        weight_dict = criterion.weight_dict
        losses = sum(loss_dict[k] * weight_dict[k] for k in loss_dict.keys() if k in weight_dict)
        loss_value = losses.item()
        optimizer.zero_grad()
        losses.backward()
        if max_norm > 0:
            grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)
        optimizer.step()
        print("epoch", epoch, f"loss {loss_value:.5f}", f"grad_norm {grad_norm.item():.4f}",
              f"class_error {loss_dict['class_error'].item():.2f}", f"card {loss_dict['cardinality_error'].item():.3f}")
    lr_scheduler.step()
    print("lrs", [gr["lr"] for gr in optimizer.param_groups])


# the training step under torch.compile against the same step run eagerly
def train_step(samples, targets):
    outputs = model(samples)
    loss_dict = criterion(outputs, targets)
    weight_dict = criterion.weight_dict
    losses = sum(loss_dict[k] * weight_dict[k] for k in loss_dict.keys() if k in weight_dict)
    optimizer.zero_grad()
    losses.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)
    optimizer.step()
    return losses


steps = batches + [batches[0]]
state, opt_state = copy.deepcopy(model.state_dict()), copy.deepcopy(optimizer.state_dict())
eager = [train_step(s, t).item() for s, t in steps]
after = copy.deepcopy(model.state_dict())
model.load_state_dict(state)
optimizer.load_state_dict(opt_state)
cstep = torch.compile(train_step)
compiled = [cstep(s, t).item() for s, t in steps]
print("compiled losses", [f"{v:.5f}" for v in compiled])
print("compiled == eager:", all(abs(a - b) <= 1e-4 * max(1.0, abs(b)) for a, b in zip(compiled, eager)),
      all(torch.allclose(model.state_dict()[k], after[k], rtol=1e-4, atol=1e-5) for k in after))
