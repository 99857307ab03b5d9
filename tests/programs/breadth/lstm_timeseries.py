# The classic "Time Series Prediction using LSTM with PyTorch" tutorial
# (flights passengers; a synthetic seasonal series instead of seaborn's
# data set): MinMaxScaler written in numpy, create_inout_sequences, an LSTM
# with a hidden_cell attribute reset per sequence, future predictions.
import numpy as np
import torch
import torch.nn as nn

torch.manual_seed(0)
months = np.arange(144)
all_data = (100 + 2 * months + 40 * np.sin(2 * np.pi * months / 12)).astype(float)
test_data_size = 12
train_data = all_data[:-test_data_size]
test_data = all_data[-test_data_size:]
print(len(train_data), len(test_data))

lo, hi = train_data.min(), train_data.max()   # MinMaxScaler(feature_range=(-1, 1))
train_data_normalized = ((train_data - lo) / (hi - lo) * 2 - 1).reshape(-1, 1)
print(train_data_normalized[:5].shape)
train_data_normalized = torch.FloatTensor(train_data_normalized).view(-1)
train_window = 12

def create_inout_sequences(input_data, tw):
    inout_seq = []
    L = len(input_data)
    for i in range(L-tw):
        train_seq = input_data[i:i+tw]
        train_label = input_data[i+tw:i+tw+1]
        inout_seq.append((train_seq ,train_label))
    return inout_seq

train_inout_seq = create_inout_sequences(train_data_normalized, train_window)
print(train_inout_seq[:1][0][0].shape, train_inout_seq[:1][0][1].shape)

class LSTM(nn.Module):
    def __init__(self, input_size=1, hidden_layer_size=100, output_size=1):
        super().__init__()
        self.hidden_layer_size = hidden_layer_size
        self.lstm = nn.LSTM(input_size, hidden_layer_size)
        self.linear = nn.Linear(hidden_layer_size, output_size)
        self.hidden_cell = (torch.zeros(1,1,self.hidden_layer_size),
                            torch.zeros(1,1,self.hidden_layer_size))

    def forward(self, input_seq):
        lstm_out, self.hidden_cell = self.lstm(input_seq.view(len(input_seq) ,1, -1), self.hidden_cell)
        predictions = self.linear(lstm_out.view(len(input_seq), -1))
        return predictions[-1]

model = LSTM(hidden_layer_size=32)
loss_function = nn.MSELoss()
optimizer = torch.optim.Adam(model.parameters(), lr=0.001)
print(model)
epochs = 3
for i in range(epochs):
    for seq, labels in train_inout_seq[:40]:
        optimizer.zero_grad()
        model.hidden_cell = (torch.zeros(1, 1, model.hidden_layer_size),
                        torch.zeros(1, 1, model.hidden_layer_size))
        y_pred = model(seq)
        single_loss = loss_function(y_pred, labels)
        single_loss.backward()
        optimizer.step()
    if i%1 == 0:
        print(f'epoch: {i:3} loss: {single_loss.item():10.8f}')
print(f'epoch: {i:3} loss: {single_loss.item():10.10f}')

fut_pred = 12
test_inputs = train_data_normalized[-train_window:].tolist()
print(len(test_inputs))
model.eval()
for i in range(fut_pred):
    seq = torch.FloatTensor(test_inputs[-train_window:])
    with torch.no_grad():
        model.hidden = (torch.zeros(1, 1, model.hidden_layer_size),
                        torch.zeros(1, 1, model.hidden_layer_size))
        test_inputs.append(model(seq).item())
print(len(test_inputs[fut_pred:]))
actual_predictions = (np.array(test_inputs[train_window:]).reshape(-1, 1) + 1) / 2 * (hi - lo) + lo
print(actual_predictions.shape)
