# meijieru/crnn.pytorch (models/crnn.py: BidirectionalLSTM, CRNN with its
# convRelu stack, the (2, 1)-stride poolings, squeeze / permute to [w, b, c]
# and log_softmax over the classes; utils.py: strLabelConverter (encode /
# decode, raw and greedy CTC collapse), averager, loadData; train.py:
# weights_init, trainBatch with nn.CTCLoss(), val with the greedy decode
# and the accuracy).  Changes for a CPU test: the lmdb dataset is a numpy set
# of synthetic "text" images (one bar pattern per character), the channel
# widths nm are divided by 16 and nh is 16, imgH 32 and width 32, Variable
# is a plain tensor, .cuda() and DataParallel are dropped, Adam is chosen
# (train.py's --adam), and the weights come from numpy after weights_init,
# so tracec and torch compute the same numbers; --n_test_disp is 0 (the
# displayed greedy strings of a barely trained model hang on near-tied
# argmaxes that rounding flips), and a known frame sequence is decoded
# instead.
import collections
import collections.abc
import copy

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim


# ---- models/crnn.py ----
class BidirectionalLSTM(nn.Module):

    def __init__(self, nIn, nHidden, nOut):
        super(BidirectionalLSTM, self).__init__()

        self.rnn = nn.LSTM(nIn, nHidden, bidirectional=True)
        self.embedding = nn.Linear(nHidden * 2, nOut)

    def forward(self, input):
        recurrent, _ = self.rnn(input)
        T, b, h = recurrent.size()
        t_rec = recurrent.view(T * b, h)

        output = self.embedding(t_rec)  # [T * b, nOut]
        output = output.view(T, b, -1)

        return output


class CRNN(nn.Module):

    def __init__(self, imgH, nc, nclass, nh, n_rnn=2, leakyRelu=False):
        super(CRNN, self).__init__()
        assert imgH % 16 == 0, 'imgH has to be a multiple of 16'

        ks = [3, 3, 3, 3, 3, 3, 2]
        ps = [1, 1, 1, 1, 1, 1, 0]
        ss = [1, 1, 1, 1, 1, 1, 1]
        nm = [4, 8, 16, 16, 32, 32, 32]      # [64, 128, 256, 256, 512, 512, 512]

        cnn = nn.Sequential()

        def convRelu(i, batchNormalization=False):
            nIn = nc if i == 0 else nm[i - 1]
            nOut = nm[i]
            cnn.add_module('conv{0}'.format(i),
                           nn.Conv2d(nIn, nOut, ks[i], ss[i], ps[i]))
            if batchNormalization:
                cnn.add_module('batchnorm{0}'.format(i), nn.BatchNorm2d(nOut))
            if leakyRelu:
                cnn.add_module('relu{0}'.format(i),
                               nn.LeakyReLU(0.2, inplace=True))
            else:
                cnn.add_module('relu{0}'.format(i), nn.ReLU(True))

        convRelu(0)
        cnn.add_module('pooling{0}'.format(0), nn.MaxPool2d(2, 2))  # 64x16x64
        convRelu(1)
        cnn.add_module('pooling{0}'.format(1), nn.MaxPool2d(2, 2))  # 128x8x32
        convRelu(2, True)
        convRelu(3)
        cnn.add_module('pooling{0}'.format(2),
                       nn.MaxPool2d((2, 2), (2, 1), (0, 1)))  # 256x4x16
        convRelu(4, True)
        convRelu(5)
        cnn.add_module('pooling{0}'.format(3),
                       nn.MaxPool2d((2, 2), (2, 1), (0, 1)))  # 512x2x16
        convRelu(6, True)  # 512x1x16

        self.cnn = cnn
        self.rnn = nn.Sequential(
            BidirectionalLSTM(nm[6], nh, nh),
            BidirectionalLSTM(nh, nh, nclass))

    def forward(self, input):
        # conv features
        conv = self.cnn(input)
        b, c, h, w = conv.size()
        assert h == 1, "the height of conv must be 1"
        conv = conv.squeeze(2)
        conv = conv.permute(2, 0, 1)  # [w, b, c]

        # rnn features
        output = self.rnn(conv)

        # add log_softmax to converge output
        output = F.log_softmax(output, dim=2)

        return output

    def backward_hook(self, module, grad_input, grad_output):
        for g in grad_input:
            g[g != g] = 0   # replace all nan/inf in gradients to zero


