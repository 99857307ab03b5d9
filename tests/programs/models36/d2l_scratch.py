# d2l.ai's chapter-style from-scratch code (chapters 3 and 4, PyTorch
# edition) as the book writes it: linear regression from scratch
# (synthetic_data with torch.normal(0, 1, (num_examples, len(w))) and
# y += torch.normal(0, 0.01, y.shape), data_iter with random.shuffle of a
# Python index list and torch.tensor(indices[...]) gathers, w from
# torch.normal(0, 0.01, size=(2,1), requires_grad=True), linreg,
# squared_loss, sgd's param -= lr * param.grad / batch_size and
# param.grad.zero_() under torch.no_grad()), the concise version
# (data.TensorDataset(*data_arrays) / load_array with shuffle=is_train,
# net[0].weight.data.normal_(0, 0.01), net[0].bias.data.fill_(0),
# nn.MSELoss, optim.SGD), softmax regression from scratch (W from
# torch.normal(0, 0.01, size=(num_inputs, num_outputs)), the exp / sum
# softmax, cross_entropy as -torch.log(y_hat[range(len(y_hat)), y]),
# accuracy with y_hat.type(y.dtype) == y, Accumulator, evaluate_accuracy,
# train_epoch_ch3 / train_ch3 with a function updater or a torch.optim
# optimizer), the MLP from scratch (nn.Parameter(torch.randn(...,
# requires_grad=True) * 0.01), relu as torch.max(X, torch.zeros_like(X))),
# dropout from scratch (dropout_layer with (torch.rand(X.shape) >
# dropout).float(), the Net that sets self.training = is_training in its
# __init__) and the concise dropout MLP with init_weights's
# nn.init.normal_(m.weight, std=0.01) through net.apply(init_weights), with
# nn.CrossEntropyLoss(reduction='none'). Changes for a CPU test: random
# Fashion-MNIST-shaped data (256 train / 64 test images of 1x28x28 in
# [0, 1], random labels) in TensorDatasets instead of torchvision's
# FashionMNIST, shuffle=True loaders with num_workers 0 instead of 4,
# 1000 synthetic regression examples, hidden sizes 32, 2 epochs, no
# plotting (d2l.Animator) -- the metrics are printed; then one training step
# of the concise MLP under torch.compile (net.eval(): a compiled step's
# dropout draws differ from eager ones) against the same step eagerly.
import copy
import random

import torch
from torch import nn
from torch.utils import data

torch.manual_seed(0)
random.seed(0)

# ---------------------------------------------------------------- 3.2 linreg from scratch


def synthetic_data(w, b, num_examples):  #@save
    """Generate y = Xw + b + noise."""
    X = torch.normal(0, 1, (num_examples, len(w)))
    y = torch.matmul(X, w) + b
    y += torch.normal(0, 0.01, y.shape)
    return X, y.reshape((-1, 1))


true_w = torch.tensor([2, -3.4])
true_b = 4.2
features, labels = synthetic_data(true_w, true_b, 1000)
print('features:', features[0], '\nlabel:', labels[0])


def data_iter(batch_size, features, labels):
    num_examples = len(features)
    indices = list(range(num_examples))
    # The examples are read at random, in no particular order
    random.shuffle(indices)
    for i in range(0, num_examples, batch_size):
        batch_indices = torch.tensor(
            indices[i: min(i + batch_size, num_examples)])
        yield features[batch_indices], labels[batch_indices]


batch_size = 10
for X, y in data_iter(batch_size, features, labels):
    print(X, '\n', y)
    break

w = torch.normal(0, 0.01, size=(2, 1), requires_grad=True)
b = torch.zeros(1, requires_grad=True)


def linreg(X, w, b):  #@save
    """The linear regression model."""
    return torch.matmul(X, w) + b


def squared_loss(y_hat, y):  #@save
    """Squared loss."""
    return (y_hat - y.reshape(y_hat.shape)) ** 2 / 2


def sgd(params, lr, batch_size):  #@save
    """Minibatch stochastic gradient descent."""
    with torch.no_grad():
        for param in params:
            param -= lr * param.grad / batch_size
            param.grad.zero_()


