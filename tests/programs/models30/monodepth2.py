# Monodepth2 self-supervised monocular depth the way nianticlabs/monodepth2
# writes it: layers.py (disp_to_depth, transformation_from_parameters with
# rot_from_axisangle / get_translation_matrix building 4x4 matrices by
# indexing writes into torch.zeros, `t *= -1` on a clone, ConvBlock / Conv3x3
# with nn.ReflectionPad2d and nn.ELU(inplace=True), BackprojectDepth's
# np.meshgrid(range(w), range(h), indexing='xy') coordinates held in
# nn.Parameter(requires_grad=False), Project3D's torch.matmul(K, T)[:, :3, :]
# and in-place `pix_coords[..., 0] /= self.width - 1` on a permuted view,
# upsample's F.interpolate(scale_factor=2, mode="nearest"), get_smooth_loss,
# the SSIM module of nn.AvgPool2d(3, 1) over nn.ReflectionPad2d(1) inputs,
# compute_depth_errors), networks/resnet_encoder.py (ResnetEncoder's
# (x - 0.45) / 0.225 and feature list, ResNetMultiImageInput whose
# pretrained conv1 weight is torch.cat([w] * num_input_images, 1) /
# num_input_images), networks/depth_decoder.py (the OrderedDict of tuple-keyed
# convs wrapped in nn.ModuleList, numpy channel counts, the skip
# connections, sigmoid disparities per scale), networks/pose_decoder.py
# (squeeze / pose convs, out.mean(3).mean(2), 0.01 * out.view(-1, n, 1, 6)),
# and trainer.py (predict_poses with frames passed in temporal order and
# invert=(f_i < 0), generate_images_pred's bilinear upsampling of each
# scale's disparity and F.grid_sample(padding_mode="border",
# align_corners=True), compute_reprojection_loss (0.85 SSIM + 0.15 L1),
# compute_losses' automasking: identity reprojection losses plus
# torch.randn(...) * 0.00001 to break ties, torch.min(combined, dim=1),
# identity_selection, the edge-aware smoothness of the mean-normalized
# disparity / 2 ** scale, Adam + StepLR stepped at the start of each epoch as
# the original does, compute_depth_losses with the bool mask * crop mask, the
# median scaling and the depth metrics). Changes for a CPU test: a
# ResNet-10-like encoder (one BasicBlock per stage) with the widths divided
# by 8 (the decoder's by 4), 64x128 images (the deepest features, 1/32 of
# the input, must be 2 pixels high for ReflectionPad2d(1)), a synthetic scene (a smooth
# texture and its neighbours shifted sideways) and weights from numpy, a few
# steps. The tie-breaking noise comes from torch.randn: numbers it touches
# print as [rng] or with a tolerance far above 1e-5. Then the depth network's
# training step (encoder, decoder, the photometric loss against a given pose)
# with compute_reprojection_loss (SSIM and L1) under torch.compile (compiling
# the whole step takes longer than this test's budget) against the same step
# eagerly.
import copy
from collections import OrderedDict

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim


# ---------------------------------------------------------------- layers.py
def disp_to_depth(disp, min_depth, max_depth):
    """Convert network's sigmoid output into depth prediction
    The formula for this conversion is given in the 'additional considerations'
    section of the paper.
    """
    min_disp = 1 / max_depth
    max_disp = 1 / min_depth
    scaled_disp = min_disp + (max_disp - min_disp) * disp
    depth = 1 / scaled_disp
    return scaled_disp, depth


def transformation_from_parameters(axisangle, translation, invert=False):
    """Convert the network's (axisangle, translation) output into a 4x4 matrix
    """
    R = rot_from_axisangle(axisangle)
    t = translation.clone()

    if invert:
        R = R.transpose(1, 2)
        t *= -1

    T = get_translation_matrix(t)

    if invert:
        M = torch.matmul(R, T)
    else:
        M = torch.matmul(T, R)

    return M


def get_translation_matrix(translation_vector):
    """Convert a translation vector into a 4x4 transformation matrix
    """
    T = torch.zeros(translation_vector.shape[0], 4, 4).to(device=translation_vector.device)

    t = translation_vector.contiguous().view(-1, 3, 1)

    T[:, 0, 0] = 1
    T[:, 1, 1] = 1
    T[:, 2, 2] = 1
    T[:, 3, 3] = 1
    T[:, :3, 3, None] = t

    return T


def rot_from_axisangle(vec):
    """Convert an axisangle rotation into a 4x4 transformation matrix
    (adapted from https://github.com/Wallacoloo/printipi)
    Input 'vec' has to be Bx1x3
    """
    angle = torch.norm(vec, 2, 2, True)
    axis = vec / (angle + 1e-7)

    ca = torch.cos(angle)
    sa = torch.sin(angle)
    C = 1 - ca

    x = axis[..., 0].unsqueeze(1)
    y = axis[..., 1].unsqueeze(1)
    z = axis[..., 2].unsqueeze(1)

    xs = x * sa
    ys = y * sa
    zs = z * sa
    xC = x * C
    yC = y * C
    zC = z * C
    xyC = x * yC
    yzC = y * zC
    zxC = z * xC

    rot = torch.zeros((vec.shape[0], 4, 4)).to(device=vec.device)

    rot[:, 0, 0] = torch.squeeze(x * xC + ca)
    rot[:, 0, 1] = torch.squeeze(xyC - zs)
    rot[:, 0, 2] = torch.squeeze(zxC + ys)
    rot[:, 1, 0] = torch.squeeze(xyC + zs)
    rot[:, 1, 1] = torch.squeeze(y * yC + ca)
    rot[:, 1, 2] = torch.squeeze(yzC - xs)
    rot[:, 2, 0] = torch.squeeze(zxC - ys)
    rot[:, 2, 1] = torch.squeeze(yzC + xs)
    rot[:, 2, 2] = torch.squeeze(z * zC + ca)
    rot[:, 3, 3] = 1

    return rot


