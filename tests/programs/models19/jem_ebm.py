# Energy-based models trained with Langevin dynamics and a replay buffer,
# the way two public programs write them: wgrathwohl/JEM's
# train_wrn_ebm.py (F / CCF over a feature network, the energy as the
# logsumexp of the class logits, sample_p_0 drawing from the replay buffer
# with reinit, sample_q's SGLD with autograd.Variable(requires_grad=True),
# autograd.grad(..., retain_graph=True) and in-place x_k.data updates, the
# buffer written back by index, the p(x) and p(y|x) losses) and the UvA DL
# course's "Deep Energy-Based Generative Models" tutorial (Sampler with
# p.requires_grad = False, torch.set_grad_enabled, inp_imgs.grad clamped,
# detach_() and zero_(), the buffer as a list of tensors with
# a binomial share of the batch reinitialised, the contrastive divergence loss with its
# alpha * (real_out ** 2 + fake_out ** 2) regularizer). Changes for a CPU
# test: 2-D toy data and small MLPs, weights and data from numpy, the
# random draws of the samplers (buffer indices, reinit choices, Langevin
# noise) taken from a numpy generator (torch's and tracec's generators
# differ); then one training step under torch.compile against the same
# step eagerly.
import copy

import numpy as np
import torch
import torch as t
import torch.nn as nn
import torch.nn.functional as F_


def fmt(x, n=4):
    return [f"{v:.4f}" for v in x.reshape(-1)[:n].tolist()]


npr = np.random.default_rng(1)     # the samplers' draws


def np_rand(*shape):
    return torch.from_numpy(npr.random(shape).astype(np.float32))


def np_randint(high, shape):
    return torch.from_numpy(npr.integers(0, high, shape))


def np_randn_like(x):
    return torch.from_numpy(npr.normal(size=tuple(x.shape)).astype(np.float32))


# ---- JEM (train_wrn_ebm.py), the Wide_ResNet replaced by an MLP
class MLPFeatures(nn.Module):
    def __init__(self, dim=2, width=32):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(dim, width), nn.LeakyReLU(0.2), nn.Linear(width, width), nn.LeakyReLU(0.2))
        self.last_dim = width

    def forward(self, x):
        return self.net(x)


class F(nn.Module):
    def __init__(self, depth=28, width=2, norm=None, dropout_rate=0.0, n_classes=10):
        super(F, self).__init__()
        self.f = MLPFeatures(width=width)
        self.energy_output = nn.Linear(self.f.last_dim, 1)
        self.class_output = nn.Linear(self.f.last_dim, n_classes)

    def forward(self, x, y=None):
        penult_z = self.f(x)
        return self.energy_output(penult_z).squeeze()

    def classify(self, x):
        penult_z = self.f(x)
        return self.class_output(penult_z).squeeze()


class CCF(F):
    def __init__(self, depth=28, width=2, norm=None, dropout_rate=0.0, n_classes=10):
        super(CCF, self).__init__(depth, width, norm=norm, dropout_rate=dropout_rate, n_classes=n_classes)

    def forward(self, x, y=None):
        logits = self.classify(x)
        if y is None:
            return logits.logsumexp(1)
        else:
            return t.gather(logits, 1, y[:, None])


class Args:
    n_classes = 3
    batch_size = 8
    buffer_size = 24
    reinit_freq = 0.25
    sgld_lr = 0.5
    sgld_std = 0.05
    n_steps = 5
    uncond = False
    p_x_weight = 1.0
    p_y_given_x_weight = 1.0


def init_random(args, bs):
    return t.FloatTensor(bs, 2).copy_(np_rand(bs, 2) * 6 - 3)


