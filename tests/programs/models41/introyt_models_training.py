# PyTorch "Intro to PyTorch" YouTube series, "Building Models with PyTorch"
# (beginner/introyt/modelsyt_tutorial) and "Training with PyTorch"
# (beginner/introyt/trainingyt), written the way the tutorials have them:
# TinyModel (Linear / ReLU / Softmax() with no dim, printed with its
# parameters), a Linear's weight and bias, LeNet with num_flat_features and
# x.view(-1, ...), LSTMTagger (Embedding, nn.LSTM over embeds.view(len, 1, -1),
# log_softmax), nn.Transformer's constructor, MaxPool2d(3) on a 1x6x6 tensor,
# BatchNorm1d(4) on a shifted 1x4x4 tensor, Dropout(p=0.4) applied twice;
# then GarmentClassifier trained with train_one_epoch (running_loss reported
# every N batches), CrossEntropyLoss on dummy outputs, SGD(lr=0.001,
# momentum=0.9), validation under torch.no_grad() with model.eval(), and the
# best-vloss checkpoint saved and loaded back.  Changes for a CPU test:
# torch.manual_seed(0) up front; FashionMNIST replaced by random 1x28x28
# images in TensorDatasets (64 training, 16 validation instead of 60000 /
# 10000, the loaders' batch_size=4, shuffle=True for training), a report
# every 4 batches instead of 1000, 2 epochs instead of 5, the TensorBoard
# SummaryWriter calls left out, the checkpoint's timestamped name replaced
# by a fixed one, a small nn.Transformer (d_model=16, nhead=2, one layer
# each); and one GarmentClassifier training step under torch.compile checked
# against the same step eagerly.
import copy

import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)

# ---- Building Models with PyTorch ----


class TinyModel(torch.nn.Module):

    def __init__(self):
        super(TinyModel, self).__init__()

        self.linear1 = torch.nn.Linear(100, 200)
        self.activation = torch.nn.ReLU()
        self.linear2 = torch.nn.Linear(200, 10)
        self.softmax = torch.nn.Softmax()

    def forward(self, x):
        x = self.linear1(x)
        x = self.activation(x)
        x = self.linear2(x)
        x = self.softmax(x)
        return x


tinymodel = TinyModel()

print('The model:')
print(tinymodel)

print('\n\nJust one layer:')
print(tinymodel.linear2)

print('\n\nModel params:')
for param in tinymodel.parameters():
    print(param)

print('\n\nLayer params:')
for param in tinymodel.linear2.parameters():
    print(param)

print(tinymodel(torch.rand(2, 100)).sum(dim=1))

lin = torch.nn.Linear(3, 2)
x = torch.rand(1, 3)
print('Input:')
print(x)

print('\n\nWeight and Bias parameters:')
for param in lin.parameters():
    print(param)

y = lin(x)
print('\n\nOutput:')
print(y)


class LeNet(torch.nn.Module):

    def __init__(self):
        super(LeNet, self).__init__()
        # 1 input image channel (black & white), 6 output channels, 5x5 square convolution
        # kernel
        self.conv1 = torch.nn.Conv2d(1, 6, 5)
        self.conv2 = torch.nn.Conv2d(6, 16, 3)
        # an affine operation: y = Wx + b
        self.fc1 = torch.nn.Linear(16 * 6 * 6, 120)  # 6*6 from image dimension
        self.fc2 = torch.nn.Linear(120, 84)
        self.fc3 = torch.nn.Linear(84, 10)

    def forward(self, x):
        # Max pooling over a (2, 2) window
        x = F.max_pool2d(F.relu(self.conv1(x)), (2, 2))
        # If the size is a square you can only specify a single number
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        x = x.view(-1, self.num_flat_features(x))
        x = F.relu(self.fc1(x))
        x = F.relu(self.fc2(x))
        x = self.fc3(x)
        return x

    def num_flat_features(self, x):
        size = x.size()[1:]  # all dimensions except the batch dimension
        num_features = 1
        for s in size:
            num_features *= s
        return num_features


