# PyTorch tutorial "Saving and Loading Models" (beginner/saving_loading_models)
# and the recipes "What is a state_dict in PyTorch" and "Zeroing out
# gradients in PyTorch", written the way the tutorials have them: the
# TheModelClass CNN with default init and SGD(lr=0.001, momentum=0.9), the
# printed model.state_dict() / optimizer.state_dict() entries, saving and
# loading a state_dict with torch.load(PATH, weights_only=True), saving the
# ENTIRE model with torch.save(model, PATH) and loading it back with
# torch.load(PATH, weights_only=False) (the user trusts their own pickle),
# the weights_only=True default refusing that pickle, a general checkpoint
# dict (epoch / model / optimizer / loss) resumed with model.train(), several
# models in one file, warmstarting a different model with
# load_state_dict(strict=False), and map_location as 'cpu',
# torch.device('cpu') and a lambda, a DataParallel model saved through
# model.module.state_dict() and its "module." keys stripped by
# consume_prefix_in_state_dict_if_present; model.eval() before inference.  Changes
# for a CPU test: files in a TemporaryDirectory, a 2-step CIFAR-sized
# training with torch.randn data instead of CIFAR10, the zeroing-gradients
# recipe's loop over 2 batches, and one training step under torch.compile
# checked against the same step eagerly.
import os
import pickle
import tempfile

import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim


# Define model
class TheModelClass(nn.Module):
    def __init__(self):
        super(TheModelClass, self).__init__()
        self.conv1 = nn.Conv2d(3, 6, 5)
        self.pool = nn.MaxPool2d(2, 2)
        self.conv2 = nn.Conv2d(6, 16, 5)
        self.fc1 = nn.Linear(16 * 5 * 5, 120)
        self.fc2 = nn.Linear(120, 84)
        self.fc3 = nn.Linear(84, 10)

    def forward(self, x):
        x = self.pool(F.relu(self.conv1(x)))
        x = self.pool(F.relu(self.conv2(x)))
        x = x.view(-1, 16 * 5 * 5)
        x = F.relu(self.fc1(x))
        x = F.relu(self.fc2(x))
        x = self.fc3(x)
        return x


torch.manual_seed(0)

# Initialize model
model = TheModelClass()

# Initialize optimizer
optimizer = optim.SGD(model.parameters(), lr=0.001, momentum=0.9)

# Print model's state_dict
print("Model's state_dict:")
for param_tensor in model.state_dict():
    print(param_tensor, "\t", model.state_dict()[param_tensor].size())

# Print optimizer's state_dict
print("Optimizer's state_dict:")
for var_name in optimizer.state_dict():
    print(var_name, "\t", optimizer.state_dict()[var_name])

criterion = nn.CrossEntropyLoss()
inputs = torch.randn(4, 3, 32, 32)
labels = torch.randint(0, 10, (4,))
for step in range(2):
    optimizer.zero_grad()
    loss = criterion(model(inputs), labels)
    loss.backward()
    optimizer.step()
    print('step', step, 'loss', loss.item())

# after steps with momentum the optimizer has per-parameter state
print("Optimizer's state_dict after training:")
osd = optimizer.state_dict()
print('state keys', sorted(osd['state'].keys()))
print('momentum_buffer', osd['state'][0]['momentum_buffer'].shape, osd['state'][0]['momentum_buffer'].sum().item())
print('param_groups', osd['param_groups'][0]['params'], osd['param_groups'][0]['lr'],
      osd['param_groups'][0]['momentum'], osd['param_groups'][0]['nesterov'])

