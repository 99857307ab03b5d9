# DeepSpeech2 the way SeanNaren/deepspeech.pytorch writes it
# (deepspeech_pytorch/model.py, loader/data_loader.py, decoder.py):
# SequenceWise (view(t * n, -1) around a module, its own __repr__), MaskConv
# (torch.BoolTensor(x.size()).fill_(0), mask[i].narrow(2, length, ...).fill_(1)
# per length.item(), x.masked_fill(mask, 0) after every module), the Conv2d
# stack with BatchNorm2d and nn.Hardtanh(0, 20, inplace=True), BatchRNN
# (SequenceWise(nn.BatchNorm1d), nn.utils.rnn.pack_padded_sequence(...,
# enforce_sorted=False) / pad_packed_sequence around a bidirectional LSTM,
# the directions summed by x.view(x.size(0), x.size(1), 2, -1).sum(2).view(...),
# the hidden states passed per layer), Lookahead (depthwise Conv1d after
# F.pad(x, pad=(0, context - 1), value=0), for the unidirectional model),
# InferenceBatchSoftmax, get_seq_lens over self.conv.modules() with
# type(m) == nn.modules.conv.Conv2d and // stride, the rnn input size from
# the conv formula; the spectrogram parser (n_fft from the sample rate and
# window size, log1p of the magnitude, mean / std normalization in place),
# SpectrogramDataset, AudioDataLoader (collate_fn set after
# DataLoader.__init__) over DSRandomSampler's batches (a seeded
# torch.Generator's randperm of the bins, printed on an [rng] line),
# _collate_fn (sorted by length, inputs[x][0].narrow(1, 0, seq_length)
# .copy_(tensor), torch.FloatTensor / torch.IntTensor percentages and
# sizes), training_step (input_percentages.mul_(int(inputs.size(3))).int(),
# out.transpose(0, 1).log_softmax(-1), nn.CTCLoss(blank=0, reduction='sum',
# zero_infinity=True)), GreedyDecoder (torch.max(probs, 2), repetitions and
# blanks removed, offsets as an int tensor). A few Adam steps. Changes for a
# CPU test: torch.stft(..., window=torch.hann_window(n), return_complex=True)
# .abs() in place of librosa.stft / magphase, a tiny label set, few
# channels and hidden units, synthetic audio from numpy at a 400 Hz sample
# rate, no Lightning (the module is an nn.Module and the loop is written
# out); then one training step under torch.compile against the same step
# eagerly.
import copy
import math

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, Dataset, Sampler

LABELS = "_ABCDE "


class SequenceWise(nn.Module):
    def __init__(self, module):
        """
        Collapses input of dim T*N*H to (T*N)*H, and applies to a module.
        Allows handling of variable sequence lengths and minibatch sizes.
        :param module: Module to apply input to.
        """
        super(SequenceWise, self).__init__()
        self.module = module

    def forward(self, x):
        t, n = x.size(0), x.size(1)
        x = x.view(t * n, -1)
        x = self.module(x)
        x = x.view(t, n, -1)
        return x

    def __repr__(self):
        tmpstr = self.__class__.__name__ + ' (\n'
        tmpstr += self.module.__repr__()
        tmpstr += ')'
        return tmpstr


class MaskConv(nn.Module):
    def __init__(self, seq_module):
        """
        Adds padding to the output of the module based on the given lengths. This is to ensure that the
        results of the model do not change when batch sizes change during inference.
        Input needs to be in the shape of (BxCxDxT)
        :param seq_module: The sequential module containing the conv stack.
        """
        super(MaskConv, self).__init__()
        self.seq_module = seq_module

    def forward(self, x, lengths):
        """
        :param x: The input of size BxCxDxT
        :param lengths: The actual length of each sequence in the batch
        :return: Masked output from the module
        """
        for module in self.seq_module:
            x = module(x)
            mask = torch.BoolTensor(x.size()).fill_(0)
            if x.is_cuda:
                mask = mask.cuda()
            for i, length in enumerate(lengths):
                length = length.item()
                if (mask[i].size(2) - length) > 0:
                    mask[i].narrow(2, length, mask[i].size(2) - length).fill_(1)
            x = x.masked_fill(mask, 0)
        return x, lengths


