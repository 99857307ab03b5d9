# Graph WaveNet the way nnzhan/Graph-WaveNet (model.py, engine.py, util.py,
# train.py, generate_training_data.py) writes it: nconv as
# torch.einsum('ncvl,vw->ncwl', (x, A)).contiguous(), gcn over the supports
# list with order-2 powers and torch.cat on channels into a 1x1 Conv2d
# "linear", the adaptive adjacency F.softmax(F.relu(torch.mm(self.nodevec1,
# self.nodevec2)), dim=1) from nn.Parameter(torch.randn(num_nodes, 10).to(
# device), requires_grad=True).to(device) (the --randomadj init, without
# torch.svd), dilated temporal convolutions with kernel_size=(1, 2) and
# growing dilation, the gated activation torch.tanh(filter) *
# torch.sigmoid(gate), skip connections cropped with skip[:, :, :,
# -s.size(3):] inside a bare try / except (the first skip is the int 0),
# residuals x + residual[:, :, :, -x.size(3):], BatchNorm2d, the receptive
# field padding nn.functional.pad(input, (self.receptive_field - in_len, 0,
# 0, 0)); the trainer (Adam with weight decay, the input padded by (1, 0, 0,
# 0), output.transpose(1, 3), clip_grad_norm_(..., 5)); util's masked MAE /
# MAPE / RMSE with null_val=0.0 (mask /= torch.mean(mask), torch.where over
# torch.isnan), StandardScaler with numpy float64 mean / std, the
# DataLoader padding with the last sample and shuffling with
# np.random.permutation, torch.Tensor(x) of float64 arrays, asym_adj's
# doubletransition supports (np.matrix, as .todense() makes them) through
# torch.tensor, the per-epoch torch.save of the state_dict named by the
# validation loss and the best epoch reloaded by np.argmin, and the test
# loop's per-horizon metrics. The repo builds gate_convs, residual_convs and
# skip_convs as nn.Conv1d(kernel_size=(1, 2)) / (1, 1) over 4-D inputs,
# which torch 2 refuses in forward (issues #34, #47): the program shows that
# refusal, then uses the fix users apply there (nn.Conv2d). Changes for a
# CPU test: scipy.sparse replaced by numpy in asym_adj, 5 sensors, nhid 4,
# two WaveNet blocks instead of four and six-step windows (a receptive field
# of 7: the input padded by one step; the test loop's range(12) horizons
# read args.seq_length),
# synthetic speeds (with zeros for missing readings) from numpy, dropout 0,
# two epochs; then one training step under torch.compile against the same
# step eagerly.
import copy
import os

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim


# ---------------------------------------------------------------- model.py
class nconv(nn.Module):
    def __init__(self):
        super(nconv, self).__init__()

    def forward(self, x, A):
        x = torch.einsum('ncvl,vw->ncwl', (x, A))
        return x.contiguous()


class linear(nn.Module):
    def __init__(self, c_in, c_out):
        super(linear, self).__init__()
        self.mlp = torch.nn.Conv2d(c_in, c_out, kernel_size=(1, 1), padding=(0, 0), stride=(1, 1), bias=True)

    def forward(self, x):
        return self.mlp(x)


class gcn(nn.Module):
    def __init__(self, c_in, c_out, dropout, support_len=3, order=2):
        super(gcn, self).__init__()
        self.nconv = nconv()
        c_in = (order * support_len + 1) * c_in
        self.mlp = linear(c_in, c_out)
        self.dropout = dropout
        self.order = order

    def forward(self, x, support):
        out = [x]
        for a in support:
            x1 = self.nconv(x, a)
            out.append(x1)
            for k in range(2, self.order + 1):
                x2 = self.nconv(x1, a)
                out.append(x2)
                x1 = x2

        h = torch.cat(out, dim=1)
        h = self.mlp(h)
        h = F.dropout(h, self.dropout, training=self.training)
        return h