with tempfile.TemporaryDirectory() as tmp:
    # Save/Load state_dict (Recommended)
    PATH = os.path.join(tmp, 'model_weights.pth')
    torch.save(model.state_dict(), PATH)

    model2 = TheModelClass()
    model2.load_state_dict(torch.load(PATH, weights_only=True))
    model2.eval()
    print('state_dict reload equal', all(torch.equal(a, b) for a, b in zip(model.state_dict().values(),
                                                                               model2.state_dict().values())))
    with torch.no_grad():
        out = model2(inputs)
    print('inference', out.argmax(1).tolist(), out.sum().item())

    # load_state_dict returns the missing / unexpected keys
    result = model2.load_state_dict(torch.load(PATH, weights_only=True))
    print('load result', result.missing_keys, result.unexpected_keys)

    # Save/Load Entire Model
    PATH_ENTIRE = os.path.join(tmp, 'entire_model.pth')
    torch.save(model, PATH_ENTIRE)

    # Model class must be defined somewhere
    model3 = torch.load(PATH_ENTIRE, weights_only=False)
    model3.eval()
    print('entire model type', type(model3).__name__, isinstance(model3, TheModelClass))
    print('entire model equal', all(torch.equal(a, b) for a, b in zip(model.state_dict().values(),
                                                                          model3.state_dict().values())))
    print('entire model training flag', model3.training, model3.conv1.training)
    with torch.no_grad():
        print('entire model out', torch.allclose(model3(inputs), out))

    # the default weights_only=True refuses to unpickle the class
    try:
        torch.load(PATH_ENTIRE)
    except Exception as e:
        print('weights_only default refuses', type(e).__name__, isinstance(e, pickle.UnpicklingError),
              'Weights only load failed' in str(e))

    # Saving & Loading a General Checkpoint for Inference and/or Resuming Training
    CKPT = os.path.join(tmp, 'checkpoint.tar')
    EPOCH = 5
    LOSS = 0.4
    torch.save({
        'epoch': EPOCH,
        'model_state_dict': model.state_dict(),
        'optimizer_state_dict': optimizer.state_dict(),
        'loss': LOSS,
    }, CKPT)

    model4 = TheModelClass()
    optimizer4 = optim.SGD(model4.parameters(), lr=0.001, momentum=0.9)

    checkpoint = torch.load(CKPT, weights_only=True)
    model4.load_state_dict(checkpoint['model_state_dict'])
    optimizer4.load_state_dict(checkpoint['optimizer_state_dict'])
    epoch = checkpoint['epoch']
    loss = checkpoint['loss']
    print('checkpoint', epoch, loss, sorted(checkpoint.keys()))

    model4.train()
    # resume training: the restored momentum makes the next steps equal
    for m, opt in ((model, optimizer), (model4, optimizer4)):
        opt.zero_grad()
        l = criterion(m(inputs), labels)
        l.backward()
        opt.step()
    print('resumed equal', all(torch.equal(a, b) for a, b in zip(model.parameters(), model4.parameters())))
    print('resumed momentum', optimizer4.state_dict()['state'][9]['momentum_buffer'].tolist())

    # Saving Multiple Models in One File
    modelA = TheModelClass()
    modelB = TheModelClass()
    optimizerA = optim.SGD(modelA.parameters(), lr=0.001, momentum=0.9)
    optimizerB = optim.Adam(modelB.parameters(), lr=0.001)
    MULTI = os.path.join(tmp, 'multi.tar')
    torch.save({
        'modelA_state_dict': modelA.state_dict(),
        'modelB_state_dict': modelB.state_dict(),
        'optimizerA_state_dict': optimizerA.state_dict(),
        'optimizerB_state_dict': optimizerB.state_dict(),
    }, MULTI)

    modelA2 = TheModelClass()
    modelB2 = TheModelClass()
    optimizerA2 = optim.SGD(modelA2.parameters(), lr=0.001, momentum=0.9)
    optimizerB2 = optim.Adam(modelB2.parameters(), lr=0.001)
    checkpoint = torch.load(MULTI, weights_only=True)
    modelA2.load_state_dict(checkpoint['modelA_state_dict'])
    modelB2.load_state_dict(checkpoint['modelB_state_dict'])
    optimizerA2.load_state_dict(checkpoint['optimizerA_state_dict'])
    optimizerB2.load_state_dict(checkpoint['optimizerB_state_dict'])
    modelA2.eval()
    modelB2.train()
    print('multi', torch.equal(modelA2.fc3.bias, modelA.fc3.bias), torch.equal(modelB2.fc3.bias, modelB.fc3.bias),
          optimizerB2.state_dict()['param_groups'][0]['betas'])

    # Warmstarting Model Using Parameters from a Different Model
    class NetB(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv1 = nn.Conv2d(3, 6, 5)
            self.pool = nn.MaxPool2d(2, 2)
            self.conv2 = nn.Conv2d(6, 16, 5)
            self.fc1 = nn.Linear(16 * 5 * 5, 120)
            self.head = nn.Linear(120, 3)

        def forward(self, x):
            x = self.pool(F.relu(self.conv1(x)))
            x = self.pool(F.relu(self.conv2(x)))
            return self.head(F.relu(self.fc1(torch.flatten(x, 1))))

    WARM = os.path.join(tmp, 'modelA.pth')
    torch.save(modelA.state_dict(), WARM)
    modelB3 = NetB()
    res = modelB3.load_state_dict(torch.load(WARM, weights_only=True), strict=False)
    print('warmstart missing', res.missing_keys)
    print('warmstart unexpected', res.unexpected_keys)
    print('warmstart conv1 copied', torch.equal(modelB3.conv1.weight, modelA.conv1.weight))
    try:
        NetB().load_state_dict(torch.load(WARM, weights_only=True))
    except RuntimeError as e:
        print('strict load error', str(e).splitlines()[0])
        print(str(e).splitlines()[1].strip()[:80])

    # Saving & Loading Model Across Devices: map_location variants
    sd1 = torch.load(PATH, map_location='cpu', weights_only=True)
    sd2 = torch.load(PATH, map_location=torch.device('cpu'), weights_only=True)
    sd3 = torch.load(PATH, map_location=lambda storage, loc: storage, weights_only=True)
    sd4 = torch.load(PATH, map_location={'cpu': 'cpu'}, weights_only=True)
    for name, sd in (('str', sd1), ('device', sd2), ('lambda', sd3), ('dict', sd4)):
        print('map_location', name, sd['fc3.bias'].device, torch.equal(sd['fc3.bias'], model2.fc3.bias))
    model5 = TheModelClass()
    model5.load_state_dict(sd3)
    model5.to(torch.device('cpu'))
    model5.eval()
    with torch.no_grad():
        print('map_location model out', torch.allclose(model5(inputs), out))

    # Saving torch.nn.DataParallel Models: save model.module.state_dict();
    # a wrapper's own state_dict has "module." keys, stripped before loading
    dp_model = torch.nn.DataParallel(model2)
    DP = os.path.join(tmp, 'dp.pth')
    torch.save(dp_model.module.state_dict(), DP)
    print('DataParallel keys', list(dp_model.state_dict().keys())[:2])
    model6 = TheModelClass()
    print('DataParallel module load', model6.load_state_dict(torch.load(DP, weights_only=True)))
    torch.save(dp_model.state_dict(), DP)
    sd = torch.load(DP, weights_only=True)
    torch.nn.modules.utils.consume_prefix_in_state_dict_if_present(sd, 'module.')
    print('consumed prefix', list(sd.keys())[:2], model6.load_state_dict(sd))

# "What is a state_dict": the recipe's Net prints
class Net(nn.Module):
    def __init__(self):
        super(Net, self).__init__()
        self.conv1 = nn.Conv2d(3, 6, 5)
        self.pool = nn.MaxPool2d(2, 2)
        self.conv2 = nn.Conv2d(6, 16, 5)
        self.fc1 = nn.Linear(16 * 5 * 5, 120)
        self.fc2 = nn.Linear(120, 84)
        self.fc3 = nn.Linear(84, 10)

    def forward(self, x):
        x = self.pool(F.relu(self.conv1(x)))
        x = self.pool(F.relu(self.conv2(x)))
        x = x.view(-1, 16 * 5 * 5)
        x = F.relu(self.fc1(x))
        x = F.relu(self.fc2(x))
        x = self.fc3(x)
        return x


net = Net()
print(net)
optimizer = optim.SGD(net.parameters(), lr=0.001, momentum=0.9)
print("Model's state_dict:")
for param_tensor in net.state_dict():
    print(param_tensor, "\t", net.state_dict()[param_tensor].size())
print()
print("Optimizer's state_dict:")
for var_name in optimizer.state_dict():
    print(var_name, "\t", optimizer.state_dict()[var_name])

# "Zeroing out gradients": the training loop over two batches
data = [(torch.randn(4, 3, 32, 32), torch.randint(0, 10, (4,))) for _ in range(2)]
for epoch in range(2):  # loop over the dataset multiple times
    running_loss = 0.0
    for i, data_i in enumerate(data, 0):
        # get the inputs; data is a list of [inputs, labels]
        inputs, labels = data_i

        # zero the parameter gradients
        optimizer.zero_grad()

        # forward + backward + optimize
        outputs = net(inputs)
        loss = criterion(outputs, labels)
        loss.backward()
        optimizer.step()

        # print statistics
        running_loss += loss.item()
    print('[%d] loss: %.3f' % (epoch + 1, running_loss / 2))
print('grad after zero_grad (set_to_none)', end=' ')
optimizer.zero_grad()
print(net.conv1.weight.grad)
net(inputs).sum().backward()
net.zero_grad(set_to_none=False)
print('net.zero_grad(set_to_none=False)', net.conv1.weight.grad.abs().sum().item(), net.fc3.bias.grad.shape)
net.zero_grad()
print('net.zero_grad()', net.fc3.bias.grad)

# compiled: one training step of the model, checked against the same step eagerly
model.train()
opt = optim.SGD(model.parameters(), lr=0.001, momentum=0.9)


def train_step(x, y):
    opt.zero_grad()
    loss = criterion(model(x), y)
    loss.backward()
    opt.step()
    return loss


state = {k: v.clone() for k, v in model.state_dict().items()}
loss_c = torch.compile(train_step)(inputs, labels)
after_c = {k: v.clone() for k, v in model.state_dict().items()}
model.load_state_dict(state)
opt = optim.SGD(model.parameters(), lr=0.001, momentum=0.9)
loss_e = train_step(inputs, labels)
print('compiled == eager', torch.allclose(loss_c, loss_e, atol=1e-6),
      all(torch.allclose(after_c[k], v, atol=1e-6) for k, v in model.state_dict().items()))
print('loss', loss_e.item())