class InferenceBatchSoftmax(nn.Module):
    def forward(self, input_):
        if not self.training:
            return F.softmax(input_, dim=-1)
        else:
            return input_


class BatchRNN(nn.Module):
    def __init__(self, input_size, hidden_size, rnn_type=nn.LSTM, bidirectional=False, batch_norm=True):
        super(BatchRNN, self).__init__()
        self.input_size = input_size
        self.hidden_size = hidden_size
        self.bidirectional = bidirectional
        self.batch_norm = SequenceWise(nn.BatchNorm1d(input_size)) if batch_norm else None
        self.rnn = rnn_type(input_size=input_size, hidden_size=hidden_size,
                            bidirectional=bidirectional, bias=True)
        self.num_directions = 2 if bidirectional else 1

    def flatten_parameters(self):
        self.rnn.flatten_parameters()

    def forward(self, x, output_lengths, h=None):
        if self.batch_norm is not None:
            x = self.batch_norm(x)
        x = nn.utils.rnn.pack_padded_sequence(x, output_lengths, enforce_sorted=False)
        x, h = self.rnn(x, h)
        x, _ = nn.utils.rnn.pad_packed_sequence(x)
        if self.bidirectional:
            x = x.view(x.size(0), x.size(1), 2, -1).sum(2).view(x.size(0), x.size(1), -1)  # (TxNxH*2) -> (TxNxH) by sum
        return x, h


class Lookahead(nn.Module):
    # Wang et al 2016 - Lookahead Convolution Layer for Unidirectional Recurrent Neural Networks
    # input shape - sequence, batch, feature - TxNxH
    # output shape - same as input
    def __init__(self, n_features, context):
        super(Lookahead, self).__init__()
        assert context > 0
        self.context = context
        self.n_features = n_features
        self.pad = (0, self.context - 1)
        self.conv = nn.Conv1d(
            self.n_features,
            self.n_features,
            kernel_size=self.context,
            stride=1,
            groups=self.n_features,
            padding=0,
            bias=False
        )

    def forward(self, x):
        x = x.transpose(0, 1).transpose(1, 2)
        x = F.pad(x, pad=self.pad, value=0)
        x = self.conv(x)
        x = x.transpose(1, 2).transpose(0, 1).contiguous()
        return x

    def __repr__(self):
        return self.__class__.__name__ + '(' \
               + 'n_features=' + str(self.n_features) \
               + ', context=' + str(self.context) + ')'


