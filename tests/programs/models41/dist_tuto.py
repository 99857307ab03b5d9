# PyTorch tutorial "Writing Distributed Applications with PyTorch"
# (intermediate/dist_tuto), written the way the tutorial has it:
# init_process setting os.environ['MASTER_ADDR'] / ['MASTER_PORT'] and
# calling dist.init_process_group(backend, rank=rank, world_size=size) with
# backend='gloo', mp.set_start_method("spawn") and one mp.Process per rank
# with target=init_process; blocking point-to-point (dist.send / dist.recv),
# immediate point-to-point (dist.isend / dist.irecv and req.wait()), an
# all_reduce of torch.ones(1) over dist.new_group([0, 1]) with
# dist.ReduceOp.SUM, and distributed synchronous SGD (Partition /
# DataPartitioner with random.Random(seed).shuffle, partition_dataset with
# bsz = 128 // size, average_gradients by all_reduce of param.grad.data
# divided by the world size, run() training Net with SGD(lr=0.01,
# momentum=0.5)).  Changes for a CPU test: a random MNIST-shaped data set
# (64 images of 1x28x28 and labels from torch.manual_seed(1234)) instead of
# the torchvision download, a smaller Net (one conv, one Linear), 2 epochs,
# port 29561, and each rank's printed lines sent back through an
# mp.Queue and printed by the parent in rank order (the ranks' own prints
# interleave in any order); no torch.compile (the gloo backend runs eagerly).
import os
from math import ceil
from random import Random

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim

OUT = None


def say(*args):
    OUT.put((dist.get_rank(), " ".join(str(a) for a in args)))


def run_blocking(rank, size):
    """Blocking point-to-point communication."""
    tensor = torch.zeros(1)
    if rank == 0:
        tensor += 1
        # Send the tensor to process 1
        dist.send(tensor=tensor, dst=1)
    else:
        # Receive tensor from process 0
        dist.recv(tensor=tensor, src=0)
    say('Rank ', rank, ' has data ', tensor[0])


def run_nonblocking(rank, size):
    """Non-blocking point-to-point communication."""
    tensor = torch.zeros(1)
    req = None
    if rank == 0:
        tensor += 1
        # Send the tensor to process 1
        req = dist.isend(tensor=tensor, dst=1)
        say('Rank 0 started sending')
    else:
        # Receive tensor from process 0
        req = dist.irecv(tensor=tensor, src=0)
        say('Rank 1 started receiving')
    req.wait()
    say('Rank ', rank, ' has data ', tensor[0])


def run_allreduce(rank, size):
    """ Simple collective communication. """
    group = dist.new_group([0, 1])
    tensor = torch.ones(1)
    dist.all_reduce(tensor, op=dist.ReduceOp.SUM, group=group)
    say('Rank ', rank, ' has data ', tensor[0])


class Partition(object):

    def __init__(self, data, index):
        self.data = data
        self.index = index

    def __len__(self):
        return len(self.index)

    def __getitem__(self, index):
        data_idx = self.index[index]
        return self.data[data_idx]


class DataPartitioner(object):

    def __init__(self, data, sizes=[0.7, 0.2, 0.1], seed=1234):
        self.data = data
        self.partitions = []
        rng = Random()  # from random import Random
        rng.seed(seed)
        data_len = len(data)
        indexes = [x for x in range(0, data_len)]
        rng.shuffle(indexes)

        for frac in sizes:
            part_len = int(frac * data_len)
            self.partitions.append(indexes[0:part_len])
            indexes = indexes[part_len:]

    def use(self, partition):
        return Partition(self.data, self.partitions[partition])


class Net(nn.Module):
    def __init__(self):
        super(Net, self).__init__()
        self.conv1 = nn.Conv2d(1, 4, 5, stride=2)
        self.fc1 = nn.Linear(4 * 12 * 12, 10)

    def forward(self, x):
        x = F.relu(self.conv1(x))
        x = x.view(-1, 4 * 12 * 12)
        return F.log_softmax(self.fc1(x), dim=1)


def partition_dataset():
    """ Partitioning MNIST """
    g = torch.Generator().manual_seed(1234)
    dataset = torch.utils.data.TensorDataset(
        (torch.randn(64, 1, 28, 28, generator=g) - 0.1307) / 0.3081,
        torch.randint(0, 10, (64,), generator=g))
    size = dist.get_world_size()
    bsz = 128 // size // 4
    partition_sizes = [1.0 / size for _ in range(size)]
    partition = DataPartitioner(dataset, partition_sizes)
    partition = partition.use(dist.get_rank())
    train_set = torch.utils.data.DataLoader(partition,
                                            batch_size=bsz,
                                            shuffle=True)
    return train_set, bsz


def average_gradients(model):
    """ Gradient averaging. """
    size = float(dist.get_world_size())
    for param in model.parameters():
        dist.all_reduce(param.grad.data, op=dist.ReduceOp.SUM)
        param.grad.data /= size


def run_sgd(rank, size):
    """ Distributed Synchronous SGD Example """
    torch.manual_seed(1234)
    train_set, bsz = partition_dataset()
    model = Net()
    optimizer = optim.SGD(model.parameters(),
                          lr=0.01, momentum=0.5)

    num_batches = ceil(len(train_set.dataset) / float(bsz))
    for epoch in range(2):
        epoch_loss = 0.0
        for data, target in train_set:
            optimizer.zero_grad()
            output = model(data)
            loss = F.nll_loss(output, target)
            epoch_loss += loss.item()
            loss.backward()
            average_gradients(model)
            optimizer.step()
        say('Rank ', dist.get_rank(), ', epoch ',
            epoch, ': ', epoch_loss / num_batches)
    say('Rank ', rank, ' fc1 bias ', model.fc1.bias.data[:4])


def run(rank, size):
    run_blocking(rank, size)
    run_nonblocking(rank, size)
    run_allreduce(rank, size)
    run_sgd(rank, size)
    dist.barrier()
    say('Rank ', rank, ' backend ', dist.get_backend(), ' world ', dist.get_world_size())


def init_process(rank, size, fn, out, backend='gloo'):
    """ Initialize the distributed environment. """
    global OUT
    OUT = out
    os.environ['MASTER_ADDR'] = '127.0.0.1'
    os.environ['MASTER_PORT'] = '29561'
    dist.init_process_group(backend, rank=rank, world_size=size)
    fn(rank, size)
    dist.destroy_process_group()


if __name__ == "__main__":
    world_size = 2
    processes = []
    mp.set_start_method("spawn")
    out = mp.Queue()
    for rank in range(world_size):
        p = mp.Process(target=init_process, args=(rank, world_size, run, out))
        p.start()
        processes.append(p)

    lines = []
    while len(lines) < world_size * 8:
        lines.append(out.get(timeout=120))
    for p in processes:
        p.join()
    for rank in range(world_size):
        for r, line in lines:
            if r == rank:
                print(line)
    print('exit codes', [p.exitcode for p in processes])
