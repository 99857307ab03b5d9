# PyTorch tutorials, intermediate_source/speech_command_classification_with_torchaudio_tutorial.py
# (the M5 raw-waveform model: Conv1d / BatchNorm1d / MaxPool1d stack, avg_pool1d over
# the remaining time, permute, log_softmax; count_parameters, pad_sequence /
# collate_fn / label_to_index, train / test with F.nll_loss(output.squeeze(), target),
# Adam + StepLR, get_likely_index / number_of_correct / predict) plus a spectrogram
# front end as torchaudio writes it (functional.melscale_fbanks with _hz_to_mel /
# _mel_to_hz / _create_triangular_filterbank, Spectrogram's torch.stft with
# return_complex=True, .abs() ** 2, the mel matmul, log(... + eps), amplitude_to_DB
# with top_db, create_dct and the MFCC matmul, the "window" normalization) and an
# istft round trip.  Changes for a CPU test: SPEECHCOMMANDS is a synthetic dataset of
# 8 kHz waveforms (the tutorial resamples to 8 kHz, so the Resample transform is
# the identity), 4 labels, n_channel=8, 2 epochs of 3 batches, StepLR step_size 1
# (20), no tqdm; weights come from numpy.  Then a log-mel classifier's training
# step (torch.stft inside it) under torch.compile against the same step run eagerly.
import copy
import math

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim

device = torch.device("cuda" if torch.cuda.is_available() else "cpu")

# ---- synthetic SPEECHCOMMANDS (waveform, sample_rate, label, speaker_id, utterance_number) ----
labels = ["down", "go", "left", "yes"]
sample_rate = 8000
g = np.random.default_rng(0)


def make_item(i):
    k = i % len(labels)
    n = 7000 + 300 * (i % 4)        # variable lengths: pad_sequence pads to the longest
    t = np.arange(n) / sample_rate
    w = 0.5 * np.sin(2 * np.pi * (200 + 150 * k) * t) + 0.1 * g.standard_normal(n)
    return (torch.from_numpy(w.astype(np.float32)).unsqueeze(0), sample_rate, labels[k],
            "spk%d" % i, 0)


train_set = [make_item(i) for i in range(24)]
test_set = [make_item(100 + i) for i in range(8)]
waveform, sample_rate, label, speaker_id, utterance_number = train_set[0]
print("Shape of waveform: {}".format(waveform.size()))
print("Sample rate of waveform: {}".format(sample_rate))

new_sample_rate = 8000
transform = nn.Identity()    # torchaudio.transforms.Resample(orig_freq=8000, new_freq=8000)
transformed = transform(waveform)


def label_to_index(word):
    # Return the position of the word in labels
    return torch.tensor(labels.index(word))


def index_to_label(index):
    # Return the word corresponding to the index in labels
    # This is the inverse of label_to_index
    return labels[index]


word_start = "yes"
index = label_to_index(word_start)
word_recovered = index_to_label(index)
print(word_start, "-->", index, "-->", word_recovered)


def pad_sequence(batch):
    # Make all tensor in a batch the same length by padding with zeros
    batch = [item.t() for item in batch]
    batch = torch.nn.utils.rnn.pad_sequence(batch, batch_first=True, padding_value=0.)
    return batch.permute(0, 2, 1)


def collate_fn(batch):
    # A data tuple has the form:
    # waveform, sample_rate, label, speaker_id, utterance_number

    tensors, targets = [], []

    # Gather in lists, and encode labels as indices
    for waveform, _, label, *_ in batch:
        tensors += [waveform]
        targets += [label_to_index(label)]

    # Group the list of tensors into a batched tensor
    tensors = pad_sequence(tensors)
    targets = torch.stack(targets)

    return tensors, targets


batch_size = 8
num_workers = 0
pin_memory = False