class DeepSpeech(nn.Module):
    def __init__(self, labels, hidden_size, hidden_layers, bidirectional, sample_rate, window_size,
                 lookahead_context=3, channels=4):
        super().__init__()
        self.bidirectional = bidirectional
        self.labels = labels
        num_classes = len(self.labels)

        self.conv = MaskConv(nn.Sequential(
            nn.Conv2d(1, channels, kernel_size=(41, 11), stride=(2, 2), padding=(20, 5)),
            nn.BatchNorm2d(channels),
            nn.Hardtanh(0, 20, inplace=True),
            nn.Conv2d(channels, channels, kernel_size=(21, 11), stride=(2, 1), padding=(10, 5)),
            nn.BatchNorm2d(channels),
            nn.Hardtanh(0, 20, inplace=True)
        ))
        # Based on above convolutions and spectrogram size using conv formula (W - F + 2P)/ S+1
        rnn_input_size = int(math.floor((sample_rate * window_size) / 2) + 1)
        rnn_input_size = int(math.floor(rnn_input_size + 2 * 20 - 41) / 2 + 1)
        rnn_input_size = int(math.floor(rnn_input_size + 2 * 10 - 21) / 2 + 1)
        rnn_input_size *= channels

        self.rnns = nn.Sequential(
            BatchRNN(
                input_size=rnn_input_size,
                hidden_size=hidden_size,
                rnn_type=nn.LSTM,
                bidirectional=self.bidirectional,
                batch_norm=False
            ),
            *(
                BatchRNN(
                    input_size=hidden_size,
                    hidden_size=hidden_size,
                    rnn_type=nn.LSTM,
                    bidirectional=self.bidirectional
                ) for x in range(hidden_layers - 1)
            )
        )

        self.lookahead = nn.Sequential(
            # consider adding batch norm?
            Lookahead(hidden_size, context=lookahead_context),
            nn.Hardtanh(0, 20, inplace=True)
        ) if not self.bidirectional else None

        fully_connected = nn.Sequential(
            nn.BatchNorm1d(hidden_size),
            nn.Linear(hidden_size, num_classes, bias=False)
        )
        self.fc = nn.Sequential(
            SequenceWise(fully_connected),
        )
        self.inference_softmax = InferenceBatchSoftmax()
        self.criterion = nn.CTCLoss(blank=self.labels.index('_'), reduction='sum', zero_infinity=True)

    def forward(self, x, lengths, hs=None):
        lengths = lengths.cpu().int()
        output_lengths = self.get_seq_lens(lengths)
        x, _ = self.conv(x, output_lengths)

        sizes = x.size()
        x = x.view(sizes[0], sizes[1] * sizes[2], sizes[3])  # Collapse feature dimension
        x = x.transpose(1, 2).transpose(0, 1).contiguous()  # TxNxH

        # if hs is None, create a list of None values corresponding to the number of rnn layers
        if hs is None:
            hs = [None] * len(self.rnns)

        new_hs = []
        for i, rnn in enumerate(self.rnns):
            x, h = rnn(x, output_lengths, hs[i])
            new_hs.append(h)

        if not self.bidirectional:  # no need for lookahead layer in bidirectional
            x = self.lookahead(x)

        x = self.fc(x)
        x = x.transpose(0, 1)
        # identity in training mode, softmax in eval mode
        x = self.inference_softmax(x)
        return x, output_lengths, new_hs

    def training_step(self, batch):
        inputs, targets, input_percentages, target_sizes = batch
        input_sizes = input_percentages.mul_(int(inputs.size(3))).int()
        out, output_sizes, hs = self(inputs, input_sizes)
        out = out.transpose(0, 1)  # TxNxH
        out = out.log_softmax(-1)

        loss = self.criterion(out, targets, output_sizes, target_sizes)
        return loss

    def get_seq_lens(self, input_length):
        """
        Given a 1D Tensor or Variable containing integer sequence lengths, return a 1D tensor or variable
        containing the size sequences that will be output by the network.
        :param input_length: 1D Tensor
        :return: 1D Tensor scaled by model
        """
        seq_len = input_length
        for m in self.conv.modules():
            if type(m) == nn.modules.conv.Conv2d:
                seq_len = ((seq_len + 2 * m.padding[1] - m.dilation[1] * (m.kernel_size[1] - 1) - 1) // m.stride[1] + 1)
        return seq_len.int()


# ---- loader/data_loader.py ----

class SpectrogramParser:
    def __init__(self, sample_rate, window_size, window_stride, normalize=True):
        self.sample_rate = sample_rate
        self.window_size = window_size
        self.window_stride = window_stride
        self.normalize = normalize

    def parse_audio(self, y):
        n_fft = int(self.sample_rate * self.window_size)
        win_length = n_fft
        hop_length = int(self.sample_rate * self.window_stride)
        # STFT
        D = torch.stft(y, n_fft=n_fft, hop_length=hop_length, win_length=win_length,
                       window=torch.hann_window(win_length), return_complex=True)
        spect = D.abs()
        # S = log(S+1)
        spect = torch.log1p(spect)
        if self.normalize:
            mean = spect.mean()
            std = spect.std()
            spect.add_(-mean)
            spect.div_(std)
        return spect


def _collate_fn(batch):
    def func(p):
        return p[0].size(1)

    batch = sorted(batch, key=lambda sample: sample[0].size(1), reverse=True)
    longest_sample = max(batch, key=func)[0]
    freq_size = longest_sample.size(0)
    minibatch_size = len(batch)
    max_seqlength = longest_sample.size(1)
    inputs = torch.zeros(minibatch_size, 1, freq_size, max_seqlength)
    input_percentages = torch.FloatTensor(minibatch_size)
    target_sizes = torch.IntTensor(minibatch_size)
    targets = []
    for x in range(minibatch_size):
        sample = batch[x]
        tensor = sample[0]
        target = sample[1]
        seq_length = tensor.size(1)
        inputs[x][0].narrow(1, 0, seq_length).copy_(tensor)
        input_percentages[x] = seq_length / float(max_seqlength)
        target_sizes[x] = len(target)
        targets.extend(target)
    targets = torch.tensor(targets, dtype=torch.long)
    return inputs, targets, input_percentages, target_sizes


class SpectrogramDataset(Dataset):
    def __init__(self, samples):
        self.ids = samples
        self.size = len(samples)

    def __getitem__(self, index):
        return self.ids[index]

    def __len__(self):
        return self.size


class AudioDataLoader(DataLoader):
    def __init__(self, *args, **kwargs):
        """
        Creates a data loader for AudioDatasets.
        """
        super(AudioDataLoader, self).__init__(*args, **kwargs)
        self.collate_fn = _collate_fn


class DSRandomSampler(Sampler):
    """
    Implementation of a Random Sampler for sampling the dataset.
    Added to ensure we reset the start index when an epoch is finished.
    This is essential since we support saving/loading state during an epoch.
    """

    def __init__(self, dataset, batch_size=1, start_index=0):
        super().__init__()
        self.dataset = dataset
        self.start_index = start_index
        self.batch_size = batch_size
        ids = list(range(len(self.dataset)))
        self.bins = [ids[i:i + self.batch_size] for i in range(0, len(ids), self.batch_size)]
        self.epoch = 0

    def __iter__(self):
        # deterministically shuffle based on epoch
        g = torch.Generator()
        g.manual_seed(self.epoch)
        indices = (
            torch.randperm(len(self.bins) - self.start_index, generator=g)
            .add(self.start_index)
            .tolist()
        )
        for x in indices:
            batch_ids = self.bins[x]
            np.random.shuffle(batch_ids)
            yield batch_ids

    def __len__(self):
        return len(self.bins) - self.start_index

    def set_epoch(self, epoch):
        self.epoch = epoch


# ---- decoder.py ----

class GreedyDecoder:
    def __init__(self, labels, blank_index=0):
        self.labels = labels
        self.int_to_char = dict([(i, c) for (i, c) in enumerate(labels)])
        self.blank_index = blank_index
        space_index = len(labels)  # To prevent errors in decode, we add an out of bounds index for the space
        if ' ' in labels:
            space_index = labels.index(' ')
        self.space_index = space_index

    def convert_to_strings(self, sequences, sizes=None, remove_repetitions=False, return_offsets=False):
        """Given a list of numeric sequences, returns the corresponding strings"""
        strings = []
        offsets = [] if return_offsets else None
        for x in range(len(sequences)):
            seq_len = sizes[x] if sizes is not None else len(sequences[x])
            string, string_offsets = self.process_string(sequences[x], seq_len, remove_repetitions)
            strings.append([string])  # We only return one path
            if return_offsets:
                offsets.append([string_offsets])
        if return_offsets:
            return strings, offsets
        else:
            return strings

    def process_string(self, sequence, size, remove_repetitions=False):
        string = ''
        offsets = []
        for i in range(size):
            char = self.int_to_char[sequence[i].item()]
            if char != self.int_to_char[self.blank_index]:
                # if this char is a repetition and remove_repetitions=true, then skip
                if remove_repetitions and i != 0 and char == self.int_to_char[sequence[i - 1].item()]:
                    pass
                elif char == self.labels[self.space_index]:
                    string += ' '
                    offsets.append(i)
                else:
                    string = string + char
                    offsets.append(i)
        return string, torch.tensor(offsets, dtype=torch.int)

    def decode(self, probs, sizes=None):
        _, max_probs = torch.max(probs, 2)
        strings, offsets = self.convert_to_strings(max_probs.view(max_probs.size(0), max_probs.size(1)),
                                                   sizes,
                                                   remove_repetitions=True,
                                                   return_offsets=True)
        return strings, offsets


def fmt(t, n=4):
    return [f"{v:.4f}" for v in t.reshape(-1)[:n].tolist()]


def load_numpy(module, r, std=0.3):
    with torch.no_grad():
        for name, p in module.named_parameters():
            if ".1." in name and "conv" in name or "fc.0.module.0" in name or "batch_norm" in name:
                continue
            p.copy_(torch.from_numpy(r.normal(0, std, tuple(p.shape)).astype(np.float32)))


r = np.random.default_rng(0)
sample_rate, window_size, window_stride = 400, 0.04, 0.02
parser = SpectrogramParser(sample_rate, window_size, window_stride)

t_ = np.arange(240) / sample_rate
waves = [np.sin(2 * np.pi * f * t_[:n]) + 0.3 * r.normal(size=n) for f, n in ((50, 200), (120, 240), (80, 150))]
transcripts = ["ABBA", "CAD E", "EDD"]
samples = [(parser.parse_audio(torch.from_numpy(w.astype(np.float32))),
            [LABELS.index(c) for c in s]) for w, s in zip(waves, transcripts)]
spect = samples[0][0]
print("spect", tuple(spect.shape), fmt(spect[3], 4), f"{spect.mean().item():.4f}", f"{spect.std().item():.4f}")
win = torch.hann_window(16)
print("hann", fmt(win[:4], 4), "stft", torch.stft(torch.ones(32), 16, 8, window=win, return_complex=True).dtype)

batch = _collate_fn(samples)
inputs, targets, input_percentages, target_sizes = batch
print("batch", tuple(inputs.shape), targets.tolist(), fmt(input_percentages, 3), target_sizes.tolist(),
      target_sizes.dtype, f"{inputs[2, 0, 4, -1].item():.4f}")

train_dataset = SpectrogramDataset(samples + samples[:2])
train_sampler = DSRandomSampler(dataset=train_dataset, batch_size=2)
train_loader = AudioDataLoader(dataset=train_dataset, num_workers=0, batch_sampler=train_sampler)
np.random.seed(0)
loaded = [(tuple(b[0].shape), b[1].tolist(), b[3].tolist()) for b in train_loader]
print("loader batch sizes", [x[0][0] for x in loaded], "longest", [x[0][3] for x in loaded])
print("loader", len(train_loader), sorted(x[0][0] for x in loaded), sorted(len(x[1]) for x in loaded),
      train_loader.collate_fn is _collate_fn)
try:
    train_loader.batch_size = 4
except ValueError as e:
    print("ValueError", e)

model = DeepSpeech(LABELS, hidden_size=8, hidden_layers=2, bidirectional=True,
                   sample_rate=sample_rate, window_size=window_size)
load_numpy(model, r)
print("model", model.rnns[1].batch_norm, model.fc[0])
print("params", sum(p.numel() for p in model.parameters()), model.rnns[0].rnn)
lengths = torch.tensor([30, 25, 8])
print("seq lens", model.get_seq_lens(lengths).tolist(), model.get_seq_lens(lengths).dtype)

mc = MaskConv(nn.Sequential(nn.Conv2d(1, 2, 3, padding=1), nn.Hardtanh(0, 20, inplace=True)))
with torch.no_grad():
    mc.seq_module[0].weight.copy_(torch.from_numpy(r.normal(size=(2, 1, 3, 3)).astype(np.float32)))
    mc.seq_module[0].bias.copy_(torch.tensor([0.5, -20.0]))
xm, _ = mc(torch.ones(2, 1, 3, 5), torch.tensor([5, 2]))
print("mask conv", xm[1, 0].tolist()[0], xm[0, 1].tolist()[1])

look = Lookahead(3, context=2)
with torch.no_grad():
    look.conv.weight.copy_(torch.tensor([[[1.0, 0.5]], [[0.0, 1.0]], [[2.0, -1.0]]]))
print("lookahead", look, look(torch.arange(12.).view(4, 1, 3))[:, 0].tolist())

out, output_sizes, hs = model(inputs, (input_percentages * inputs.size(3)).int())
print("out", tuple(out.shape), output_sizes.tolist(), fmt(out[0, 3], 4), fmt(out[2, 2], 3))
print("hidden", len(hs), tuple(hs[0][0].shape), fmt(hs[1][1][1, 2], 4))

ctc = nn.CTCLoss(blank=0, reduction='sum', zero_infinity=True)
lp = torch.from_numpy(r.normal(size=(5, 2, 4)).astype(np.float32)).log_softmax(-1).requires_grad_()
loss_inf = ctc(lp, torch.tensor([1, 2, 1, 2, 3, 1, 3, 1, 3, 1]), torch.tensor([5, 5]), torch.tensor([2, 8]))
loss_inf.backward()
print("ctc zero_infinity", f"{loss_inf.item():.4f}", fmt(lp.grad[:, 1], 4), fmt(lp.grad[0, 0], 4))

optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
losses = []
for step in range(4):
    b = (inputs, targets, input_percentages.clone(), target_sizes)
    loss = model.training_step(b)
    optimizer.zero_grad()
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 400)
    optimizer.step()
    losses.append(loss.item())