net = LeNet()
print(net)
print(net(torch.rand(1, 1, 32, 32)))


class LSTMTagger(torch.nn.Module):

    def __init__(self, embedding_dim, hidden_dim, vocab_size, tagset_size):
        super(LSTMTagger, self).__init__()
        self.hidden_dim = hidden_dim

        self.word_embeddings = torch.nn.Embedding(vocab_size, embedding_dim)

        # The LSTM takes word embeddings as inputs, and outputs hidden states
        # with dimensionality hidden_dim.
        self.lstm = torch.nn.LSTM(embedding_dim, hidden_dim)

        # The linear layer that maps from hidden state space to tag space
        self.hidden2tag = torch.nn.Linear(hidden_dim, tagset_size)

    def forward(self, sentence):
        embeds = self.word_embeddings(sentence)
        lstm_out, _ = self.lstm(embeds.view(len(sentence), 1, -1))
        tag_space = self.hidden2tag(lstm_out.view(len(sentence), -1))
        tag_scores = F.log_softmax(tag_space, dim=1)
        return tag_scores


tagger = LSTMTagger(6, 6, 9, 3)
print(tagger)
print(tagger(torch.tensor([0, 4, 2, 7, 1])))

transformer = torch.nn.Transformer(d_model=16, nhead=2, num_encoder_layers=1,
                                   num_decoder_layers=1, dim_feedforward=32)
print(transformer.encoder.layers[0].self_attn)
print(sum(p.numel() for p in transformer.parameters()))

my_tensor = torch.rand(1, 6, 6)
print(my_tensor)

maxpool_layer = torch.nn.MaxPool2d(3)
print(maxpool_layer(my_tensor))

my_tensor = torch.rand(1, 4, 4) * 20 + 5
print(my_tensor)

print(my_tensor.mean())

norm_layer = torch.nn.BatchNorm1d(4)
normed_tensor = norm_layer(my_tensor)
print(normed_tensor)

print(normed_tensor.mean())

my_tensor = torch.rand(1, 4, 4)

dropout = torch.nn.Dropout(p=0.4)
print(dropout(my_tensor))
print(dropout(my_tensor))

# ---- Training with PyTorch ----

training_set = torch.utils.data.TensorDataset(torch.randn(64, 1, 28, 28),
                                              torch.randint(0, 10, (64,)))
validation_set = torch.utils.data.TensorDataset(torch.randn(16, 1, 28, 28),
                                                torch.randint(0, 10, (16,)))

# Create data loaders for our datasets; shuffle for training, not for validation
training_loader = torch.utils.data.DataLoader(training_set, batch_size=4, shuffle=True)
validation_loader = torch.utils.data.DataLoader(validation_set, batch_size=4, shuffle=False)

# Class labels
classes = ('T-shirt/top', 'Trouser', 'Pullover', 'Dress', 'Coat',
           'Shirt', 'Sandal', 'Sneaker', 'Bag', 'Ankle Boot')

# Report split sizes
print('Training set has {} instances'.format(len(training_set)))
print('Validation set has {} instances'.format(len(validation_set)))

dataiter = iter(training_loader)
images, labels = next(dataiter)
print('  '.join(classes[labels[j]] for j in range(4)))


# PyTorch models inherit from torch.nn.Module
class GarmentClassifier(nn.Module):
    def __init__(self):
        super(GarmentClassifier, self).__init__()
        self.conv1 = nn.Conv2d(1, 6, 5)
        self.pool = nn.MaxPool2d(2, 2)
        self.conv2 = nn.Conv2d(6, 16, 5)
        self.fc1 = nn.Linear(16 * 4 * 4, 120)
        self.fc2 = nn.Linear(120, 84)
        self.fc3 = nn.Linear(84, 10)

    def forward(self, x):
        x = self.pool(F.relu(self.conv1(x)))
        x = self.pool(F.relu(self.conv2(x)))
        x = x.view(-1, 16 * 4 * 4)
        x = F.relu(self.fc1(x))
        x = F.relu(self.fc2(x))
        x = self.fc3(x)
        return x