class gwnet(nn.Module):
    def __init__(self, device, num_nodes, dropout=0.3, supports=None, gcn_bool=True, addaptadj=True, aptinit=None,
                 in_dim=2, out_dim=12, residual_channels=32, dilation_channels=32, skip_channels=256,
                 end_channels=512, kernel_size=2, blocks=4, layers=2):
        super(gwnet, self).__init__()
        self.dropout = dropout
        self.blocks = blocks
        self.layers = layers
        self.gcn_bool = gcn_bool
        self.addaptadj = addaptadj

        self.filter_convs = nn.ModuleList()
        self.gate_convs = nn.ModuleList()
        self.residual_convs = nn.ModuleList()
        self.skip_convs = nn.ModuleList()
        self.bn = nn.ModuleList()
        self.gconv = nn.ModuleList()

        self.start_conv = nn.Conv2d(in_channels=in_dim,
                                    out_channels=residual_channels,
                                    kernel_size=(1, 1))
        self.supports = supports

        receptive_field = 1

        self.supports_len = 0
        if supports is not None:
            self.supports_len += len(supports)

        if gcn_bool and addaptadj:
            if aptinit is None:
                if supports is None:
                    self.supports = []
                self.nodevec1 = nn.Parameter(torch.randn(num_nodes, 10).to(device), requires_grad=True).to(device)
                self.nodevec2 = nn.Parameter(torch.randn(10, num_nodes).to(device), requires_grad=True).to(device)
                self.supports_len += 1
            else:
                if supports is None:
                    self.supports = []
                m, p, n = torch.svd(aptinit)
                initemb1 = torch.mm(m[:, :10], torch.diag(p[:10] ** 0.5))
                initemb2 = torch.mm(torch.diag(p[:10] ** 0.5), n[:, :10].t())
                self.nodevec1 = nn.Parameter(initemb1, requires_grad=True).to(device)
                self.nodevec2 = nn.Parameter(initemb2, requires_grad=True).to(device)
                self.supports_len += 1

        for b in range(blocks):
            additional_scope = kernel_size - 1
            new_dilation = 1
            for i in range(layers):
                # dilated convolutions
                self.filter_convs.append(nn.Conv2d(in_channels=residual_channels,
                                                   out_channels=dilation_channels,
                                                   kernel_size=(1, kernel_size), dilation=new_dilation))

                # (nn.Conv1d in the repo: see the header)
                self.gate_convs.append(nn.Conv2d(in_channels=residual_channels,
                                                 out_channels=dilation_channels,
                                                 kernel_size=(1, kernel_size), dilation=new_dilation))

                # 1x1 convolution for residual connection
                self.residual_convs.append(nn.Conv2d(in_channels=dilation_channels,
                                                     out_channels=residual_channels,
                                                     kernel_size=(1, 1)))

                # 1x1 convolution for skip connection
                self.skip_convs.append(nn.Conv2d(in_channels=dilation_channels,
                                                 out_channels=skip_channels,
                                                 kernel_size=(1, 1)))
                self.bn.append(nn.BatchNorm2d(residual_channels))
                new_dilation *= 2
                receptive_field += additional_scope
                additional_scope *= 2
                if self.gcn_bool:
                    self.gconv.append(gcn(dilation_channels, residual_channels, dropout,
                                          support_len=self.supports_len))

        self.end_conv_1 = nn.Conv2d(in_channels=skip_channels,
                                    out_channels=end_channels,
                                    kernel_size=(1, 1),
                                    bias=True)

        self.end_conv_2 = nn.Conv2d(in_channels=end_channels,
                                    out_channels=out_dim,
                                    kernel_size=(1, 1),
                                    bias=True)

        self.receptive_field = receptive_field

    def forward(self, input):
        in_len = input.size(3)
        if in_len < self.receptive_field:
            x = nn.functional.pad(input, (self.receptive_field - in_len, 0, 0, 0))
        else:
            x = input
        x = self.start_conv(x)
        skip = 0

        # calculate the current adaptive adj matrix once per iteration
        new_supports = None
        if self.gcn_bool and self.addaptadj and self.supports is not None:
            adp = F.softmax(F.relu(torch.mm(self.nodevec1, self.nodevec2)), dim=1)
            new_supports = self.supports + [adp]

        # WaveNet layers
        for i in range(self.blocks * self.layers):

            #            |----------------------------------------|     *residual*
            #            |                                        |
            #            |    |-- conv -- tanh --|                |
            # -> dilate -|----|                  * ----|-- 1x1 -- + -->	*input*
            #                 |-- conv -- sigm --|     |
            #                                         1x1
            #                                          |
            # ---------------------------------------> + ------------->	*skip*

            # (dilation, init_dilation) = self.dilations[i]

            # residual = dilation_func(x, dilation, init_dilation, i)
            residual = x
            # dilated convolution
            filter = self.filter_convs[i](residual)
            filter = torch.tanh(filter)
            gate = self.gate_convs[i](residual)
            gate = torch.sigmoid(gate)
            x = filter * gate

            # parametrized skip connection

            s = x
            s = self.skip_convs[i](s)
            try:
                skip = skip[:, :, :, -s.size(3):]
            except:  # noqa: E722
                skip = 0
            skip = s + skip

            if self.gcn_bool and self.supports is not None:
                if self.addaptadj:
                    x = self.gconv[i](x, new_supports)
                else:
                    x = self.gconv[i](x, self.supports)
            else:
                x = self.residual_convs[i](x)

            x = x + residual[:, :, :, -x.size(3):]

            x = self.bn[i](x)

        x = F.relu(skip)
        x = F.relu(self.end_conv_1(x))
        x = self.end_conv_2(x)
        return x


