# PyTorch tutorial "(beta) Dynamic Quantization on an LSTM Word Language
# Model" (advanced/dynamic_quantization_tutorial), written the way the
# tutorial has it: LSTMModel (Dropout, Embedding, a multi-layer nn.LSTM with
# dropout, Linear decoder, init_weights with .data.uniform_ / .data.zero_,
# init_hidden from next(self.parameters()).new_zeros), the Dictionary /
# Corpus tokenizer over train / valid / test files, text generated with
# torch.multinomial on output.squeeze().div(temperature).exp() and
# input_.fill_(word_idx), batchify / get_batch / repackage_hidden / evaluate,
# torch.quantization.quantize_dynamic(model, {nn.LSTM, nn.Linear},
# dtype=torch.qint8) and the printed quantized model, print_size_of_model
# through torch.save to "temp.p" and os.path.getsize, and the float and
# quantized models' test losses with torch.set_num_threads(1).  Changes for a
# CPU test: torch.manual_seed(0) up front; a tiny corpus written by the
# program instead of wikitext-2, and the trained checkpoint replaced by the
# model's own initialization (no download); ninp=32, nhid=16, nlayers=2
# instead of 512 / 256 / 5; 40 generated words reported every 10 instead of
# 1000 every 100; bptt=5; the sizes printed as "smaller" and the rounded
# ratio instead of megabytes (the serialized bytes are the library's own),
# and the elapsed times marked [rng].
import os
import time
from io import open

import torch
import torch.nn as nn

torch.manual_seed(0)


class LSTMModel(nn.Module):
    """Container module with an encoder, a recurrent module, and a decoder."""

    def __init__(self, ntoken, ninp, nhid, nlayers, dropout=0.5):
        super(LSTMModel, self).__init__()
        self.drop = nn.Dropout(dropout)
        self.encoder = nn.Embedding(ntoken, ninp)
        self.rnn = nn.LSTM(ninp, nhid, nlayers, dropout=dropout)
        self.decoder = nn.Linear(nhid, ntoken)

        self.init_weights()

        self.nhid = nhid
        self.nlayers = nlayers

    def init_weights(self):
        initrange = 0.1
        self.encoder.weight.data.uniform_(-initrange, initrange)
        self.decoder.bias.data.zero_()
        self.decoder.weight.data.uniform_(-initrange, initrange)

    def forward(self, input, hidden):
        emb = self.drop(self.encoder(input))
        output, hidden = self.rnn(emb, hidden)
        output = self.drop(output)
        decoded = self.decoder(output)
        return decoded, hidden

    def init_hidden(self, bsz):
        weight = next(self.parameters())
        return (weight.new_zeros(self.nlayers, bsz, self.nhid),
                weight.new_zeros(self.nlayers, bsz, self.nhid))


class Dictionary(object):
    def __init__(self):
        self.word2idx = {}
        self.idx2word = []

    def add_word(self, word):
        if word not in self.word2idx:
            self.idx2word.append(word)
            self.word2idx[word] = len(self.idx2word) - 1
        return self.word2idx[word]

    def __len__(self):
        return len(self.idx2word)


class Corpus(object):
    def __init__(self, path):
        self.dictionary = Dictionary()
        self.train = self.tokenize(os.path.join(path, 'train.txt'))
        self.valid = self.tokenize(os.path.join(path, 'valid.txt'))
        self.test = self.tokenize(os.path.join(path, 'test.txt'))

    def tokenize(self, path):
        """Tokenizes a text file."""
        assert os.path.exists(path)
        # Add words to the dictionary
        with open(path, 'r', encoding="utf8") as f:
            for line in f:
                words = line.split() + ['<eos>']
                for word in words:
                    self.dictionary.add_word(word)

        # Tokenize file content
        with open(path, 'r', encoding="utf8") as f:
            idss = []
            for line in f:
                words = line.split() + ['<eos>']
                ids = []
                for word in words:
                    ids.append(self.dictionary.word2idx[word])
                idss.append(torch.tensor(ids).type(torch.int64))
            ids = torch.cat(idss)

        return ids


model_data_filepath = 'data/'
os.makedirs(model_data_filepath + 'wikitext-2', exist_ok=True)
TEXT = {
    'train.txt': ["the quick brown fox jumps over the lazy dog",
                  "a stitch in time saves nine",
                  "the early bird catches the worm",
                  "all that glitters is not gold"],
    'valid.txt': ["the lazy dog sleeps in the early sun"],
    'test.txt': ["the quick bird catches the brown worm",
                 "time saves the lazy fox", "all that is gold glitters"],
}
for name, lines in TEXT.items():
    with open(model_data_filepath + 'wikitext-2/' + name, 'w', encoding="utf8") as f:
        f.write("\n".join(lines) + "\n")

