# Instant-NGP style NeRF the way yashbhalgat/HashNeRF-pytorch writes it:
# utils.py (hash with the int64 primes and `xor_result ^= coords[..., i] *
# primes[i]`, `torch.tensor((1 << log2_hashmap_size) - 1).to(device) &
# xor_result`, BOX_OFFSETS from a list comprehension, get_voxel_vertices'
# keep_mask / clamp of points outside the box / torch.floor(...).int()),
# hash_encoding.py (HashEmbedder: an nn.ModuleList of nn.Embedding(2 **
# log2_hashmap_size, n_features) with nn.init.uniform_(a=-0.0001,
# b=0.0001), the growth factor b from torch.log of int tensors, per-level
# torch.floor(self.base_resolution * self.b ** i), trilinear_interp;
# SHEncoder up to degree 4 written into torch.empty through
# result[..., k] = ...), radam / loss.py (total_variation_loss with
# torch.tensor(torch.floor(...)).int(), torch.clip, torch.randint, the
# meshgrid cube), radiance_fields/ngp.py-style NeRFSmall (bias-free Linear
# stacks, F.relu(h, inplace=True), torch.split of the input), and
# run_nerf.py / run_nerf_helpers.py (run_network's `outputs_flat[~keep_mask,
# -1] = 0`, uniform ray sampling with torch.linspace, raw2outputs with the
# 1e10 last distance, cumprod transmittance, Categorical entropy sparsity
# loss, img2mse / mse2psnr's -10. * torch.log(x) / torch.log(torch.Tensor([10.])),
# RAdam parameter groups with betas=(0.9, 0.99) and eps=1e-15 for the
# embeddings, the learning-rate decay written into every param group).
# Changes for a CPU test: 4 levels of 2 ** 8 entries, resolutions 2 to 10, a
# 16-wide NeRFSmall, 6 rays of 8 samples from numpy, weights from numpy,
# tv_loss_weight=0.0 in training (each level's TV loss, its cube corner
# drawn by torch.randint after torch.manual_seed(0), is compared on its
# own), a few steps; then one training step under
# torch.compile against the same step eagerly.
import copy
import math

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.distributions import Categorical


# ---------------------------------------------------------------- utils.py
BOX_OFFSETS = torch.tensor([[[i, j, k] for i in [0, 1] for j in [0, 1] for k in [0, 1]]],
                           device='cpu')


def hash(coords, log2_hashmap_size):
    '''
    coords: this function can process upto 7 dim coordinates
    log2T:  logarithm of T w.r.t 2
    '''
    primes = [1, 2654435761, 805459861, 3674653429, 2097192037, 1434869437, 2165219737]

    xor_result = torch.zeros_like(coords)[..., 0]
    for i in range(coords.shape[-1]):
        xor_result ^= coords[..., i]*primes[i]

    return torch.tensor((1 << log2_hashmap_size)-1).to(xor_result.device) & xor_result


def get_voxel_vertices(xyz, bounding_box, resolution, log2_hashmap_size):
    '''
    xyz: 3D coordinates of samples. B x 3
    bounding_box: min and max x,y,z coordinates of object bbox
    resolution: number of voxels per axis
    '''
    box_min, box_max = bounding_box

    keep_mask = xyz == torch.max(torch.min(xyz, box_max), box_min)
    if not torch.all(xyz <= box_max) or not torch.all(xyz >= box_min):
        # print("ALERT: some points are outside bounding box. Clipping them!")
        xyz = torch.clamp(xyz, min=box_min, max=box_max)

    grid_size = (box_max-box_min)/resolution

    bottom_left_idx = torch.floor((xyz-box_min)/grid_size).int()
    voxel_min_vertex = bottom_left_idx*grid_size + box_min
    voxel_max_vertex = voxel_min_vertex + torch.tensor([1.0, 1.0, 1.0])*grid_size

    voxel_indices = bottom_left_idx.unsqueeze(1) + BOX_OFFSETS
    hashed_voxel_indices = hash(voxel_indices, log2_hashmap_size)

    return voxel_min_vertex, voxel_max_vertex, hashed_voxel_indices, keep_mask