# ---------------------------------------------------------------- util.py
class DataLoader(object):
    def __init__(self, xs, ys, batch_size, pad_with_last_sample=True):
        """
        :param xs:
        :param ys:
        :param batch_size:
        :param pad_with_last_sample: pad with the last sample to make number of samples divisible to batch_size.
        """
        self.batch_size = batch_size
        self.current_ind = 0
        if pad_with_last_sample:
            num_padding = (batch_size - (len(xs) % batch_size)) % batch_size
            x_padding = np.repeat(xs[-1:], num_padding, axis=0)
            y_padding = np.repeat(ys[-1:], num_padding, axis=0)
            xs = np.concatenate([xs, x_padding], axis=0)
            ys = np.concatenate([ys, y_padding], axis=0)
        self.size = len(xs)
        self.num_batch = int(self.size // self.batch_size)
        self.xs = xs
        self.ys = ys

    def shuffle(self):
        permutation = np.random.permutation(self.size)
        xs, ys = self.xs[permutation], self.ys[permutation]
        self.xs = xs
        self.ys = ys

    def get_iterator(self):
        self.current_ind = 0

        def _wrapper():
            while self.current_ind < self.num_batch:
                start_ind = self.batch_size * self.current_ind
                end_ind = min(self.size, self.batch_size * (self.current_ind + 1))
                x_i = self.xs[start_ind: end_ind, ...]
                y_i = self.ys[start_ind: end_ind, ...]
                yield (x_i, y_i)
                self.current_ind += 1

        return _wrapper()


class StandardScaler():
    """
    Standard the input
    """

    def __init__(self, mean, std):
        self.mean = mean
        self.std = std

    def transform(self, data):
        return (data - self.mean) / self.std

    def inverse_transform(self, data):
        return (data * self.std) + self.mean


def asym_adj(adj):
    # (scipy.sparse in the repo: coo_matrix, diags, .dot, .todense())
    adj = np.asarray(adj)
    rowsum = np.array(adj.sum(1)).flatten()
    with np.errstate(divide="ignore"):
        d_inv = np.power(rowsum, -1).flatten()
    d_inv[np.isinf(d_inv)] = 0.
    d_mat = np.diag(d_inv)
    return np.asmatrix(d_mat.dot(adj).astype(np.float32))


def load_adj(adj_mx, adjtype):
    sensor_ids = [str(k) for k in range(len(adj_mx))]
    sensor_id_to_ind = {s: k for k, s in enumerate(sensor_ids)}
    if adjtype == "transition":
        adj = [asym_adj(adj_mx)]
    elif adjtype == "doubletransition":
        adj = [asym_adj(adj_mx), asym_adj(np.transpose(adj_mx))]
    elif adjtype == "identity":
        adj = [np.diag(np.ones(adj_mx.shape[0])).astype(np.float32)]
    else:
        error = 0
        assert error, "adj type not defined"
    return sensor_ids, sensor_id_to_ind, adj


def load_dataset(dataset_dir, batch_size, valid_batch_size=None, test_batch_size=None):
    data = {}
    for category in ['train', 'val', 'test']:
        cat_data = np.load(os.path.join(dataset_dir, category + '.npz'))
        data['x_' + category] = cat_data['x']
        data['y_' + category] = cat_data['y']
    scaler = StandardScaler(mean=data['x_train'][..., 0].mean(), std=data['x_train'][..., 0].std())
    # Data format
    for category in ['train', 'val', 'test']:
        data['x_' + category][..., 0] = scaler.transform(data['x_' + category][..., 0])
    data['train_loader'] = DataLoader(data['x_train'], data['y_train'], batch_size)
    data['val_loader'] = DataLoader(data['x_val'], data['y_val'], valid_batch_size)
    data['test_loader'] = DataLoader(data['x_test'], data['y_test'], test_batch_size)
    data['scaler'] = scaler
    return data


def masked_mse(preds, labels, null_val=np.nan):
    if np.isnan(null_val):
        mask = ~torch.isnan(labels)
    else:
        mask = (labels != null_val)
    mask = mask.float()
    mask /= torch.mean((mask))
    mask = torch.where(torch.isnan(mask), torch.zeros_like(mask), mask)
    loss = (preds - labels) ** 2
    loss = loss * mask
    loss = torch.where(torch.isnan(loss), torch.zeros_like(loss), loss)
    return torch.mean(loss)


def masked_rmse(preds, labels, null_val=np.nan):
    return torch.sqrt(masked_mse(preds=preds, labels=labels, null_val=null_val))


def masked_mae(preds, labels, null_val=np.nan):
    if np.isnan(null_val):
        mask = ~torch.isnan(labels)
    else:
        mask = (labels != null_val)
    mask = mask.float()
    mask /= torch.mean((mask))
    mask = torch.where(torch.isnan(mask), torch.zeros_like(mask), mask)
    loss = torch.abs(preds - labels)
    loss = loss * mask
    loss = torch.where(torch.isnan(loss), torch.zeros_like(loss), loss)
    return torch.mean(loss)


def masked_mape(preds, labels, null_val=np.nan):
    if np.isnan(null_val):
        mask = ~torch.isnan(labels)
    else:
        mask = (labels != null_val)
    mask = mask.float()
    mask /= torch.mean((mask))
    mask = torch.where(torch.isnan(mask), torch.zeros_like(mask), mask)
    loss = torch.abs(preds - labels) / labels
    loss = loss * mask
    loss = torch.where(torch.isnan(loss), torch.zeros_like(loss), loss)
    return torch.mean(loss)


def metric(pred, real):
    mae = masked_mae(pred, real, 0.0).item()
    mape = masked_mape(pred, real, 0.0).item()
    rmse = masked_rmse(pred, real, 0.0).item()
    return mae, mape, rmse


# ---------------------------------------------------------------- engine.py
class trainer():
    def __init__(self, scaler, in_dim, seq_length, num_nodes, nhid, dropout, lrate, wdecay, device, supports,
                 gcn_bool, addaptadj, aptinit):
        self.model = gwnet(device, num_nodes, dropout, supports=supports, gcn_bool=gcn_bool, addaptadj=addaptadj,
                           aptinit=aptinit, in_dim=in_dim, out_dim=seq_length, residual_channels=nhid,
                           dilation_channels=nhid, skip_channels=nhid * 8, end_channels=nhid * 16,
                           blocks=2)
        self.model.to(device)
        self.optimizer = optim.Adam(self.model.parameters(), lr=lrate, weight_decay=wdecay)
        self.loss = masked_mae
        self.scaler = scaler
        self.clip = 5

    def train(self, input, real_val):
        self.model.train()
        self.optimizer.zero_grad()
        input = nn.functional.pad(input, (1, 0, 0, 0))
        output = self.model(input)
        output = output.transpose(1, 3)
        # output = [batch_size,12,num_nodes,1]
        real = torch.unsqueeze(real_val, dim=1)
        predict = self.scaler.inverse_transform(output)

        loss = self.loss(predict, real, 0.0)
        loss.backward()
        if self.clip is not None:
            torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.clip)
        self.optimizer.step()
        mape = masked_mape(predict, real, 0.0).item()
        rmse = masked_rmse(predict, real, 0.0).item()
        return loss.item(), mape, rmse

    def eval(self, input, real_val):
        self.model.eval()
        input = nn.functional.pad(input, (1, 0, 0, 0))
        output = self.model(input)
        output = output.transpose(1, 3)
        # output = [batch_size,12,num_nodes,1]
        real = torch.unsqueeze(real_val, dim=1)
        predict = self.scaler.inverse_transform(output)
        loss = self.loss(predict, real, 0.0)
        mape = masked_mape(predict, real, 0.0).item()
        rmse = masked_rmse(predict, real, 0.0).item()
        return loss.item(), mape, rmse