train_loader = torch.utils.data.DataLoader(
    train_set,
    batch_size=batch_size,
    shuffle=False,
    collate_fn=collate_fn,
    num_workers=num_workers,
    pin_memory=pin_memory,
)
test_loader = torch.utils.data.DataLoader(
    test_set,
    batch_size=batch_size,
    shuffle=False,
    drop_last=False,
    collate_fn=collate_fn,
    num_workers=num_workers,
    pin_memory=pin_memory,
)


class M5(nn.Module):
    def __init__(self, n_input=1, n_output=35, stride=16, n_channel=32):
        super().__init__()
        self.conv1 = nn.Conv1d(n_input, n_channel, kernel_size=80, stride=stride)
        self.bn1 = nn.BatchNorm1d(n_channel)
        self.pool1 = nn.MaxPool1d(4)
        self.conv2 = nn.Conv1d(n_channel, n_channel, kernel_size=3)
        self.bn2 = nn.BatchNorm1d(n_channel)
        self.pool2 = nn.MaxPool1d(4)
        self.conv3 = nn.Conv1d(n_channel, 2 * n_channel, kernel_size=3)
        self.bn3 = nn.BatchNorm1d(2 * n_channel)
        self.pool3 = nn.MaxPool1d(4)
        self.conv4 = nn.Conv1d(2 * n_channel, 2 * n_channel, kernel_size=3)
        self.bn4 = nn.BatchNorm1d(2 * n_channel)
        self.pool4 = nn.MaxPool1d(4)
        self.fc1 = nn.Linear(2 * n_channel, n_output)

    def forward(self, x):
        x = self.conv1(x)
        x = F.relu(self.bn1(x))
        x = self.pool1(x)
        x = self.conv2(x)
        x = F.relu(self.bn2(x))
        x = self.pool2(x)
        x = self.conv3(x)
        x = F.relu(self.bn3(x))
        x = self.pool3(x)
        x = self.conv4(x)
        x = F.relu(self.bn4(x))
        x = self.pool4(x)
        x = F.avg_pool1d(x, x.shape[-1])
        x = x.permute(0, 2, 1)
        x = self.fc1(x)
        return F.log_softmax(x, dim=2)


model = M5(n_input=transformed.shape[0], n_output=len(labels), n_channel=8)
model.to(device)
print(model)
r = np.random.default_rng(1)
with torch.no_grad():
    for name, p in model.named_parameters():
        if "bn" in name:
            continue
        fan_in = p[0].numel() if p.dim() > 1 else 10
        p.copy_(torch.from_numpy((r.standard_normal(tuple(p.shape)) / math.sqrt(fan_in)).astype(np.float32)))


def count_parameters(model):
    return sum(p.numel() for p in model.parameters() if p.requires_grad)


n = count_parameters(model)
print("Number of parameters: %s" % n)

optimizer = optim.Adam(model.parameters(), lr=0.01, weight_decay=0.0001)
scheduler = optim.lr_scheduler.StepLR(optimizer, step_size=1, gamma=0.1)  # step_size=20
losses = []


def train(model, epoch, log_interval):
    model.train()
    for batch_idx, (data, target) in enumerate(train_loader):

        data = data.to(device)
        target = target.to(device)

        # apply transform and model on whole batch directly on device
        data = transform(data)
        output = model(data)

        # negative log-likelihood for a tensor of size (batch x 1 x n_output)
        loss = F.nll_loss(output.squeeze(), target)

        optimizer.zero_grad()
        loss.backward()
        optimizer.step()

        # print training stats
        if batch_idx % log_interval == 0:
            print(f"Train Epoch: {epoch} [{batch_idx * len(data)}/{len(train_loader.dataset)} ({100. * batch_idx / len(train_loader):.0f}%)]\tLoss: {loss.item():.6f}")

        # record loss
        losses.append(loss.item())


def number_of_correct(pred, target):
    # count number of correct predictions
    return pred.squeeze().eq(target).sum().item()


def get_likely_index(tensor):
    # find most likely label index for each element in the batch
    return tensor.argmax(dim=-1)


