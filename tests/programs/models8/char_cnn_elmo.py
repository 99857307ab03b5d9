# Two character-level encoders.  (1) srviest/char-cnn-text-classification-pytorch, the
# Zhang, Zhao & LeCun (2015) character CNN: data_loader.py's AGNEWs dataset (csv
# reader, alphabet from a JSON file, oneHotEncode writing X[i][j] = 1.0 over the
# reversed text), model.py's CharCNN (six Conv1d / ReLU / MaxPool1d stages,
# x.view(x.size(0), -1), two Linear / ReLU / Dropout stages, nn.LogSoftmax() with its
# implicit dim), train.py's train / eval with target.sub_(1), F.nll_loss,
# clip_grad_norm_ and the accuracy from torch.max(logit, 1)[1].view(target.size())
# formatted as a tensor.  (2) allenai/allennlp's ELMo character encoder
# (modules/elmo.py's _ElmoCharacterEncoder with ELMoCharacterMapper's ids,
# add_sentence_boundary_token_ids, F.embedding of the char ids, the max-pooled
# Conv1d filters of several widths, modules/highway.py's Highway with its bias
# initialised through layer.bias[input_dim:].data.fill_(1), and the projection).
# Changes for a CPU test: a synthetic AG_NEWS csv, l0 = 128 characters (1014), 16
# conv channels (256), 32 hidden units (1024), 1 epoch of 3 batches, dropout 0
# in the compared runs; ELMo's options are tiny (char embedding 4, filters
# [[1, 4], [2, 8], [3, 8]], 2 highway layers, projection 8, max 10 characters per
# token); weights come from numpy.  Then the char-CNN's training step under
# torch.compile against the same step run eagerly.
import copy
import csv
import json
import math

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.autograd import Variable
from torch.utils.data import DataLoader, Dataset


# ---- char-cnn: data_loader.py ----
class AGNEWs(Dataset):
    def __init__(self, label_data_path, alphabet_path, l0=1014):
        """Create AG's News dataset object.

        Arguments:
            label_data_path: The path of label and data file in csv.
            l0: max length of a sample.
            alphabet_path: The path of alphabet json file.
        """
        self.label_data_path = label_data_path
        self.l0 = l0
        # read alphabet
        self.loadAlphabet(alphabet_path)
        self.load(label_data_path)

    def __len__(self):
        return len(self.label)

    def __getitem__(self, idx):
        X = self.oneHotEncode(idx)
        y = self.y[idx]
        return X, y

    def loadAlphabet(self, alphabet_path):
        with open(alphabet_path) as f:
            self.alphabet = ''.join(json.load(f))

    def load(self, label_data_path, lowercase=True):
        self.label = []
        self.data = []
        with open(label_data_path, 'r') as f:
            rdr = csv.reader(f, delimiter=',', quotechar='"')
            # num_samples = sum(1 for row in rdr)
            for index, row in enumerate(rdr):
                self.label.append(int(row[0]))
                txt = ' '.join(row[1:])
                if lowercase:
                    txt = txt.lower()
                self.data.append(txt)

        self.y = torch.LongTensor(self.label)

    def oneHotEncode(self, idx):
        # X = (batch, 70, sequence_length)
        X = torch.zeros(len(self.alphabet), self.l0)
        sequence = self.data[idx]
        for index_char, char in enumerate(sequence[::-1]):
            if self.char2Index(char) != -1:
                X[self.char2Index(char)][index_char] = 1.0
        return X

    def char2Index(self, character):
        return self.alphabet.find(character)

    def getClassWeight(self):
        num_samples = self.__len__()
        label_set = set(self.label)
        num_class = [self.label.count(c) for c in label_set]
        class_weight = [num_samples / float(self.label.count(c)) for c in label_set]
        return class_weight, num_class