lr = 0.03
num_epochs = 3
net = linreg
loss = squared_loss

for epoch in range(num_epochs):
    for X, y in data_iter(batch_size, features, labels):
        l = loss(net(X, w, b), y)  # Minibatch loss in `X` and `y`
        # Compute gradient on `l` with respect to [`w`, `b`]
        l.sum().backward()
        sgd([w, b], lr, batch_size)  # Update parameters using their gradient
    with torch.no_grad():
        train_l = loss(net(features, w, b), labels)
        print(f'epoch {epoch + 1}, loss {float(train_l.mean()):f}')

print(f'error in estimating w: {true_w - w.reshape(true_w.shape)}')
print(f'error in estimating b: {true_b - b}')

# ---------------------------------------------------------------- 3.3 concise linreg


def load_array(data_arrays, batch_size, is_train=True):  #@save
    """Construct a PyTorch data iterator."""
    dataset = data.TensorDataset(*data_arrays)
    return data.DataLoader(dataset, batch_size, shuffle=is_train)


data_iter_c = load_array((features, labels), batch_size)
print(next(iter(data_iter_c))[1].T)
net = nn.Sequential(nn.Linear(2, 1))
net[0].weight.data.normal_(0, 0.01)
net[0].bias.data.fill_(0)
loss = nn.MSELoss()
trainer = torch.optim.SGD(net.parameters(), lr=0.03)
for epoch in range(num_epochs):
    for X, y in data_iter_c:
        l = loss(net(X), y)
        trainer.zero_grad()
        l.backward()
        trainer.step()
    l = loss(net(features), labels)
    print(f'epoch {epoch + 1}, loss {l:f}')
w = net[0].weight.data
print('error in estimating w:', true_w - w.reshape(true_w.shape))
b = net[0].bias.data
print('error in estimating b:', true_b - b)

# ---------------------------------------------------------------- 3.5 data


def get_dataloader_workers():  #@save
    """Use 4 processes to read the data."""
    return 0


def load_data_fashion_mnist(batch_size, resize=None):  #@save
    """Download the Fashion-MNIST dataset and then load it into memory."""
    mnist_train = data.TensorDataset(torch.rand(256, 1, 28, 28), torch.randint(0, 10, (256,)))
    mnist_test = data.TensorDataset(torch.rand(64, 1, 28, 28), torch.randint(0, 10, (64,)))
    return (data.DataLoader(mnist_train, batch_size, shuffle=True,
                            num_workers=get_dataloader_workers()),
            data.DataLoader(mnist_test, batch_size, shuffle=False,
                            num_workers=get_dataloader_workers()))


batch_size = 32
train_iter, test_iter = load_data_fashion_mnist(batch_size)

# ---------------------------------------------------------------- 3.6 softmax regression from scratch
num_inputs = 784
num_outputs = 10

W = torch.normal(0, 0.01, size=(num_inputs, num_outputs), requires_grad=True)
b = torch.zeros(num_outputs, requires_grad=True)

X = torch.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
print(X.sum(0, keepdim=True), X.sum(1, keepdim=True))


def softmax(X):
    X_exp = torch.exp(X)
    partition = X_exp.sum(1, keepdim=True)
    return X_exp / partition  # The broadcasting mechanism is applied here


X = torch.normal(0, 1, (2, 5))
X_prob = softmax(X)
print(X_prob, X_prob.sum(1))


def net(X):
    return softmax(torch.matmul(X.reshape((-1, W.shape[0])), W) + b)


y = torch.tensor([0, 2])
y_hat = torch.tensor([[0.1, 0.3, 0.6], [0.3, 0.2, 0.5]])
print(y_hat[[0, 1], y])


def cross_entropy(y_hat, y):
    return - torch.log(y_hat[range(len(y_hat)), y])


print(cross_entropy(y_hat, y))


def accuracy(y_hat, y):  #@save
    """Compute the number of correct predictions."""
    if len(y_hat.shape) > 1 and y_hat.shape[1] > 1:
        y_hat = y_hat.argmax(axis=1)
    cmp = y_hat.type(y.dtype) == y
    return float(cmp.type(y.dtype).sum())


