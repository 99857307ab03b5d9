"""
A char-level training script in the style of karpathy/nanoGPT train.py
(single process: the DDP, wandb and checkpoint-resume parts are left out)
followed by sample.py's generation.  The text is a random string made with
NumPy (the original reads data/shakespeare_char/{train,val}.bin).
"""
import argparse
import math
import time
from contextlib import nullcontext

import numpy as np
import torch

from model import GPTConfig, GPT

parser = argparse.ArgumentParser()
parser.add_argument('--batch_size', type=int, default=64)
parser.add_argument('--block_size', type=int, default=256)
parser.add_argument('--n_layer', type=int, default=6)
parser.add_argument('--n_head', type=int, default=6)
parser.add_argument('--n_embd', type=int, default=384)
parser.add_argument('--dropout', type=float, default=0.2)
parser.add_argument('--bias', action='store_true')
parser.add_argument('--learning_rate', type=float, default=1e-3)
parser.add_argument('--max_iters', type=int, default=5000)
parser.add_argument('--lr_decay_iters', type=int, default=5000)
parser.add_argument('--min_lr', type=float, default=1e-4)
parser.add_argument('--warmup_iters', type=int, default=100)
parser.add_argument('--weight_decay', type=float, default=1e-1)
parser.add_argument('--beta1', type=float, default=0.9)
parser.add_argument('--beta2', type=float, default=0.99)
parser.add_argument('--grad_clip', type=float, default=1.0)
parser.add_argument('--eval_interval', type=int, default=250)
parser.add_argument('--eval_iters', type=int, default=200)
parser.add_argument('--log_interval', type=int, default=10)
parser.add_argument('--gradient_accumulation_steps', type=int, default=1)
parser.add_argument('--text_length', type=int, default=100000)
parser.add_argument('--max_new_tokens', type=int, default=100)
parser.add_argument('--temperature', type=float, default=0.8)
parser.add_argument('--top_k', type=int, default=200)
parser.add_argument('--seed', type=int, default=1337)
parser.add_argument('--device', type=str, default='cpu')
parser.add_argument('--dtype', type=str, default='float32')
parser.add_argument('--compile', action='store_true') # nanoGPT's default is True; off here (torch.compile takes a minute)
args = parser.parse_args()

torch.manual_seed(args.seed)
device = args.device
device_type = 'cuda' if 'cuda' in device else 'cpu' # for later use in torch.autocast
ptdtype = {'float32': torch.float32, 'bfloat16': torch.bfloat16, 'float16': torch.float16}[args.dtype]
ctx = nullcontext() if device_type == 'cpu' else torch.amp.autocast(device_type=device_type, dtype=ptdtype)

# poor man's data loader: a random "text" over a small alphabet, split 90/10
rng = np.random.default_rng(args.seed)
chars = sorted(set("abcdefghijklmnopqrstuvwxyz \n"))
stoi = { ch:i for i,ch in enumerate(chars) }
itos = { i:ch for i,ch in enumerate(chars) }
encode = lambda s: [stoi[c] for c in s]
decode = lambda l: ''.join([itos[i] for i in l])
text = ''.join(rng.choice(chars, size=args.text_length))
ids = np.array(encode(text), dtype=np.uint16)
n = int(0.9 * len(ids))
splits = {'train': ids[:n], 'val': ids[n:]}
block_size = args.block_size
batch_size = args.batch_size

def get_batch(split):
    data = splits[split]
    ix = torch.randint(len(data) - block_size, (batch_size,))
    x = torch.stack([torch.from_numpy((data[i:i+block_size]).astype(np.int64)) for i in ix])
    y = torch.stack([torch.from_numpy((data[i+1:i+1+block_size]).astype(np.int64)) for i in ix])
    x, y = x.to(device), y.to(device)
    return x, y

# model init
model_args = dict(n_layer=args.n_layer, n_head=args.n_head, n_embd=args.n_embd, block_size=block_size,
                  bias=args.bias, vocab_size=len(chars), dropout=args.dropout)
gptconf = GPTConfig(**model_args)
model = GPT(gptconf)
model.to(device)