# ---- char-cnn: model.py ----
class CharCNN(nn.Module):
    def __init__(self, args):
        super(CharCNN, self).__init__()
        C, H = args.conv_channels, args.hidden
        self.conv1 = nn.Sequential(
            nn.Conv1d(args.num_features, C, kernel_size=7, stride=1),
            nn.ReLU(),
            nn.MaxPool1d(kernel_size=3, stride=3)
        )

        self.conv2 = nn.Sequential(
            nn.Conv1d(C, C, kernel_size=7, stride=1),
            nn.ReLU(),
            nn.MaxPool1d(kernel_size=3, stride=3)
        )

        self.conv3 = nn.Sequential(
            nn.Conv1d(C, C, kernel_size=3, stride=1),
            nn.ReLU()
        )

        self.conv4 = nn.Sequential(
            nn.Conv1d(C, C, kernel_size=3, stride=1),
            nn.ReLU()
        )

        self.conv5 = nn.Sequential(
            nn.Conv1d(C, C, kernel_size=3, stride=1),
            nn.ReLU()
        )

        self.conv6 = nn.Sequential(
            nn.Conv1d(C, C, kernel_size=3, stride=1),
            nn.ReLU(),
            nn.MaxPool1d(kernel_size=3, stride=3)
        )

        self.fc1 = nn.Sequential(
            nn.Linear(C * args.final_length, H),
            nn.ReLU(),
            nn.Dropout(p=args.dropout)
        )

        self.fc2 = nn.Sequential(
            nn.Linear(H, H),
            nn.ReLU(),
            nn.Dropout(p=args.dropout)
        )

        self.fc3 = nn.Linear(H, 4)
        self.log_softmax = nn.LogSoftmax()

    def forward(self, x):
        x = self.conv1(x)
        x = self.conv2(x)
        x = self.conv3(x)
        x = self.conv4(x)
        x = self.conv5(x)
        x = self.conv6(x)

        # collapse
        x = x.view(x.size(0), -1)
        # linear layer
        x = self.fc1(x)
        # linear layer
        x = self.fc2(x)
        # linear layer
        x = self.fc3(x)
        # output layer
        x = self.log_softmax(x)

        return x


# ---- char-cnn: train.py ----
def train(train_loader, dev_loader, model, args):
    optimizer = torch.optim.Adam(model.parameters(), lr=args.lr)
    model.train()
    for epoch in range(1, args.epochs + 1):
        for i_batch, data in enumerate(train_loader, start=1):
            inputs, target = data
            target.sub_(1)
            inputs = Variable(inputs)
            target = Variable(target)
            logit = model(inputs)
            loss = F.nll_loss(logit, target)
            optimizer.zero_grad()
            loss.backward()
            if args.max_norm is not None:
                torch.nn.utils.clip_grad_norm_(model.parameters(), args.max_norm)
            optimizer.step()
            if i_batch % args.log_interval == 0:
                corrects = (torch.max(logit, 1)[1].view(target.size()).data == target.data).sum()
                accuracy = 100.0 * corrects / args.batch_size
                print('Epoch[{}] Batch[{}] - loss: {:.6f}  lr: {:.5f}  acc: {:.3f}% ({}/{})'.format(
                    epoch, i_batch, loss.item(), optimizer.state_dict()['param_groups'][0]['lr'],
                    accuracy, corrects, args.batch_size))
        eval(dev_loader, model, epoch, args)
    return optimizer


def eval(data_loader, model, epoch_train, args):
    model.eval()
    corrects, avg_loss, accumulated_loss, size = 0, 0, 0, 0
    predicates_all, target_all = [], []
    for i_batch, (data) in enumerate(data_loader):
        inputs, target = data
        target.sub_(1)
        size += len(target)
        with torch.no_grad():
            logit = model(inputs)
        predicates = torch.max(logit, 1)[1].view(target.size()).data
        accumulated_loss += F.nll_loss(logit, target, reduction='sum').item()
        corrects += (torch.max(logit, 1)[1].view(target.size()).data == target.data).sum()
        predicates_all += predicates.cpu().numpy().tolist()
        target_all += target.data.cpu().numpy().tolist()
    avg_loss = accumulated_loss / size
    accuracy = 100.0 * corrects / size
    model.train()
    print('\nEvaluation - loss: {:.6f}  acc: {:.3f}% ({}/{}) \n'.format(avg_loss, accuracy, corrects, size))
    return avg_loss, accuracy


