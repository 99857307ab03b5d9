"""``torchvision.models.detection.anchor_utils.AnchorGenerator``: for each
feature map, ``len(sizes) * len(aspect_ratios)`` zero-centred cell anchors
(widths ``size / sqrt(ratio)``, heights ``size * sqrt(ratio)``, rounded)
shifted to every position of the map at the image-to-map stride; one
``[sum(H * W * A), 4]`` tensor per image."""
from __future__ import annotations

from tracec import dtypes as dt
from tracec import nn
from tracec.creation import arange, as_tensor, full
from tracec.shape_extra import meshgrid
from tracec.shape_ops import cat, stack


class AnchorGenerator(nn.Module):
    def __init__(self, sizes=((128, 256, 512),), aspect_ratios=((0.5, 1.0, 2.0),)):
        super().__init__()
        if not isinstance(sizes[0], (list, tuple)):
            sizes = tuple((s,) for s in sizes)
        if not isinstance(aspect_ratios[0], (list, tuple)):
            aspect_ratios = (aspect_ratios,) * len(sizes)
        self.sizes = sizes
        self.aspect_ratios = aspect_ratios
        self.cell_anchors = [self.generate_anchors(size, ratio) for size, ratio in zip(sizes, aspect_ratios)]

    def generate_anchors(self, scales, aspect_ratios, dtype=dt.float32, device="cpu"):
        scales = as_tensor(scales, dtype=dtype, device=device)
        aspect_ratios = as_tensor(aspect_ratios, dtype=dtype, device=device)
        h_ratios = aspect_ratios.sqrt()
        w_ratios = 1 / h_ratios
        ws = (w_ratios[:, None] * scales[None, :]).view(-1)
        hs = (h_ratios[:, None] * scales[None, :]).view(-1)
        return (stack([-ws, -hs, ws, hs], dim=1) / 2).round()

    def set_cell_anchors(self, dtype, device):
        self.cell_anchors = [a.to(dtype=dtype, device=device) for a in self.cell_anchors]

    def num_anchors_per_location(self):
        return [len(s) * len(a) for s, a in zip(self.sizes, self.aspect_ratios)]

    def grid_anchors(self, grid_sizes, strides):
        if not len(grid_sizes) == len(strides) == len(self.cell_anchors):
            raise AssertionError(
                "Anchors should be Tuple[Tuple[int]] because each feature map could potentially have "
                "different sizes and aspect ratios. There needs to be a match between the number of "
                "feature maps passed and the number of sizes / aspect ratios specified.")
        anchors = []
        for (grid_height, grid_width), (stride_height, stride_width), base in zip(grid_sizes, strides,
                                                                                   self.cell_anchors):
            shifts_x = arange(0, grid_width, dtype=dt.int32, device=base.device) * stride_width
            shifts_y = arange(0, grid_height, dtype=dt.int32, device=base.device) * stride_height
            shift_y, shift_x = meshgrid(shifts_y, shifts_x, indexing="ij")
            shift_x, shift_y = shift_x.reshape(-1), shift_y.reshape(-1)
            shifts = stack((shift_x, shift_y, shift_x, shift_y), dim=1)
            anchors.append((shifts.view(-1, 1, 4) + base.view(1, -1, 4)).reshape(-1, 4))
        return anchors

    def forward(self, image_list, feature_maps):
        grid_sizes = [fm.shape[-2:] for fm in feature_maps]
        image_size = image_list.tensors.shape[-2:]
        dtype, device = feature_maps[0].dtype, feature_maps[0].device
        strides = [[full((), image_size[0] // g[0], dtype=dt.int64, device=device),
                    full((), image_size[1] // g[1], dtype=dt.int64, device=device)] for g in grid_sizes]
        self.set_cell_anchors(dtype, device)
        over_maps = self.grid_anchors(grid_sizes, strides)
        return [cat(list(over_maps)) for _ in range(len(image_list.image_sizes))]