# ---------------------------------------------------------------- generate_training_data.py
def generate_graph_seq2seq_io_data(df, x_offsets, y_offsets, add_time_in_day=True):
    num_samples, num_nodes = df.shape
    data = np.expand_dims(df, axis=-1)
    feature_list = [data]
    if add_time_in_day:
        time_ind = (np.arange(num_samples) % 288) / 288.0
        time_in_day = np.tile(time_ind, [1, num_nodes, 1]).transpose((2, 1, 0))
        feature_list.append(time_in_day)
    data = np.concatenate(feature_list, axis=-1)
    x, y = [], []
    min_t = abs(min(x_offsets))
    max_t = abs(num_samples - abs(max(y_offsets)))  # Exclusive
    for t in range(min_t, max_t):  # t is the index of the last observation.
        x.append(data[t + x_offsets, ...])
        y.append(data[t + y_offsets, ...])
    x = np.stack(x, axis=0)
    y = np.stack(y, axis=0)
    return x, y


class Args:
    device = "cpu"
    adjtype = "doubletransition"
    gcn_bool = True
    aptonly = False
    addaptadj = True
    randomadj = True
    seq_length = 6
    nhid = 4
    in_dim = 2
    num_nodes = 5
    batch_size = 4
    learning_rate = 0.001
    dropout = 0.0
    weight_decay = 0.0001
    epochs = 2
    print_every = 2
    save = "./garage/metr"
    data = "."


