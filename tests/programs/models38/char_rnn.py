# PyTorch tutorials "NLP From Scratch: Classifying Names with a
# Character-Level RNN" (its 2024 version) and "NLP From Scratch: Generating
# Names with a Character-Level RNN", written the way the tutorials have
# them: torch.set_default_device / get_default_device, unicodeToAscii with
# unicodedata NFD, letterToIndex's "_" out-of-vocabulary character,
# lineToTensor's `tensor[li][0][...] = 1`, the NamesDataset subclass with
# cached data / label tensors, random_split(alldata, [.85, .15],
# generator=torch.Generator(device=device).manual_seed(2024)), CharRNN over
# nn.RNN with h2o and LogSoftmax, label_from_output's topk, train's
# random.shuffle / np.array_split minibatches summing per-name NLLLoss,
# clip_grad_norm_(rnn.parameters(), 3), SGD, the confusion matrix built with
# `confusion[label_i][guess_i] += 1` and normalized row by row; then the
# generator RNN (category + input + hidden concatenated, i2h / i2o / o2o,
# Dropout(0.1), LogSoftmax), randomTrainingExample with random.randint,
# targetTensor's torch.LongTensor, train's `target_line_tensor.unsqueeze_(-1)`,
# `loss = torch.Tensor([0])` and `loss += l`, the manual
# `p.data.add_(p.grad.data, alpha=-learning_rate)` update, timeSince, and
# sample()'s `topv, topi = output.topk(1)` with dropout still on.  Changes
# for a CPU test: small inline name lists written to data/names/*.txt
# (three languages), the glob and the label set sorted (Python's string
# hashing orders a set differently in every process), hidden size 32, a
# few epochs / iterations, the timing lines marked [rng], the plots left
# out; then the generator's step in eval mode (no dropout) and CharRNN's
# forward under torch.compile checked against eager.
from __future__ import unicode_literals, print_function, division

import glob
import math
import os
import random
import string
import time
import unicodedata
from io import open

import numpy as np
import torch
import torch.nn as nn
from torch.utils.data import Dataset

NAMES = {
    'English': ['Abbott', 'Barker', 'Clarke', 'Dawson', 'Ellis', 'Fletcher', 'Gibson', 'Harris'],
    'Russian': ['Abakov', 'Belov', 'Chekov', 'Durov', 'Egorov', 'Fedorov', 'Gorky', 'Ivanov'],
    'Polish': ['Ślusàrski', 'Adamczak', 'Bajek', 'Czajka', 'Dąbrowski', 'Fabian', 'Gorski', 'Jankowski'],
}
os.makedirs('data/names', exist_ok=True)
for lang, names in NAMES.items():
    with open(os.path.join('data/names', lang + '.txt'), 'w', encoding='utf-8') as f:
        f.write('\n'.join(names) + '\n')

torch.manual_seed(0)
random.seed(0)

# Check if CUDA is available
device = torch.device('cpu')
if torch.cuda.is_available():
    device = torch.device('cuda')

torch.set_default_device(device)
print(f"Using device = {torch.get_default_device()}")

# We can use "_" to represent an out-of-vocabulary character, that is, any character we are not handling in our model
allowed_characters = string.ascii_letters + " .,;'" + "_"
n_letters = len(allowed_characters)


# Turn a Unicode string to plain ASCII, thanks to https://stackoverflow.com/a/518232/2809427
def unicodeToAscii(s):
    return ''.join(
        c for c in unicodedata.normalize('NFD', s)
        if unicodedata.category(c) != 'Mn'
        and c in allowed_characters
    )


print(f"converting 'Ślusàrski' to {unicodeToAscii('Ślusàrski')}")


# Find letter index from all_letters, e.g. "a" = 0
def letterToIndex(letter):
    # return our out-of-vocabulary character if we encounter a letter unknown to our model
    if letter not in allowed_characters:
        return allowed_characters.find("_")
    else:
        return allowed_characters.find(letter)


