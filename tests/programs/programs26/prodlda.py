# ProdLDA, the autoencoded variational topic model (Srivastava & Sutton,
# 2017), after hyqneuron/pytorch-avitm (https://github.com/hyqneuron/
# pytorch-avitm, pytorch_model.py and pytorch_run.py): softplus encoder,
# BatchNorm1d layers whose scale is removed with
# register_parameter('weight', None), the Laplace approximation of the
# Dirichlet prior kept in register_buffer'd prior_mean / prior_var /
# prior_logvar, noise from input.data.new().resize_as_(...).normal_(),
# F.softmax without dim (the implicit-dim warning), the decoder weight
# initialised with .data.uniform_(0, init_mult), the KLD of section 3.3,
# Adam(betas=(0.99, 0.999)), and the topic words printed from the
# decoder's weight (argsort).
# Written for this test: a 30-word vocabulary, 4 topics, 24 synthetic
# bag-of-words documents, 3 epochs of batch 8; one training step compiled
# against eager.
import copy
import math
import warnings
from types import SimpleNamespace

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.autograd import Variable

warnings.simplefilter("ignore")


class ProdLDA(nn.Module):

    def __init__(self, net_arch):
        super(ProdLDA, self).__init__()
        ac = net_arch
        self.net_arch = net_arch
        # encoder
        self.en1_fc     = nn.Linear(ac.num_input, ac.en1_units)             # 1995 -> 100
        self.en2_fc     = nn.Linear(ac.en1_units, ac.en2_units)             # 100  -> 100
        self.en2_drop   = nn.Dropout(0.2)
        self.mean_fc    = nn.Linear(ac.en2_units, ac.num_topic)             # 100  -> 50
        self.mean_bn    = nn.BatchNorm1d(ac.num_topic)                      # bn for mean
        self.logvar_fc  = nn.Linear(ac.en2_units, ac.num_topic)             # 100  -> 50
        self.logvar_bn  = nn.BatchNorm1d(ac.num_topic)                      # bn for logvar
        # z
        self.p_drop     = nn.Dropout(0.2)
        # decoder
        self.decoder    = nn.Linear(ac.num_topic, ac.num_input)             # 50   -> 1995
        self.decoder_bn = nn.BatchNorm1d(ac.num_input)                      # bn for decoder
        # prior mean and variance as constant buffers
        prior_mean   = torch.Tensor(1, ac.num_topic).fill_(0)
        prior_var    = torch.Tensor(1, ac.num_topic).fill_(ac.variance)
        prior_logvar = prior_var.log()
        self.register_buffer('prior_mean',    prior_mean)
        self.register_buffer('prior_var',     prior_var)
        self.register_buffer('prior_logvar',  prior_logvar)
        # initialize decoder weight
        if ac.init_mult != 0:
            #std = 1. / math.sqrt( ac.init_mult * (ac.num_topic + ac.num_input))
            self.decoder.weight.data.uniform_(0, ac.init_mult)
        # remove BN's scale parameters
        self.logvar_bn .register_parameter('weight', None)
        self.mean_bn   .register_parameter('weight', None)
        self.decoder_bn.register_parameter('weight', None)
        self.decoder_bn.register_parameter('weight', None)

    def forward(self, input, compute_loss=False, avg_loss=True):
        # compute posterior
        en1 = F.softplus(self.en1_fc(input))                            # en1_fc   output
        en2 = F.softplus(self.en2_fc(en1))                              # encoder2 output
        en2 = self.en2_drop(en2)
        posterior_mean   = self.mean_bn  (self.mean_fc  (en2))          # posterior mean
        posterior_logvar = self.logvar_bn(self.logvar_fc(en2))          # posterior log variance
        posterior_var    = posterior_logvar.exp()
        # take sample
        eps = Variable(input.data.new().resize_as_(posterior_mean.data).normal_()) # noise
        z = posterior_mean + posterior_var.sqrt() * eps                 # reparameterization
        p = F.softmax(z)                                                # mixture probability
        p = self.p_drop(p)
        # do reconstruction
        recon = F.softmax(self.decoder_bn(self.decoder(p)))             # reconstructed distribution over vocabulary

        if compute_loss:
            return recon, self.loss(input, recon, posterior_mean, posterior_logvar, posterior_var, avg_loss)
        else:
            return recon

    def loss(self, input, recon, posterior_mean, posterior_logvar, posterior_var, avg=True):
        # NL
        NL  = -(input * (recon+1e-10).log()).sum(1)
        # KLD, see Section 3.3 of Akash Srivastava and Charles Sutton, 2017,
        # https://arxiv.org/pdf/1703.01488.pdf
        prior_mean   = Variable(self.prior_mean).expand_as(posterior_mean)
        prior_var    = Variable(self.prior_var).expand_as(posterior_mean)
        prior_logvar = Variable(self.prior_logvar).expand_as(posterior_mean)
        var_division    = posterior_var  / prior_var
        diff            = posterior_mean - prior_mean
        diff_term       = diff * diff / prior_var
        logvar_division = prior_logvar - posterior_logvar
        # put KLD together
        KLD = 0.5 * ( (var_division + diff_term + logvar_division).sum(1) - self.net_arch.num_topic )
        # loss
        loss = (NL + KLD)
        # in traiming mode, return averaged loss. In testing mode, return individual loss
        if avg:
            return loss.mean()
        else:
            return loss