# ---------------------------------------------------------------- hash_encoding.py
class HashEmbedder(nn.Module):
    def __init__(self, bounding_box, n_levels=16, n_features_per_level=2,
                 log2_hashmap_size=19, base_resolution=16, finest_resolution=512):
        super(HashEmbedder, self).__init__()
        self.bounding_box = bounding_box
        self.n_levels = n_levels
        self.n_features_per_level = n_features_per_level
        self.log2_hashmap_size = log2_hashmap_size
        self.base_resolution = torch.tensor(base_resolution)
        self.finest_resolution = torch.tensor(finest_resolution)
        self.out_dim = self.n_levels * self.n_features_per_level

        self.b = torch.exp((torch.log(self.finest_resolution)-torch.log(self.base_resolution))/(n_levels-1))

        self.embeddings = nn.ModuleList([nn.Embedding(2**self.log2_hashmap_size,
                                        self.n_features_per_level) for i in range(n_levels)])
        # custom uniform initialization
        for i in range(n_levels):
            nn.init.uniform_(self.embeddings[i].weight, a=-0.0001, b=0.0001)
            # self.embeddings[i].weight.data.zero_()

    def trilinear_interp(self, x, voxel_min_vertex, voxel_max_vertex, voxel_embedds):
        '''
        x: B x 3
        voxel_min_vertex: B x 3
        voxel_max_vertex: B x 3
        voxel_embedds: B x 8 x 2
        '''
        # source: https://en.wikipedia.org/wiki/Trilinear_interpolation
        weights = (x - voxel_min_vertex)/(voxel_max_vertex-voxel_min_vertex)  # B x 3

        # step 1
        # 0->000, 1->001, 2->010, 3->011, 4->100, 5->101, 6->110, 7->111
        c00 = voxel_embedds[:, 0]*(1-weights[:, 0][:, None]) + voxel_embedds[:, 4]*weights[:, 0][:, None]
        c01 = voxel_embedds[:, 1]*(1-weights[:, 0][:, None]) + voxel_embedds[:, 5]*weights[:, 0][:, None]
        c10 = voxel_embedds[:, 2]*(1-weights[:, 0][:, None]) + voxel_embedds[:, 6]*weights[:, 0][:, None]
        c11 = voxel_embedds[:, 3]*(1-weights[:, 0][:, None]) + voxel_embedds[:, 7]*weights[:, 0][:, None]

        # step 2
        c0 = c00*(1-weights[:, 1][:, None]) + c10*weights[:, 1][:, None]
        c1 = c01*(1-weights[:, 1][:, None]) + c11*weights[:, 1][:, None]

        # step 3
        c = c0*(1-weights[:, 2][:, None]) + c1*weights[:, 2][:, None]

        return c

    def forward(self, x):
        # x is 3D point position: B x 3
        x_embedded_all = []
        for i in range(self.n_levels):
            resolution = torch.floor(self.base_resolution * self.b**i)
            voxel_min_vertex, voxel_max_vertex, hashed_voxel_indices, keep_mask = get_voxel_vertices(
                                                x, self.bounding_box,
                                                resolution, self.log2_hashmap_size)

            voxel_embedds = self.embeddings[i](hashed_voxel_indices)

            x_embedded = self.trilinear_interp(x, voxel_min_vertex, voxel_max_vertex, voxel_embedds)
            x_embedded_all.append(x_embedded)

        keep_mask = keep_mask.sum(dim=-1) == keep_mask.shape[-1]
        return torch.cat(x_embedded_all, dim=-1), keep_mask


