# Deep Image Prior denoising (DmitryUlyanov/deep-image-prior, models/skip.py,
# models/common.py, utils/common_utils.py and denoising.ipynb), as written:
# the skip() encoder-decoder built of nn.Sequential with add_module, Concat
# (centre-cropping its inputs to the smallest, torch.cat(inputs_, dim=1)),
# conv() with nn.ReflectionPad2d padding and stride-2 downsampling, bn(),
# act('LeakyReLU'), nn.Upsample(scale_factor=2, mode='bilinear'), the
# sigmoid output; get_noise (fill_noise: uniform_() * 1/10), np_to_torch,
# get_params, optimize() with the closure: the input perturbed by
# reg_noise_std * noise.normal_(), MSE to the noisy image, the exponential
# average out_avg, PSNR against the clean image (skimage's
# peak_signal_noise_ratio, here in NumPy), and the backtracking when the
# PSNR drops (reloading the last parameters). Written for this test: a
# 16x16 synthetic image, 8 channels, 2 scales, 12 iterations; one compiled
# step (the closure's tensor work) against eager.
import copy

import numpy as np
import torch
import torch.nn as nn


class Concat(nn.Module):
    def __init__(self, dim, *args):
        super(Concat, self).__init__()
        self.dim = dim

        for idx, module in enumerate(args):
            self.add_module(str(idx), module)

    def forward(self, input):
        inputs = []
        for module in self._modules.values():
            inputs.append(module(input))

        inputs_shapes2 = [x.shape[2] for x in inputs]
        inputs_shapes3 = [x.shape[3] for x in inputs]

        if np.all(np.array(inputs_shapes2) == min(inputs_shapes2)) and np.all(np.array(inputs_shapes3) == min(inputs_shapes3)):
            inputs_ = inputs
        else:
            target_shape2 = min(inputs_shapes2)
            target_shape3 = min(inputs_shapes3)

            inputs_ = []
            for inp in inputs:
                diff2 = (inp.size(2) - target_shape2) // 2
                diff3 = (inp.size(3) - target_shape3) // 2
                inputs_.append(inp[:, :, diff2: diff2 + target_shape2, diff3:diff3 + target_shape3])

        return torch.cat(inputs_, dim=self.dim)

    def __len__(self):
        return len(self._modules)


def add_module(self, module):
    self.add_module(str(len(self) + 1), module)


torch.nn.Module.add = add_module


def act(act_fun='LeakyReLU'):
    if isinstance(act_fun, str):
        if act_fun == 'LeakyReLU':
            return nn.LeakyReLU(0.2, inplace=True)
        elif act_fun == 'ELU':
            return nn.ELU()
        elif act_fun == 'none':
            return nn.Sequential()
        else:
            assert False
    else:
        return act_fun()


def bn(num_features):
    return nn.BatchNorm2d(num_features)


def conv(in_f, out_f, kernel_size, stride=1, bias=True, pad='zero', downsample_mode='stride'):
    downsampler = None
    if stride != 1 and downsample_mode != 'stride':
        if downsample_mode == 'avg':
            downsampler = nn.AvgPool2d(stride, stride)
        elif downsample_mode == 'max':
            downsampler = nn.MaxPool2d(stride, stride)
        else:
            assert False
        stride = 1

    padder = None
    to_pad = int((kernel_size - 1) / 2)
    if pad == 'reflection':
        padder = nn.ReflectionPad2d(to_pad)
        to_pad = 0

    convolver = nn.Conv2d(in_f, out_f, kernel_size, stride, padding=to_pad, bias=bias)

    layers = filter(lambda x: x is not None, [padder, convolver, downsampler])
    return nn.Sequential(*layers)