class ConvBlock(nn.Module):
    """Layer to perform a convolution followed by ELU
    """
    def __init__(self, in_channels, out_channels):
        super(ConvBlock, self).__init__()

        self.conv = Conv3x3(in_channels, out_channels)
        self.nonlin = nn.ELU(inplace=True)

    def forward(self, x):
        out = self.conv(x)
        out = self.nonlin(out)
        return out


class Conv3x3(nn.Module):
    """Layer to pad and convolve input
    """
    def __init__(self, in_channels, out_channels, use_refl=True):
        super(Conv3x3, self).__init__()

        if use_refl:
            self.pad = nn.ReflectionPad2d(1)
        else:
            self.pad = nn.ZeroPad2d(1)
        self.conv = nn.Conv2d(int(in_channels), int(out_channels), 3)

    def forward(self, x):
        out = self.pad(x)
        out = self.conv(out)
        return out


class BackprojectDepth(nn.Module):
    """Layer to transform a depth image into a point cloud
    """
    def __init__(self, batch_size, height, width):
        super(BackprojectDepth, self).__init__()

        self.batch_size = batch_size
        self.height = height
        self.width = width

        meshgrid = np.meshgrid(range(self.width), range(self.height), indexing='xy')
        self.id_coords = np.stack(meshgrid, axis=0).astype(np.float32)
        self.id_coords = nn.Parameter(torch.from_numpy(self.id_coords),
                                      requires_grad=False)

        self.ones = nn.Parameter(torch.ones(self.batch_size, 1, self.height * self.width),
                                 requires_grad=False)

        self.pix_coords = torch.unsqueeze(torch.stack(
            [self.id_coords[0].view(-1), self.id_coords[1].view(-1)], 0), 0)
        self.pix_coords = self.pix_coords.repeat(batch_size, 1, 1)
        self.pix_coords = nn.Parameter(torch.cat([self.pix_coords, self.ones], 1),
                                       requires_grad=False)

    def forward(self, depth, inv_K):
        cam_points = torch.matmul(inv_K[:, :3, :3], self.pix_coords)
        cam_points = depth.view(self.batch_size, 1, -1) * cam_points
        cam_points = torch.cat([cam_points, self.ones], 1)

        return cam_points


class Project3D(nn.Module):
    """Layer which projects 3D points into a camera with intrinsics K and at position T
    """
    def __init__(self, batch_size, height, width, eps=1e-7):
        super(Project3D, self).__init__()

        self.batch_size = batch_size
        self.height = height
        self.width = width
        self.eps = eps

    def forward(self, points, K, T):
        P = torch.matmul(K, T)[:, :3, :]

        cam_points = torch.matmul(P, points)

        pix_coords = cam_points[:, :2, :] / (cam_points[:, 2, :].unsqueeze(1) + self.eps)
        pix_coords = pix_coords.view(self.batch_size, 2, self.height, self.width)
        pix_coords = pix_coords.permute(0, 2, 3, 1)
        pix_coords[..., 0] /= self.width - 1
        pix_coords[..., 1] /= self.height - 1
        pix_coords = (pix_coords - 0.5) * 2
        return pix_coords


def upsample(x):
    """Upsample input tensor by a factor of 2
    """
    return F.interpolate(x, scale_factor=2, mode="nearest")


def get_smooth_loss(disp, img):
    """Computes the smoothness loss for a disparity image
    The color image is used for edge-aware smoothness
    """
    grad_disp_x = torch.abs(disp[:, :, :, :-1] - disp[:, :, :, 1:])
    grad_disp_y = torch.abs(disp[:, :, :-1, :] - disp[:, :, 1:, :])

    grad_img_x = torch.mean(torch.abs(img[:, :, :, :-1] - img[:, :, :, 1:]), 1, keepdim=True)
    grad_img_y = torch.mean(torch.abs(img[:, :, :-1, :] - img[:, :, 1:, :]), 1, keepdim=True)

    grad_disp_x *= torch.exp(-grad_img_x)
    grad_disp_y *= torch.exp(-grad_img_y)

    return grad_disp_x.mean() + grad_disp_y.mean()


class SSIM(nn.Module):
    """Layer to compute the SSIM loss between a pair of images
    """
    def __init__(self):
        super(SSIM, self).__init__()
        self.mu_x_pool   = nn.AvgPool2d(3, 1)
        self.mu_y_pool   = nn.AvgPool2d(3, 1)
        self.sig_x_pool  = nn.AvgPool2d(3, 1)
        self.sig_y_pool  = nn.AvgPool2d(3, 1)
        self.sig_xy_pool = nn.AvgPool2d(3, 1)

        self.refl = nn.ReflectionPad2d(1)

        self.C1 = 0.01 ** 2
        self.C2 = 0.03 ** 2

    def forward(self, x, y):
        x = self.refl(x)
        y = self.refl(y)

        mu_x = self.mu_x_pool(x)
        mu_y = self.mu_y_pool(y)

        sigma_x  = self.sig_x_pool(x ** 2) - mu_x ** 2
        sigma_y  = self.sig_y_pool(y ** 2) - mu_y ** 2
        sigma_xy = self.sig_xy_pool(x * y) - mu_x * mu_y

        SSIM_n = (2 * mu_x * mu_y + self.C1) * (2 * sigma_xy + self.C2)
        SSIM_d = (mu_x ** 2 + mu_y ** 2 + self.C1) * (sigma_x + sigma_y + self.C2)

        return torch.clamp((1 - SSIM_n / SSIM_d) / 2, 0, 1)