class SHEncoder(nn.Module):
    def __init__(self, input_dim=3, degree=4):

        super().__init__()

        self.input_dim = input_dim
        self.degree = degree

        assert self.input_dim == 3
        assert self.degree >= 1 and self.degree <= 5

        self.out_dim = degree ** 2

        self.C0 = 0.28209479177387814
        self.C1 = 0.4886025119029199
        self.C2 = [
            1.0925484305920792,
            -1.0925484305920792,
            0.31539156525252005,
            -1.0925484305920792,
            0.5462742152960396
        ]
        self.C3 = [
            -0.5900435899266435,
            2.890611442640554,
            -0.4570457994644658,
            0.3731763325901154,
            -0.4570457994644658,
            1.445305721320277,
            -0.5900435899266435
        ]
        self.C4 = [
            2.5033429417967046,
            -1.7701307697799304,
            0.9461746957575601,
            -0.6690465435572892,
            0.10578554691520431,
            -0.6690465435572892,
            0.47308734787878004,
            -1.7701307697799304,
            0.6258357354491761
        ]

    def forward(self, input, **kwargs):

        result = torch.empty((*input.shape[:-1], self.out_dim), dtype=input.dtype, device=input.device)
        x, y, z = input.unbind(-1)

        result[..., 0] = self.C0
        if self.degree > 1:
            result[..., 1] = -self.C1 * y
            result[..., 2] = self.C1 * z
            result[..., 3] = -self.C1 * x
            if self.degree > 2:
                xx, yy, zz = x * x, y * y, z * z
                xy, yz, xz = x * y, y * z, x * z
                result[..., 4] = self.C2[0] * xy
                result[..., 5] = self.C2[1] * yz
                result[..., 6] = self.C2[2] * (2.0 * zz - xx - yy)
                #result[..., 6] = self.C2[2] * (3.0 * zz - 1) # xx + yy + zz == 1, but this will lead to different result...
                result[..., 7] = self.C2[3] * xz
                result[..., 8] = self.C2[4] * (xx - yy)
                if self.degree > 3:
                    result[..., 9] = self.C3[0] * y * (3 * xx - yy)
                    result[..., 10] = self.C3[1] * xy * z
                    result[..., 11] = self.C3[2] * y * (4 * zz - xx - yy)
                    result[..., 12] = self.C3[3] * z * (2 * zz - 3 * xx - 3 * yy)
                    result[..., 13] = self.C3[4] * x * (4 * zz - xx - yy)
                    result[..., 14] = self.C3[5] * z * (xx - yy)
                    result[..., 15] = self.C3[6] * x * (xx - 3 * yy)
                    if self.degree > 4:
                        result[..., 16] = self.C4[0] * xy * (xx - yy)
                        result[..., 17] = self.C4[1] * yz * (3 * xx - yy)
                        result[..., 18] = self.C4[2] * xy * (7 * zz - 1)
                        result[..., 19] = self.C4[3] * yz * (7 * zz - 3)
                        result[..., 20] = self.C4[4] * (zz * (35 * zz - 30) + 3)
                        result[..., 21] = self.C4[5] * xz * (7 * zz - 3)
                        result[..., 22] = self.C4[6] * (xx - yy) * (7 * zz - 1)
                        result[..., 23] = self.C4[7] * xz * (xx - 3 * yy)
                        result[..., 24] = self.C4[8] * (xx * (xx - 3 * yy) - yy * (3 * xx - yy))

        return result