# ---- utils.py ----
class strLabelConverter(object):
    """Convert between str and label.

    NOTE:
        Insert `blank` to the alphabet for CTC.

    Args:
        alphabet (str): set of the possible characters.
        ignore_case (bool, default=True): whether or not to ignore all of the case.
    """

    def __init__(self, alphabet, ignore_case=False):
        self._ignore_case = ignore_case
        if self._ignore_case:
            alphabet = alphabet.lower()
        self.alphabet = alphabet + '-'  # for `-1` index

        self.dict = {}
        for i, char in enumerate(alphabet):
            # NOTE: 0 is reserved for 'blank' required by wrap_ctc
            self.dict[char] = i + 1

    def encode(self, text):
        """Support batch or single str.

        Args:
            text (str or list of str): texts to convert.

        Returns:
            torch.IntTensor [length_0 + length_1 + ... length_{n - 1}]: encoded texts.
            torch.IntTensor [n]: length of each text.
        """
        if isinstance(text, str):
            text = [
                self.dict[char.lower() if self._ignore_case else char]
                for char in text
            ]
            length = [len(text)]
        elif isinstance(text, collections.abc.Iterable):
            length = [len(s) for s in text]
            text = ''.join(text)
            text, _ = self.encode(text)
        return (torch.IntTensor(text), torch.IntTensor(length))

    def decode(self, t, length, raw=False):
        """Decode encoded texts back into strs.

        Args:
            torch.IntTensor [length_0 + length_1 + ... length_{n - 1}]: encoded texts.
            torch.IntTensor [n]: length of each text.

        Raises:
            AssertionError: when the texts and its length does not match.

        Returns:
            text (str or list of str): texts to convert.
        """
        if length.numel() == 1:
            length = length[0]
            assert t.numel() == length, "text with length: {} does not match declared length: {}".format(t.numel(), length)
            if raw:
                return ''.join([self.alphabet[i - 1] for i in t])
            else:
                char_list = []
                for i in range(length):
                    if t[i] != 0 and (not (i > 0 and t[i - 1] == t[i])):
                        char_list.append(self.alphabet[t[i] - 1])
                return ''.join(char_list)
        else:
            # batch mode
            assert t.numel() == length.sum(), "texts with length: {} does not match declared length: {}".format(t.numel(), length.sum())
            texts = []
            index = 0
            for i in range(length.numel()):
                l = length[i]
                texts.append(
                    self.decode(
                        t[index:index + l], torch.IntTensor([l]), raw=raw))
                index += l
            return texts


class averager(object):
    """Compute average for `torch.Variable` and `torch.Tensor`. """

    def __init__(self):
        self.reset()

    def add(self, v):
        if isinstance(v, torch.Tensor):
            count = v.data.numel()
            v = v.data.sum()
        self.n_count += count
        self.sum += v

    def reset(self):
        self.n_count = 0
        self.sum = 0

    def val(self):
        res = 0
        if self.n_count != 0:
            res = self.sum / float(self.n_count)
        return res


def loadData(v, data):
    with torch.no_grad():
        v.resize_(data.size()).copy_(data)


# ---- train.py ----
def weights_init(m):
    classname = m.__class__.__name__
    if classname.find('Conv') != -1:
        m.weight.data.normal_(0.0, 0.02)
    elif classname.find('BatchNorm') != -1:
        m.weight.data.normal_(1.0, 0.02)
        m.bias.data.fill_(0)


class Opt:
    alphabet = '0123456789abcdefghijklmnopqrstuvwxyz'
    imgH = 32
    imgW = 32             # 100
    nh = 16               # 256
    batchSize = 4         # 64
    lr = 0.001
    beta1 = 0.5
    n_test_disp = 0       # 10: the displayed argmax strings hang on near ties
    adam = True
    adadelta = False


opt = Opt()
nclass = len(opt.alphabet) + 1
nc = 1

converter = strLabelConverter(opt.alphabet)
criterion = nn.CTCLoss()

crnn = CRNN(opt.imgH, nc, nclass, opt.nh)
crnn.apply(weights_init)
print(crnn.cnn[:4])
r = np.random.default_rng(0)
with torch.no_grad():
    for name, p in crnn.named_parameters():
        if 'batchnorm' in name:     # weights_init's normal_(1.0, 0.02) and fill_(0)
            p.copy_(torch.from_numpy((float(name.endswith('weight')) + 0.02 * r.standard_normal(tuple(p.shape))).astype(np.float32)))
            continue
        std = 0.05 if p.dim() == 1 else p[0].numel() ** -0.5
        p.copy_(torch.from_numpy((std * r.standard_normal(tuple(p.shape))).astype(np.float32)))