print("losses", [f"{v:.4f}" for v in losses])
print("bn", fmt(model.conv.seq_module[1].running_mean, 4), fmt(model.rnns[1].batch_norm.module.running_var, 4))

decoder = GreedyDecoder(LABELS)
model.eval()
with torch.no_grad():
    probs, sizes, _ = model(inputs, (input_percentages * inputs.size(3)).int())
strings, offsets = decoder.decode(probs, sizes)
print("probs", fmt(probs[1, 2], 7), f"{probs.sum(-1).mean().item():.4f}")
print("decoded", strings, [o[0].tolist() for o in offsets], offsets[0][0].dtype)
# in eval mode the padding of the shortest utterance does not change its output
n3 = int(input_percentages[2] * inputs.size(3))
with torch.no_grad():
    out1, _, _ = model(inputs[2:, :, :, :n3], torch.tensor([n3]))
print("batch invariance", torch.allclose(out1[0], probs[2, :out1.size(1)], atol=1e-5), tuple(out1.shape))
print("decode fixed", decoder.decode(torch.eye(7)[[1, 1, 0, 2, 6, 6, 2, 0, 2]].unsqueeze(0))[0])
model.train()

uni = DeepSpeech(LABELS, hidden_size=8, hidden_layers=1, bidirectional=False,
                 sample_rate=sample_rate, window_size=window_size)