# ---------------------------------------------------------------- radiance_fields / run_nerf_helpers.py
class NeRFSmall(nn.Module):
    def __init__(self,
                 num_layers=3,
                 hidden_dim=64,
                 geo_feat_dim=15,
                 num_layers_color=4,
                 hidden_dim_color=64,
                 input_ch=3, input_ch_views=3,
                 ):
        super(NeRFSmall, self).__init__()

        self.input_ch = input_ch
        self.input_ch_views = input_ch_views

        # sigma network
        self.num_layers = num_layers
        self.hidden_dim = hidden_dim
        self.geo_feat_dim = geo_feat_dim

        sigma_net = []
        for l in range(num_layers):
            if l == 0:
                in_dim = self.input_ch
            else:
                in_dim = hidden_dim

            if l == num_layers - 1:
                out_dim = 1 + self.geo_feat_dim  # 1 sigma + 15 SH features for color
            else:
                out_dim = hidden_dim

            sigma_net.append(nn.Linear(in_dim, out_dim, bias=False))

        self.sigma_net = nn.ModuleList(sigma_net)

        # color network
        self.num_layers_color = num_layers_color
        self.hidden_dim_color = hidden_dim_color

        color_net = []
        for l in range(num_layers_color):
            if l == 0:
                in_dim = self.input_ch_views + self.geo_feat_dim
            else:
                in_dim = hidden_dim

            if l == num_layers_color - 1:
                out_dim = 3  # 3 rgb
            else:
                out_dim = hidden_dim

            color_net.append(nn.Linear(in_dim, out_dim, bias=False))

        self.color_net = nn.ModuleList(color_net)

    def forward(self, x):
        input_pts, input_views = torch.split(x, [self.input_ch, self.input_ch_views], dim=-1)

        # sigma
        h = input_pts
        for l in range(self.num_layers):
            h = self.sigma_net[l](h)
            if l != self.num_layers - 1:
                h = F.relu(h, inplace=True)

        sigma, geo_feat = h[..., 0], h[..., 1:]

        # color
        h = torch.cat([input_views, geo_feat], dim=-1)
        for l in range(self.num_layers_color):
            h = self.color_net[l](h)
            if l != self.num_layers_color - 1:
                h = F.relu(h, inplace=True)

        # color = torch.sigmoid(h)
        color = h
        outputs = torch.cat([color, sigma.unsqueeze(dim=-1)], -1)

        return outputs


def total_variation_loss(embeddings, min_resolution, max_resolution, level, log2_hashmap_size, n_levels=16):
    # Get resolution
    b = torch.exp((torch.log(max_resolution)-torch.log(min_resolution))/(n_levels-1))
    resolution = torch.tensor(torch.floor(min_resolution * b**level)).int()

    # Cube size to apply TV loss
    min_cube_size = min_resolution - 1
    max_cube_size = 50  # can be tuned
    if min_cube_size > max_cube_size:
        print("ALERT! min cuboid size greater than max!")
    cube_size = torch.floor(torch.clip(resolution/10.0, min_cube_size, max_cube_size)).int()

    # Sample cuboid
    min_vertex = torch.randint(0, resolution-cube_size, (3,))
    idx = min_vertex + torch.stack([torch.arange(cube_size+1) for _ in range(3)], dim=-1)
    cube_indices = torch.stack(torch.meshgrid(idx[:, 0], idx[:, 1], idx[:, 2]), dim=-1)

    hashed_indices = hash(cube_indices, log2_hashmap_size)
    cube_embeddings = embeddings(hashed_indices)

    tv_x = torch.pow(cube_embeddings[1:, :, :, :]-cube_embeddings[:-1, :, :, :], 2).sum()
    tv_y = torch.pow(cube_embeddings[:, 1:, :, :]-cube_embeddings[:, :-1, :, :], 2).sum()
    tv_z = torch.pow(cube_embeddings[:, :, 1:, :]-cube_embeddings[:, :, :-1, :], 2).sum()

    return (tv_x + tv_y + tv_z)/cube_size


img2mse = lambda x, y: torch.mean((x - y) ** 2)
mse2psnr = lambda x: -10. * torch.log(x) / torch.log(torch.Tensor([10.]))


def batchify(fn, chunk):
    """Constructs a version of 'fn' that applies to smaller batches.
    """
    if chunk is None:
        return fn

    def ret(inputs):
        return torch.cat([fn(inputs[i:i+chunk]) for i in range(0, inputs.shape[0], chunk)], 0)
    return ret