# initialize a GradScaler. If enabled=False scaler is a no-op
scaler = torch.amp.GradScaler(device_type, enabled=(args.dtype == 'float16'))

# optimizer
optimizer = model.configure_optimizers(args.weight_decay, args.learning_rate, (args.beta1, args.beta2), device_type)

# compile the model
if args.compile:
    print("compiling the model... (takes a ~minute)")
    unoptimized_model = model
    model = torch.compile(model) # requires PyTorch 2.0

# helps estimate an arbitrarily accurate loss over either split using many batches
@torch.no_grad()
def estimate_loss():
    out = {}
    model.eval()
    for split in ['train', 'val']:
        losses = torch.zeros(args.eval_iters)
        for k in range(args.eval_iters):
            X, Y = get_batch(split)
            with ctx:
                logits, loss = model(X, Y)
            losses[k] = loss.item()
        out[split] = losses.mean()
    model.train()
    return out

# learning rate decay scheduler (cosine with warmup)
def get_lr(it):
    # 1) linear warmup for warmup_iters steps
    if it < args.warmup_iters:
        return args.learning_rate * (it + 1) / (args.warmup_iters + 1)
    # 2) if it > lr_decay_iters, return min learning rate
    if it > args.lr_decay_iters:
        return args.min_lr
    # 3) in between, use cosine decay down to min learning rate
    decay_ratio = (it - args.warmup_iters) / (args.lr_decay_iters - args.warmup_iters)
    assert 0 <= decay_ratio <= 1
    coeff = 0.5 * (1.0 + math.cos(math.pi * decay_ratio)) # coeff ranges 0..1
    return args.min_lr + coeff * (args.learning_rate - args.min_lr)

# training loop
X, Y = get_batch('train') # fetch the very first batch
t0 = time.time()
iter_num = 0
best_val_loss = 1e9
while True:

    # determine and set the learning rate for this iteration
    lr = get_lr(iter_num)
    for param_group in optimizer.param_groups:
        param_group['lr'] = lr

    # evaluate the loss on train/val sets and write checkpoints
    if iter_num % args.eval_interval == 0:
        losses = estimate_loss()
        print(f"step {iter_num}: train loss {losses['train']:.4f}, val loss {losses['val']:.4f}")
        best_val_loss = min(best_val_loss, losses['val'])

    # forward backward update, with optional gradient accumulation to simulate larger batch size
    # and using the GradScaler if data type is float16
    for micro_step in range(args.gradient_accumulation_steps):
        with ctx:
            logits, loss = model(X, Y)
            loss = loss / args.gradient_accumulation_steps # scale the loss to account for gradient accumulation
        # immediately async prefetch next batch while model is doing the forward pass on the GPU
        X, Y = get_batch('train')
        # backward pass, with gradient scaling if training in fp16
        scaler.scale(loss).backward()
    # clip the gradient
    if args.grad_clip != 0.0:
        scaler.unscale_(optimizer)
        torch.nn.utils.clip_grad_norm_(model.parameters(), args.grad_clip)
    # step the optimizer and scaler if training in fp16
    scaler.step(optimizer)
    scaler.update()
    # flush the gradients as soon as we can, no need for this memory anymore
    optimizer.zero_grad(set_to_none=True)

    # timing and logging
    t1 = time.time()
    dt = t1 - t0
    t0 = t1
    if iter_num % args.log_interval == 0:
        # get loss as float. note: this is a CPU-GPU sync point
        lossf = loss.item() * args.gradient_accumulation_steps
        print(f"iter {iter_num}: loss {lossf:.4f}, time {dt*1000:.2f}ms")
    iter_num += 1

    # termination conditions
    if iter_num > args.max_iters:
        break

# sample.py: generate from the trained model
model.eval()
start_ids = encode("\n")
x = (torch.tensor(start_ids, dtype=torch.long, device=device)[None, ...])
with torch.no_grad():
    with ctx:
        y = model.generate(x, args.max_new_tokens, temperature=args.temperature, top_k=args.top_k)
        print(decode(y[0].tolist()))
        print('---------------')