load_numpy(uni, r)
uo, us, uh = uni(inputs, (input_percentages * inputs.size(3)).int())
print("unidirectional", tuple(uo.shape), fmt(uo[1, 4], 4), uni.lookahead)
uni.training_step((inputs, targets, input_percentages.clone(), target_sizes)).backward()
print("lookahead grad", fmt(uni.lookahead[0].conv.weight.grad, 4))


# one training step under torch.compile against the same step eagerly
def train_step(b):
    loss = model.training_step(b)
    optimizer.zero_grad()
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 400)
    optimizer.step()
    return loss


state, opt_state = copy.deepcopy(model.state_dict()), copy.deepcopy(optimizer.state_dict())
eager = [train_step((inputs, targets, input_percentages.clone(), target_sizes)).item() for _ in range(2)]
after = {k: v.clone() for k, v in model.state_dict().items()}
model.load_state_dict(state)
optimizer.load_state_dict(opt_state)
cstep = torch.compile(train_step)
compiled = [cstep((inputs, targets, input_percentages.clone(), target_sizes)).item() for _ in range(2)]
print("compiled losses", [f"{v:.4f}" for v in compiled])
print("compiled == eager:", all(abs(a - b) <= 1e-4 * max(1.0, abs(b)) for a, b in zip(compiled, eager)),
      all(torch.allclose(model.state_dict()[k].float(), after[k].float(), rtol=1e-4, atol=1e-5) for k in after))