def skip(num_input_channels=2, num_output_channels=3,
         num_channels_down=[16, 32, 64, 128, 128], num_channels_up=[16, 32, 64, 128, 128], num_channels_skip=[4, 4, 4, 4, 4],
         filter_size_down=3, filter_size_up=3, filter_skip_size=1,
         need_sigmoid=True, need_bias=True,
         pad='zero', upsample_mode='nearest', downsample_mode='stride', act_fun='LeakyReLU',
         need1x1_up=True):
    assert len(num_channels_down) == len(num_channels_up) == len(num_channels_skip)

    n_scales = len(num_channels_down)

    if not (isinstance(upsample_mode, list) or isinstance(upsample_mode, tuple)):
        upsample_mode = [upsample_mode] * n_scales

    if not (isinstance(downsample_mode, list) or isinstance(downsample_mode, tuple)):
        downsample_mode = [downsample_mode] * n_scales

    if not (isinstance(filter_size_down, list) or isinstance(filter_size_down, tuple)):
        filter_size_down = [filter_size_down] * n_scales

    if not (isinstance(filter_size_up, list) or isinstance(filter_size_up, tuple)):
        filter_size_up = [filter_size_up] * n_scales

    last_scale = n_scales - 1

    model = nn.Sequential()
    model_tmp = model

    input_depth = num_input_channels
    for i in range(len(num_channels_down)):

        deeper = nn.Sequential()
        skip = nn.Sequential()

        if num_channels_skip[i] != 0:
            model_tmp.add(Concat(1, skip, deeper))
        else:
            model_tmp.add(deeper)

        model_tmp.add(bn(num_channels_skip[i] + (num_channels_up[i + 1] if i < last_scale else num_channels_down[i])))

        if num_channels_skip[i] != 0:
            skip.add(conv(input_depth, num_channels_skip[i], filter_skip_size, bias=need_bias, pad=pad))
            skip.add(bn(num_channels_skip[i]))
            skip.add(act(act_fun))

        deeper.add(conv(input_depth, num_channels_down[i], filter_size_down[i], 2, bias=need_bias, pad=pad, downsample_mode=downsample_mode[i]))
        deeper.add(bn(num_channels_down[i]))
        deeper.add(act(act_fun))

        deeper.add(conv(num_channels_down[i], num_channels_down[i], filter_size_down[i], bias=need_bias, pad=pad))
        deeper.add(bn(num_channels_down[i]))
        deeper.add(act(act_fun))

        deeper_main = nn.Sequential()

        if i == len(num_channels_down) - 1:
            # The deepest
            k = num_channels_down[i]
        else:
            deeper.add(deeper_main)
            k = num_channels_up[i + 1]

        deeper.add(nn.Upsample(scale_factor=2, mode=upsample_mode[i]))

        model_tmp.add(conv(num_channels_skip[i] + k, num_channels_up[i], filter_size_up[i], 1, bias=need_bias, pad=pad))
        model_tmp.add(bn(num_channels_up[i]))
        model_tmp.add(act(act_fun))

        if need1x1_up:
            model_tmp.add(conv(num_channels_up[i], num_channels_up[i], 1, bias=need_bias, pad=pad))
            model_tmp.add(bn(num_channels_up[i]))
            model_tmp.add(act(act_fun))

        input_depth = num_channels_down[i]
        model_tmp = deeper_main

    model.add(conv(num_channels_up[0], num_output_channels, 1, bias=need_bias, pad=pad))
    if need_sigmoid:
        model.add(nn.Sigmoid())

    return model


def fill_noise(x, noise_type):
    """Fills tensor `x` with noise of type `noise_type`."""
    if noise_type == 'u':
        x.uniform_()
    elif noise_type == 'n':
        x.normal_()
    else:
        assert False


def get_noise(input_depth, method, spatial_size, noise_type='u', var=1. / 10):
    if isinstance(spatial_size, int):
        spatial_size = (spatial_size, spatial_size)
    if method == 'noise':
        shape = [1, input_depth, spatial_size[0], spatial_size[1]]
        net_input = torch.zeros(shape)

        fill_noise(net_input, noise_type)
        net_input *= var
    else:
        assert False

    return net_input


def np_to_torch(img_np):
    return torch.from_numpy(img_np)[None, :]


def torch_to_np(img_var):
    return img_var.detach().cpu().numpy()[0]


def get_params(opt_over, net, net_input, downsampler=None):
    opt_over_list = opt_over.split(',')
    params = []

    for opt in opt_over_list:
        if opt == 'net':
            params += [x for x in net.parameters()]
        elif opt == 'input':
            net_input.requires_grad = True
            params += [net_input]
        else:
            assert False, 'what is it?'

    return params


def compare_psnr(image_true, image_test):
    err = np.mean((image_true.astype(np.float64) - image_test.astype(np.float64)) ** 2)
    return 10 * np.log10(1.0 / err)