# Turn a line into a <line_length x 1 x n_letters>,
# or an array of one-hot letter vectors
def lineToTensor(line):
    tensor = torch.zeros(len(line), 1, n_letters)
    for li, letter in enumerate(line):
        tensor[li][0][letterToIndex(letter)] = 1
    return tensor


print(f"The letter 'a' becomes {lineToTensor('a').nonzero().tolist()}")  # notice that the first position in the tensor = 1
print(f"The name 'Ahn' becomes {lineToTensor('Ahn').argmax(dim=2).flatten().tolist()}")  # notice 'A' sets the 27th index to 1


class NamesDataset(Dataset):

    def __init__(self, data_dir):
        self.data_dir = data_dir  # for provenance of the dataset
        self.load_time = time.localtime  # for provenance of the dataset
        labels_set = set()  # set of all classes

        self.data = []
        self.data_tensors = []
        self.labels = []
        self.labels_tensors = []

        # read all the ``.txt`` files in the specified directory
        text_files = sorted(glob.glob(os.path.join(data_dir, '*.txt')))
        for filename in text_files:
            label = os.path.splitext(os.path.basename(filename))[0]
            labels_set.add(label)
            lines = open(filename, encoding='utf-8').read().strip().split('\n')
            for name in lines:
                self.data.append(name)
                self.data_tensors.append(lineToTensor(name))
                self.labels.append(label)

        # Cache the tensor representation of the labels
        self.labels_uniq = sorted(labels_set)
        for idx in range(len(self.labels)):
            temp_tensor = torch.tensor([self.labels_uniq.index(self.labels[idx])], dtype=torch.long)
            self.labels_tensors.append(temp_tensor)

    def __len__(self):
        return len(self.data)

    def __getitem__(self, idx):
        data_item = self.data[idx]
        data_label = self.labels[idx]
        data_tensor = self.data_tensors[idx]
        label_tensor = self.labels_tensors[idx]

        return label_tensor, data_tensor, data_label, data_item


alldata = NamesDataset("data/names")
print(f"loaded {len(alldata)} items of data")
label_tensor, data_tensor, data_label, data_item = alldata[0]
print(f"example = ({label_tensor}, tensor of shape {tuple(data_tensor.shape)}, '{data_label}', '{data_item}')")

train_set, test_set = torch.utils.data.random_split(alldata, [.85, .15], generator=torch.Generator(device=device).manual_seed(2024))

print(f"train examples = {len(train_set)}, validation examples = {len(test_set)}")
print('validation names', [test_set[i][3] for i in range(len(test_set))])

import torch.nn.functional as F  # noqa: E402


class CharRNN(nn.Module):
    def __init__(self, input_size, hidden_size, output_size):
        super(CharRNN, self).__init__()

        self.rnn = nn.RNN(input_size, hidden_size)
        self.h2o = nn.Linear(hidden_size, output_size)
        self.softmax = nn.LogSoftmax(dim=1)

    def forward(self, line_tensor):
        rnn_out, hidden = self.rnn(line_tensor)
        output = self.h2o(hidden[0])
        output = self.softmax(output)

        return output


n_hidden = 32
rnn = CharRNN(n_letters, n_hidden, len(alldata.labels_uniq))
print(rnn)


def label_from_output(output, output_labels):
    top_n, top_i = output.topk(1)
    label_i = top_i[0].item()
    return output_labels[label_i], label_i


input = lineToTensor('Albert')
output = rnn(input)  # this is equivalent to ``output = rnn.forward(input)``
print(output)
print(label_from_output(output, alldata.labels_uniq))