def fmt(t, n=4):
    return [f"{v:.4f}" for v in t.reshape(-1)[:n].tolist()]


def load_numpy(model, seed):
    r = np.random.default_rng(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.startswith("bn."):
                base = 1.0 if name.endswith("weight") else 0.0
                p.copy_(torch.from_numpy((base + r.normal(0, 0.1, tuple(p.shape))).astype(np.float32)))
            else:
                fan_in = int(np.prod(p.shape[1:])) if p.dim() > 1 else 4
                p.copy_(torch.from_numpy(r.normal(0, 1 / np.sqrt(fan_in), tuple(p.shape)).astype(np.float32)))


# synthetic speeds: daily-ish waves per sensor, zeros where a reading is missing
args = Args()
rng = np.random.default_rng(0)
n_steps = 56
t = np.arange(n_steps)[:, None]
speeds = 55 + 10 * np.sin(t / 6.0 + np.arange(args.num_nodes)[None] * 0.7) + rng.normal(0, 2, (n_steps, args.num_nodes))
speeds[rng.random((n_steps, args.num_nodes)) < 0.05] = 0.0
x_offsets = np.sort(np.concatenate((np.arange(-(args.seq_length - 1), 1, 1),)))
y_offsets = np.sort(np.arange(1, args.seq_length + 1, 1))
x, y = generate_graph_seq2seq_io_data(speeds, x_offsets=x_offsets, y_offsets=y_offsets)
num_samples = x.shape[0]
num_test = round(num_samples * 0.2)
num_train = round(num_samples * 0.7)
num_val = num_samples - num_test - num_train
x_train, y_train = x[:num_train], y[:num_train]
x_val, y_val = x[num_train: num_train + num_val], y[num_train: num_train + num_val]
x_test, y_test = x[-num_test:], y[-num_test:]
for cat in ["train", "val", "test"]:
    _x, _y = locals()["x_" + cat], locals()["y_" + cat]
    print(cat, "x: ", _x.shape, "y:", _y.shape)
    np.savez_compressed(os.path.join(args.data, "%s.npz" % cat), x=_x, y=_y,
                        x_offsets=x_offsets.reshape(list(x_offsets.shape) + [1]),
                        y_offsets=y_offsets.reshape(list(y_offsets.shape) + [1]))
adj_mx = (rng.random((args.num_nodes, args.num_nodes)) < 0.5).astype(np.float32) * rng.random((args.num_nodes, args.num_nodes))
np.fill_diagonal(adj_mx, 1.0)
adj_mx[3, :] = 0.0

# the repo's gate convolution, as torch 2 runs it
gate_conv = nn.Conv1d(in_channels=4, out_channels=4, kernel_size=(1, 2), dilation=2)
print("repo gate_conv", gate_conv, tuple(gate_conv.weight.shape))
try:
    gate_conv(torch.zeros(2, 4, 5, 13))
except RuntimeError as e:
    print("RuntimeError:", e)

# ---------------------------------------------------------------- train.py
np.random.seed(0)
torch.manual_seed(0)
device = torch.device(args.device)
sensor_ids, sensor_id_to_ind, adj_mx = load_adj(adj_mx, args.adjtype)
dataloader = load_dataset(args.data, args.batch_size, args.batch_size, args.batch_size)
scaler = dataloader['scaler']
supports = [torch.tensor(i).to(device) for i in adj_mx]
print("supports", type(adj_mx[0]).__name__, [tuple(s.shape) for s in supports], supports[0].dtype,
      fmt(supports[0][0], 5), fmt(supports[1][:, 3], 5))
print("scaler", type(scaler.mean).__name__, f"{scaler.mean:.4f}", f"{scaler.std:.4f}",
      dataloader['train_loader'].size, dataloader['train_loader'].num_batch, dataloader['val_loader'].size)

if args.randomadj:
    adjinit = None
else:
    adjinit = supports[0]

if args.aptonly:
    supports = None

engine = trainer(scaler, args.in_dim, args.seq_length, args.num_nodes, args.nhid, args.dropout,
                 args.learning_rate, args.weight_decay, device, supports, args.gcn_bool, args.addaptadj,
                 adjinit)
print("nodevec randn", f"{engine.model.nodevec1.std().item():.1f}")
load_numpy(engine.model, 1)
print("receptive field", engine.model.receptive_field, "supports_len", engine.model.supports_len,
      "params", sum(p.numel() for p in engine.model.parameters()),
      [n for n, _ in engine.model.named_parameters()][:3], type(engine.model.nodevec1).__name__)

# the pieces on their own
nc = nconv()
xa = torch.arange(24.0).view(1, 2, 3, 4)
A = torch.tensor([[0.5, 0.5, 0.0], [0.0, 1.0, 0.0], [0.2, 0.3, 0.5]])
print("nconv", nc(xa, A)[0, 1, :, 0].tolist(), nc(xa, A).is_contiguous())
print("masked metrics", [f"{v:.4f}" for v in metric(torch.tensor([[1.0, 2.0], [3.0, 4.0]]), torch.tensor([[0.0, 2.5], [3.0, 0.0]]))],
      [f"{v:.4f}" for v in metric(torch.ones(2, 2), torch.zeros(2, 2))],
      f"{masked_mae(torch.ones(3), torch.tensor([1.0, float('nan'), 3.0])).item():.4f}")

os.makedirs(os.path.dirname(args.save), exist_ok=True)
print("start training...", flush=True)
his_loss = []
for i in range(1, args.epochs + 1):
    train_loss = []
    train_mape = []
    train_rmse = []
    dataloader['train_loader'].shuffle()
    for iter, (x, y) in enumerate(dataloader['train_loader'].get_iterator()):
        trainx = torch.Tensor(x).to(device)
        trainx = trainx.transpose(1, 3)
        trainy = torch.Tensor(y).to(device)
        trainy = trainy.transpose(1, 3)
        metrics = engine.train(trainx, trainy[:, 0, :, :])
        train_loss.append(metrics[0])
        train_mape.append(metrics[1])
        train_rmse.append(metrics[2])
        if iter % args.print_every == 0:
            log = 'Iter: {:03d}, Train Loss: {:.4f}, Train MAPE: {:.4f}, Train RMSE: {:.4f}'
            print(log.format(iter, train_loss[-1], train_mape[-1], train_rmse[-1]), flush=True)
    # validation
    valid_loss = []
    valid_mape = []
    valid_rmse = []

    for iter, (x, y) in enumerate(dataloader['val_loader'].get_iterator()):
        testx = torch.Tensor(x).to(device)
        testx = testx.transpose(1, 3)
        testy = torch.Tensor(y).to(device)
        testy = testy.transpose(1, 3)
        metrics = engine.eval(testx, testy[:, 0, :, :])
        valid_loss.append(metrics[0])
        valid_mape.append(metrics[1])
        valid_rmse.append(metrics[2])
    mtrain_loss = np.mean(train_loss)
    mtrain_mape = np.mean(train_mape)
    mtrain_rmse = np.mean(train_rmse)

    mvalid_loss = np.mean(valid_loss)
    mvalid_mape = np.mean(valid_mape)
    mvalid_rmse = np.mean(valid_rmse)
    his_loss.append(mvalid_loss)

    log = 'Epoch: {:03d}, Train Loss: {:.4f}, Train MAPE: {:.4f}, Train RMSE: {:.4f}, Valid Loss: {:.4f}, Valid MAPE: {:.4f}, Valid RMSE: {:.4f}'
    print(log.format(i, mtrain_loss, mtrain_mape, mtrain_rmse, mvalid_loss, mvalid_mape, mvalid_rmse), flush=True)
    torch.save(engine.model.state_dict(), args.save + "_epoch_" + str(i) + "_" + str(round(mvalid_loss, 2)) + ".pth")

# testing
bestid = np.argmin(his_loss)
engine.model.load_state_dict(torch.load(args.save + "_epoch_" + str(bestid + 1) + "_" + str(round(his_loss[bestid], 2)) + ".pth"))
print("best epoch", bestid + 1, sorted(os.listdir(os.path.dirname(args.save))))

outputs = []
realy = torch.Tensor(dataloader['y_test']).to(device)
realy = realy.transpose(1, 3)[:, 0, :, :]

for iter, (x, y) in enumerate(dataloader['test_loader'].get_iterator()):
    testx = torch.Tensor(x).to(device)
    testx = testx.transpose(1, 3)
    with torch.no_grad():
        preds = engine.model(testx).transpose(1, 3)
    outputs.append(preds.squeeze())

yhat = torch.cat(outputs, dim=0)
yhat = yhat[:realy.size(0), ...]

print("Training finished")
print("The valid loss on best model is", str(round(his_loss[bestid], 4)))

amae = []
amape = []
armse = []
for i in range(args.seq_length):
    pred = scaler.inverse_transform(yhat[:, :, i])
    real = realy[:, :, i]
    metrics = metric(pred, real)
    if i % 2 == 0:
        log = 'Evaluate best model on test data for horizon {:d}, Test MAE: {:.4f}, Test MAPE: {:.4f}, Test RMSE: {:.4f}'
        print(log.format(i + 1, metrics[0], metrics[1], metrics[2]))
    amae.append(metrics[0])
    amape.append(metrics[1])
    armse.append(metrics[2])

log = 'On average over 6 horizons, Test MAE: {:.4f}, Test MAPE: {:.4f}, Test RMSE: {:.4f}'
print(log.format(np.mean(amae), np.mean(amape), np.mean(armse)))
print("adaptive adjacency", fmt(F.softmax(F.relu(torch.mm(engine.model.nodevec1, engine.model.nodevec2)), dim=1)[0], 5))
print("params", fmt(engine.model.nodevec1), fmt(engine.model.gconv[3].mlp.mlp.weight), fmt(engine.model.bn[-1].running_var))


# one training step under torch.compile against the same step eagerly
def train_step(input, real_val):
    engine.model.train()
    engine.optimizer.zero_grad()
    input = nn.functional.pad(input, (1, 0, 0, 0))
    output = engine.model(input).transpose(1, 3)
    predict = engine.scaler.inverse_transform(output)
    loss = engine.loss(predict, torch.unsqueeze(real_val, dim=1), 0.0)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(engine.model.parameters(), engine.clip)
    engine.optimizer.step()
    return loss


x, y = next(dataloader['train_loader'].get_iterator())
bx, by = torch.Tensor(x).transpose(1, 3), torch.Tensor(y).transpose(1, 3)[:, 0, :, :]
state, opt_state = copy.deepcopy(engine.model.state_dict()), copy.deepcopy(engine.optimizer.state_dict())
eager = [train_step(bx, by).item() for _ in range(2)]
after = {k: v.clone() for k, v in engine.model.state_dict().items()}
engine.model.load_state_dict(state)
engine.optimizer.load_state_dict(opt_state)
cstep = torch.compile(train_step)
compiled = [cstep(bx, by).item() for _ in range(2)]
print("compiled losses", [f"{v:.5f}" for v in compiled])
print("compiled == eager:", all(abs(a - b) <= 1e-4 * max(1.0, abs(b)) for a, b in zip(compiled, eager)),
      all(torch.allclose(engine.model.state_dict()[k].float(), after[k].float(), rtol=1e-4, atol=1e-5) for k in after))