class Args:
    lr = 0.001
    epochs = 1
    batch_size = 8
    max_norm = 400
    dropout = 0.0
    log_interval = 1
    l0 = 128
    conv_channels = 16      # 256
    hidden = 32             # 1024
    num_features = 0
    final_length = 1        # ((l0 - 96) / 27 for the published sizes: 34)


args = Args()
alphabet = "abcdefghijklmnopqrstuvwxyz0123456789,;.!?:'\"/\\|_@#$%^&*~`+-=<>()[]{}"
with open('alphabet.json', 'w') as f:
    json.dump(list(alphabet), f)
words = [["stocks", "market", "bank"], ["game", "team", "coach"], ["software", "web", "chip"],
         ["minister", "election", "talks"]]
g = np.random.default_rng(0)
for name, n in (('train.csv', 24), ('test.csv', 8)):
    with open(name, 'w', newline='') as f:
        w = csv.writer(f, quotechar='"')
        for i in range(n):
            c = i % 4
            title = " ".join(g.choice(words[c], 3)).title()
            w.writerow([c + 1, title, "Description, with \"quotes\": " + " ".join(g.choice(words[c], 4))])

train_dataset = AGNEWs(label_data_path='train.csv', alphabet_path='alphabet.json', l0=args.l0)
dev_dataset = AGNEWs(label_data_path='test.csv', alphabet_path='alphabet.json', l0=args.l0)
args.num_features = len(train_dataset.alphabet)
print("alphabet", args.num_features, "first", train_dataset.data[0][:30], train_dataset.getClassWeight())
X, y = train_dataset[0]
print("one-hot", tuple(X.shape), X.sum().item(), X[:, 0].argmax().item(), y.item())
train_loader = DataLoader(train_dataset, batch_size=args.batch_size, num_workers=0, drop_last=True, shuffle=False)
dev_loader = DataLoader(dev_dataset, batch_size=args.batch_size, num_workers=0, drop_last=False)

model = CharCNN(args)
r = np.random.default_rng(1)
with torch.no_grad():
    for name, p in model.named_parameters():
        fan = p[0].numel() if p.dim() > 1 else 8
        p.copy_(torch.from_numpy((r.standard_normal(tuple(p.shape)) / math.sqrt(fan)).astype(np.float32)))
print(model.conv1, model.fc1)
optimizer = train(train_loader, dev_loader, model, args)

# the training step under torch.compile against the same step run eagerly
inputs, target = next(iter(train_loader))
target.sub_(1)


def train_step(inputs, target):
    logit = model(inputs)
    loss = F.nll_loss(logit, target)
    optimizer.zero_grad()
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), args.max_norm)
    optimizer.step()
    return loss


def check_compiled(model, optimizer, train_step, *batch):
    state, opt_state = copy.deepcopy(model.state_dict()), copy.deepcopy(optimizer.state_dict())
    eager = [train_step(*batch).item() for _ in range(2)]
    after = copy.deepcopy(model.state_dict())
    model.load_state_dict(state)
    optimizer.load_state_dict(opt_state)
    cstep = torch.compile(train_step)
    compiled = [cstep(*batch).item() for _ in range(2)]
    print("compiled losses", [f"{v:.6f}" for v in compiled])
    print("compiled == eager:", all(abs(a - b) <= 1e-4 * max(1.0, abs(b)) for a, b in zip(compiled, eager)),
          all(torch.allclose(model.state_dict()[k], after[k], rtol=1e-4, atol=1e-5) for k in after))


check_compiled(model, optimizer, train_step, inputs, target)


# ---- allennlp: modules/elmo.py (ELMoCharacterMapper, _ElmoCharacterEncoder) ----
def _make_bos_eos(character, padding_character, beginning_of_word_character, end_of_word_character,
                  max_word_length):
    char_ids = [padding_character] * max_word_length
    char_ids[0] = beginning_of_word_character
    char_ids[1] = character
    char_ids[2] = end_of_word_character
    return char_ids


