# PyTorch tutorial "Deep Learning for NLP with PyTorch": "Introduction to
# PyTorch" and "Deep Learning with PyTorch" (beginner/nlp/pytorch_tutorial,
# beginner/nlp/deep_learning_tutorial), written the way the tutorials have
# them: torch.tensor from nested lists, torch.cat along axes, view(2, -1),
# requires_grad and grad_fn, .detach(), torch.no_grad(); an affine map
# nn.Linear(5, 3), F.relu, F.softmax / F.log_softmax; the BoWClassifier
# (make_bow_vector, make_target, word_to_ix), nn.NLLLoss, optim.SGD(lr=0.1),
# the "Creo" column of the weights before and after training.  Written for
# this test: 20 epochs, and one compiled training step checked against the
# same step run eagerly.
import copy

import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim

torch.manual_seed(1)

V_data = [1., 2., 3.]
V = torch.tensor(V_data)
print(V)
M = torch.tensor([[1., 2., 3.], [4., 5., 6]])
print(M, M[0], V[0].item())
x_1 = torch.tensor([[1., 2.], [3., 4.]])
y_1 = torch.tensor([[5., 6.], [7., 8.]])
print(torch.cat([x_1, y_1]))
print(torch.cat([x_1, y_1], 1))
x = torch.arange(24.).view(2, 3, 4)
print(x.view(2, 12).sum(1), x.view(2, -1).shape)

x = torch.tensor([1., 2., 3], requires_grad=True)
y = torch.tensor([4., 5., 6], requires_grad=True)
z = x + y
print(z, z.grad_fn.__class__.__name__)
s = z.sum()
print(s, s.grad_fn.__class__.__name__)
s.backward()
print(x.grad)
x = torch.randn(2, 2)
y = torch.randn(2, 2)
print(x.requires_grad, y.requires_grad)
z = x + y
print(z.grad_fn)
x = x.requires_grad_()
y = y.requires_grad_()
z = x + y
print(z.grad_fn.__class__.__name__, z.requires_grad)
new_z = z.detach()
print(new_z.grad_fn)
print(x.requires_grad)
print((x ** 2).requires_grad)
with torch.no_grad():
    print((x ** 2).requires_grad)

lin = nn.Linear(5, 3)  # maps from R^5 to R^3, parameters A, b
data = torch.randn(2, 5)
print(lin(data))
data = torch.randn(2, 2)
print(data)
print(F.relu(data))
data = torch.randn(5)
print(data)
print(F.softmax(data, dim=0))
print(F.softmax(data, dim=0).sum())  # Sums to 1 because it is a distribution!
print(F.log_softmax(data, dim=0))  # theres also log_softmax

data = [("me gusta comer en la cafeteria".split(), "SPANISH"),
        ("Give it to me".split(), "ENGLISH"),
        ("No creo que sea una buena idea".split(), "SPANISH"),
        ("No it is not a good idea to get lost at sea".split(), "ENGLISH")]

test_data = [("Yo creo que si".split(), "SPANISH"),
             ("it is lost on me".split(), "ENGLISH")]

word_to_ix = {}
for sent, _ in data + test_data:
    for word in sent:
        if word not in word_to_ix:
            word_to_ix[word] = len(word_to_ix)
print(word_to_ix)

VOCAB_SIZE = len(word_to_ix)
NUM_LABELS = 2


class BoWClassifier(nn.Module):  # inheriting from nn.Module!

    def __init__(self, num_labels, vocab_size):
        super(BoWClassifier, self).__init__()
        self.linear = nn.Linear(vocab_size, num_labels)

    def forward(self, bow_vec):
        return F.log_softmax(self.linear(bow_vec), dim=1)


def make_bow_vector(sentence, word_to_ix):
    vec = torch.zeros(len(word_to_ix))
    for word in sentence:
        vec[word_to_ix[word]] += 1
    return vec.view(1, -1)


def make_target(label, label_to_ix):
    return torch.LongTensor([label_to_ix[label]])


model = BoWClassifier(NUM_LABELS, VOCAB_SIZE)
for param in model.parameters():
    print(param.shape)

with torch.no_grad():
    sample = data[0]
    bow_vector = make_bow_vector(sample[0], word_to_ix)
    log_probs = model(bow_vector)
    print(log_probs)

label_to_ix = {"SPANISH": 0, "ENGLISH": 1}

with torch.no_grad():
    for instance, label in test_data:
        bow_vec = make_bow_vector(instance, word_to_ix)
        log_probs = model(bow_vec)
        print(log_probs)

print(next(model.parameters())[:, word_to_ix["creo"]])

loss_function = nn.NLLLoss()
optimizer = optim.SGD(model.parameters(), lr=0.1)


def train_step(bow_vec, target):
    model.zero_grad()
    log_probs = model(bow_vec)
    loss = loss_function(log_probs, target)
    loss.backward()
    optimizer.step()
    return loss


for epoch in range(20):
    total = 0.0
    for instance, label in data:
        bow_vec = make_bow_vector(instance, word_to_ix)
        target = make_target(label, label_to_ix)
        total += train_step(bow_vec, target).item()
    if epoch % 5 == 0:
        print("epoch", epoch, "loss", round(total, 6))

with torch.no_grad():
    for instance, label in test_data:
        bow_vec = make_bow_vector(instance, word_to_ix)
        log_probs = model(bow_vec)
        print(log_probs)

print(next(model.parameters())[:, word_to_ix["creo"]])

bow_vec = torch.cat([make_bow_vector(s, word_to_ix) for s, _ in data])
target = torch.cat([make_target(lb, label_to_ix) for _, lb in data])
state, opt_state = copy.deepcopy(model.state_dict()), copy.deepcopy(optimizer.state_dict())
loss_c = torch.compile(train_step)(bow_vec, target)
after_c = copy.deepcopy(model.state_dict())
model.load_state_dict(state)
optimizer.load_state_dict(opt_state)
loss_e = train_step(bow_vec, target)
print("compiled loss", round(loss_c.item(), 6))
print("compiled == eager", torch.allclose(loss_c, loss_e, atol=1e-6),
      all(torch.allclose(after_c[k], v, atol=1e-6) for k, v in model.state_dict().items()))
