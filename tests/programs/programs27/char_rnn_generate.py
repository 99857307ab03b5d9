# spro's char-rnn.pytorch (https://github.com/spro/char-rnn.pytorch,
# model.py / train.py / generate.py / helpers.py), as written: CharRNN
# (nn.Embedding, a 2-layer nn.GRU fed one step at a time, input.view(1, -1)
# and output.view(batch_size, -1)), random_training_set cutting chunks with
# random.randint, char_tensor through string.printable, the training loop
# over chunk_len steps accumulating the CrossEntropyLoss and dividing
# loss.data.item() by chunk_len, and generate(): the prime string fed
# character by character, then output.data.view(-1).div(temperature).exp()
# and torch.multinomial(output_dist, 1)[0] to draw each next character.
# Written for this test: a 2-sentence corpus, chunks of 12, 8 epochs of
# batch 4, a 20-character sample; one compiled training step against eager.
import copy
import random
import string

import torch
import torch.nn as nn
from torch.autograd import Variable

all_characters = string.printable
n_characters = len(all_characters)

file = ("the quick brown fox jumps over the lazy dog. "
        "a stitch in time saves nine, and the early bird catches the worm. ") * 3
file_len = len(file)


def char_tensor(string):
    tensor = torch.zeros(len(string)).long()
    for c in range(len(string)):
        try:
            tensor[c] = all_characters.index(string[c])
        except:
            continue
    return tensor


class CharRNN(nn.Module):
    def __init__(self, input_size, hidden_size, output_size, model="gru", n_layers=1):
        super(CharRNN, self).__init__()
        self.model = model.lower()
        self.input_size = input_size
        self.hidden_size = hidden_size
        self.output_size = output_size
        self.n_layers = n_layers

        self.encoder = nn.Embedding(input_size, hidden_size)
        if self.model == "gru":
            self.rnn = nn.GRU(hidden_size, hidden_size, n_layers)
        elif self.model == "lstm":
            self.rnn = nn.LSTM(hidden_size, hidden_size, n_layers)
        self.decoder = nn.Linear(hidden_size, output_size)

    def forward(self, input, hidden):
        batch_size = input.size(0)
        encoded = self.encoder(input)
        output, hidden = self.rnn(encoded.view(1, batch_size, -1), hidden)
        output = self.decoder(output.view(batch_size, -1))
        return output, hidden

    def init_hidden(self, batch_size):
        if self.model == "lstm":
            return (Variable(torch.zeros(self.n_layers, batch_size, self.hidden_size)),
                    Variable(torch.zeros(self.n_layers, batch_size, self.hidden_size)))
        return Variable(torch.zeros(self.n_layers, batch_size, self.hidden_size))


def generate(decoder, prime_str="A", predict_len=100, temperature=0.8, cuda=False):
    hidden = decoder.init_hidden(1)
    prime_input = Variable(char_tensor(prime_str).unsqueeze(0))
    predicted = prime_str

    # Use priming string to "build up" hidden state
    for p in range(len(prime_str) - 1):
        _, hidden = decoder(prime_input[:, p], hidden)

    inp = prime_input[:, -1]

    for p in range(predict_len):
        output, hidden = decoder(inp, hidden)

        # Sample from the network as a multinomial distribution
        output_dist = output.data.view(-1).div(temperature).exp()
        top_i = torch.multinomial(output_dist, 1)[0]

        # Add predicted character to string and use as next input
        predicted_char = all_characters[top_i]
        predicted += predicted_char
        inp = Variable(char_tensor(predicted_char).unsqueeze(0))

    return predicted


chunk_len, batch_size, hidden_size, n_layers = 12, 4, 24, 2


def random_training_set(chunk_len, batch_size):
    inp = torch.LongTensor(batch_size, chunk_len)
    target = torch.LongTensor(batch_size, chunk_len)
    for bi in range(batch_size):
        start_index = random.randint(0, file_len - chunk_len)
        end_index = start_index + chunk_len + 1
        chunk = file[start_index:end_index]
        inp[bi] = char_tensor(chunk[:-1])
        target[bi] = char_tensor(chunk[1:])
    inp = Variable(inp)
    target = Variable(target)
    return inp, target


def train(inp, target):
    hidden = decoder.init_hidden(batch_size)
    decoder.zero_grad()
    loss = 0

    for c in range(chunk_len):
        output, hidden = decoder(inp[:, c], hidden)
        loss += criterion(output.view(batch_size, -1), target[:, c])

    loss.backward()
    decoder_optimizer.step()

    return loss.data.item() / chunk_len


random.seed(0)
torch.manual_seed(0)
decoder = CharRNN(n_characters, hidden_size, n_characters, model="gru", n_layers=n_layers)
decoder_optimizer = torch.optim.Adam(decoder.parameters(), lr=0.01)
criterion = nn.CrossEntropyLoss()

all_losses = []
loss_avg = 0
for epoch in range(1, 9):
    loss = train(*random_training_set(chunk_len, batch_size))
    loss_avg += loss
    if epoch % 2 == 0:
        print("[(%d %d%%) %.4f]" % (epoch, epoch / 8 * 100, loss))

print(generate(decoder, "th", 20, temperature=0.8))

# the LSTM variant's hidden tuple, one step
lstm = CharRNN(n_characters, 8, n_characters, model="lstm", n_layers=1)
out, (h, c) = lstm(char_tensor("ab"), lstm.init_hidden(2))
print("lstm", tuple(out.shape), tuple(h.shape), round(out.sum().item(), 5))

inp, target = random_training_set(chunk_len, batch_size)
state, opt_state = copy.deepcopy(decoder.state_dict()), copy.deepcopy(decoder_optimizer.state_dict())
train_c = torch.compile(train)
loss_c = train_c(inp, target)
after_c = copy.deepcopy(decoder.state_dict())
decoder.load_state_dict(state)
decoder_optimizer.load_state_dict(opt_state)
loss_e = train(inp, target)
print("compiled loss", round(loss_c, 5))
print("compiled == eager", abs(loss_c - loss_e) < 1e-6,
      all(torch.allclose(after_c[k], v, atol=1e-5) for k, v in decoder.state_dict().items()))