class ELMoCharacterMapper:
    """
    Maps individual tokens to sequences of character ids, compatible with ELMo.
    """
    max_word_length = 10    # 50

    # char ids 0-255 come from utf-8 encoding bytes
    # assign 256-300 to special chars
    beginning_of_sentence_character = 256  # <begin sentence>
    end_of_sentence_character = 257  # <end sentence>
    beginning_of_word_character = 258  # <begin word>
    end_of_word_character = 259  # <end word>
    padding_character = 260  # <padding>

    beginning_of_sentence_characters = _make_bos_eos(
        beginning_of_sentence_character, padding_character, beginning_of_word_character,
        end_of_word_character, max_word_length)
    end_of_sentence_characters = _make_bos_eos(
        end_of_sentence_character, padding_character, beginning_of_word_character,
        end_of_word_character, max_word_length)

    bos_token = "<S>"
    eos_token = "</S>"

    def convert_word_to_char_ids(self, word):
        if word == self.bos_token:
            char_ids = self.beginning_of_sentence_characters
        elif word == self.eos_token:
            char_ids = self.end_of_sentence_characters
        else:
            word_encoded = word.encode("utf-8", "ignore")[: (self.max_word_length - 2)]
            char_ids = [self.padding_character] * self.max_word_length
            char_ids[0] = self.beginning_of_word_character
            for k, chr_id in enumerate(word_encoded, start=1):
                char_ids[k] = chr_id
            char_ids[len(word_encoded) + 1] = self.end_of_word_character

        # +1 one for masking
        return [c + 1 for c in char_ids]


def add_sentence_boundary_token_ids(tensor, mask, sentence_begin_token, sentence_end_token):
    # (allennlp/nn/util.py)
    sequence_lengths = mask.sum(dim=1).detach().cpu().numpy()
    tensor_shape = list(tensor.data.shape)
    new_shape = list(tensor_shape)
    new_shape[1] = tensor_shape[1] + 2
    tensor_with_boundary_tokens = tensor.new_zeros(*new_shape, device=tensor.device)
    if len(tensor_shape) == 2:
        tensor_with_boundary_tokens[:, 1:-1] = tensor
        tensor_with_boundary_tokens[:, 0] = sentence_begin_token
        for i, j in enumerate(sequence_lengths):
            tensor_with_boundary_tokens[i, j + 1] = sentence_end_token
        new_mask = tensor_with_boundary_tokens != 0
    elif len(tensor_shape) == 3:
        tensor_with_boundary_tokens[:, 1:-1, :] = tensor
        sentence_begin_token = sentence_begin_token.detach().to(tensor.device)
        sentence_end_token = sentence_end_token.detach().to(tensor.device)
        for i, j in enumerate(sequence_lengths):
            tensor_with_boundary_tokens[i, 0, :] = sentence_begin_token
            tensor_with_boundary_tokens[i, j + 1, :] = sentence_end_token
        new_mask = (tensor_with_boundary_tokens > 0).long().sum(dim=-1) > 0
    else:
        raise ValueError("add_sentence_boundary_token_ids only accepts 2D and 3D input")

    return tensor_with_boundary_tokens, new_mask


class Highway(torch.nn.Module):
    def __init__(self, input_dim, num_layers=1, activation=torch.nn.functional.relu):
        super().__init__()
        self._input_dim = input_dim
        self._layers = torch.nn.ModuleList(
            [torch.nn.Linear(input_dim, input_dim * 2) for _ in range(num_layers)]
        )
        self._activation = activation
        for layer in self._layers:
            # We should bias the highway layer to just carry its input forward.  We do that by
            # setting the bias on `B(x)` to be positive, because that means `g` will be biased to
            # be high, so we will carry the input forward.  The bias on `B(x)` is the second half
            # of the bias vector in each Linear layer.
            layer.bias[input_dim:].data.fill_(1)

    def forward(self, inputs):
        current_input = inputs
        for layer in self._layers:
            projected_input = layer(current_input)
            linear_part = current_input
            # NOTE: if you modify this, think about whether you should modify the initialization
            # above, too.
            nonlinear_part, gate = projected_input.chunk(2, dim=-1)
            nonlinear_part = self._activation(nonlinear_part)
            gate = torch.sigmoid(gate)
            current_input = gate * linear_part + (1 - gate) * nonlinear_part
        return current_input