def compute_depth_errors(gt, pred):
    """Computation of error metrics between predicted and ground truth depths
    """
    thresh = torch.max((gt / pred), (pred / gt))
    a1 = (thresh < 1.25     ).float().mean()
    a2 = (thresh < 1.25 ** 2).float().mean()
    a3 = (thresh < 1.25 ** 3).float().mean()

    rmse = (gt - pred) ** 2
    rmse = torch.sqrt(rmse.mean())

    rmse_log = (torch.log(gt) - torch.log(pred)) ** 2
    rmse_log = torch.sqrt(rmse_log.mean())

    abs_rel = torch.mean(torch.abs(gt - pred) / gt)

    sq_rel = torch.mean((gt - pred) ** 2 / gt)

    return abs_rel, sq_rel, rmse, rmse_log, a1, a2, a3


# ---------------------------------------------------------------- networks/resnet_encoder.py
# (torchvision's ResNet, one BasicBlock per stage, widths / 8)
def conv3x3(in_planes, out_planes, stride=1):
    return nn.Conv2d(in_planes, out_planes, kernel_size=3, stride=stride, padding=1, bias=False)


class BasicBlock(nn.Module):
    expansion = 1

    def __init__(self, inplanes, planes, stride=1, downsample=None):
        super(BasicBlock, self).__init__()
        self.conv1 = conv3x3(inplanes, planes, stride)
        self.bn1 = nn.BatchNorm2d(planes)
        self.relu = nn.ReLU(inplace=True)
        self.conv2 = conv3x3(planes, planes)
        self.bn2 = nn.BatchNorm2d(planes)
        self.downsample = downsample
        self.stride = stride

    def forward(self, x):
        identity = x
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        if self.downsample is not None:
            identity = self.downsample(x)
        out += identity
        out = self.relu(out)
        return out


class ResNetMultiImageInput(nn.Module):
    """Constructs a resnet model with varying number of input images.
    Adapted from https://github.com/pytorch/vision/blob/master/torchvision/models/resnet.py
    """
    def __init__(self, block, layers, num_classes=1000, num_input_images=1):
        super(ResNetMultiImageInput, self).__init__()
        self.inplanes = 8
        self.conv1 = nn.Conv2d(
            num_input_images * 3, 8, kernel_size=7, stride=2, padding=3, bias=False)
        self.bn1 = nn.BatchNorm2d(8)
        self.relu = nn.ReLU(inplace=True)
        self.maxpool = nn.MaxPool2d(kernel_size=3, stride=2, padding=1)
        self.layer1 = self._make_layer(block, 8, layers[0])
        self.layer2 = self._make_layer(block, 16, layers[1], stride=2)
        self.layer3 = self._make_layer(block, 32, layers[2], stride=2)
        self.layer4 = self._make_layer(block, 64, layers[3], stride=2)

        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode='fan_out', nonlinearity='relu')
            elif isinstance(m, nn.BatchNorm2d):
                nn.init.constant_(m.weight, 1)
                nn.init.constant_(m.bias, 0)

    def _make_layer(self, block, planes, blocks, stride=1):
        downsample = None
        if stride != 1 or self.inplanes != planes * block.expansion:
            downsample = nn.Sequential(
                nn.Conv2d(self.inplanes, planes * block.expansion, kernel_size=1, stride=stride, bias=False),
                nn.BatchNorm2d(planes * block.expansion),
            )
        layers = [block(self.inplanes, planes, stride, downsample)]
        self.inplanes = planes * block.expansion
        for _ in range(1, blocks):
            layers.append(block(self.inplanes, planes))
        return nn.Sequential(*layers)


def resnet_multiimage_input(num_layers, pretrained=False, num_input_images=1, pretrained_state=None):
    """Constructs a ResNet model.
    Args:
        num_layers (int): Number of resnet layers. Must be 18 or 50
        pretrained (bool): If True, returns a model pre-trained on ImageNet
        num_input_images (int): Number of frames stacked as input
    """
    assert num_layers in [10], "Can only run with 10 layer resnet in this test"
    blocks = {10: [1, 1, 1, 1]}[num_layers]
    model = ResNetMultiImageInput(BasicBlock, blocks, num_input_images=num_input_images)

    if pretrained:
        loaded = copy.deepcopy(pretrained_state)
        loaded['conv1.weight'] = torch.cat(
            [loaded['conv1.weight']] * num_input_images, 1) / num_input_images
        model.load_state_dict(loaded)
    return model


class ResnetEncoder(nn.Module):
    """Pytorch module for a resnet encoder
    """
    def __init__(self, num_layers, pretrained, num_input_images=1, pretrained_state=None):
        super(ResnetEncoder, self).__init__()

        self.num_ch_enc = np.array([64, 64, 128, 256, 512]) // 8

        self.encoder = resnet_multiimage_input(num_layers, pretrained, num_input_images, pretrained_state)

        if num_layers > 34:
            self.num_ch_enc[1:] *= 4

    def forward(self, input_image):
        self.features = []
        x = (input_image - 0.45) / 0.225
        x = self.encoder.conv1(x)
        x = self.encoder.bn1(x)
        self.features.append(self.encoder.relu(x))
        self.features.append(self.encoder.layer1(self.encoder.maxpool(self.features[-1])))
        self.features.append(self.encoder.layer2(self.features[-1]))
        self.features.append(self.encoder.layer3(self.features[-1]))
        self.features.append(self.encoder.layer4(self.features[-1]))

        return self.features


