# golbin/WaveNet (wavenet/networks.py: DilatedCausalConv1d, CausalConv1d,
# ResidualBlock with the gated tanh * sigmoid, residual and skip 1x1
# convolutions, ResidualStack (its blocks kept in a plain Python list, as
# published), DensNet, WaveNet with receptive fields and InputSizeError;
# wavenet/model.py's WaveNet wrapper: CrossEntropyLoss over the softmax
# output and Adam; generation by feeding back the argmax one-hot) with
# torchaudio.functional's mu_law_encoding / mu_law_decoding (torch.sign,
# torch.log1p) and golbin's utils/data.py one_hot.  Changes for a CPU test:
# the audio is a synthetic numpy waveform, the sizes are small (layer_size 3,
# stack_size 2, 256 in_channels, res_channels 16, 40 samples), .cuda() and
# DataParallel are dropped, the model is not saved, and the weights come from
# numpy, so tracec and torch compute the same numbers.
import numpy as np
import torch


# ---- torchaudio.functional ----
def mu_law_encoding(x, quantization_channels):
    mu = quantization_channels - 1.0
    if not x.is_floating_point():
        x = x.to(torch.float)
    mu = torch.tensor(mu, dtype=x.dtype)
    x_mu = torch.sign(x) * torch.log1p(mu * torch.abs(x)) / torch.log1p(mu)
    x_mu = ((x_mu + 1) / 2 * mu + 0.5).to(torch.int64)
    return x_mu


def mu_law_decoding(x_mu, quantization_channels):
    mu = quantization_channels - 1.0
    if not x_mu.is_floating_point():
        x_mu = x_mu.to(torch.float)
    mu = torch.tensor(mu, dtype=x_mu.dtype)
    x = ((x_mu) / mu) * 2 - 1.0
    x = torch.sign(x) * (torch.exp(torch.abs(x) * torch.log1p(mu)) - 1.0) / mu
    return x


# ---- wavenet/exceptions.py ----
class InputSizeError(Exception):
    def __init__(self, input_size, receptive_fields, output_size):

        message = 'Input size has to be larger than receptive_fields\n'
        message += 'Input size: {0}, Receptive fields size: {1}, Output size: {2}'.format(
            input_size, receptive_fields, output_size)

        super(InputSizeError, self).__init__(message)


# ---- wavenet/networks.py ----
class DilatedCausalConv1d(torch.nn.Module):
    """Dilated Causal Convolution for WaveNet"""
    def __init__(self, channels, dilation=1):
        super(DilatedCausalConv1d, self).__init__()

        self.conv = torch.nn.Conv1d(channels, channels,
                                    kernel_size=2, stride=1,  # Fixed for WaveNet
                                    dilation=dilation,
                                    padding=0,  # Fixed for WaveNet dilation
                                    bias=False)  # Fixed for WaveNet but not sure

    def init_weights_for_test(self):
        for m in self.modules():
            if isinstance(m, torch.nn.Conv1d):
                m.weight.data.fill_(1)

    def forward(self, x):
        output = self.conv(x)

        return output


class CausalConv1d(torch.nn.Module):
    """Causal Convolution for WaveNet"""
    def __init__(self, in_channels, out_channels):
        super(CausalConv1d, self).__init__()

        # padding=1 for same size(length) between input and output for causal convolution
        self.conv = torch.nn.Conv1d(in_channels, out_channels,
                                    kernel_size=2, stride=1, padding=1,
                                    bias=False)  # Fixed for WaveNet but not sure

    def init_weights_for_test(self):
        for m in self.modules():
            if isinstance(m, torch.nn.Conv1d):
                m.weight.data.fill_(1)

    def forward(self, x):
        output = self.conv(x)

        # remove last value for causal convolution
        return output[:, :, :-1]


class ResidualBlock(torch.nn.Module):
    def __init__(self, res_channels, skip_channels, dilation):
        """
        Residual block
        :param res_channels: number of residual channel for input, output
        :param skip_channels: number of skip channel for output
        :param dilation:
        """
        super(ResidualBlock, self).__init__()

        self.dilated = DilatedCausalConv1d(res_channels, dilation=dilation)
        self.conv_res = torch.nn.Conv1d(res_channels, res_channels, 1)
        self.conv_skip = torch.nn.Conv1d(res_channels, skip_channels, 1)

        self.gate_tanh = torch.nn.Tanh()
        self.gate_sigmoid = torch.nn.Sigmoid()

    def forward(self, x, skip_size):
        """
        :param x:
        :param skip_size: The last output size for loss and prediction
        :return:
        """
        output = self.dilated(x)

        # PixelCNN gate
        gated_tanh = self.gate_tanh(output)
        gated_sigmoid = self.gate_sigmoid(output)
        gated = gated_tanh * gated_sigmoid

        # Residual network
        output = self.conv_res(gated)
        input_cut = x[:, :, -output.size(2):]
        output += input_cut

        # Skip connection
        skip = self.conv_skip(gated)
        skip = skip[:, :, -skip_size:]

        return output, skip