def get_sample_q(args, device):
    def sample_p_0(replay_buffer, bs, y=None):
        if len(replay_buffer) == 0:
            return init_random(args, bs), []
        buffer_size = len(replay_buffer) if y is None else len(replay_buffer) // args.n_classes
        inds = np_randint(buffer_size, (bs,))
        # if cond, convert inds to class conditional inds
        if y is not None:
            inds = y.cpu() * buffer_size + inds
            assert not args.uncond, "Can't drawn conditional samples without giving me y"
        buffer_samples = replay_buffer[inds]
        random_samples = init_random(args, bs)
        choose_random = (np_rand(bs) < args.reinit_freq).float()[:, None]
        samples = choose_random * random_samples + (1 - choose_random) * buffer_samples
        return samples.to(device), inds

    def sample_q(f, replay_buffer, y=None, n_steps=args.n_steps):
        """this func takes in replay_buffer now so we have the option to sample from
        scratch (i.e. replay_buffer==[]).  See test_wrn_ebm.py for example.
        """
        f.eval()
        # get batch size
        bs = args.batch_size if y is None else y.size(0)
        # generate initial samples and buffer inds of those samples (if buffer is used)
        init_sample, buffer_inds = sample_p_0(replay_buffer, bs=bs, y=y)
        x_k = t.autograd.Variable(init_sample, requires_grad=True)
        # sgld
        for k in range(n_steps):
            f_prime = t.autograd.grad(f(x_k, y=y).sum(), [x_k], retain_graph=True)[0]
            x_k.data += args.sgld_lr * f_prime + args.sgld_std * np_randn_like(x_k)
        f.train()
        final_samples = x_k.detach()
        # update replay buffer
        if len(replay_buffer) > 0:
            replay_buffer[buffer_inds] = final_samples.cpu()
        return final_samples
    return sample_q


# ---- the UvA tutorial's Sampler and contrastive divergence step
class Sampler:

    def __init__(self, model, img_shape, sample_size, max_len=64):
        """
        Inputs:
            model - Neural network to use for modeling E_theta
            img_shape - Shape of the images to model
            sample_size - Batch size of the samples
            max_len - Maximum number of data points to keep in the buffer
        """
        super().__init__()
        self.model = model
        self.img_shape = img_shape
        self.sample_size = sample_size
        self.max_len = max_len
        self.examples = [(np_rand(1, *img_shape) * 2 - 1) for _ in range(self.sample_size)]

    def sample_new_exmps(self, steps=60, step_size=10):
        """
        Function for getting a new batch of "fake" images.
        Inputs:
            steps - Number of iterations in the MCMC algorithm
            step_size - Learning rate nu in the algorithm above
        """
        # Choose 95% of the batch from the buffer, 5% generate from scratch
        n_new = int(npr.binomial(self.sample_size, 0.05))
        rand_imgs = np_rand(n_new, *self.img_shape) * 2 - 1
        old_imgs = torch.cat([self.examples[i] for i in npr.choice(len(self.examples), self.sample_size - n_new)], dim=0)
        inp_imgs = torch.cat([rand_imgs, old_imgs], dim=0).detach()

        # Perform MCMC sampling
        inp_imgs = Sampler.generate_samples(self.model, inp_imgs, steps=steps, step_size=step_size)

        # Add new images to the buffer and remove old ones if needed
        self.examples = list(inp_imgs.to(torch.device("cpu")).chunk(self.sample_size, dim=0)) + self.examples
        self.examples = self.examples[:self.max_len]
        return inp_imgs

    @staticmethod
    def generate_samples(model, inp_imgs, steps=60, step_size=10, return_img_per_step=False):
        """
        Function for sampling images for a given model.
        Inputs:
            model - Neural network to use for modeling E_theta
            inp_imgs - Images to start from for sampling. If you want to generate new images, enter noise between -1 and 1.
            steps - Number of iterations in the MCMC algorithm.
            step_size - Learning rate nu in the algorithm above
            return_img_per_step - If True, we return the sample at every iteration of the MCMC
        """
        # Before MCMC: set model parameters to "required_grad=False"
        # because we are only interested in the gradients of the input.
        is_training = model.training
        model.eval()
        for p in model.parameters():
            p.requires_grad = False
        inp_imgs.requires_grad = True

        # Enable gradient calculation if not already the case
        had_gradients_enabled = torch.is_grad_enabled()
        torch.set_grad_enabled(True)

        # We use a buffer tensor in which we generate noise each loop iteration.
        # More efficient than creating a new tensor every iteration.
        noise = torch.zeros(inp_imgs.shape, device=inp_imgs.device)

        # List for storing generations at each step (for later analysis)
        imgs_per_step = []

        # Loop over K (steps)
        for _ in range(steps):
            # Part 1: Add noise to the input.
            noise.copy_(np_randn_like(noise) * 0.005)
            inp_imgs.data.add_(noise.data)
            inp_imgs.data.clamp_(min=-1.0, max=1.0)

            # Part 2: calculate gradients for the current input.
            out_imgs = -model(inp_imgs)
            out_imgs.sum().backward()
            inp_imgs.grad.data.clamp_(-0.03, 0.03) # For stabilizing and preventing too high gradients

            # Apply gradients to our current samples
            inp_imgs.data.add_(-step_size * inp_imgs.grad.data)
            inp_imgs.grad.detach_()
            inp_imgs.grad.zero_()
            inp_imgs.data.clamp_(min=-1.0, max=1.0)

            if return_img_per_step:
                imgs_per_step.append(inp_imgs.clone().detach())

        # Reactivate gradients for parameters for training
        for p in model.parameters():
            p.requires_grad = True
        model.train(is_training)

        # Reset gradient calculation to setting before this function
        torch.set_grad_enabled(had_gradients_enabled)

        if return_img_per_step:
            return torch.stack(imgs_per_step, dim=0)
        else:
            return inp_imgs