def test(model, epoch):
    model.eval()
    correct = 0
    for data, target in test_loader:

        data = data.to(device)
        target = target.to(device)

        # apply transform and model on whole batch directly on device
        data = transform(data)
        output = model(data)

        pred = get_likely_index(output)
        correct += number_of_correct(pred, target)

    print(f"\nTest Epoch: {epoch}\tAccuracy: {correct}/{len(test_loader.dataset)} ({100. * correct / len(test_loader.dataset):.0f}%)\n")


log_interval = 1
n_epoch = 2

for epoch in range(1, n_epoch + 1):
    train(model, epoch, log_interval)
    test(model, epoch)
    scheduler.step()
print("lr", scheduler.get_last_lr(), "losses", len(losses))


def predict(tensor):
    # Use the model to predict the label of the waveform
    tensor = tensor.to(device)
    tensor = transform(tensor)
    tensor = model(tensor.unsqueeze(0))
    tensor = get_likely_index(tensor)
    tensor = index_to_label(tensor.squeeze())
    return tensor


waveform, sample_rate, utterance, *_ = train_set[-1]
print(f"Expected: {utterance}. Predicted: {predict(waveform)}.")
# (the conv biases feed BatchNorm, so their gradients are rounding noise that Adam
# scales up to lr: they, and the running means they shift, are not compared)
print("running_var", [f"{v:.5f}" for v in model.bn1.running_var[:4].tolist()],
      model.bn1.num_batches_tracked.item())


# ---- torchaudio.functional: melscale_fbanks ----
def _hz_to_mel(freq, mel_scale="htk"):
    if mel_scale == "htk":
        return 2595.0 * math.log10(1.0 + (freq / 700.0))
    # Fill in the linear part
    f_min = 0.0
    f_sp = 200.0 / 3
    mels = (freq - f_min) / f_sp
    # Fill in the log-scale part
    min_log_hz = 1000.0
    min_log_mel = (min_log_hz - f_min) / f_sp
    logstep = math.log(6.4) / 27.0
    if freq >= min_log_hz:
        mels = min_log_mel + math.log(freq / min_log_hz) / logstep
    return mels


def _mel_to_hz(mels, mel_scale="htk"):
    if mel_scale == "htk":
        return 700.0 * (10.0 ** (mels / 2595.0) - 1.0)
    # Fill in the linear scale
    f_min = 0.0
    f_sp = 200.0 / 3
    freqs = f_min + f_sp * mels
    # And now the nonlinear scale
    min_log_hz = 1000.0
    min_log_mel = (min_log_hz - f_min) / f_sp
    logstep = math.log(6.4) / 27.0
    log_t = mels >= min_log_mel
    freqs[log_t] = min_log_hz * torch.exp(logstep * (mels[log_t] - min_log_mel))
    return freqs


def _create_triangular_filterbank(all_freqs, f_pts):
    # Adopted from Librosa
    # calculate the difference between each filter mid point and each stft freq point in hertz
    f_diff = f_pts[1:] - f_pts[:-1]  # (n_filter + 1)
    slopes = f_pts.unsqueeze(0) - all_freqs.unsqueeze(1)  # (n_freqs, n_filter + 2)
    # create overlapping triangles
    zero = torch.zeros(1)
    down_slopes = (-1.0 * slopes[:, :-2]) / f_diff[:-1]  # (n_freqs, n_filter)
    up_slopes = slopes[:, 2:] / f_diff[1:]  # (n_freqs, n_filter)
    fb = torch.max(zero, torch.min(down_slopes, up_slopes))
    return fb