print(accuracy(y_hat, y) / len(y))


class Accumulator:  #@save
    """For accumulating sums over `n` variables."""
    def __init__(self, n):
        self.data = [0.0] * n

    def add(self, *args):
        self.data = [a + float(b) for a, b in zip(self.data, args)]

    def reset(self):
        self.data = [0.0] * len(self.data)

    def __getitem__(self, idx):
        return self.data[idx]


def evaluate_accuracy(net, data_iter):  #@save
    """Compute the accuracy for a model on a dataset."""
    if isinstance(net, torch.nn.Module):
        net.eval()  # Set the model to evaluation mode
    metric = Accumulator(2)  # No. of correct predictions, no. of predictions

    with torch.no_grad():
        for X, y in data_iter:
            metric.add(accuracy(net(X), y), y.numel())
    return metric[0] / metric[1]


print(evaluate_accuracy(net, test_iter))


def train_epoch_ch3(net, train_iter, loss, updater):  #@save
    """The training loop defined in Chapter 3."""
    # Set the model to training mode
    if isinstance(net, torch.nn.Module):
        net.train()
    # Sum of training loss, sum of training accuracy, no. of examples
    metric = Accumulator(3)
    for X, y in train_iter:
        # Compute gradients and update parameters
        y_hat = net(X)
        l = loss(y_hat, y)
        if isinstance(updater, torch.optim.Optimizer):
            # Using PyTorch in-built optimizer & loss criterion
            updater.zero_grad()
            l.mean().backward()
            updater.step()
        else:
            # Using custom built optimizer & loss criterion
            l.sum().backward()
            updater(X.shape[0])
        metric.add(float(l.sum()), accuracy(y_hat, y), y.numel())
    # Return training loss and training accuracy
    return metric[0] / metric[2], metric[1] / metric[2]


def train_ch3(net, train_iter, test_iter, loss, num_epochs, updater):  #@save
    """Train a model (defined in Chapter 3)."""
    for epoch in range(num_epochs):
        train_metrics = train_epoch_ch3(net, train_iter, loss, updater)
        test_acc = evaluate_accuracy(net, test_iter)
        print(f'epoch {epoch + 1}: train loss {train_metrics[0]:.4f}, '
              f'train acc {train_metrics[1]:.3f}, test acc {test_acc:.3f}')
    train_loss, train_acc = train_metrics
    assert train_loss < 10, train_loss


lr = 0.1


def updater(batch_size):
    return sgd([W, b], lr, batch_size)


num_epochs = 2
train_ch3(net, train_iter, test_iter, cross_entropy, num_epochs, updater)


def predict_ch3(net, test_iter, n=6):  #@save
    """Predict labels (defined in Chapter 3)."""
    for X, y in test_iter:
        break
    trues = y
    preds = net(X).argmax(axis=1)
    print('true', trues[0:n].tolist(), 'pred', preds[0:n].tolist())


predict_ch3(net, test_iter)

# ---------------------------------------------------------------- 4.2 MLP from scratch
num_inputs, num_outputs, num_hiddens = 784, 10, 32

W1 = nn.Parameter(torch.randn(
    num_inputs, num_hiddens, requires_grad=True) * 0.01)
b1 = nn.Parameter(torch.zeros(num_hiddens, requires_grad=True))
W2 = nn.Parameter(torch.randn(
    num_hiddens, num_outputs, requires_grad=True) * 0.01)
b2 = nn.Parameter(torch.zeros(num_outputs, requires_grad=True))

params = [W1, b1, W2, b2]


def relu(X):
    a = torch.zeros_like(X)
    return torch.max(X, a)


def net(X):
    X = X.reshape((-1, num_inputs))
    H = relu(X@W1 + b1)  # Here '@' stands for matrix multiplication
    return (H@W2 + b2)


loss = nn.CrossEntropyLoss(reduction='none')
num_epochs, lr = 2, 0.1
updater = torch.optim.SGD(params, lr=lr)
train_ch3(net, train_iter, test_iter, loss, num_epochs, updater)