model = GarmentClassifier()

loss_fn = torch.nn.CrossEntropyLoss()

# NB: Loss functions expect data in batches, so we're creating batches of 4
# Represents the model's confidence in each of the 10 classes for a given input
dummy_outputs = torch.rand(4, 10)
# Represents the correct class among the 10 being tested
dummy_labels = torch.tensor([1, 5, 3, 7])

print(dummy_outputs)
print(dummy_labels)

loss = loss_fn(dummy_outputs, dummy_labels)
print('Total loss for this batch: {}'.format(loss.item()))

# compiled: one training step, checked against the same step eagerly
check = GarmentClassifier()
check_ref = copy.deepcopy(check)
opt_c = torch.optim.SGD(check.parameters(), lr=0.001, momentum=0.9)
opt_e = torch.optim.SGD(check_ref.parameters(), lr=0.001, momentum=0.9)


def train_step(m, opt, inputs, labels):
    opt.zero_grad()
    loss = loss_fn(m(inputs), labels)
    loss.backward()
    opt.step()
    return loss


loss_c = torch.compile(train_step)(check, opt_c, images, labels)
loss_e = train_step(check_ref, opt_e, images, labels)
print('compiled == eager:', torch.allclose(loss_c, loss_e, rtol=1e-5),
      all(torch.allclose(p, q, rtol=1e-4, atol=1e-6)
          for p, q in zip(check.parameters(), check_ref.parameters())))

# Optimizers specified in the torch.optim package
optimizer = torch.optim.SGD(model.parameters(), lr=0.001, momentum=0.9)


def train_one_epoch(epoch_index):
    running_loss = 0.
    last_loss = 0.

    # Here, we use enumerate(training_loader) instead of
    # iter(training_loader) so that we can track the batch
    # index and do some intra-epoch reporting
    for i, data in enumerate(training_loader):
        # Every data instance is an input + label pair
        inputs, labels = data

        # Zero your gradients for every batch!
        optimizer.zero_grad()

        # Make predictions for this batch
        outputs = model(inputs)

        # Compute the loss and its gradients
        loss = loss_fn(outputs, labels)
        loss.backward()

        # Adjust learning weights
        optimizer.step()

        # Gather data and report
        running_loss += loss.item()
        if i % 4 == 3:
            last_loss = running_loss / 4  # loss per batch
            print('  batch {} loss: {}'.format(i + 1, last_loss))
            running_loss = 0.

    return last_loss


timestamp = 'fixed'
epoch_number = 0

EPOCHS = 2

best_vloss = 1_000_000.

for epoch in range(EPOCHS):
    print('EPOCH {}:'.format(epoch_number + 1))

    # Make sure gradient tracking is on, and do a pass over the data
    model.train(True)
    avg_loss = train_one_epoch(epoch_number)

    running_vloss = 0.0
    # Set the model to evaluation mode, disabling dropout and using population
    # statistics for batch normalization.
    model.eval()

    # Disable gradient computation and reduce memory consumption.
    with torch.no_grad():
        for i, vdata in enumerate(validation_loader):
            vinputs, vlabels = vdata
            voutputs = model(vinputs)
            vloss = loss_fn(voutputs, vlabels)
            running_vloss += vloss

    avg_vloss = running_vloss / (i + 1)
    print('LOSS train {} valid {}'.format(avg_loss, avg_vloss))

    # Track best performance, and save the model's state
    if avg_vloss < best_vloss:
        best_vloss = avg_vloss
        model_path = 'model_{}_{}'.format(timestamp, epoch_number)
        torch.save(model.state_dict(), model_path)

    epoch_number += 1

saved_model = GarmentClassifier()
saved_model.load_state_dict(torch.load(model_path))
print(model_path, best_vloss)
print(all(torch.equal(p, q) for p, q in zip(saved_model.state_dict().values(),
                                             model.state_dict().values())))