def melscale_fbanks(n_freqs, f_min, f_max, n_mels, sample_rate, norm=None, mel_scale="htk"):
    # freq bins
    all_freqs = torch.linspace(0, sample_rate // 2, n_freqs)
    # calculate mel freq bins
    m_min = _hz_to_mel(f_min, mel_scale=mel_scale)
    m_max = _hz_to_mel(f_max, mel_scale=mel_scale)
    m_pts = torch.linspace(m_min, m_max, n_mels + 2)
    f_pts = _mel_to_hz(m_pts, mel_scale=mel_scale)
    # create filterbank
    fb = _create_triangular_filterbank(all_freqs, f_pts)
    if norm is not None and norm == "slaney":
        # Slaney-style mel is scaled to be approx constant energy per channel
        enorm = 2.0 / (f_pts[2 : n_mels + 2] - f_pts[:n_mels])
        fb *= enorm.unsqueeze(0)
    return fb


# ---- torchaudio.transforms.Spectrogram / MelSpectrogram (power=2.0), AmplitudeToDB-like log ----
class MelSpectrogram(nn.Module):
    def __init__(self, sample_rate=16000, n_fft=400, win_length=None, hop_length=None,
                 f_min=0.0, f_max=None, n_mels=128, norm=None, mel_scale="htk"):
        super().__init__()
        self.n_fft = n_fft
        self.win_length = win_length if win_length is not None else n_fft
        self.hop_length = hop_length if hop_length is not None else self.win_length // 2
        self.register_buffer("window", torch.hann_window(self.win_length))
        fb = melscale_fbanks(n_fft // 2 + 1, f_min, f_max if f_max is not None else float(sample_rate // 2),
                             n_mels, sample_rate, norm, mel_scale)
        self.register_buffer("fb", fb)

    def forward(self, waveform):
        shape = waveform.size()
        waveform = waveform.reshape(-1, shape[-1])
        spec_f = torch.stft(input=waveform, n_fft=self.n_fft, hop_length=self.hop_length,
                            win_length=self.win_length, window=self.window, center=True,
                            pad_mode="reflect", normalized=False, onesided=True,
                            return_complex=True)
        spec_f = spec_f.reshape(shape[:-1] + spec_f.shape[-2:])
        spec_f = spec_f.abs().pow(2.0)
        mel = torch.matmul(spec_f.transpose(-1, -2), self.fb).transpose(-1, -2)
        return mel


mel_t = MelSpectrogram(sample_rate=8000, n_fft=128, hop_length=64, n_mels=16, norm="slaney",
                       mel_scale="slaney")
print("fb", tuple(mel_t.fb.shape), f"{mel_t.fb.sum().item():.5f}", f"{mel_t.fb.max().item():.5f}")
data, target = next(iter(test_loader))
mel = mel_t(data)
logmel = torch.log(mel + 1e-6)
print("logmel", tuple(logmel.shape), f"{logmel.mean().item():.4f}", f"{logmel.std().item():.4f}")

# ---- torchaudio.functional: amplitude_to_DB, create_dct; transforms.MFCC ----
def amplitude_to_DB(x, multiplier, amin, db_multiplier, top_db=None):
    x_db = multiplier * torch.log10(torch.clamp(x, min=amin))
    x_db -= multiplier * db_multiplier

    if top_db is not None:
        # Expand batch
        shape = x_db.size()
        packed_channels = shape[-3] if x_db.dim() > 2 else 1
        x_db = x_db.reshape(-1, packed_channels, shape[-2], shape[-1])

        x_db = torch.max(x_db, (x_db.amax(dim=(-3, -2, -1)) - top_db).view(-1, 1, 1, 1))

        # Repack batch
        x_db = x_db.reshape(shape)

    return x_db


def create_dct(n_mfcc, n_mels, norm):
    # http://en.wikipedia.org/wiki/Discrete_cosine_transform#DCT-II
    n = torch.arange(float(n_mels))
    k = torch.arange(float(n_mfcc)).unsqueeze(1)
    dct = torch.cos(math.pi / float(n_mels) * (n + 0.5) * k)  # size (n_mfcc, n_mels)

    if norm is None:
        dct *= 2.0
    else:
        assert norm == "ortho"
        dct[0] *= 1.0 / math.sqrt(2.0)
        dct *= math.sqrt(2.0 / float(n_mels))
    return dct.t()


amin, ref_value, top_db = 1e-10, 1.0, 80.0
db_multiplier = math.log10(max(amin, ref_value))
mel_db = amplitude_to_DB(mel, 10.0, amin, db_multiplier, top_db)
dct_mat = create_dct(8, 16, "ortho")
mfcc = torch.matmul(mel_db.transpose(-1, -2), dct_mat).transpose(-1, -2)
print("mfcc", tuple(mfcc.shape), f"{mel_db.max().item():.4f}", f"{mel_db.min().item():.4f}",
      [f"{v:.4f}" for v in mfcc[1, 0, :3, 4].tolist()], f"{create_dct(4, 16, None).sum().item():.5f}")
# Spectrogram(normalized=True): the "window" normalization
spec_n = torch.stft(data[:, 0], 128, 64, window=mel_t.window, return_complex=True)
spec_n /= mel_t.window.pow(2.).sum().sqrt()
print("normalized spectrogram", f"{spec_n.abs().pow(2.).mean().item():.6f}")

# Tensor.stft with a short window, its gradient, and the istft round trip
x = data[0, 0, :2048].clone().requires_grad_()
window = torch.hann_window(64)
spec = x.stft(128, hop_length=32, win_length=64, window=window, return_complex=True)
print("spec", tuple(spec.shape), spec.dtype, f"{spec.abs().sum().item():.3f}")
power = spec.abs() ** 2
loss = torch.log(power + 1e-10).mean()
loss.backward()
print("stft grad", f"{x.grad.norm().item():.5f}", [f"{v:.5f}" for v in x.grad[100:103].tolist()])
y = torch.istft(spec.detach(), 128, hop_length=32, win_length=64, window=window, length=2048)
print("istft round trip", tuple(y.shape), (y - x.detach()).abs().max().item() < 1e-4)
y2 = spec.detach().istft(128, 32, 64, window, center=True)
print("Tensor.istft", tuple(y2.shape), torch.allclose(y2, x.detach()[:y2.shape[-1]], atol=1e-4))
full = torch.stft(x.detach(), 64, window=torch.hann_window(64, periodic=False), onesided=False,
                  normalized=True, center=False, return_complex=True)
print("twosided", tuple(full.shape), f"{full.real.sum().item():.4f}", f"{full.imag.abs().sum().item():.4f}")
try:
    torch.stft(x.detach(), 64)
except RuntimeError as e:
    print("RuntimeError:", str(e)[:60])

# a log-mel classifier's training step (stft inside the step) under torch.compile against
# the same step run eagerly (the M5 stack is left out of it: its cold compile costs seconds)
head = nn.Sequential(nn.Conv1d(16, 8, 3), nn.ReLU(), nn.AdaptiveAvgPool1d(1), nn.Flatten(),
                     nn.Linear(8, len(labels)))
with torch.no_grad():
    for p in head.parameters():
        p.copy_(torch.from_numpy((0.3 * r.standard_normal(tuple(p.shape))).astype(np.float32)))
opt2 = optim.Adam(head.parameters(), lr=0.01)


def train_step(data, target):
    opt2.zero_grad()
    logmel = torch.log(mel_t(data).squeeze(1) + 1e-6)
    out = F.log_softmax(head(logmel), dim=-1)
    loss = F.nll_loss(out, target)
    loss.backward()
    opt2.step()
    return loss


state, opt_state = copy.deepcopy(head.state_dict()), copy.deepcopy(opt2.state_dict())
eager = [train_step(data, target).item() for _ in range(2)]
after = copy.deepcopy(head.state_dict())
head.load_state_dict(state)
opt2.load_state_dict(opt_state)
cstep = torch.compile(train_step)
compiled = [cstep(data, target).item() for _ in range(2)]
print("compiled losses", [f"{v:.6f}" for v in compiled])
print("compiled == eager:", all(abs(a - b) <= 1e-4 * max(1.0, abs(b)) for a, b in zip(compiled, eager)),
      all(torch.allclose(head.state_dict()[k], after[k], rtol=1e-4, atol=1e-5) for k in after))
