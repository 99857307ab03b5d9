# yunjey/pytorch-tutorial 01-basics: pytorch_basics + linear_regression +
# logistic_regression + feedforward_neural_network (synthetic data instead of MNIST)
import torch
import torch.nn as nn
import numpy as np

torch.manual_seed(0)
# ================================================================== #
#                     1. Basic autograd example 1                    #
# ================================================================== #
x = torch.tensor(1., requires_grad=True)
w = torch.tensor(2., requires_grad=True)
b = torch.tensor(3., requires_grad=True)
y = w * x + b    # y = 2 * x + 3
y.backward()
print(x.grad)    # x.grad = 2
print(w.grad)    # w.grad = 1
print(b.grad)    # b.grad = 1

# ================================================================== #
#                    2. Basic autograd example 2                     #
# ================================================================== #
x = torch.randn(10, 3)
y = torch.randn(10, 2)
linear = nn.Linear(3, 2)
print('w: ', linear.weight.shape)
print('b: ', linear.bias.shape)
criterion = nn.MSELoss()
optimizer = torch.optim.SGD(linear.parameters(), lr=0.01)
pred = linear(x)
loss = criterion(pred, y)
print('loss: ', loss.item())
loss.backward()
print('dL/dw: ', linear.weight.grad.shape)
print('dL/db: ', linear.bias.grad.shape)
optimizer.step()
pred = linear(x)
loss = criterion(pred, y)
print('loss after 1 step optimization: ', loss.item())

# ================================================================== #
#                     3. Loading data from numpy                     #
# ================================================================== #
x = np.array([[1, 2], [3, 4]])
y = torch.from_numpy(x)
z = y.numpy()
print(type(z), z.dtype, y.dtype)

# ================================================================== #
#                         4. Input pipeline                          #
# ================================================================== #
class CustomDataset(torch.utils.data.Dataset):
    def __init__(self):
        self.data = torch.randn(20, 3, 8, 8)
        self.labels = torch.randint(0, 10, (20,))
    def __getitem__(self, index):
        return self.data[index], self.labels[index]
    def __len__(self):
        return 20

custom_dataset = CustomDataset()
train_loader = torch.utils.data.DataLoader(dataset=custom_dataset, batch_size=8, shuffle=True)
data_iter = iter(train_loader)
images, labels = next(data_iter)
print(images.size(), labels.size(), labels.dtype)
for images, labels in train_loader:
    pass

# ================================================================== #
#                        6. Save and load the model                  #
# ================================================================== #
resnet_like = nn.Sequential(nn.Conv2d(3, 4, 3), nn.ReLU(), nn.AdaptiveAvgPool2d((1, 1)))
model = resnet_like
torch.save(resnet_like.state_dict(), 'params.ckpt')
resnet_like.load_state_dict(torch.load('params.ckpt'))
print(model(images).shape)

# ---------------- linear regression ----------------
input_size = 1
output_size = 1
num_epochs = 60
learning_rate = 0.001
x_train = np.array([[3.3], [4.4], [5.5], [6.71], [6.93], [4.168],
                    [9.779], [6.182], [7.59], [2.167], [7.042],
                    [10.791], [5.313], [7.997], [3.1]], dtype=np.float32)
y_train = np.array([[1.7], [2.76], [2.09], [3.19], [1.694], [1.573],
                    [3.366], [2.596], [2.53], [1.221], [2.827],
                    [3.465], [1.65], [2.904], [1.3]], dtype=np.float32)
model = nn.Linear(input_size, output_size)
criterion = nn.MSELoss()
optimizer = torch.optim.SGD(model.parameters(), lr=learning_rate)
for epoch in range(num_epochs):
    inputs = torch.from_numpy(x_train)
    targets = torch.from_numpy(y_train)
    outputs = model(inputs)
    loss = criterion(outputs, targets)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    if (epoch+1) % 20 == 0:
        print('Epoch [{}/{}], Loss: {:.4f}'.format(epoch+1, num_epochs, loss.item()))
predicted = model(torch.from_numpy(x_train)).detach().numpy()
print(predicted.shape, predicted.dtype)
torch.save(model.state_dict(), 'model.ckpt')

# ---------------- logistic regression ----------------
input_size = 28 * 28
num_classes = 10
num_epochs = 2
batch_size = 20
learning_rate = 0.001
gen = np.random.RandomState(0)
protos = gen.rand(10, 28 * 28).astype(np.float32)
lab = gen.randint(0, 10, 100)
imgs = (protos[lab] + 0.3 * gen.rand(100, 28 * 28)).astype(np.float32).reshape(100, 1, 28, 28)
train_dataset = torch.utils.data.TensorDataset(torch.from_numpy(imgs), torch.from_numpy(lab))
test_dataset = train_dataset
train_loader = torch.utils.data.DataLoader(dataset=train_dataset, batch_size=batch_size, shuffle=True)
test_loader = torch.utils.data.DataLoader(dataset=test_dataset, batch_size=batch_size, shuffle=False)
model = nn.Linear(input_size, num_classes)
criterion = nn.CrossEntropyLoss()
optimizer = torch.optim.SGD(model.parameters(), lr=learning_rate)
total_step = len(train_loader)
for epoch in range(num_epochs):
    for i, (images, labels) in enumerate(train_loader):
        images = images.reshape(-1, input_size)
        outputs = model(images)
        loss = criterion(outputs, labels)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        if (i+1) % 5 == 0:
            print('Epoch [{}/{}], Step [{}/{}], Loss: {:.4f}'
                  .format(epoch+1, num_epochs, i+1, total_step, loss.item()))
with torch.no_grad():
    correct = 0
    total = 0
    for images, labels in test_loader:
        images = images.reshape(-1, input_size)
        outputs = model(images)
        _, predicted = torch.max(outputs.data, 1)
        total += labels.size(0)
        correct += (predicted == labels).sum()
    print('Accuracy of the model on the 10000 test images: {} %'.format(100 * correct / total))

# ---------------- feedforward ----------------
device = torch.device('cuda' if torch.cuda.is_available() else 'cpu')
hidden_size = 50
class NeuralNet(nn.Module):
    def __init__(self, input_size, hidden_size, num_classes):
        super(NeuralNet, self).__init__()
        self.fc1 = nn.Linear(input_size, hidden_size)
        self.relu = nn.ReLU()
        self.fc2 = nn.Linear(hidden_size, num_classes)
    def forward(self, x):
        out = self.fc1(x)
        out = self.relu(out)
        out = self.fc2(out)
        return out
model = NeuralNet(input_size, hidden_size, num_classes).to(device)
criterion = nn.CrossEntropyLoss()
optimizer = torch.optim.Adam(model.parameters(), lr=learning_rate)
for epoch in range(num_epochs):
    for i, (images, labels) in enumerate(train_loader):
        images = images.reshape(-1, 28*28).to(device)
        labels = labels.to(device)
        outputs = model(images)
        loss = criterion(outputs, labels)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        if (i+1) % 5 == 0:
            print ('Epoch [{}/{}], Step [{}/{}], Loss: {:.4f}'
                   .format(epoch+1, num_epochs, i+1, total_step, loss.item()))
with torch.no_grad():
    correct = 0
    total = 0
    for images, labels in test_loader:
        images = images.reshape(-1, 28*28).to(device)
        labels = labels.to(device)
        outputs = model(images)
        _, predicted = torch.max(outputs.data, 1)
        total += labels.size(0)
        correct += (predicted == labels).sum().item()
    print('Accuracy of the network on the 10000 test images: {} %'.format(100 * correct / total))
torch.save(model.state_dict(), 'model.ckpt')