class Swish(nn.Module):

    def forward(self, x):
        return x * torch.sigmoid(x)


class SmallEnergy(nn.Module):
    def __init__(self, hidden=32):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(2, hidden), Swish(), nn.Linear(hidden, hidden), Swish(),
                                 nn.Linear(hidden, 1))

    def forward(self, x):
        x = self.net(x).squeeze(dim=-1)
        return x


def load_numpy(module, r, std=0.4):
    with torch.no_grad():
        for name, p in module.named_parameters():
            p.copy_(torch.from_numpy(r.normal(0, std, tuple(p.shape)).astype(np.float32)))


r = np.random.default_rng(0)
centers = np.array([[2.0, 0.0], [-1.0, 1.7], [-1.0, -1.7]])
labels = r.integers(0, 3, 96)
points = (centers[labels] + 0.3 * r.normal(size=(96, 2))).astype(np.float32)

args = Args()
f = CCF(n_classes=args.n_classes, width=16)
load_numpy(f, r)
print("CCF", [n for n, _ in f.named_parameters()][:3], isinstance(f, F))
xb = torch.from_numpy(points[:8])
yb = torch.from_numpy(labels[:8])
print("energy", fmt(f(xb), 4), "class energy", fmt(f(xb, y=yb), 4), tuple(f(xb, y=yb).shape))
print("logsumexp", torch.allclose(f(xb), f.classify(xb).logsumexp(1)))

replay_buffer = init_random(args, args.buffer_size)
sample_q = get_sample_q(args, "cpu")
print("buffer", tuple(replay_buffer.shape), fmt(replay_buffer[3], 2))
optim = t.optim.Adam(f.parameters(), lr=1e-3, betas=[0.0, 0.999], weight_decay=0.0)
for it in range(4):
    x_p_d = torch.from_numpy(points[it * 16:it * 16 + 8])
    x_lab, y_lab = x_p_d, torch.from_numpy(labels[it * 16:it * 16 + 8])
    L = 0.
    if args.p_x_weight > 0:  # maximize log p(x)
        x_q = sample_q(f, replay_buffer)  # sample from log-sumexp
        fp_all = f(x_p_d)
        fq_all = f(x_q)
        fp = fp_all.mean()
        fq = fq_all.mean()

        l_p_x = -(fp - fq)
        L += args.p_x_weight * l_p_x
    if args.p_y_given_x_weight > 0:  # maximize log p(y | x)
        logits = f.classify(x_lab)
        l_p_y_given_x = nn.CrossEntropyLoss()(logits, y_lab)
        acc = (logits.max(1)[1] == y_lab).float().mean()
        L += args.p_y_given_x_weight * l_p_y_given_x
    optim.zero_grad()
    L.backward()
    optim.step()
    print('P(x) | {}:{:>d} f(x_p_d)={:>14.9f} f(x_q)={:>14.9f} d={:>14.9f}'.format(0, it, fp, fq, fp - fq),
          'P(y|x) {}:{:>d} loss={:>14.9f}, acc={:>14.9f}'.format(0, it, l_p_y_given_x.item(), acc.item()))