def train(rnn, training_data, n_epoch=10, n_batch_size=64, report_every=50, learning_rate=0.2, criterion=nn.NLLLoss()):
    """
    Learn on a batch of training_data for a specified number of iterations and reporting thresholds
    """
    # Keep track of losses for plotting
    current_loss = 0
    all_losses = []
    rnn.train()
    optimizer = torch.optim.SGD(rnn.parameters(), lr=learning_rate)

    start = time.time()
    print(f"training on data set with n = {len(training_data)}")

    for iter in range(1, n_epoch + 1):
        rnn.zero_grad()  # clear the gradients

        # create some minibatches
        # we cannot use dataloaders because each of our names is a different length
        batches = list(range(len(training_data)))
        random.shuffle(batches)
        batches = np.array_split(batches, len(batches) // n_batch_size)

        for idx, batch in enumerate(batches):
            batch_loss = 0
            for i in batch:  # for each example in this batch
                (label_tensor, text_tensor, label, text) = training_data[i]
                output = rnn.forward(text_tensor)
                loss = criterion(output, label_tensor)
                batch_loss += loss

            # optimize parameters
            batch_loss.backward()
            nn.utils.clip_grad_norm_(rnn.parameters(), 3)
            optimizer.step()
            optimizer.zero_grad()

            current_loss += batch_loss.item() / len(batch)

        all_losses.append(current_loss / len(batches))
        if iter % report_every == 0:
            print(f"{iter} ({iter / n_epoch:.0%}): \t average batch loss = {all_losses[-1]}")
        current_loss = 0

    return all_losses


start = time.time()
all_losses = train(rnn, train_set, n_epoch=6, n_batch_size=5, learning_rate=0.15, report_every=2)
end = time.time()
print(f"[rng] training took {end-start}s")


def evaluate(rnn, testing_data, classes):
    confusion = torch.zeros(len(classes), len(classes))

    rnn.eval()  # set to eval mode
    with torch.no_grad():  # do not record the gradients during eval phase
        for i in range(len(testing_data)):
            (label_tensor, text_tensor, label, text) = testing_data[i]
            output = rnn(text_tensor)
            guess, guess_i = label_from_output(output, classes)
            label_i = classes.index(label)
            confusion[label_i][guess_i] += 1

    # Normalize by dividing every row by its sum
    for i in range(len(classes)):
        denom = confusion[i].sum()
        if denom > 0:
            confusion[i] = confusion[i] / denom

    return confusion


confusion = evaluate(rnn, test_set, classes=alldata.labels_uniq)
print(confusion)
print('train-set confusion diagonal', evaluate(rnn, train_set, classes=alldata.labels_uniq).diag())
classifier = rnn

# Generating Names with a Character-Level RNN
all_letters = string.ascii_letters + " .,;'-"
n_letters = len(all_letters) + 1  # Plus EOS marker

category_lines = {}
all_categories = []
for filename in sorted(glob.glob('data/names/*.txt')):
    category = os.path.splitext(os.path.basename(filename))[0]
    all_categories.append(category)
    lines = [unicodeToAscii(line) for line in open(filename, encoding='utf-8').read().strip().split('\n')]
    category_lines[category] = lines

n_categories = len(all_categories)
print('# categories:', n_categories, all_categories)
print(unicodeToAscii("O'Néàl"))


class RNN(nn.Module):
    def __init__(self, input_size, hidden_size, output_size):
        super(RNN, self).__init__()
        self.hidden_size = hidden_size

        self.i2h = nn.Linear(n_categories + input_size + hidden_size, hidden_size)
        self.i2o = nn.Linear(n_categories + input_size + hidden_size, output_size)
        self.o2o = nn.Linear(hidden_size + output_size, output_size)
        self.dropout = nn.Dropout(0.1)
        self.softmax = nn.LogSoftmax(dim=1)

    def forward(self, category, input, hidden):
        input_combined = torch.cat((category, input, hidden), 1)
        hidden = self.i2h(input_combined)
        output = self.i2o(input_combined)
        output_combined = torch.cat((hidden, output), 1)
        output = self.o2o(output_combined)
        output = self.dropout(output)
        output = self.softmax(output)
        return output, hidden

    def initHidden(self):
        return torch.zeros(1, self.hidden_size)


# Random item from a list
def randomChoice(l):
    return l[random.randint(0, len(l) - 1)]


# Get a random category and random line from that category
def randomTrainingPair():
    category = randomChoice(all_categories)
    line = randomChoice(category_lines[category])
    return category, line


# One-hot vector for category
def categoryTensor(category):
    li = all_categories.index(category)
    tensor = torch.zeros(1, n_categories)
    tensor[0][li] = 1
    return tensor


# One-hot matrix of first to last letters (not including EOS) for input
def inputTensor(line):
    tensor = torch.zeros(len(line), 1, n_letters)
    for li in range(len(line)):
        letter = line[li]
        tensor[li][0][all_letters.find(letter)] = 1
    return tensor


# ``LongTensor`` of second letter to end (EOS) for target
def targetTensor(line):
    letter_indexes = [all_letters.find(line[li]) for li in range(1, len(line))]
    letter_indexes.append(n_letters - 1)  # EOS
    return torch.LongTensor(letter_indexes)


# Make category, input, and target tensors from a random category, line pair
def randomTrainingExample():
    category, line = randomTrainingPair()
    category_tensor = categoryTensor(category)
    input_line_tensor = inputTensor(line)
    target_line_tensor = targetTensor(line)
    return category_tensor, input_line_tensor, target_line_tensor


criterion = nn.NLLLoss()

learning_rate = 0.0005


def train(category_tensor, input_line_tensor, target_line_tensor):
    target_line_tensor.unsqueeze_(-1)
    hidden = rnn.initHidden()

    rnn.zero_grad()

    loss = torch.Tensor([0])  # you can also just simply use ``loss = 0``

    for i in range(input_line_tensor.size(0)):
        output, hidden = rnn(category_tensor, input_line_tensor[i], hidden)
        l = criterion(output, target_line_tensor[i])
        loss += l

    loss.backward()

    for p in rnn.parameters():
        p.data.add_(p.grad.data, alpha=-learning_rate)

    return output, loss.item() / input_line_tensor.size(0)


def timeSince(since):
    now = time.time()
    s = now - since
    m = math.floor(s / 60)
    s -= m * 60
    return '%dm %ds' % (m, s)


rnn = RNN(n_letters, 32, n_letters)

n_iters = 40
print_every = 10
plot_every = 5
all_losses = []
total_loss = 0  # Reset every ``plot_every`` ``iters``

start = time.time()

for iter in range(1, n_iters + 1):
    output, loss = train(*randomTrainingExample())
    total_loss += loss

    if iter % print_every == 0:
        print('[rng] %s' % timeSince(start), '(%d %d%%) %.4f' % (iter, iter / n_iters * 100, loss))

    if iter % plot_every == 0:
        all_losses.append(total_loss / plot_every)
        total_loss = 0

print('losses', all_losses)

max_length = 20


# Sample from a category and starting letter
def sample(category, start_letter='A'):
    with torch.no_grad():  # no need to track history in sampling
        category_tensor = categoryTensor(category)
        input = inputTensor(start_letter)
        hidden = rnn.initHidden()

        output_name = start_letter

        for i in range(max_length):
            output, hidden = rnn(category_tensor, input[0], hidden)
            topv, topi = output.topk(1)
            topi = topi[0][0]
            if topi == n_letters - 1:
                break
            else:
                letter = all_letters[topi]
                output_name += letter
            input = inputTensor(letter)

        return output_name


# Get multiple samples from one category and multiple starting letters
def samples(category, start_letters='ABC'):
    for start_letter in start_letters:
        print(sample(category, start_letter))


samples('Russian', 'RUS')
samples('Polish', 'PAB')

# compiled: the generator's step (eval mode: no dropout) and CharRNN's
# forward, checked against eager
rnn.eval()
category_tensor, input_line_tensor, _ = randomTrainingExample()
hidden = rnn.initHidden()
out_c, hid_c = torch.compile(rnn)(category_tensor, input_line_tensor[0], hidden)
out_e, hid_e = rnn(category_tensor, input_line_tensor[0], hidden)
print('compiled == eager (generator)', torch.allclose(out_c, out_e, atol=1e-6), torch.allclose(hid_c, hid_e, atol=1e-6))
line = alldata.data_tensors[-1]
print('compiled == eager (CharRNN)', torch.allclose(torch.compile(classifier)(line), classifier(line), atol=1e-6))