# ---------------------------------------------------------------- 4.6 dropout


def dropout_layer(X, dropout):
    assert 0 <= dropout <= 1
    # In this case, all elements are dropped out
    if dropout == 1:
        return torch.zeros_like(X)
    # In this case, all elements are kept
    if dropout == 0:
        return X
    mask = (torch.rand(X.shape) > dropout).float()
    return mask * X / (1.0 - dropout)


X = torch.arange(16, dtype=torch.float32).reshape((2, 8))
print(X)
print(dropout_layer(X, 0.))
print(dropout_layer(X, 0.5))
print(dropout_layer(X, 1.))

num_inputs, num_outputs, num_hiddens1, num_hiddens2 = 784, 10, 32, 32
dropout1, dropout2 = 0.2, 0.5


class Net(nn.Module):
    def __init__(self, num_inputs, num_outputs, num_hiddens1, num_hiddens2,
                 is_training=True):
        super(Net, self).__init__()
        self.num_inputs = num_inputs
        self.training = is_training
        self.lin1 = nn.Linear(num_inputs, num_hiddens1)
        self.lin2 = nn.Linear(num_hiddens1, num_hiddens2)
        self.lin3 = nn.Linear(num_hiddens2, num_outputs)
        self.relu = nn.ReLU()

    def forward(self, X):
        H1 = self.relu(self.lin1(X.reshape((-1, self.num_inputs))))
        # Use dropout only when training the model
        if self.training == True:
            # Add a dropout layer after the first fully connected layer
            H1 = dropout_layer(H1, dropout1)
        H2 = self.relu(self.lin2(H1))
        if self.training == True:
            # Add a dropout layer after the second fully connected layer
            H2 = dropout_layer(H2, dropout2)
        out = self.lin3(H2)
        return out


net = Net(num_inputs, num_outputs, num_hiddens1, num_hiddens2)

num_epochs, lr, batch_size = 2, 0.5, 32
loss = nn.CrossEntropyLoss(reduction='none')
trainer = torch.optim.SGD(net.parameters(), lr=lr)
train_ch3(net, train_iter, test_iter, loss, num_epochs, trainer)

net = nn.Sequential(nn.Flatten(),
                    nn.Linear(784, 32),
                    nn.ReLU(),
                    # Add a dropout layer after the first fully connected layer
                    nn.Dropout(dropout1),
                    nn.Linear(32, 32),
                    nn.ReLU(),
                    # Add a dropout layer after the second fully connected layer
                    nn.Dropout(dropout2),
                    nn.Linear(32, 10))


def init_weights(m):
    if type(m) == nn.Linear:
        nn.init.normal_(m.weight, std=0.01)


net.apply(init_weights)
trainer = torch.optim.SGD(net.parameters(), lr=lr)
train_ch3(net, train_iter, test_iter, loss, num_epochs, trainer)
print('lin1 weight', [f'{v:.5f}' for v in net[1].weight[0, :4].tolist()])

# one training step of the concise MLP under torch.compile against the same
# step eagerly (net.eval(): a compiled step's dropout draws differ)
X, y = next(iter(test_iter))
net.eval()


def train_step(X, y):
    trainer.zero_grad()
    l = loss(net(X), y)
    l.mean().backward()
    trainer.step()
    return l.mean()


state, opt_state = copy.deepcopy(net.state_dict()), copy.deepcopy(trainer.state_dict())
eager = [train_step(X, y).item() for _ in range(3)]
after = {k: v.clone() for k, v in net.state_dict().items()}
net.load_state_dict(state)
trainer.load_state_dict(opt_state)
cstep = torch.compile(train_step)
compiled = [cstep(X, y).item() for _ in range(3)]
print("compiled losses", [f"{v:.4f}" for v in compiled])
print("compiled == eager:", all(abs(a - b) <= 1e-4 * max(1.0, abs(b)) for a, b in zip(compiled, eager)),
      all(torch.allclose(net.state_dict()[k], after[k], rtol=1e-4, atol=1e-5) for k in after))