def run_network(inputs, viewdirs, fn, embed_fn, embeddirs_fn, netchunk=1024*64):
    """Prepares inputs and applies network 'fn'.
    """
    inputs_flat = torch.reshape(inputs, [-1, inputs.shape[-1]])
    embedded, keep_mask = embed_fn(inputs_flat)

    if viewdirs is not None:
        input_dirs = viewdirs[:, None].expand(inputs.shape)
        input_dirs_flat = torch.reshape(input_dirs, [-1, input_dirs.shape[-1]])
        embedded_dirs = embeddirs_fn(input_dirs_flat)
        embedded = torch.cat([embedded, embedded_dirs], -1)

    outputs_flat = batchify(fn, netchunk)(embedded)
    outputs_flat[~keep_mask, -1] = 0  # set sigma to 0 for invalid points
    outputs = torch.reshape(outputs_flat, list(inputs.shape[:-1]) + [outputs_flat.shape[-1]])
    return outputs


def raw2outputs(raw, z_vals, rays_d, raw_noise_std=0, white_bkgd=False, pytest=False):
    """Transforms model's predictions to semantically meaningful values.
    """
    raw2alpha = lambda raw, dists, act_fn=F.relu: 1.-torch.exp(-act_fn(raw)*dists)

    dists = z_vals[..., 1:] - z_vals[..., :-1]
    dists = torch.cat([dists, torch.Tensor([1e10]).expand(dists[..., :1].shape)], -1)  # [N_rays, N_samples]

    dists = dists * torch.norm(rays_d[..., None, :], dim=-1)

    rgb = torch.sigmoid(raw[..., :3])  # [N_rays, N_samples, 3]
    noise = 0.
    if raw_noise_std > 0.:
        noise = torch.randn(raw[..., 3].shape) * raw_noise_std

    alpha = raw2alpha(raw[..., 3] + noise, dists)  # [N_rays, N_samples]
    # weights = alpha * tf.math.cumprod(1.-alpha + 1e-10, -1, exclusive=True)
    weights = alpha * torch.cumprod(torch.cat([torch.ones((alpha.shape[0], 1)), 1.-alpha + 1e-10], -1), -1)[:, :-1]
    rgb_map = torch.sum(weights[..., None] * rgb, -2)  # [N_rays, 3]

    depth_map = torch.sum(weights * z_vals, -1) / torch.sum(weights, -1)
    disp_map = 1./torch.max(1e-10 * torch.ones_like(depth_map), depth_map)
    acc_map = torch.sum(weights, -1)

    if white_bkgd:
        rgb_map = rgb_map + (1.-acc_map[..., None])

    # Calculate weights sparsity loss
    probs = torch.cat([weights, 1-weights.sum(-1, keepdim=True)+1e-6], dim=-1)
    entropy = Categorical(probs=probs).entropy()
    sparsity_loss = entropy

    return rgb_map, disp_map, acc_map, weights, depth_map, sparsity_loss


def render_rays(rays_o, rays_d, viewdirs, near, far, N_samples, network_fn, embed_fn, embeddirs_fn,
                white_bkgd=False):
    N_rays = rays_o.shape[0]
    t_vals = torch.linspace(0., 1., steps=N_samples)
    z_vals = near * (1.-t_vals) + far * (t_vals)
    z_vals = z_vals.expand([N_rays, N_samples])
    pts = rays_o[..., None, :] + rays_d[..., None, :] * z_vals[..., :, None]  # [N_rays, N_samples, 3]
    raw = run_network(pts, viewdirs, network_fn, embed_fn, embeddirs_fn)
    rgb_map, disp_map, acc_map, weights, depth_map, sparsity_loss = raw2outputs(raw, z_vals, rays_d,
                                                                                white_bkgd=white_bkgd)
    return {'rgb_map': rgb_map, 'disp_map': disp_map, 'acc_map': acc_map, 'depth_map': depth_map,
            'sparsity_loss': sparsity_loss, 'weights': weights}


# ---------------------------------------------------------------- the test
def fmt(t, n=4):
    return [f"{v:.4f}" for v in t.reshape(-1)[:n].tolist()]


rng = np.random.default_rng(0)