# ---------------------------------------------------------------- networks/depth_decoder.py
class DepthDecoder(nn.Module):
    def __init__(self, num_ch_enc, scales=range(4), num_output_channels=1, use_skips=True):
        super(DepthDecoder, self).__init__()

        self.num_output_channels = num_output_channels
        self.use_skips = use_skips
        self.upsample_mode = 'nearest'
        self.scales = scales

        self.num_ch_enc = num_ch_enc
        self.num_ch_dec = np.array([16, 32, 64, 128, 256]) // 4

        # decoder
        self.convs = OrderedDict()
        for i in range(4, -1, -1):
            # upconv_0
            num_ch_in = self.num_ch_enc[-1] if i == 4 else self.num_ch_dec[i + 1]
            num_ch_out = self.num_ch_dec[i]
            self.convs[("upconv", i, 0)] = ConvBlock(num_ch_in, num_ch_out)

            # upconv_1
            num_ch_in = self.num_ch_dec[i]
            if self.use_skips and i > 0:
                num_ch_in += self.num_ch_enc[i - 1]
            num_ch_out = self.num_ch_dec[i]
            self.convs[("upconv", i, 1)] = ConvBlock(num_ch_in, num_ch_out)

        for s in self.scales:
            self.convs[("dispconv", s)] = Conv3x3(self.num_ch_dec[s], self.num_output_channels)

        self.decoder = nn.ModuleList(list(self.convs.values()))
        self.sigmoid = nn.Sigmoid()

    def forward(self, input_features):
        self.outputs = {}

        # decoder
        x = input_features[-1]
        for i in range(4, -1, -1):
            x = self.convs[("upconv", i, 0)](x)
            x = [upsample(x)]
            if self.use_skips and i > 0:
                x += [input_features[i - 1]]
            x = torch.cat(x, 1)
            x = self.convs[("upconv", i, 1)](x)
            if i in self.scales:
                self.outputs[("disp", i)] = self.sigmoid(self.convs[("dispconv", i)](x))

        return self.outputs


