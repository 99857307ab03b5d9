# ndrplz/ConvLSTM_pytorch: convlstm.py (ConvLSTMCell: the gates of one
# Conv2d over torch.cat([input, h]), torch.split by hidden_dim, init_hidden;
# ConvLSTM: _check_kernel_size_consistency, _extend_for_multilayer, the
# batch_first permute, the layer / time loops stacking h, return_all_layers,
# the NotImplementedError of a given hidden_state) and the README's usage
# (last_states[0][0]), trained on next-frame prediction of moving blobs with a
# 1x1 Conv2d head, MSE and Adam.
# Changes for a CPU test: 6x6 frames, 4 time steps, hidden_dim [4, 6], weights
# and data from numpy.  Then the training step under torch.compile against the
# same step run eagerly.
import copy

import numpy as np
import torch.nn as nn
import torch


class ConvLSTMCell(nn.Module):

    def __init__(self, input_dim, hidden_dim, kernel_size, bias):
        """
        Initialize ConvLSTM cell.

        Parameters
        ----------
        input_dim: int
            Number of channels of input tensor.
        hidden_dim: int
            Number of channels of hidden state.
        kernel_size: (int, int)
            Size of the convolutional kernel.
        bias: bool
            Whether or not to add the bias.
        """

        super(ConvLSTMCell, self).__init__()

        self.input_dim = input_dim
        self.hidden_dim = hidden_dim

        self.kernel_size = kernel_size
        self.padding = kernel_size[0] // 2, kernel_size[1] // 2
        self.bias = bias

        self.conv = nn.Conv2d(in_channels=self.input_dim + self.hidden_dim,
                              out_channels=4 * self.hidden_dim,
                              kernel_size=self.kernel_size,
                              padding=self.padding,
                              bias=self.bias)

    def forward(self, input_tensor, cur_state):
        h_cur, c_cur = cur_state

        combined = torch.cat([input_tensor, h_cur], dim=1)  # concatenate along channel axis

        combined_conv = self.conv(combined)
        cc_i, cc_f, cc_o, cc_g = torch.split(combined_conv, self.hidden_dim, dim=1)
        i = torch.sigmoid(cc_i)
        f = torch.sigmoid(cc_f)
        o = torch.sigmoid(cc_o)
        g = torch.tanh(cc_g)

        c_next = f * c_cur + i * g
        h_next = o * torch.tanh(c_next)

        return h_next, c_next

    def init_hidden(self, batch_size, image_size):
        height, width = image_size
        return (torch.zeros(batch_size, self.hidden_dim, height, width, device=self.conv.weight.device),
                torch.zeros(batch_size, self.hidden_dim, height, width, device=self.conv.weight.device))


class ConvLSTM(nn.Module):

    """

    Parameters:
        input_dim: Number of channels in input
        hidden_dim: Number of hidden channels
        kernel_size: Size of kernel in convolutions
        num_layers: Number of LSTM layers stacked on each other
        batch_first: Whether or not dimension 0 is the batch or not
        bias: Bias or no bias in Convolution
        return_all_layers: Return the list of computations for all layers
        Note: Will do same padding.

    Input:
        A tensor of size B, T, C, H, W or T, B, C, H, W
    Output:
        A tuple of two lists of length num_layers (or length 1 if return_all_layers is False).
            0 - layer_output_list is the list of lists of length T of each output
            1 - last_state_list is the list of last states
                    each element of the list is a tuple (h, c) for hidden state and memory
    Example:
        >> x = torch.rand((32, 10, 64, 128, 128))
        >> convlstm = ConvLSTM(64, 16, 3, 1, True, True, False)
        >> _, last_states = convlstm(x)
        >> h = last_states[0][0]  # 0 for layer index, 0 for h index
    """

    def __init__(self, input_dim, hidden_dim, kernel_size, num_layers,
                 batch_first=False, bias=True, return_all_layers=False):
        super(ConvLSTM, self).__init__()

        self._check_kernel_size_consistency(kernel_size)

        # Make sure that both `kernel_size` and `hidden_dim` are lists having len == num_layers
        kernel_size = self._extend_for_multilayer(kernel_size, num_layers)
        hidden_dim = self._extend_for_multilayer(hidden_dim, num_layers)
        if not len(kernel_size) == len(hidden_dim) == num_layers:
            raise ValueError('Inconsistent list length.')

        self.input_dim = input_dim
        self.hidden_dim = hidden_dim
        self.kernel_size = kernel_size
        self.num_layers = num_layers
        self.batch_first = batch_first
        self.bias = bias
        self.return_all_layers = return_all_layers

        cell_list = []
        for i in range(0, self.num_layers):
            cur_input_dim = self.input_dim if i == 0 else self.hidden_dim[i - 1]

            cell_list.append(ConvLSTMCell(input_dim=cur_input_dim,
                                          hidden_dim=self.hidden_dim[i],
                                          kernel_size=self.kernel_size[i],
                                          bias=self.bias))

        self.cell_list = nn.ModuleList(cell_list)

    def forward(self, input_tensor, hidden_state=None):
        """

        Parameters
        ----------
        input_tensor: todo
            5-D Tensor either of shape (t, b, c, h, w) or (b, t, c, h, w)
        hidden_state: todo
            None. todo implement stateful

        Returns
        -------
        last_state_list, layer_output
        """
        if not self.batch_first:
            # (t, b, c, h, w) -> (b, t, c, h, w)
            input_tensor = input_tensor.permute(1, 0, 2, 3, 4)

        b, _, _, h, w = input_tensor.size()

        # Implement stateful ConvLSTM
        if hidden_state is not None:
            raise NotImplementedError()
        else:
            # Since the init is done in forward. Can send image size here
            hidden_state = self._init_hidden(batch_size=b,
                                             image_size=(h, w))

        layer_output_list = []
        last_state_list = []

        seq_len = input_tensor.size(1)
        cur_layer_input = input_tensor

        for layer_idx in range(self.num_layers):

            h, c = hidden_state[layer_idx]
            output_inner = []
            for t in range(seq_len):
                h, c = self.cell_list[layer_idx](input_tensor=cur_layer_input[:, t, :, :, :],
                                                 cur_state=[h, c])
                output_inner.append(h)

            layer_output = torch.stack(output_inner, dim=1)
            cur_layer_input = layer_output

            layer_output_list.append(layer_output)
            last_state_list.append([h, c])

        if not self.return_all_layers:
            layer_output_list = layer_output_list[-1:]
            last_state_list = last_state_list[-1:]

        return layer_output_list, last_state_list

    def _init_hidden(self, batch_size, image_size):
        init_states = []
        for i in range(self.num_layers):
            init_states.append(self.cell_list[i].init_hidden(batch_size, image_size))
        return init_states

    @staticmethod
    def _check_kernel_size_consistency(kernel_size):
        if not (isinstance(kernel_size, tuple) or
                (isinstance(kernel_size, list) and all([isinstance(elem, tuple) for elem in kernel_size]))):
            raise ValueError('`kernel_size` must be tuple or list of tuples')

    @staticmethod
    def _extend_for_multilayer(param, num_layers):
        if not isinstance(param, list):
            param = [param] * num_layers
        return param