torch.manual_seed(0)
np.random.seed(0)
yy, xx = np.mgrid[:16, :16] / 15.0
img_np = np.stack([xx, yy, (xx * yy) ** 0.5]).astype(np.float32)
sigma_ = 25. / 255.
img_noisy_np = np.clip(img_np + np.random.normal(scale=sigma_, size=img_np.shape), 0, 1).astype(np.float32)

INPUT = 'noise'
pad = 'reflection'
OPT_OVER = 'net'
reg_noise_std = 1. / 30.
LR = 0.01
OPTIMIZER = 'adam'
exp_weight = 0.99
num_iter = 12
input_depth = 8

net = skip(
    input_depth, 3,
    num_channels_down=[8, 8],
    num_channels_up=[8, 8],
    num_channels_skip=[4, 4],
    upsample_mode='bilinear',
    need_sigmoid=True, need_bias=True, pad=pad, act_fun='LeakyReLU')
net_input = get_noise(input_depth, INPUT, (img_np.shape[1], img_np.shape[2])).detach()
s = sum([np.prod(list(p.size())) for p in net.parameters()])
print('Number of params: %d' % s)
mse = torch.nn.MSELoss()
img_noisy_torch = np_to_torch(img_noisy_np)

net_input_saved = net_input.detach().clone()
noise = net_input.detach().clone()
out_avg = None
last_net = None
psrn_noisy_last = 0
i = 0


def closure():
    global i, out_avg, psrn_noisy_last, last_net, net_input

    if reg_noise_std > 0:
        net_input = net_input_saved + (noise.normal_() * reg_noise_std)

    out = net(net_input)

    # Smoothing
    if out_avg is None:
        out_avg = out.detach()
    else:
        out_avg = out_avg * exp_weight + out.detach() * (1 - exp_weight)

    total_loss = mse(out, img_noisy_torch)
    total_loss.backward()

    psrn_noisy = compare_psnr(img_noisy_np, out.detach().cpu().numpy()[0])
    psrn_gt = compare_psnr(img_np, out.detach().cpu().numpy()[0])
    psrn_gt_sm = compare_psnr(img_np, out_avg.detach().cpu().numpy()[0])

    print('Iteration %05d    Loss %f   PSNR_noisy: %f   PSRN_gt: %f PSNR_gt_sm: %f' % (i, total_loss.item(), psrn_noisy, psrn_gt, psrn_gt_sm))

    # Backtracking
    if i % 4 == 0:
        if psrn_noisy - psrn_noisy_last < -5:
            print('Falling back to previous checkpoint.')

            for new_param, net_param in zip(last_net, net.parameters()):
                net_param.data.copy_(new_param.cuda() if torch.cuda.is_available() else new_param)

            return total_loss * 0
        else:
            last_net = [x.detach().cpu() for x in net.parameters()]
            psrn_noisy_last = psrn_noisy

    i += 1

    return total_loss


p = get_params(OPT_OVER, net, net_input)
print('Starting optimization with ADAM')
optimizer = torch.optim.Adam(p, lr=LR)

for j in range(num_iter):
    optimizer.zero_grad()
    optimizer.step(closure)

out_np = torch_to_np(net(net_input_saved))
print("final PSNR %.4f" % compare_psnr(img_np, out_np), "out mean %.5f" % out_np.mean())


# one step compiled: the closure's tensor work (its prints and PSNRs stay outside)
def step(inp):
    optimizer.zero_grad()
    out = net(inp)
    total_loss = mse(out, img_noisy_torch)
    total_loss.backward()
    optimizer.step()
    return total_loss, out.detach()


inp = net_input_saved + noise.normal_() * reg_noise_std
state, opt_state = copy.deepcopy(net.state_dict()), copy.deepcopy(optimizer.state_dict())
loss_c, out_c = torch.compile(step)(inp)
after_c = copy.deepcopy(net.state_dict())
net.load_state_dict(state)
optimizer.load_state_dict(opt_state)
loss_e, out_e = step(inp)
print("compiled loss %.6f" % loss_c.item())
print("compiled == eager", torch.allclose(loss_c, loss_e, atol=1e-6), torch.allclose(out_c, out_e, atol=1e-5),
      # (weights only: a conv bias before a BatchNorm has a gradient that is
      # zero but for rounding, which Adam's normalisation turns into a step)
      all(torch.allclose(after_c[k], v, atol=1e-5) for k, v in net.state_dict().items()
          if k.endswith("weight")))