# ---------------------------------------------------------------- networks/pose_decoder.py
class PoseDecoder(nn.Module):
    def __init__(self, num_ch_enc, num_input_features, num_frames_to_predict_for=None, stride=1):
        super(PoseDecoder, self).__init__()

        self.num_ch_enc = num_ch_enc
        self.num_input_features = num_input_features

        if num_frames_to_predict_for is None:
            num_frames_to_predict_for = num_input_features - 1
        self.num_frames_to_predict_for = num_frames_to_predict_for

        self.convs = OrderedDict()
        self.convs[("squeeze")] = nn.Conv2d(self.num_ch_enc[-1], 256 // 8, 1)
        self.convs[("pose", 0)] = nn.Conv2d(num_input_features * 256 // 8, 256 // 8, 3, stride, 1)
        self.convs[("pose", 1)] = nn.Conv2d(256 // 8, 256 // 8, 3, stride, 1)
        self.convs[("pose", 2)] = nn.Conv2d(256 // 8, 6 * num_frames_to_predict_for, 1)

        self.relu = nn.ReLU()

        self.net = nn.ModuleList(list(self.convs.values()))

    def forward(self, input_features):
        last_features = [f[-1] for f in input_features]

        cat_features = [self.relu(self.convs["squeeze"](f)) for f in last_features]
        cat_features = torch.cat(cat_features, 1)

        out = cat_features
        for i in range(3):
            out = self.convs[("pose", i)](out)
            if i != 2:
                out = self.relu(out)

        out = out.mean(3).mean(2)

        out = 0.01 * out.view(-1, self.num_frames_to_predict_for, 1, 6)

        axisangle = out[..., :3]
        translation = out[..., 3:]

        return axisangle, translation


# ---------------------------------------------------------------- trainer.py
class Opt:
    height = 64
    width = 128
    scales = [0, 1, 2, 3]
    frame_ids = [0, -1, 1]
    min_depth = 0.1
    max_depth = 100.0
    disparity_smoothness = 1e-3
    learning_rate = 1e-3
    scheduler_step_size = 1
    batch_size = 2
    num_layers = 10
    v1_multiscale = False
    avg_reprojection = False
    disable_automasking = False
    no_ssim = False
    pose_model_type = "separate_resnet"


class Trainer:
    def __init__(self, options, pretrained_state):
        self.opt = options
        self.models = {}
        self.parameters_to_train = []
        self.device = torch.device("cpu")
        self.num_scales = len(self.opt.scales)
        self.num_input_frames = len(self.opt.frame_ids)
        self.num_pose_frames = 2 if self.opt.pose_model_type == "separate_resnet" else self.num_input_frames
        assert self.opt.frame_ids[0] == 0, "frame_ids must start with 0"
        self.use_pose_net = True

        self.models["encoder"] = ResnetEncoder(self.opt.num_layers, True, pretrained_state=pretrained_state)
        self.models["encoder"].to(self.device)
        self.parameters_to_train += list(self.models["encoder"].parameters())

        self.models["depth"] = DepthDecoder(self.models["encoder"].num_ch_enc, self.opt.scales)
        self.models["depth"].to(self.device)
        self.parameters_to_train += list(self.models["depth"].parameters())

        self.models["pose_encoder"] = ResnetEncoder(self.opt.num_layers, True, num_input_images=self.num_pose_frames,
                                                    pretrained_state=pretrained_state)
        self.models["pose_encoder"].to(self.device)
        self.parameters_to_train += list(self.models["pose_encoder"].parameters())

        self.models["pose"] = PoseDecoder(self.models["pose_encoder"].num_ch_enc, num_input_features=1,
                                          num_frames_to_predict_for=2)
        self.models["pose"].to(self.device)
        self.parameters_to_train += list(self.models["pose"].parameters())

        self.model_optimizer = optim.Adam(self.parameters_to_train, self.opt.learning_rate)
        self.model_lr_scheduler = optim.lr_scheduler.StepLR(
            self.model_optimizer, self.opt.scheduler_step_size, 0.1)

        self.ssim = SSIM()
        self.ssim.to(self.device)

        self.backproject_depth = {}
        self.project_3d = {}
        for scale in self.opt.scales:
            h = self.opt.height // (2 ** scale)
            w = self.opt.width // (2 ** scale)

            self.backproject_depth[scale] = BackprojectDepth(self.opt.batch_size, h, w)
            self.backproject_depth[scale].to(self.device)

            self.project_3d[scale] = Project3D(self.opt.batch_size, h, w)
            self.project_3d[scale].to(self.device)

        self.depth_metric_names = [
            "de/abs_rel", "de/sq_rel", "de/rms", "de/log_rms", "da/a1", "da/a2", "da/a3"]

    def set_train(self):
        for m in self.models.values():
            m.train()

    def set_eval(self):
        for m in self.models.values():
            m.eval()

    def run_epoch(self, loader):
        self.model_lr_scheduler.step()

        self.set_train()
        for batch_idx, inputs in enumerate(loader):
            outputs, losses = self.process_batch(inputs)

            self.model_optimizer.zero_grad()
            losses["loss"].backward()
            self.model_optimizer.step()

            self.compute_depth_losses(inputs, outputs, losses)
            self.log(batch_idx, inputs, outputs, losses)

    def process_batch(self, inputs):
        for key, ipt in inputs.items():
            inputs[key] = ipt.to(self.device)

        features = self.models["encoder"](inputs["color_aug", 0, 0])
        outputs = self.models["depth"](features)

        outputs.update(self.predict_poses(inputs, features))

        self.generate_images_pred(inputs, outputs)
        losses = self.compute_losses(inputs, outputs)

        return outputs, losses

    def predict_poses(self, inputs, features):
        outputs = {}
        if self.num_pose_frames == 2:
            pose_feats = {f_i: inputs["color_aug", f_i, 0] for f_i in self.opt.frame_ids}

            for f_i in self.opt.frame_ids[1:]:
                if f_i != "s":
                    # To maintain ordering we always pass frames in temporal order
                    if f_i < 0:
                        pose_inputs = [pose_feats[f_i], pose_feats[0]]
                    else:
                        pose_inputs = [pose_feats[0], pose_feats[f_i]]

                    pose_inputs = [self.models["pose_encoder"](torch.cat(pose_inputs, 1))]

                    axisangle, translation = self.models["pose"](pose_inputs)
                    outputs[("axisangle", 0, f_i)] = axisangle
                    outputs[("translation", 0, f_i)] = translation

                    # Invert the matrix if the frame id is negative
                    outputs[("cam_T_cam", 0, f_i)] = transformation_from_parameters(
                        axisangle[:, 0], translation[:, 0], invert=(f_i < 0))
        return outputs

    def generate_images_pred(self, inputs, outputs):
        for scale in self.opt.scales:
            disp = outputs[("disp", scale)]
            if self.opt.v1_multiscale:
                source_scale = scale
            else:
                disp = F.interpolate(
                    disp, [self.opt.height, self.opt.width], mode="bilinear", align_corners=False)
                source_scale = 0

            _, depth = disp_to_depth(disp, self.opt.min_depth, self.opt.max_depth)

            outputs[("depth", 0, scale)] = depth

            for i, frame_id in enumerate(self.opt.frame_ids[1:]):

                if frame_id == "s":
                    T = inputs["stereo_T"]
                else:
                    T = outputs[("cam_T_cam", 0, frame_id)]

                cam_points = self.backproject_depth[source_scale](
                    depth, inputs[("inv_K", source_scale)])
                pix_coords = self.project_3d[source_scale](
                    cam_points, inputs[("K", source_scale)], T)

                outputs[("sample", frame_id, scale)] = pix_coords

                outputs[("color", frame_id, scale)] = F.grid_sample(
                    inputs[("color", frame_id, source_scale)],
                    outputs[("sample", frame_id, scale)],
                    padding_mode="border", align_corners=True)

                if not self.opt.disable_automasking:
                    outputs[("color_identity", frame_id, scale)] = \
                        inputs[("color", frame_id, source_scale)]

    def compute_reprojection_loss(self, pred, target):
        """Computes reprojection loss between a batch of predicted and target images
        """
        abs_diff = torch.abs(target - pred)
        l1_loss = abs_diff.mean(1, True)

        if self.opt.no_ssim:
            reprojection_loss = l1_loss
        else:
            ssim_loss = self.ssim(pred, target).mean(1, True)
            reprojection_loss = 0.85 * ssim_loss + 0.15 * l1_loss

        return reprojection_loss

    def compute_losses(self, inputs, outputs):
        """Compute the reprojection and smoothness losses for a minibatch
        """
        losses = {}
        total_loss = 0

        for scale in self.opt.scales:
            loss = 0
            reprojection_losses = []

            if self.opt.v1_multiscale:
                source_scale = scale
            else:
                source_scale = 0

            disp = outputs[("disp", scale)]
            color = inputs[("color", 0, scale)]
            target = inputs[("color", 0, source_scale)]

            for frame_id in self.opt.frame_ids[1:]:
                pred = outputs[("color", frame_id, scale)]
                reprojection_losses.append(self.compute_reprojection_loss(pred, target))

            reprojection_losses = torch.cat(reprojection_losses, 1)

            if not self.opt.disable_automasking:
                identity_reprojection_losses = []
                for frame_id in self.opt.frame_ids[1:]:
                    pred = inputs[("color", frame_id, source_scale)]
                    identity_reprojection_losses.append(
                        self.compute_reprojection_loss(pred, target))

                identity_reprojection_losses = torch.cat(identity_reprojection_losses, 1)

                if self.opt.avg_reprojection:
                    identity_reprojection_loss = identity_reprojection_losses.mean(1, keepdim=True)
                else:
                    # save both images, and do min all at once below
                    identity_reprojection_loss = identity_reprojection_losses

            if self.opt.avg_reprojection:
                reprojection_loss = reprojection_losses.mean(1, keepdim=True)
            else:
                reprojection_loss = reprojection_losses

            if not self.opt.disable_automasking:
                # add random numbers to break ties
                identity_reprojection_loss += torch.randn(
                    identity_reprojection_loss.shape, device=self.device) * 0.00001

                combined = torch.cat((identity_reprojection_loss, reprojection_loss), dim=1)
            else:
                combined = reprojection_loss

            if combined.shape[1] == 1:
                to_optimise = combined
            else:
                to_optimise, idxs = torch.min(combined, dim=1)

            if not self.opt.disable_automasking:
                outputs["identity_selection/{}".format(scale)] = (
                    idxs > identity_reprojection_loss.shape[1] - 1).float()

            loss += to_optimise.mean()

            mean_disp = disp.mean(2, True).mean(3, True)
            norm_disp = disp / (mean_disp + 1e-7)
            smooth_loss = get_smooth_loss(norm_disp, color)

            loss += self.opt.disparity_smoothness * smooth_loss / (2 ** scale)
            total_loss += loss
            losses["loss/{}".format(scale)] = loss

        total_loss /= self.num_scales
        losses["loss"] = total_loss
        return losses

    def compute_depth_losses(self, inputs, outputs, losses):
        """Compute depth metrics, to allow monitoring during training
        (the KITTI [375, 1242] size and garg/eigen crop scaled down by 8)
        """
        depth_pred = outputs[("depth", 0, 0)]
        depth_pred = torch.clamp(F.interpolate(
            depth_pred, [47, 155], mode="bilinear", align_corners=False), 1e-3, 80)
        depth_pred = depth_pred.detach()

        depth_gt = inputs["depth_gt"]
        mask = depth_gt > 0

        # garg/eigen crop
        crop_mask = torch.zeros_like(mask)
        crop_mask[:, :, 19:46, 5:149] = 1
        mask = mask * crop_mask

        depth_gt = depth_gt[mask]
        depth_pred = depth_pred[mask]
        depth_pred *= torch.median(depth_gt) / torch.median(depth_pred)

        depth_pred = torch.clamp(depth_pred, min=1e-3, max=80)

        depth_errors = compute_depth_errors(depth_gt, depth_pred)

        for i, metric in enumerate(self.depth_metric_names):
            losses[metric] = np.array(depth_errors[i].cpu())

    def log(self, batch_idx, inputs, outputs, losses):
        print("batch {} loss {:.4f} scales {} lr {}".format(
            batch_idx, losses["loss"].item(),
            " ".join("{:.4f}".format(losses["loss/{}".format(s)].item()) for s in self.opt.scales),
            self.model_lr_scheduler.get_last_lr()))
        print("  depth metrics " + " ".join("{} {:.4f}".format(k, float(losses[k])) for k in self.depth_metric_names))
        print("  identity selection", ["{:.4f}".format(outputs["identity_selection/{}".format(s)].mean().item())
                                             for s in self.opt.scales])


def fmt(t, n=4):
    return [f"{v:.4f}" for v in t.reshape(-1)[:n].tolist()]


def load_numpy(model, seed, std=0.1):
    r = np.random.default_rng(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if p.dim() > 1:
                fan_in = p[0].numel()
                p.copy_(torch.from_numpy(r.normal(0, 1.0 / np.sqrt(fan_in), tuple(p.shape)).astype(np.float32)))
            elif 'bn' in name and name.endswith('weight'):
                p.copy_(torch.from_numpy(1 + r.normal(0, std, tuple(p.shape)).astype(np.float32)))
            else:
                p.copy_(torch.from_numpy(r.normal(0, std, tuple(p.shape)).astype(np.float32)))


def make_batch(rng, opt):
    """A KITTI-like batch: frames 0, -1, +1 of a smooth texture moving sideways,
    their 2**s-downsampled copies, K / inv_K per scale and a sparse depth_gt."""
    n, h, w = opt.batch_size, opt.height, opt.width
    yy, xx = np.meshgrid(np.arange(h), np.arange(w), indexing='ij')
    frames = {f: [] for f in opt.frame_ids}
    for _ in range(n):
        ph = rng.uniform(0, 2 * np.pi, (3, 2))
        fr = rng.uniform(0.15, 0.5, (3, 2))
        for f in opt.frame_ids:
            x = xx + 1.5 * f
            frames[f].append(np.stack([0.5 + 0.4 * np.sin(fr[c, 0] * x + ph[c, 0]) * np.cos(fr[c, 1] * yy + ph[c, 1])
                                       for c in range(3)]))
    inputs = {}
    for f in opt.frame_ids:
        color = torch.from_numpy(np.stack(frames[f]).astype(np.float32))
        for s in opt.scales:
            c = color if s == 0 else F.avg_pool2d(color, 2 ** s)
            inputs[("color", f, s)] = c
            inputs[("color_aug", f, s)] = c
    K0 = np.array([[0.58, 0, 0.5, 0], [0, 1.92, 0.5, 0], [0, 0, 1, 0], [0, 0, 0, 1]], dtype=np.float32)
    for s in opt.scales:
        K = K0.copy()
        K[0, :] *= w // (2 ** s)
        K[1, :] *= h // (2 ** s)
        inv_K = np.linalg.pinv(K)
        inputs[("K", s)] = torch.from_numpy(K)[None].repeat(n, 1, 1)
        inputs[("inv_K", s)] = torch.from_numpy(inv_K)[None].repeat(n, 1, 1)
    gt = rng.uniform(2, 60, (n, 1, 47, 155)).astype(np.float32)
    gt[rng.uniform(0, 1, gt.shape) < 0.7] = 0.0
    inputs["depth_gt"] = torch.from_numpy(gt)
    return inputs


opt = Opt()

# the geometry layers on their own
aa = torch.tensor([[[0.1, -0.2, 0.3]], [[0.0, 0.0, 0.0]]])
tr = torch.tensor([[[0.5, -1.0, 2.0]], [[0.1, 0.2, 0.3]]])
M = transformation_from_parameters(aa, tr)
Mi = transformation_from_parameters(aa, tr, invert=True)
print("transformation", fmt(M[0], 16))
print("inverse", fmt(Mi[0, :3], 12), torch.allclose(torch.matmul(M, Mi), torch.eye(4).expand(2, 4, 4), atol=1e-6),
      "identity rotation", torch.equal(rot_from_axisangle(aa[1:])[0], torch.eye(4)))
print("translation", get_translation_matrix(tr)[1].tolist())
bp = BackprojectDepth(2, 3, 4)
print("BackprojectDepth", [n for n, _ in bp.named_parameters()], bp.pix_coords.requires_grad, tuple(bp.pix_coords.shape),
      bp.pix_coords[0, :2, :6].tolist(), "trainable", sum(p.requires_grad for p in bp.parameters()))
K = torch.tensor([[[2.0, 0, 1.5, 0], [0, 3.0, 1.0, 0], [0, 0, 1, 0], [0, 0, 0, 1]]]).repeat(2, 1, 1)
inv_K = torch.inverse(K)
print("inverse(K)", fmt(inv_K[0, :3, :3], 9), np.allclose(inv_K.numpy(), np.linalg.pinv(K.numpy()), atol=1e-6))
depth = torch.full((2, 1, 3, 4), 5.0, requires_grad=True)
pts = bp(depth, inv_K)
pix = Project3D(2, 3, 4)(pts, K, M)
print("Project3D", tuple(pix.shape), fmt(pix[0, 1], 8), fmt(pix[1, 2], 8))
pix.sum().backward()
print("depth grad through the in-place division", fmt(depth.grad[0, 0], 8))
Pm = Project3D(2, 3, 4)(pts.detach(), K, torch.eye(4).expand(2, 4, 4))
print("identity projection spans [-1, 1]", fmt(Pm[0, :, 0, 0], 3), fmt(Pm[0, :, -1, 1], 3))
print("disp_to_depth", [fmt(t, 3) for t in disp_to_depth(torch.tensor([0.0, 0.5, 1.0]), 0.1, 100)])
print("upsample", upsample(torch.arange(4.).view(1, 1, 2, 2)).view(-1).tolist())
rng = np.random.default_rng(0)
a = torch.from_numpy(rng.uniform(0, 1, (1, 3, 6, 7)).astype(np.float32))
b = torch.from_numpy(rng.uniform(0, 1, (1, 3, 6, 7)).astype(np.float32))
ssim = SSIM()
print("SSIM", tuple(ssim(a, b).shape), fmt(ssim(a, b)[0, 1, 2], 5), f"{ssim(a, a).abs().max().item():.6f}",
      fmt(ssim(a, 1 - a)[0, 0, 0], 4))
print("smooth loss", f"{get_smooth_loss(a[:, :1], b).item():.6f}")
e = compute_depth_errors(torch.tensor([1.0, 2.0, 4.0, 8.0]), torch.tensor([1.1, 1.5, 4.0, 12.0]))
print("depth errors", [f"{v.item():.4f}" for v in e])

# a "pretrained" single-image encoder and the model
torch.manual_seed(0)
imagenet = ResNetMultiImageInput(BasicBlock, [1, 1, 1, 1])
print("kaiming fan_out", f"{imagenet.conv1.weight.std().item():.3f}", "bn init",
      imagenet.bn1.weight.sum().item(), imagenet.bn1.bias.sum().item())
load_numpy(imagenet, 1)
pretrained_state = imagenet.state_dict()
trainer = Trainer(opt, pretrained_state)
pe = trainer.models["pose_encoder"].encoder
print("pose encoder conv1", tuple(pe.conv1.weight.shape),
      torch.allclose(pe.conv1.weight[:, :3], pretrained_state['conv1.weight'] / 2),
      torch.equal(pe.conv1.weight[:, 3:], pe.conv1.weight[:, :3]))
print("num_ch_enc", trainer.models["encoder"].num_ch_enc.tolist(), "num_ch_dec",
      trainer.models["depth"].num_ch_dec.tolist(), type(trainer.models["depth"].decoder[0].conv.conv.in_channels).__name__)
print("decoder keys", list(trainer.models["depth"].convs)[:3], len(trainer.models["depth"].decoder))
load_numpy(trainer.models["depth"], 2)
load_numpy(trainer.models["pose"], 3, std=0.3)
print("params", len(trainer.parameters_to_train), sum(p.numel() for p in trainer.parameters_to_train))

inputs = make_batch(rng, opt)
print("batch", tuple(inputs[("color", -1, 0)].shape), tuple(inputs[("color", 1, 3)].shape), fmt(inputs[("K", 2)][0], 4),
      fmt(inputs[("inv_K", 0)][1, 0], 3))

with torch.no_grad():
    trainer.set_eval()
    features = trainer.models["encoder"](inputs["color_aug", 0, 0])
    print("features", [tuple(f.shape) for f in features])
    outputs = trainer.models["depth"](features)
    print("disps", {k[1]: tuple(v.shape) for k, v in outputs.items()}, fmt(outputs[("disp", 0)][0, 0, 5], 4))
    poses = trainer.predict_poses(inputs, features)
    print("axisangle", tuple(poses[("axisangle", 0, -1)].shape), fmt(poses[("axisangle", 0, -1)], 6),
          fmt(poses[("translation", 0, 1)], 6))
    print("cam_T_cam -1", fmt(poses[("cam_T_cam", 0, -1)][0], 12))

loader = [inputs, make_batch(rng, opt)]
for epoch in range(2):
    trainer.run_epoch(loader)
    print("epoch", epoch, "lr", trainer.model_optimizer.param_groups[0]['lr'])
print("grads", fmt(trainer.models["depth"].convs[("dispconv", 0)].conv.weight.grad),
      fmt(trainer.models["pose"].convs[("pose", 2)].bias.grad, 6))
# (the tie-breaking noise decides a few pixels' minimum, which the small
# gradients at the input layer feel)
print("encoder conv1 grad", [f"{v:.4e}" for v in trainer.models["encoder"].encoder.conv1.weight.grad.view(-1)[:4].tolist()])
print("bn running", fmt(trainer.models["encoder"].encoder.bn1.running_var))


# the depth network's training step (the photometric loss against the poses
# predicted now, held fixed) with compute_reprojection_loss (SSIM and L1)
# under torch.compile, against the same step eagerly
encoder, depth_decoder = trainer.models["encoder"], trainer.models["depth"]
with torch.no_grad():
    trainer.set_eval()
    fixed_poses = trainer.predict_poses(inputs, None)
trainer.set_train()
depth_params = list(encoder.parameters()) + list(depth_decoder.parameters())
depth_optimizer = optim.Adam(depth_params, 1e-3)
noise = {s: torch.from_numpy(rng.normal(0, 1, (2, 2, 64, 128)).astype(np.float32)) * 0.00001 for s in opt.scales}


def depth_step(color, color_m1, color_p1, K, inv_K):
    depth_optimizer.zero_grad()
    outputs = depth_decoder(encoder(color))
    total = 0
    for scale in opt.scales:
        disp = F.interpolate(outputs[("disp", scale)], [opt.height, opt.width], mode="bilinear", align_corners=False)
        _, depth = disp_to_depth(disp, opt.min_depth, opt.max_depth)
        reprojection, identity = [], []
        for frame_id, source in [(-1, color_m1), (1, color_p1)]:
            cam_points = trainer.backproject_depth[0](depth, inv_K)
            pix_coords = trainer.project_3d[0](cam_points, K, fixed_poses[("cam_T_cam", 0, frame_id)])
            pred = F.grid_sample(source, pix_coords, padding_mode="border", align_corners=True)
            reprojection.append(trainer.compute_reprojection_loss(pred, color))
            identity.append(trainer.compute_reprojection_loss(source, color))
        combined = torch.cat((torch.cat(identity, 1) + noise[scale], torch.cat(reprojection, 1)), dim=1)
        to_optimise, idxs = torch.min(combined, dim=1)
        d = outputs[("disp", scale)]
        norm_disp = d / (d.mean(2, True).mean(3, True) + 1e-7)
        total = total + to_optimise.mean() + opt.disparity_smoothness * get_smooth_loss(
            norm_disp, inputs[("color", 0, scale)]) / (2 ** scale)
    total = total / len(opt.scales)
    total.backward()
    depth_optimizer.step()
    return total


args = (inputs[("color", 0, 0)], inputs[("color", -1, 0)], inputs[("color", 1, 0)], inputs[("K", 0)], inputs[("inv_K", 0)])
state = {k: copy.deepcopy(m.state_dict()) for k, m in [("encoder", encoder), ("depth", depth_decoder)]}
opt_state = copy.deepcopy(depth_optimizer.state_dict())
eager = [depth_step(*args).item() for _ in range(2)]
after = {f"{k}.{n}": v.clone() for k, m in [("encoder", encoder), ("depth", depth_decoder)]
         for n, v in m.state_dict().items()}
encoder.load_state_dict(state["encoder"])
depth_decoder.load_state_dict(state["depth"])
depth_optimizer.load_state_dict(opt_state)
trainer.compute_reprojection_loss = torch.compile(trainer.compute_reprojection_loss)
compiled = [depth_step(*args).item() for _ in range(2)]
del trainer.compute_reprojection_loss
now = {f"{k}.{n}": v for k, m in [("encoder", encoder), ("depth", depth_decoder)] for n, v in m.state_dict().items()}
print("compiled losses", [f"{v:.5f}" for v in compiled])
print("compiled == eager:", all(abs(a - b) <= 1e-4 * max(1.0, abs(b)) for a, b in zip(compiled, eager)),
      all(torch.allclose(now[k].float(), after[k].float(), rtol=1e-4, atol=1e-5) for k in after))