class _ElmoCharacterEncoder(torch.nn.Module):
    def __init__(self, options, requires_grad=False):
        super().__init__()
        self._options = options
        self.output_dim = self._options["lstm"]["projection_dim"]
        self.requires_grad = requires_grad

        # Cache the arrays for use in forward -- +1 due to masking.
        self._beginning_of_sentence_characters = torch.from_numpy(
            np.array(ELMoCharacterMapper.beginning_of_sentence_characters) + 1
        )
        self._end_of_sentence_characters = torch.from_numpy(
            np.array(ELMoCharacterMapper.end_of_sentence_characters) + 1
        )
        self._load_weights()

    def _load_weights(self):
        # (the published _load_char_embedding / _load_cnn_weights / _load_highway /
        # _load_projection read an hdf5 file; here the same structure from numpy)
        r = np.random.default_rng(7)
        cnn_options = self._options["char_cnn"]
        n_chars = cnn_options["n_characters"]
        char_embed_dim = cnn_options["embedding"]["dim"]
        weights = np.zeros((n_chars + 1, char_embed_dim), dtype="float32")
        weights[1:, :] = 0.5 * r.standard_normal((n_chars, char_embed_dim))
        self._char_embedding_weights = torch.nn.Parameter(
            torch.FloatTensor(weights), requires_grad=self.requires_grad
        )
        filters = cnn_options["filters"]
        convolutions = []
        for i, (width, num) in enumerate(filters):
            conv = torch.nn.Conv1d(in_channels=char_embed_dim, out_channels=num, kernel_size=width, bias=True)
            w_reshaped = r.standard_normal((num, char_embed_dim, width)).astype(np.float32) * 0.3
            conv.weight.data.copy_(torch.FloatTensor(w_reshaped))
            conv.bias.data.copy_(torch.FloatTensor(0.1 * r.standard_normal(num).astype(np.float32)))
            conv.weight.requires_grad = self.requires_grad
            conv.bias.requires_grad = self.requires_grad
            convolutions.append(conv)
            self.add_module("char_conv_{}".format(i), conv)
        self._convolutions = convolutions

        n_filters = sum(f[1] for f in filters)
        n_highway = cnn_options["n_highway"]
        # create the layers, and load the weights
        self._highways = Highway(n_filters, n_highway, activation=torch.nn.functional.relu)
        print("highway bias", self._highways._layers[0].bias[n_filters:].tolist()[:3],
              self._highways._layers[0].bias.requires_grad)
        for k in range(n_highway):
            # The AllenNLP highway is one matrix multplication with concatenation of
            # transform and carry weights.
            w_transform = (r.standard_normal((n_filters, n_filters)) / np.sqrt(n_filters)).astype(np.float32)
            w_carry = (r.standard_normal((n_filters, n_filters)) / np.sqrt(n_filters)).astype(np.float32)
            weight = np.concatenate([w_transform, w_carry], axis=0)
            self._highways._layers[k].weight.data.copy_(torch.FloatTensor(weight))
            self._highways._layers[k].weight.requires_grad = self.requires_grad
            b_transform = np.zeros(n_filters, dtype=np.float32)
            b_carry = np.full(n_filters, -2.0, dtype=np.float32)
            bias = np.concatenate([b_transform, b_carry], axis=0)
            self._highways._layers[k].bias.data.copy_(torch.FloatTensor(bias))
            self._highways._layers[k].bias.requires_grad = self.requires_grad

        self._projection = torch.nn.Linear(n_filters, self.output_dim, bias=True)
        weight = (r.standard_normal((n_filters, self.output_dim)) / np.sqrt(n_filters)).astype(np.float32)
        self._projection.weight.data.copy_(torch.FloatTensor(np.transpose(weight)))
        self._projection.bias.data.copy_(torch.FloatTensor(np.zeros(self.output_dim, np.float32)))
        self._projection.weight.requires_grad = self.requires_grad
        self._projection.bias.requires_grad = self.requires_grad

    def get_output_dim(self):
        return self.output_dim

    def forward(self, inputs):
        # Add BOS/EOS
        mask = (inputs > 0).sum(dim=-1) > 0
        character_ids_with_bos_eos, mask_with_bos_eos = add_sentence_boundary_token_ids(
            inputs, mask, self._beginning_of_sentence_characters, self._end_of_sentence_characters
        )

        # the character id embedding
        max_chars_per_token = self._options["char_cnn"]["max_characters_per_token"]
        # (batch_size * sequence_length, max_chars_per_token, embed_dim)
        character_embedding = torch.nn.functional.embedding(
            character_ids_with_bos_eos.view(-1, max_chars_per_token), self._char_embedding_weights
        )

        # run convolutions
        cnn_options = self._options["char_cnn"]
        if cnn_options["activation"] == "tanh":
            activation = torch.tanh
        elif cnn_options["activation"] == "relu":
            activation = torch.nn.functional.relu
        else:
            raise Exception("Unknown activation")

        # (batch_size * sequence_length, embed_dim, max_chars_per_token)
        character_embedding = torch.transpose(character_embedding, 1, 2)
        convs = []
        for i in range(len(self._convolutions)):
            conv = getattr(self, "char_conv_{}".format(i))
            convolved = conv(character_embedding)
            # (batch_size * sequence_length, n_filters for this width)
            convolved, _ = torch.max(convolved, dim=-1)
            convolved = activation(convolved)
            convs.append(convolved)

        # (batch_size * sequence_length, n_filters)
        token_embedding = torch.cat(convs, dim=-1)

        # apply the highway layers (batch_size * sequence_length, n_filters)
        token_embedding = self._highways(token_embedding)

        # final projection  (batch_size * sequence_length, embedding_dim)
        token_embedding = self._projection(token_embedding)

        # reshape to (batch_size, sequence_length, embedding_dim)
        batch_size, sequence_length, _ = character_ids_with_bos_eos.size()

        return {
            "mask": mask_with_bos_eos,
            "token_embedding": token_embedding.view(batch_size, sequence_length, -1),
        }