corpus = Corpus(model_data_filepath + 'wikitext-2')
ntokens = len(corpus.dictionary)
print(ntokens, corpus.train.shape, corpus.test[:12])

model = LSTMModel(
    ntoken=ntokens,
    ninp=32,
    nhid=16,
    nlayers=2,
    dropout=0.5
)

model.eval()
print(model)

input_ = torch.randint(ntokens, (1, 1), dtype=torch.long)
hidden = model.init_hidden(1)
temperature = 1.0
num_words = 40

with open(model_data_filepath + 'out.txt', 'w') as outf:
    with torch.no_grad():  # no tracking history
        for i in range(num_words):
            output, hidden = model(input_, hidden)
            word_weights = output.squeeze().div(temperature).exp().cpu()
            word_idx = torch.multinomial(word_weights, 1)[0]
            input_.fill_(word_idx)

            word = corpus.dictionary.idx2word[word_idx]

            outf.write(str(word.encode('utf-8')) + ('\n' if i % 20 == 19 else ' '))

            if i % 10 == 0:
                print('| Generated {}/{} words'.format(i, num_words))

with open(model_data_filepath + 'out.txt', 'r') as outf:
    all_output = outf.read()
    print(all_output)

bptt = 5
criterion = nn.CrossEntropyLoss()
eval_batch_size = 1


# create test dataset
def batchify(data, bsz):
    # Work out how cleanly we can divide the dataset into bsz parts.
    nbatch = data.size(0) // bsz
    # Trim off any extra elements that wouldn't cleanly fit (remainders).
    data = data.narrow(0, 0, nbatch * bsz)
    # Evenly divide the data across the bsz batches.
    return data.view(bsz, -1).t().contiguous()


test_data = batchify(corpus.test, eval_batch_size)
print(test_data.shape)


# Evaluation functions
def get_batch(source, i):
    seq_len = min(bptt, len(source) - 1 - i)
    data = source[i:i + seq_len]
    target = source[i + 1:i + 1 + seq_len].reshape(-1)
    return data, target


def repackage_hidden(h):
    """Wraps hidden states in new Tensors, to detach them from their history."""

    if isinstance(h, torch.Tensor):
        return h.detach()
    else:
        return tuple(repackage_hidden(v) for v in h)


def evaluate(model_, data_source):
    # Turn on evaluation mode which disables dropout.
    model_.eval()
    total_loss = 0.
    hidden = model_.init_hidden(eval_batch_size)
    with torch.no_grad():
        for i in range(0, data_source.size(0) - 1, bptt):
            data, targets = get_batch(data_source, i)
            output, hidden = model_(data, hidden)
            hidden = repackage_hidden(hidden)
            output_flat = output.view(-1, ntokens)
            total_loss += len(data) * criterion(output_flat, targets).item()
    return total_loss / (len(data_source) - 1)


import torch.quantization  # noqa: E402  (where the tutorial imports it)

quantized_model = torch.quantization.quantize_dynamic(
    model, {nn.LSTM, nn.Linear}, dtype=torch.qint8
)
print(quantized_model)


def print_size_of_model(model):
    torch.save(model.state_dict(), "temp.p")
    size = os.path.getsize("temp.p")
    os.remove('temp.p')
    return size


float_size = print_size_of_model(model)
quantized_size = print_size_of_model(quantized_model)
print('quantized smaller:', quantized_size < float_size)

torch.set_num_threads(1)


def time_model_evaluation(model, test_data):
    s = time.time()
    loss = evaluate(model, test_data)
    elapsed = time.time() - s
    print('''loss: {0:.3f}\nelapsed time (seconds): {1:.1f} [rng]'''.format(loss, elapsed))
    return loss


float_loss = time_model_evaluation(model, test_data)
quantized_loss = time_model_evaluation(quantized_model, test_data)
print('loss difference below 0.05:', abs(float_loss - quantized_loss) < 0.05)
with torch.no_grad():
    out_f, _ = model(test_data[:4], model.init_hidden(1))
    out_q, _ = quantized_model(test_data[:4], quantized_model.init_hidden(1))
print(out_q[0, 0, :6], (out_f - out_q).abs().max() < 0.05)