print("buffer after", fmt(replay_buffer[:, 0], 6), replay_buffer.requires_grad, x_q.requires_grad)
# class-conditional sampling: the buffer split into n_classes blocks
y_q = torch.tensor([0, 1, 2, 2, 1, 0, 0, 1])
xq_c = sample_q(f, replay_buffer, y=y_q, n_steps=3)
print("conditional", tuple(xq_c.shape), fmt(xq_c[2], 2), f.training)
# from scratch (an empty buffer)
print("from scratch", fmt(sample_q(f, [], n_steps=2)[0], 2))

# ---- the tutorial's contrastive divergence training
model = SmallEnergy()
load_numpy(model, r)
sampler = Sampler(model, img_shape=(2,), sample_size=8, max_len=32)
print("examples", len(sampler.examples), tuple(sampler.examples[0].shape))
opt = torch.optim.Adam(model.parameters(), lr=1e-3, betas=(0.0, 0.999))
alpha = 0.1
pts = torch.from_numpy(points / 3.0)
for it in range(4):
    real_imgs = pts[it * 8:(it + 1) * 8]
    small_noise = np_randn_like(real_imgs) * 0.005
    real_imgs.add_(small_noise).clamp_(min=-1.0, max=1.0)

    # Obtain samples
    fake_imgs = sampler.sample_new_exmps(steps=6, step_size=10)

    # Predict energy score for all images
    inp_imgs = torch.cat([real_imgs, fake_imgs], dim=0)
    real_out, fake_out = model(inp_imgs).chunk(2, dim=0)

    # Calculate losses
    reg_loss = alpha * (real_out ** 2 + fake_out ** 2).mean()
    cdiv_loss = fake_out.mean() - real_out.mean()
    loss = reg_loss + cdiv_loss
    opt.zero_grad()
    loss.backward()
    opt.step()
    print(f"cd {it} loss {loss.item():.5f} reg {reg_loss.item():.5f} cdiv {cdiv_loss.item():.5f}")
print("after sampling", all(p.requires_grad for p in model.parameters()), torch.is_grad_enabled(), model.training,
      len(sampler.examples), fake_imgs.requires_grad, fake_imgs.grad is not None and float(fake_imgs.grad.abs().sum()))
with torch.no_grad():
    steps = Sampler.generate_samples(model, torch.from_numpy(points[:4] / 3.0).clone(), steps=5, step_size=10,
                                     return_img_per_step=True)
print("per step", tuple(steps.shape), fmt(steps[-1, 0], 2), torch.is_grad_enabled())


# one training step under torch.compile against the same step eagerly
def train_step(x_p_d, x_q, x_lab, y_lab):
    fp = f(x_p_d).mean()
    fq = f(x_q).mean()
    L = -(fp - fq) + nn.CrossEntropyLoss()(f.classify(x_lab), y_lab)
    optim.zero_grad()
    L.backward()
    optim.step()
    return L


xpd, xq = torch.from_numpy(points[:8]), replay_buffer[:8].clone()
yl = torch.from_numpy(labels[:8])
state, opt_state = copy.deepcopy(f.state_dict()), copy.deepcopy(optim.state_dict())
eager = [train_step(xpd, xq, xpd, yl).item() for _ in range(2)]
after = {k: v.clone() for k, v in f.state_dict().items()}
f.load_state_dict(state)
optim.load_state_dict(opt_state)
cstep = torch.compile(train_step)
compiled = [cstep(xpd, xq, xpd, yl).item() for _ in range(2)]
print("compiled losses", [f"{v:.5f}" for v in compiled])
print("compiled == eager:", all(abs(a - b) <= 1e-4 * max(1.0, abs(b)) for a, b in zip(compiled, eager)),
      all(torch.allclose(f.state_dict()[k], after[k], rtol=1e-4, atol=1e-5) for k in after))