class ResidualStack(torch.nn.Module):
    def __init__(self, layer_size, stack_size, res_channels, skip_channels):
        """
        Stack residual blocks by layer and stack size
        :param layer_size: integer, 10 = layer[dilation=1, dilation=2, 4, 8, 16, 32, 64, 128, 256, 512]
        :param stack_size: integer, 5 = stack[layer1, layer2, layer3, layer4, layer5]
        :param res_channels: number of residual channel for input, output
        :param skip_channels: number of skip channel for output
        :return:
        """
        super(ResidualStack, self).__init__()

        self.layer_size = layer_size
        self.stack_size = stack_size

        self.res_blocks = self.stack_res_block(res_channels, skip_channels)

    @staticmethod
    def _residual_block(res_channels, skip_channels, dilation):
        block = ResidualBlock(res_channels, skip_channels, dilation)

        if torch.cuda.device_count() > 1:
            block = torch.nn.DataParallel(block)

        if torch.cuda.is_available():
            block.cuda()

        return block

    def build_dilations(self):
        dilations = []

        # 5 = stack[layer1, layer2, layer3, layer4, layer5]
        for s in range(0, self.stack_size):
            # 10 = layer[dilation=1, dilation=2, 4, 8, 16, 32, 64, 128, 256, 512]
            for l in range(0, self.layer_size):
                dilations.append(2 ** l)

        return dilations

    def stack_res_block(self, res_channels, skip_channels):
        """
        Prepare dilated convolution blocks by layer and stack size
        :return:
        """
        res_blocks = []
        dilations = self.build_dilations()

        for dilation in dilations:
            block = self._residual_block(res_channels, skip_channels, dilation)
            res_blocks.append(block)

        return res_blocks

    def forward(self, x, skip_size):
        """
        :param x:
        :param skip_size: The last output size for loss and prediction
        :return:
        """
        output = x
        skip_connections = []

        for res_block in self.res_blocks:
            # output is the next input
            output, skip = res_block(output, skip_size)
            skip_connections.append(skip)

        return torch.stack(skip_connections)


class DensNet(torch.nn.Module):
    def __init__(self, channels):
        """
        The last network of WaveNet
        :param channels: number of channels for input and output
        :return:
        """
        super(DensNet, self).__init__()

        self.conv1 = torch.nn.Conv1d(channels, channels, 1)
        self.conv2 = torch.nn.Conv1d(channels, channels, 1)

        self.relu = torch.nn.ReLU()
        self.softmax = torch.nn.Softmax(dim=1)

    def forward(self, x):
        output = self.relu(x)
        output = self.conv1(output)
        output = self.relu(output)
        output = self.conv2(output)

        output = self.softmax(output)

        return output


class WaveNet(torch.nn.Module):
    def __init__(self, layer_size, stack_size, in_channels, res_channels):
        """
        Stack residual blocks by layer and stack size
        :param layer_size: integer, 10 = layer[dilation=1, dilation=2, 4, 8, 16, 32, 64, 128, 256, 512]
        :param stack_size: integer, 5 = stack[layer1, layer2, layer3, layer4, layer5]
        :param in_channels: number of channels for input data. skip channel is same as input channel
        :param res_channels: number of residual channel for input, output
        :return:
        """
        super(WaveNet, self).__init__()

        self.receptive_fields = self.calc_receptive_fields(layer_size, stack_size)

        self.causal = CausalConv1d(in_channels, res_channels)

        self.res_stack = ResidualStack(layer_size, stack_size, res_channels, in_channels)

        self.densnet = DensNet(in_channels)

    @staticmethod
    def calc_receptive_fields(layer_size, stack_size):
        layers = [2 ** i for i in range(0, layer_size)] * stack_size
        num_receptive_fields = np.sum(layers)

        return int(num_receptive_fields)

    def calc_output_size(self, x):
        output_size = int(x.size(2)) - self.receptive_fields

        self.check_input_size(x, output_size)

        return output_size

    def check_input_size(self, x, output_size):
        if output_size < 1:
            raise InputSizeError(int(x.size(2)), self.receptive_fields, output_size)

    def forward(self, x):
        """
        The size of timestep(3rd dimention) has to be bigger than receptive fields
        :param x: Tensor[batch, timestep, channels]
        :return: Tensor[batch, timestep, channels]
        """
        output = x.transpose(1, 2)

        output_size = self.calc_output_size(output)

        output = self.causal(output)

        skip_connections = self.res_stack(output, output_size)

        output = torch.sum(skip_connections, dim=0)

        output = self.densnet(output)

        return output.transpose(1, 2).contiguous()


