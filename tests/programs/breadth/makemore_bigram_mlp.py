# karpathy's makemore lectures, parts 1 (bigram counts and the one-layer
# neural bigram) and 2 (the MLP of Bengio et al.), with a small inline word
# list instead of names.txt.
import torch
import torch.nn.functional as F
import random

words = ["emma", "olivia", "ava", "isabella", "sophia", "charlotte", "mia", "amelia",
         "harper", "evelyn", "abigail", "emily", "elizabeth", "mila", "ella", "avery",
         "sofia", "camila", "aria", "scarlett", "victoria", "madison", "luna", "grace",
         "quinn", "zoe", "jade", "xavia", "kyla", "brynn", "wendy", "hope", "uma", "fatima"]
print(words[:3], len(words), min(len(w) for w in words), max(len(w) for w in words))

N = torch.zeros((27, 27), dtype=torch.int32)
chars = sorted(list(set(''.join(words))))
stoi = {s: i + 1 for i, s in enumerate(chars)}
stoi['.'] = 0
itos = {i: s for s, i in stoi.items()}
for w in words:
    chs = ['.'] + list(w) + ['.']
    for ch1, ch2 in zip(chs, chs[1:]):
        ix1 = stoi[ch1]
        ix2 = stoi[ch2]
        N[ix1, ix2] += 1
print(N[0, :5], N.dtype, N.sum().item())

p = N[0].float()
p = p / p.sum()
g = torch.Generator().manual_seed(2147483647)
p2 = torch.rand(3, generator=g)
p2 = p2 / p2.sum()
print(p2.shape, torch.multinomial(p2, num_samples=100, replacement=True, generator=g).shape)
P = (N + 1).float()
P /= P.sum(1, keepdims=True)
print(P.shape, torch.allclose(P.sum(1), torch.ones(27)))
g = torch.Generator().manual_seed(2147483647)
for i in range(5):
    out = []
    ix = 0
    while True:
        p = P[ix]
        ix = torch.multinomial(p, num_samples=1, replacement=True, generator=g).item()
        out.append(itos[ix])
        if ix == 0:
            break
    print(len(''.join(out)) >= 1)

log_likelihood = 0.0
n = 0
for w in words:
    chs = ['.'] + list(w) + ['.']
    for ch1, ch2 in zip(chs, chs[1:]):
        ix1 = stoi[ch1]
        ix2 = stoi[ch2]
        prob = P[ix1, ix2]
        logprob = torch.log(prob)
        log_likelihood += logprob
        n += 1
print(f'{log_likelihood=}'.split('=')[0], f'{-log_likelihood/n:.4f}' != '')
nll = -log_likelihood
print(f'{nll/n}'[:7] == f'{(nll/n).item()}'[:7])

# neural bigram
xs, ys = [], []
for w in words:
    chs = ['.'] + list(w) + ['.']
    for ch1, ch2 in zip(chs, chs[1:]):
        xs.append(stoi[ch1])
        ys.append(stoi[ch2])
xs = torch.tensor(xs)
ys = torch.tensor(ys)
num = xs.nelement()
print('number of examples: ', num)
g = torch.Generator().manual_seed(2147483647)
W = torch.randn((27, 27), generator=g, requires_grad=True)
for k in range(20):
    xenc = F.one_hot(xs, num_classes=27).float()
    logits = xenc @ W
    counts = logits.exp()
    probs = counts / counts.sum(1, keepdims=True)
    loss = -probs[torch.arange(num), ys].log().mean() + 0.01 * (W ** 2).mean()
    if k % 5 == 0:
        print(f"{loss.item():.4f}")
    W.grad = None
    loss.backward()
    W.data += -50 * W.grad

# part 2: MLP
block_size = 3
def build_dataset(words):
    X, Y = [], []
    for w in words:
        context = [0] * block_size
        for ch in w + '.':
            ix = stoi[ch]
            X.append(context)
            Y.append(ix)
            context = context[1:] + [ix]
    X = torch.tensor(X)
    Y = torch.tensor(Y)
    print(X.shape, Y.shape)
    return X, Y

random.seed(42)
random.shuffle(words)
n1 = int(0.8 * len(words))
n2 = int(0.9 * len(words))
Xtr, Ytr = build_dataset(words[:n1])
Xdev, Ydev = build_dataset(words[n1:n2])
Xte, Yte = build_dataset(words[n2:])
g = torch.Generator().manual_seed(2147483647)
C = torch.randn((27, 10), generator=g)
W1 = torch.randn((30, 64), generator=g)
b1 = torch.randn(64, generator=g)
W2 = torch.randn((64, 27), generator=g)
b2 = torch.randn(27, generator=g)
parameters = [C, W1, b1, W2, b2]
print(sum(p.nelement() for p in parameters))
for p in parameters:
    p.requires_grad = True
lre = torch.linspace(-3, 0, 1000)
lrs = 10 ** lre
lri, lossi, stepi = [], [], []
for i in range(200):
    ix = torch.randint(0, Xtr.shape[0], (32,))
    emb = C[Xtr[ix]]  # (32, 3, 10)
    h = torch.tanh(emb.view(-1, 30) @ W1 + b1)  # (32, 64)
    logits = h @ W2 + b2  # (32, 27)
    loss = F.cross_entropy(logits, Ytr[ix])
    for p in parameters:
        p.grad = None
    loss.backward()
    lr = 0.1 if i < 100 else 0.01
    for p in parameters:
        p.data += -lr * p.grad
    stepi.append(i)
    lossi.append(loss.log10().item())
print(len(lossi), lrs[500].item() > 0)
emb = C[Xtr]
h = torch.tanh(emb.view(-1, 30) @ W1 + b1)
logits = h @ W2 + b2
loss = F.cross_entropy(logits, Ytr)
print(f"train {loss.item():.4f}")
emb = C[Xdev]
h = torch.tanh(emb.view(-1, 30) @ W1 + b1)
logits = h @ W2 + b2
loss = F.cross_entropy(logits, Ydev)
print(f"dev {loss.item():.4f}")
g = torch.Generator().manual_seed(2147483647 + 10)
for _ in range(5):
    out = []
    context = [0] * block_size
    while True:
        emb = C[torch.tensor([context])]
        h = torch.tanh(emb.view(1, -1) @ W1 + b1)
        logits = h @ W2 + b2
        probs = F.softmax(logits, dim=1)
        ix = torch.multinomial(probs, num_samples=1, generator=g).item()
        context = context[1:] + [ix]
        out.append(ix)
        if ix == 0:
            break
    print(''.join(itos[i] for i in out).endswith('.'))