def numpy_init(module, seed):
    r = np.random.default_rng(seed)
    with torch.no_grad():
        for name, p in module.named_parameters():
            fan = p[0].numel() if p.dim() > 1 else 8
            p.copy_(torch.from_numpy((r.standard_normal(tuple(p.shape)) / np.sqrt(fan)).astype(np.float32)))
    return module


# moving blobs: (batch, time, channel, 6, 6)
g = np.random.default_rng(0)
T, H, W = 5, 6, 6
yy, xx = np.mgrid[0:H, 0:W]
frames = np.zeros((8, T, 1, H, W), np.float32)
for b in range(8):
    y0, x0, vy, vx = g.uniform(1, 4), g.uniform(1, 4), g.uniform(-0.6, 0.6), g.uniform(-0.6, 0.6)
    for t in range(T):
        frames[b, t, 0] = np.exp(-((yy - y0 - vy * t) ** 2 + (xx - x0 - vx * t) ** 2) / 2.0)
frames = torch.from_numpy(frames)

try:
    ConvLSTM(1, 4, 3, 1)
except ValueError as e:
    print("ValueError:", e)
try:
    ConvLSTM(1, [4, 6], [(3, 3)], 2)
except ValueError as e:
    print("ValueError:", e)

model = numpy_init(ConvLSTM(input_dim=1, hidden_dim=[4, 6], kernel_size=(3, 3), num_layers=2,
                            batch_first=True, bias=True, return_all_layers=True), 0)
print(model)
layer_outputs, last_states = model(frames[:, :4])
print("outputs", len(layer_outputs), [tuple(o.shape) for o in layer_outputs], len(last_states))
h = last_states[-1][0]
print("h", tuple(h.shape), f"{h.sum().item():.5f}", f"{last_states[0][1].abs().sum().item():.5f}",
      torch.equal(layer_outputs[1][:, -1], h))
try:
    model(frames[:, :4], hidden_state=last_states)
except NotImplementedError:
    print("NotImplementedError")

seq_first = numpy_init(ConvLSTM(1, 4, (3, 3), 1, batch_first=False, return_all_layers=False), 0)
out, st = seq_first(frames[:, :4].transpose(0, 1))
print("seq first", len(out), tuple(out[0].shape), f"{out[0].mean().item():.6f}",
      torch.allclose(out[0], layer_outputs[0], atol=1e-6))


class NextFrame(nn.Module):
    def __init__(self):
        super().__init__()
        self.convlstm = ConvLSTM(1, [4, 6], (3, 3), 2, batch_first=True)
        self.head = nn.Conv2d(6, 1, kernel_size=1)

    def forward(self, x):
        _, last_states = self.convlstm(x)
        return torch.sigmoid(self.head(last_states[0][0]))


net = numpy_init(NextFrame(), 1)
optimizer = torch.optim.Adam(net.parameters(), lr=1e-2)
criterion = nn.MSELoss()


def train_step(x, y):
    optimizer.zero_grad()
    loss = criterion(net(x), y)
    loss.backward()
    optimizer.step()
    return loss


for epoch in range(3):
    for i in range(0, 8, 4):
        loss = train_step(frames[i:i + 4, :4], frames[i:i + 4, 4])
    print(f"epoch {epoch} loss {loss.item():.6f}")
print("grad", f"{net.convlstm.cell_list[0].conv.weight.grad.abs().sum().item():.6f}",
      f"{net.head.bias.grad.item():.6f}")

# the training step under torch.compile against the same step run eagerly
batches = [(frames[i:i + 4, :4], frames[i:i + 4, 4]) for i in (4, 0, 4)]
state, opt_state = copy.deepcopy(net.state_dict()), copy.deepcopy(optimizer.state_dict())
eager = [train_step(*b).item() for b in batches]
after = copy.deepcopy(net.state_dict())
net.load_state_dict(state)
optimizer.load_state_dict(opt_state)
cstep = torch.compile(train_step)
compiled = [cstep(*b).item() for b in batches]
print("compiled losses", [f"{v:.6f}" for v in compiled])
print("compiled == eager:", all(abs(a - b) <= 1e-4 * max(1.0, abs(b)) for a, b in zip(compiled, eager)),
      all(torch.allclose(net.state_dict()[k], after[k], rtol=1e-4, atol=1e-5) for k in after))