# pytorch_run.py's arguments and its Laplace approximation of a symmetric
# Dirichlet(alpha = 1) prior: variance 1 - 1/K on each topic
args = SimpleNamespace(en1_units=16, en2_units=16, num_topic=4, batch_size=8, optimizer='Adam',
                       learning_rate=0.002, momentum=0.99, num_epoch=3, init_mult=1.0,
                       variance=0.995, start=True, nogpu=True)
vocab = [f"w{i}" for i in range(30)]
net_arch = args
net_arch.num_input = len(vocab)
net_arch.variance = 1 - 1.0 / net_arch.num_topic
rng = np.random.RandomState(0)
topics = rng.dirichlet(np.full(30, 0.3), size=4)
docs = np.stack([rng.multinomial(40, topics[rng.randint(4)]) for _ in range(24)]).astype(np.float32)
tensor_tr = torch.from_numpy(docs)

torch.manual_seed(0)
model = ProdLDA(net_arch)
print("bn weight", model.mean_bn.weight, "bias", model.mean_bn.bias.shape,
      [n for n, _ in model.named_parameters()][-3:], [n for n, _ in model.named_buffers()][:3])
print("prior", model.prior_var.tolist(), round(model.prior_logvar[0, 0].item(), 6))
# the loss on fixed posteriors (the noise and dropout draws aside, which the
# test takes from the compiled code's stream: the lines after them are [rng])
post = torch.from_numpy(rng.randn(3, 4, 4).astype(np.float32))
recon0 = F.softmax(torch.from_numpy(rng.randn(4, 30).astype(np.float32)), dim=1)
print("loss terms", [round(v, 4) for v in model.loss(tensor_tr[:4], recon0, post[0], post[1],
                                                      post[1].exp(), avg=False).tolist()])
optimizer = torch.optim.Adam(model.parameters(), args.learning_rate, betas=(args.momentum, 0.999))


def train():
    for epoch in range(args.num_epoch):
        all_indices = torch.arange(tensor_tr.size(0)).split(args.batch_size)
        loss_epoch = 0.0
        model.train()                   # switch to training mode
        for batch_indices in all_indices:
            input = Variable(tensor_tr[batch_indices])
            recon, loss = model(input, compute_loss=True)
            # optimize
            optimizer.zero_grad()       # clear previous gradients
            loss.backward()             # backprop
            optimizer.step()            # update parameters
            # report
            loss_epoch += loss.item()    # add loss to loss_epoch
        if epoch % 1 == 0:
            print('[rng] Epoch {}, loss={}'.format(epoch, loss_epoch / len(all_indices)))


def identify_topic_in_line(line):
    topics = []
    for topic, keywords in associations.items():
        for word in keywords:
            if word in line:
                topics.append(topic)
                break
    return topics


def print_top_words(beta, feature_names, n_top_words=5):
    print('---------------Printing the Topics------------------')
    for i in range(len(beta)):
        line = " ".join([feature_names[j]
                         for j in beta[i].argsort()[:-n_top_words - 1:-1]])
        print('[rng]', line)
    print('---------------End of Topics------------------')


train()
emb = model.decoder.weight.data.cpu().numpy().T
print_top_words(emb, vocab)
model.eval()
with torch.no_grad():
    recon, losses = model(tensor_tr[:4], compute_loss=True, avg_loss=False)
print("[rng] eval losses", [round(v, 4) for v in losses.tolist()], recon.shape,
      torch.allclose(recon.sum(1), torch.ones(4)))
model.train()


def train_step(input):
    recon, loss = model(input, compute_loss=True)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    return loss


# compiled against eager, the noise and the dropout drawn from one seed each
state, opt_state = copy.deepcopy(model.state_dict()), copy.deepcopy(optimizer.state_dict())
torch.manual_seed(1)
loss_c = torch.compile(train_step)(tensor_tr[:8])
after_c = copy.deepcopy(model.state_dict())
model.load_state_dict(state)
optimizer.load_state_dict(opt_state)
torch.manual_seed(1)
loss_e = train_step(tensor_tr[:8])
print("[rng] compiled loss", round(loss_c.item(), 5))
print("compiled == eager", torch.allclose(loss_c, loss_e, atol=1e-5),
      all(torch.allclose(after_c[k].float(), v.float(), atol=1e-5) for k, v in model.state_dict().items()))