image = torch.FloatTensor(opt.batchSize, 3, opt.imgH, opt.imgH)
text = torch.IntTensor(opt.batchSize * 5)
length = torch.IntTensor(opt.batchSize)

# synthetic text images: each character is a 4-pixel-wide bar pattern
words = ['ab1', 'c2d', 'e3', 'f4g5', 'h6', 'i7j', 'k8', 'l9m0']
def render(word):
    img = np.zeros((1, opt.imgH, opt.imgW), dtype=np.float32)
    for k, ch in enumerate(word):
        code = opt.alphabet.index(ch)
        x0 = 2 + 7 * k
        for bit in range(6):
            if (code >> bit) & 1:
                img[0, 4 + 4 * bit:7 + 4 * bit, x0:x0 + 5] = 1.0
    return img
images_all = np.stack([render(w) for w in words])
train_loader = [(torch.from_numpy(images_all[i:i + 4]), words[i:i + 4]) for i in (0, 4)]

if opt.adam:
    optimizer = optim.Adam(crnn.parameters(), lr=opt.lr,
                           betas=(opt.beta1, 0.999))
elif opt.adadelta:
    optimizer = optim.Adadelta(crnn.parameters())
else:
    optimizer = optim.RMSprop(crnn.parameters(), lr=opt.lr)

loss_avg = averager()


def val(net, dataset, criterion, max_iter=100):
    print('Start val')

    for p in crnn.parameters():
        p.requires_grad = False

    net.eval()
    val_iter = iter(dataset)

    i = 0
    n_correct = 0
    loss_avg = averager()

    max_iter = min(max_iter, len(dataset))
    for i in range(max_iter):
        data = next(val_iter)
        i += 1
        cpu_images, cpu_texts = data
        batch_size = cpu_images.size(0)
        loadData(image, cpu_images)
        t, l = converter.encode(cpu_texts)
        loadData(text, t)
        loadData(length, l)

        preds = crnn(image)
        preds_size = torch.IntTensor([preds.size(0)] * batch_size)
        cost = criterion(preds, text, preds_size, length) / batch_size
        loss_avg.add(cost)

        _, preds = preds.max(2)
        preds = preds.transpose(1, 0).contiguous().view(-1)
        sim_preds = converter.decode(preds.data, preds_size.data, raw=False)
        for pred, target in zip(sim_preds, cpu_texts):
            if pred == target.lower():
                n_correct += 1

    raw_preds = converter.decode(preds.data, preds_size.data, raw=True)[:opt.n_test_disp]
    for raw_pred, pred, gt in zip(raw_preds, sim_preds, cpu_texts):
        print('%-20s => %-20s, gt: %-20s' % (raw_pred, pred, gt))

    accuracy = n_correct / float(max_iter * opt.batchSize)
    print('Test loss: %f, accuray: %f' % (loss_avg.val(), accuracy))


def trainBatch(net, criterion, optimizer, data):
    cpu_images, cpu_texts = data
    batch_size = cpu_images.size(0)
    loadData(image, cpu_images)
    t, l = converter.encode(cpu_texts)
    loadData(text, t)
    loadData(length, l)

    preds = crnn(image)
    preds_size = torch.IntTensor([preds.size(0)] * batch_size)
    cost = criterion(preds, text, preds_size, length) / batch_size
    crnn.zero_grad()
    cost.backward()
    optimizer.step()
    return cost


print("encode", [v.tolist() for v in converter.encode(['ab1', 'z'])])
for epoch in range(3):
    for i, data in enumerate(train_loader):
        for p in crnn.parameters():
            p.requires_grad = True
        crnn.train()

        cost = trainBatch(crnn, criterion, optimizer, data)
        loss_avg.add(cost)

    print('[%d/%d][%d/%d] Loss: %f' % (epoch, 3, i + 1, len(train_loader), loss_avg.val()))
    loss_avg.reset()
val(crnn, train_loader, criterion)
print("image", tuple(image.shape), "text", text.tolist()[:6], "length", length.tolist())

# the greedy CTC decode of a known frame sequence, raw and collapsed
frames = torch.IntTensor([0, 11, 11, 0, 12, 2, 2, 0, 0, 11, 0, 11, 3])
print("decode", converter.decode(frames, torch.IntTensor([13]), raw=True),
      converter.decode(frames, torch.IntTensor([13]), raw=False),
      converter.decode(frames, torch.IntTensor([6, 7]), raw=False))

# (no torch.compile check here: the compiled step unrolls the 9-step
# bidirectional LSTMs and the CTC recursions, whose cold native build takes
# longer than this test may; tests/test_models6_gaps.py compiles nn.CTCLoss)