def arr(*shape, std=1.0):
    return torch.from_numpy(rng.normal(0, std, shape).astype(np.float32))


coords = torch.tensor([[0, 0, 0], [1, 2, 3], [7, 5, 6], [100, 200, 300]])
print("hash", hash(coords, 8).tolist(), hash(coords, 19).tolist(), hash(coords, 8).dtype)
print("BOX_OFFSETS", tuple(BOX_OFFSETS.shape), BOX_OFFSETS[0, 5].tolist())
bounding_box = (torch.tensor([-1.0, -1.0, -1.0]), torch.tensor([1.0, 1.0, 1.0]))
xyz = torch.tensor([[0.1, -0.3, 0.7], [1.5, 0.2, -0.2], [-0.99, 0.99, 0.0]])
vmin, vmax, hashed, keep = get_voxel_vertices(xyz, bounding_box, torch.floor(torch.tensor(4.0)), 8)
print("voxel", fmt(vmin, 6), fmt(vmax, 3), hashed.tolist()[1], hashed.dtype, keep.tolist())

torch.manual_seed(0)
embed_fn = HashEmbedder(bounding_box, n_levels=4, n_features_per_level=2, log2_hashmap_size=8,
                        base_resolution=2, finest_resolution=10)
print("b", f"{embed_fn.b.item():.5f}", embed_fn.b.dtype, embed_fn.base_resolution.dtype,
      "resolutions", [torch.floor(embed_fn.base_resolution * embed_fn.b ** i).item() for i in range(4)],
      "init range", bool(embed_fn.embeddings[0].weight.abs().max() <= 1e-4))
with torch.no_grad():
    for emb in embed_fn.embeddings:
        emb.weight.copy_(arr(*emb.weight.shape, std=0.5))
embeddirs_fn = SHEncoder(degree=4)
dirs = F.normalize(arr(5, 3), dim=-1)
sh = embeddirs_fn(dirs)
print("SH", tuple(sh.shape), fmt(sh[2], 16))
sh5 = SHEncoder(degree=5)(dirs)
print("SH degree 5", fmt(sh5[1, 16:], 9))

pts = torch.tensor([[0.2, 0.3, -0.4], [0.9, -1.2, 0.0], [0.5, 0.5, 0.5], [-0.7, 0.1, 0.33]], requires_grad=True)
emb_out, keep_mask = embed_fn(pts)
emb_out.pow(2).sum().backward()
print("embedding", tuple(emb_out.shape), fmt(emb_out[0], 8), "keep", keep_mask.tolist())
print("grads: points", fmt(pts.grad, 6), "table rows hit", int((embed_fn.embeddings[3].weight.grad.abs().sum(-1) > 0).sum()))
embed_fn.zero_grad()

tv0 = total_variation_loss(embed_fn.embeddings[0], embed_fn.base_resolution, embed_fn.finest_resolution, 0, 8, n_levels=4)
tvs = [total_variation_loss(embed_fn.embeddings[i], embed_fn.base_resolution, embed_fn.finest_resolution, i, 8,
                            n_levels=4) for i in range(4)]
print("TV level 0", f"{tv0.item():.5f}", tv0.dtype, "TV levels", [f"{t.item():.4f}" for t in tvs])

model = NeRFSmall(num_layers=2, hidden_dim=16, geo_feat_dim=7, num_layers_color=3, hidden_dim_color=16,
                  input_ch=embed_fn.out_dim, input_ch_views=embeddirs_fn.out_dim)
with torch.no_grad():
    for p in model.parameters():
        p.copy_(arr(*p.shape, std=1.0 / math.sqrt(p.shape[1])))

