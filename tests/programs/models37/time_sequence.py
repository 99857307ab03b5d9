# pytorch/examples time_sequence_prediction (generate_sine_wave.py and
# train.py in one file), written the way the repo has them: the sine waves
# made with np.random.seed(2) / np.random.randint(-4 * T, 4 * T, N) shifts
# and stored as float64, then train.py's np.random.seed(0) /
# torch.manual_seed(0), the Sequence model of two nn.LSTMCell(…, 51) and a
# Linear with torch.zeros(..., dtype=torch.double) states,
# input.split(1, dim=1), the `future` loop feeding outputs back,
# torch.cat(outputs, dim=1), seq.double(), nn.MSELoss, optim.LBFGS(lr=0.8)
# with a closure that prints the loss, and the no_grad future prediction
# with its test loss.  Changes for a CPU test: L=24 points per wave, N=6
# waves, the data kept in memory instead of traindata.pt (torch.save of the
# numpy array and torch.load(weights_only=False) round-trip it here through
# a BytesIO), 2 steps with max_iter=4, future=8, no plots; then the
# model's forward on the test input under torch.compile checked against
# eager.
from __future__ import print_function
import argparse
import io

import numpy as np
import torch
import torch.nn as nn
import torch.optim as optim

# --- generate_sine_wave.py
np.random.seed(2)

T = 20
L = 24
N = 6

x = np.empty((N, L), 'int64')
x[:] = np.array(range(L)) + np.random.randint(-4 * T, 4 * T, N).reshape(N, 1)
data = np.sin(x / 1.0 / T).astype('float64')
buf = io.BytesIO()
torch.save(data, buf)


# --- train.py
class Sequence(nn.Module):
    def __init__(self):
        super(Sequence, self).__init__()
        self.lstm1 = nn.LSTMCell(1, 51)
        self.lstm2 = nn.LSTMCell(51, 51)
        self.linear = nn.Linear(51, 1)

    def forward(self, input, future = 0):
        outputs = []
        h_t = torch.zeros(input.size(0), 51, dtype=torch.double)
        c_t = torch.zeros(input.size(0), 51, dtype=torch.double)
        h_t2 = torch.zeros(input.size(0), 51, dtype=torch.double)
        c_t2 = torch.zeros(input.size(0), 51, dtype=torch.double)

        for input_t in input.split(1, dim=1):
            h_t, c_t = self.lstm1(input_t, (h_t, c_t))
            h_t2, c_t2 = self.lstm2(h_t, (h_t2, c_t2))
            output = self.linear(h_t2)
            outputs += [output]
        for i in range(future):# if we should predict the future
            h_t, c_t = self.lstm1(output, (h_t, c_t))
            h_t2, c_t2 = self.lstm2(h_t, (h_t2, c_t2))
            output = self.linear(h_t2)
            outputs += [output]
        outputs = torch.cat(outputs, dim=1)
        return outputs


if __name__ == '__main__':
    parser = argparse.ArgumentParser()
    parser.add_argument('--steps', type=int, default=2, help='steps to run')
    opt = parser.parse_args([])
    # set random seed to 0
    np.random.seed(0)
    torch.manual_seed(0)
    # load data and make training set
    buf.seek(0)
    data = torch.load(buf, weights_only=False)
    input = torch.from_numpy(data[3:, :-1])
    target = torch.from_numpy(data[3:, 1:])
    test_input = torch.from_numpy(data[:3, :-1])
    test_target = torch.from_numpy(data[:3, 1:])
    # build the model
    seq = Sequence()
    seq.double()
    criterion = nn.MSELoss()
    # use LBFGS as optimizer since we can load the whole data to train
    optimizer = optim.LBFGS(seq.parameters(), lr=0.8, max_iter=4)
    #begin to train
    for i in range(opt.steps):
        print('STEP: ', i)
        def closure():
            optimizer.zero_grad()
            out = seq(input)
            loss = criterion(out, target)
            print('loss:', loss.item())
            loss.backward()
            return loss
        optimizer.step(closure)
        # begin to predict, no need to track gradient here
        with torch.no_grad():
            future = 8
            pred = seq(test_input, future=future)
            loss = criterion(pred[:, :-future], test_target)
            print('test loss:', loss.item())
            y = pred.detach().numpy()
        print('future', np.round(y[0, -4:], 6).tolist())

    with torch.no_grad():
        eager = seq(test_input[:, :6], future=2)
        compiled = torch.compile(seq)(test_input[:, :6], future=2)
    print('compiled == eager:', torch.allclose(compiled, eager, atol=1e-10))
