# pytorch/examples time_sequence_prediction/generate_sine_wave.py, written
# from memory; --length/--n (defaults: the original's L=1000, N=100) make a
# smaller data set.
import argparse

import numpy as np
import torch

parser = argparse.ArgumentParser()
parser.add_argument('--length', type=int, default=1000, help='L: points per wave')
parser.add_argument('--n', type=int, default=100, help='N: number of waves')
opt = parser.parse_args()

np.random.seed(2)

T = 20
L = opt.length
N = opt.n

x = np.empty((N, L), 'int64')
x[:] = np.array(range(L)) + np.random.randint(-4 * T, 4 * T, N).reshape(N, 1)
data = np.sin(x / 1.0 / T).astype('float64')
torch.save(data, open('traindata.pt', 'wb'))