N_rays, N_samples = 6, 8
rays_o = arr(N_rays, 3, std=0.2) + torch.tensor([0.0, 0.0, -1.5])
rays_d = arr(N_rays, 3, std=0.2) + torch.tensor([0.0, 0.0, 1.0])
viewdirs = rays_d / torch.norm(rays_d, dim=-1, keepdim=True)
target_s = torch.from_numpy(rng.uniform(0, 1, (N_rays, 3)).astype(np.float32))
ret = render_rays(rays_o, rays_d, viewdirs, 0.5, 2.5, N_samples, model, embed_fn, embeddirs_fn)
print("render", fmt(ret['rgb_map'][1], 3), "disp", fmt(ret['disp_map'], 3), "acc", fmt(ret['acc_map'], 3),
      "depth", fmt(ret['depth_map'], 3), "sparsity", fmt(ret['sparsity_loss'], 3))

grad_vars = list(model.parameters())
embedding_params = list(embed_fn.parameters())
lrate, lrate_decay = 1e-2, 0.01
optimizer = torch.optim.RAdam([
                    {'params': grad_vars, 'weight_decay': 1e-6},
                    {'params': embedding_params, 'eps': 1e-15}
                ], lr=lrate, betas=(0.9, 0.99))
tv_loss_weight, sparse_loss_weight = 0.0, 1e-3
global_step = 0
for i in range(4):
    ret = render_rays(rays_o, rays_d, viewdirs, 0.5, 2.5, N_samples, model, embed_fn, embeddirs_fn,
                      white_bkgd=i % 2 == 1)
    optimizer.zero_grad()
    img_loss = img2mse(ret['rgb_map'], target_s)
    loss = img_loss
    psnr = mse2psnr(img_loss)
    sparsity_loss = sparse_loss_weight * ret['sparsity_loss'].sum()
    loss = loss + sparsity_loss
    n_levels = embed_fn.n_levels
    min_res = embed_fn.base_resolution
    max_res = embed_fn.finest_resolution
    log2_hashmap_size = embed_fn.log2_hashmap_size
    TV_loss = sum(total_variation_loss(embed_fn.embeddings[i], min_res, max_res, i, log2_hashmap_size,
                                       n_levels=n_levels) for i in range(n_levels))
    loss = loss + tv_loss_weight * TV_loss
    loss.backward()
    optimizer.step()

    decay_rate = 0.1
    decay_steps = lrate_decay * 1000
    new_lrate = lrate * (decay_rate ** (global_step / decay_steps))
    for param_group in optimizer.param_groups:
        param_group['lr'] = new_lrate
    print(f"[TRAIN] Iter: {i} Loss: {loss.item()}  PSNR: {psnr.item()}", psnr.shape, f"lr {new_lrate:.6f}")
    global_step += 1
print("after training", fmt(embed_fn.embeddings[2].weight[hashed[0]], 4), fmt(model.color_net[2].weight, 4),
      "state", sorted(optimizer.state[grad_vars[0]].keys()), optimizer.state[grad_vars[0]]['step'])


# one training step under torch.compile against the same step eagerly
def train_step(ro, rd, vd, target):
    ret = render_rays(ro, rd, vd, 0.5, 2.5, N_samples, model, embed_fn, embeddirs_fn)
    optimizer.zero_grad()
    loss = img2mse(ret['rgb_map'], target) + sparse_loss_weight * ret['sparsity_loss'].sum()
    loss.backward()
    optimizer.step()
    return loss


params = grad_vars + embedding_params
state = [p.detach().clone() for p in params]
opt_state = copy.deepcopy(optimizer.state_dict())
eager = [train_step(rays_o, rays_d, viewdirs, target_s).item() for _ in range(2)]
after = [p.detach().clone() for p in params]
with torch.no_grad():
    for p, s in zip(params, state):
        p.copy_(s)
optimizer.load_state_dict(opt_state)
cstep = torch.compile(train_step)
compiled = [cstep(rays_o, rays_d, viewdirs, target_s).item() for _ in range(2)]
print("compiled losses", [f"{v:.5f}" for v in compiled])
print("compiled == eager:", all(abs(a - b) <= 1e-4 * max(1.0, abs(b)) for a, b in zip(compiled, eager)),
      all(torch.allclose(p, a, rtol=1e-4, atol=1e-5) for p, a in zip(params, after)))