options = {"lstm": {"projection_dim": 8},
           "char_cnn": {"activation": "tanh", "n_characters": 262, "embedding": {"dim": 4},
                        "filters": [[1, 4], [2, 8], [3, 8]], "n_highway": 2,
                        "max_characters_per_token": ELMoCharacterMapper.max_word_length}}
encoder = _ElmoCharacterEncoder(options, requires_grad=True)
mapper = ELMoCharacterMapper()
sentences = [["The", "cat", "sat"], ["Hello", "wörld"], ["characterization"]]
ids = torch.zeros(3, 3, ELMoCharacterMapper.max_word_length, dtype=torch.long)
for i, sent in enumerate(sentences):
    for j, word in enumerate(sent):
        ids[i, j] = torch.tensor(mapper.convert_word_to_char_ids(word))
print("char ids", ids[1, 1].tolist(), ids[2, 0].tolist())
out = encoder(ids)
print("mask", out["mask"].tolist())
emb = out["token_embedding"]
print("token_embedding", tuple(emb.shape), [f"{v:.4f}" for v in emb[1, 2].tolist()])
emb.pow(2).sum().backward()
print("grads", f"{encoder._char_embedding_weights.grad.abs().sum().item():.5f}",
      f"{encoder._highways._layers[1].bias.grad.abs().sum().item():.5f}",
      encoder._char_embedding_weights.grad[0].abs().sum().item())

# a token-classification training step over the ELMo character encoder (not compiled:
# add_sentence_boundary_token_ids reads the sequence lengths in numpy, and the loss
# picks the unmasked tokens by boolean indexing, so its shapes depend on the data)
head = nn.Linear(8, 3)
with torch.no_grad():
    head.weight.copy_(torch.from_numpy((0.3 * r.standard_normal((3, 8))).astype(np.float32)))
    head.bias.zero_()
tags = torch.tensor([[0, 1, 2, 0, 0], [0, 2, 1, 0, 0], [0, 1, 0, 0, 0]])
opt = torch.optim.Adam(list(encoder.parameters()) + list(head.parameters()), lr=0.01)
for step in range(3):
    out = encoder(ids)
    logits = head(out["token_embedding"])
    loss = F.cross_entropy(logits[out["mask"]], tags[out["mask"]])
    opt.zero_grad()
    loss.backward()
    opt.step()
    print("tagger step", step, f"{loss.item():.6f}")