# ---- wavenet/model.py ----
class Model:
    def __init__(self, layer_size=10, stack_size=5, in_channels=256, res_channels=512, lr=0.002):

        self.layer_size = layer_size
        self.stack_size = stack_size
        self.in_channels = in_channels
        self.res_channels = res_channels
        self.receptive_fields = 2 ** layer_size * stack_size

        self.lr = lr
        self.loss = self._loss()
        self.optimizer = None

        self.net = WaveNet(layer_size, stack_size, in_channels, res_channels)

        # numpy weights, then the optimizer over net.parameters() as published
        numpy_init(self.net, 0)
        self.optimizer = self._optimizer()

        self._prepare_for_gpu()

    @staticmethod
    def _loss():
        loss = torch.nn.CrossEntropyLoss()

        if torch.cuda.is_available():
            loss = loss.cuda()

        return loss

    def _optimizer(self):
        return torch.optim.Adam(self.net.parameters(), lr=self.lr)

    def _prepare_for_gpu(self):
        if torch.cuda.device_count() > 1:
            print("{0} GPUs are detected.".format(torch.cuda.device_count()))
            self.net = torch.nn.DataParallel(self.net)

        if torch.cuda.is_available():
            self.net.cuda()

    def train(self, inputs, targets):
        """
        Train 1 time
        :param inputs: Tensor[batch, timestep, channels]
        :param targets: Torch tensor [batch, timestep, channels]
        :return: float loss
        """
        outputs = self.net(inputs)

        loss = self.loss(outputs.view(-1, self.in_channels),
                         targets.long().view(-1))

        self.optimizer.zero_grad()
        loss.backward()
        self.optimizer.step()

        return loss.data.item()

    def generate(self, inputs):
        """
        Generate 1 time
        :param inputs: Tensor[batch, timestep, channels]
        :return: Tensor[batch, timestep, channels]
        """
        outputs = self.net(inputs)

        return outputs


# ---- utils/data.py ----
def one_hot_encode(data, channels=256):
    one_hot = np.zeros((data.size, channels), dtype=float)
    one_hot[np.arange(data.size), data.ravel()] = 1

    return one_hot


def one_hot_decode(data, axis=1):
    decoded = np.argmax(data, axis=axis)

    return decoded


def numpy_init(module, seed):
    r = np.random.default_rng(seed)
    with torch.no_grad():
        for name, p in module.named_parameters():
            std = 0.05 if p.dim() == 1 else p[0].numel() ** -0.5
            p.copy_(torch.from_numpy((std * r.standard_normal(tuple(p.shape))).astype(np.float32)))


# the residual blocks live in a plain list: their parameters are not the
# model's (nor the optimizer's), as published; they get numpy weights too
def init_blocks(net, seed):
    for i, block in enumerate(net.res_stack.res_blocks):
        numpy_init(block, seed + i)


layer_size, stack_size, in_channels, res_channels = 3, 2, 256, 16
model = Model(layer_size, stack_size, in_channels, res_channels, lr=0.002)
init_blocks(model.net, 10)
print("receptive fields", model.net.receptive_fields, model.receptive_fields,
      "params", len(list(model.net.parameters())), "blocks", len(model.net.res_stack.res_blocks))

# audio: a chirp with noise, mu-law quantized
t = np.linspace(0, 1, 160, dtype=np.float32)
audio = (0.6 * np.sin(2 * np.pi * (3 + 8 * t) * t) + 0.05 * np.random.default_rng(1).standard_normal(160)).astype(np.float32)
x = torch.from_numpy(audio)
q = mu_law_encoding(x, 256)
print("mu-law", q[:8].tolist(), q.dtype, int(q.min()), int(q.max()))
back = mu_law_decoding(q, 256)
print("decode max err", f"{(back - x).abs().max().item():.5f}")

try:
    model.net(torch.zeros(1, 8, 256))
except InputSizeError as e:
    print("InputSizeError:", str(e).splitlines()[1])

# training windows: inputs are one-hot samples, targets the samples after
# the receptive field
win = 40
rf = model.net.receptive_fields
q_np = q.numpy()
for step in range(4):
    starts = [step * 10, step * 10 + 50]
    inputs = np.stack([one_hot_encode(q_np[s:s + win], 256) for s in starts]).astype(np.float32)
    targets = np.stack([q_np[s + rf + 1:s + win + 1] for s in starts])
    loss = model.train(torch.from_numpy(inputs), torch.from_numpy(targets))
    print("[{0}/{1}] loss: {2:.6f}".format(step + 1, 4, loss))

# generation: append the argmax sample and slide the window
seed_window = torch.from_numpy(one_hot_encode(q_np[:rf + 1], 256).astype(np.float32)).unsqueeze(0)
generated = []
with torch.no_grad():
    for i in range(5):
        out = model.generate(seed_window)
        nxt = one_hot_decode(out[0, -1:].numpy(), axis=1)
        generated.append(int(nxt[0]))
        new = torch.from_numpy(one_hot_encode(nxt, 256).astype(np.float32)).unsqueeze(0)
        seed_window = torch.cat([seed_window[:, 1:], new], dim=1)
print("generated", generated, [f"{v:.4f}" for v in mu_law_decoding(torch.tensor(generated), 256).tolist()])

# (no torch.compile check here: the cold native build of the step's
# 256-channel convolutions takes longer than this test may)
