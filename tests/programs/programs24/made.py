"""
Implements Masked AutoEncoder for Density Estimation, by Germain et al. 2015
Re-implementation by Andrej Karpathy based on https://arxiv.org/abs/1502.03509
"""
# karpathy/pytorch-made, made.py: MaskedLinear (a registered mask buffer,
# set_mask copying a transposed uint8 numpy mask through .data.copy_,
# F.linear with mask * weight), MADE (np.random.RandomState orderings and
# connectivities, num_masks cycling) and its __main__ check of the
# autoregressive property by backpropagating each output to a Variable
# input.  Changes for a test: hidden sizes [20], [20, 22], [20, 22, 23] in
# place of [200], [200, 220], [200, 220, 230]; torch.manual_seed(0).

import numpy as np

import torch
import torch.nn as nn
import torch.nn.functional as F

# ------------------------------------------------------------------------------

class MaskedLinear(nn.Linear):
    """ same as Linear except has a configurable mask on the weights """
    
    def __init__(self, in_features, out_features, bias=True):
        super().__init__(in_features, out_features, bias)        
        self.register_buffer('mask', torch.ones(out_features, in_features))
        
    def set_mask(self, mask):
        self.mask.data.copy_(torch.from_numpy(mask.astype(np.uint8).T))
        
    def forward(self, input):
        return F.linear(input, self.mask * self.weight, self.bias)

class MADE(nn.Module):
    def __init__(self, nin, hidden_sizes, nout, num_masks=1, natural_ordering=False):
        """
        nin: integer; number of inputs
        hidden sizes: a list of integers; number of units in hidden layers
        nout: integer; number of outputs, which usually collectively parameterize some kind of 1D distribution
        num_masks: can be used to train ensemble over orderings/connections
        natural_ordering: force natural ordering of dimensions, don't use random permutations
        """
        
        super().__init__()
        self.nin = nin
        self.hidden_sizes = hidden_sizes
        
        # define a simple MLP neural net
        self.net = []
        hs = [nin] + hidden_sizes + [nout]
        for h0,h1 in zip(hs, hs[1:]):
            self.net.extend([
                    MaskedLinear(h0, h1),
                    nn.ReLU(),
                ])
        self.net.pop() # pop the last ReLU for the output layer
        self.net = nn.Sequential(*self.net)
        
        # seeds for orders/connectivities of the model ensemble
        self.natural_ordering = natural_ordering
        self.num_masks = num_masks
        self.seed = 0 # for cycling through num_masks orderings
        
        self.m = {}
        self.update_masks() # builds the initial self.m connectivity
        # note, we could also precompute the masks and cache them, but this
        # could get memory expensive for large number of masks.
        
    def update_masks(self):
        if self.m and self.num_masks == 1: return # only a single seed, skip for efficiency
        L = len(self.hidden_sizes)
        
        # fetch the next seed and construct a random stream
        rng = np.random.RandomState(self.seed)
        self.seed = (self.seed + 1) % self.num_masks
        
        # sample the order of the inputs and the connectivity of all neurons
        self.m[-1] = np.arange(self.nin) if self.natural_ordering else rng.permutation(self.nin)
        for l in range(L):
            self.m[l] = rng.randint(self.m[l-1].min(), self.nin-1, size=self.hidden_sizes[l])
        
        # construct the mask matrices
        masks = [self.m[l-1][:,None] <= self.m[l][None,:] for l in range(L)]
        masks.append(self.m[L-1][:,None] < self.m[-1][None,:])
        
        # set the masks in all MaskedLinear layers
        layers = [l for l in self.net.modules() if isinstance(l, MaskedLinear)]
        for l,m in zip(layers, masks):
            l.set_mask(m)
    
    def forward(self, x):
        return self.net(x)

# ------------------------------------------------------------------------------

if __name__ == '__main__':
    from torch.autograd import Variable
    torch.manual_seed(0)
    
    # run a quick and dirty test for the autoregressive property
    D = 10
    rng = np.random.RandomState(14)
    x = (rng.rand(1, D) > 0.5).astype(np.float32)
    
    # check both natural ordering and not
    for natural in [True, False]:
        # check a few configurations of hidden units, depths 1,2,3
        for hiddens in [[20], [20,22], [20,22,23]]:
        
            print("checking hiddens %s with natural = %s" % (hiddens, natural))
            model = MADE(D, hiddens, D, natural_ordering=natural)
            
            # run backpropagation for each dimension to compute what other
            # dimensions it depends on.
            res = []
            for k in range(D):
                xtr = Variable(torch.from_numpy(x), requires_grad=True)
                xtrhat = model(xtr)
                loss = xtrhat[0,k]
                loss.backward()
                
                depends = (xtr.grad[0].numpy() != 0).astype(np.uint8)
                depends_ix = list(np.where(depends)[0])
                isok = k not in depends_ix
                
                res.append((len(depends_ix), k, depends_ix, isok))
            
            # pretty print the dependencies
            res.sort()
            for nl, k, ix, isok in res:
                print("output %d depends on inputs: %30s : %s" % (k, ix, "OK" if isok else "NOTOK"))
        
