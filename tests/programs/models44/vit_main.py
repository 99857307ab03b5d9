# pytorch/examples vision_transformer/main.py: PatchExtractor (unfold /
# unfold / permute / contiguous / view into patches, with its divisibility
# assert), InputEmbedding (the Linear projection, class_token and
# pos_embedding Parameters of shape (batch_size, 1, latent_size) moved with
# .to(self.device), a PatchExtractor built in forward, torch.cat of the
# class token and the in-place `linear_projection += pos_embed`),
# EncoderBlock (one LayerNorm used twice, nn.MultiheadAttention without
# batch_first, so as in the original the batch is its sequence axis, and the
# GELU MLP with Dropout), ViT (ModuleList of encoders, MLPHead on the class
# token), TrainEval (train_fn with the log_interval / dry_run print, eval_fn,
# train saving "best-weights.pt" with torch.save(self.model.state_dict())
# on a better validation loss), and main's argparse options (the int-typed
# --dropout and --weight-decay as written), Adam with weight decay and
# nn.CrossEntropyLoss.
# Changes for a CPU test: random CIFAR-like tensors (a TensorDataset, no
# torchvision download) at 16x16, the command line given to parse_args
# (--no-cuda, small sizes, 2 epochs), np.inf from numpy as imported there;
# then the training step of one encoder block's MLP (in eval mode: no
# dropout) under torch.compile against the same step eagerly.
import argparse
import copy

import numpy as np
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset


class PatchExtractor(nn.Module):
    def __init__(self, patch_size=16):
        super().__init__()
        self.patch_size = patch_size

    def forward(self, input_data):
        batch_size, channels, height, width = input_data.size()
        assert height % self.patch_size == 0 and width % self.patch_size == 0, \
            f"Input height ({height}) and width ({width}) must be divisible by patch size ({self.patch_size})"

        num_patches_h = height // self.patch_size
        num_patches_w = width // self.patch_size
        num_patches = num_patches_h * num_patches_w

        patches = input_data.unfold(2, self.patch_size, self.patch_size). \
            unfold(3, self.patch_size, self.patch_size). \
            permute(0, 2, 3, 1, 4, 5). \
            contiguous(). \
            view(batch_size, num_patches, -1)

        # Expected shape of a patch on default settings is (4, 196, 768)

        return patches


class InputEmbedding(nn.Module):

    def __init__(self, args):
        super(InputEmbedding, self).__init__()
        self.patch_size = args.patch_size
        self.n_channels = args.n_channels
        self.latent_size = args.latent_size
        use_cuda = not args.no_cuda and torch.cuda.is_available()
        self.device = torch.device("cuda" if use_cuda else "cpu")
        self.batch_size = args.batch_size
        self.input_size = self.patch_size * self.patch_size * self.n_channels

        # Linear projection
        self.LinearProjection = nn.Linear(self.input_size, self.latent_size)
        # Class token
        self.class_token = nn.Parameter(torch.randn(self.batch_size, 1, self.latent_size)).to(self.device)
        # Positional embedding
        self.pos_embedding = nn.Parameter(torch.randn(self.batch_size, 1, self.latent_size)).to(self.device)

    def forward(self, input_data):
        input_data = input_data.to(self.device)
        # Patchifying the Image
        patchify = PatchExtractor(patch_size=self.patch_size)
        patches = patchify(input_data)

        linear_projection = self.LinearProjection(patches).to(self.device)
        b, n, _ = linear_projection.shape
        linear_projection = torch.cat((self.class_token, linear_projection), dim=1)
        pos_embed = self.pos_embedding[:, :n + 1, :]
        linear_projection += pos_embed

        return linear_projection


class EncoderBlock(nn.Module):

    def __init__(self, args):
        super(EncoderBlock, self).__init__()

        self.latent_size = args.latent_size
        self.num_heads = args.num_heads
        self.dropout = args.dropout
        self.norm = nn.LayerNorm(self.latent_size)
        self.attention = nn.MultiheadAttention(self.latent_size, self.num_heads, dropout=self.dropout)
        self.enc_MLP = nn.Sequential(
            nn.Linear(self.latent_size, self.latent_size * 4),
            nn.GELU(),
            nn.Dropout(self.dropout),
            nn.Linear(self.latent_size * 4, self.latent_size),
            nn.Dropout(self.dropout)
        )

    def forward(self, emb_patches):
        first_norm = self.norm(emb_patches)
        attention_out = self.attention(first_norm, first_norm, first_norm)[0]
        first_added = attention_out + emb_patches
        second_norm = self.norm(first_added)
        mlp_out = self.enc_MLP(second_norm)
        output = mlp_out + first_added

        return output


class ViT(nn.Module):
    def __init__(self, args):
        super(ViT, self).__init__()

        self.num_encoders = args.num_encoders
        self.latent_size = args.latent_size
        self.num_classes = args.num_classes
        self.dropout = args.dropout

        self.embedding = InputEmbedding(args)
        # Encoder Stack
        self.encoders = nn.ModuleList([EncoderBlock(args) for _ in range(self.num_encoders)])
        self.MLPHead = nn.Sequential(
            nn.LayerNorm(self.latent_size),
            nn.Linear(self.latent_size, self.latent_size),
            nn.Linear(self.latent_size, self.num_classes),
        )

    def forward(self, test_input):
        enc_output = self.embedding(test_input)
        for enc_layer in self.encoders:
            enc_output = enc_layer(enc_output)

        class_token_embed = enc_output[:, 0]
        return self.MLPHead(class_token_embed)


class TrainEval:

    def __init__(self, args, model, train_dataloader, val_dataloader, optimizer, criterion, device):
        self.model = model.to(device)
        self.train_dataloader = train_dataloader
        self.val_dataloader = val_dataloader
        self.optimizer = optimizer
        self.criterion = criterion
        self.epoch = args.epochs
        self.device = device
        self.args = args

    def train_fn(self, current_epoch):
        self.model.train()
        total_loss = 0.0
        for t, data in enumerate(self.train_dataloader):
            images, labels = data
            images, labels = images.to(self.device), labels.to(self.device)
            self.optimizer.zero_grad()
            logits = self.model(images)
            loss = self.criterion(logits, labels)
            loss.backward()
            self.optimizer.step()
            total_loss += loss.item()
            if t % self.args.log_interval == 0:
                print('Train Epoch: {} [{}/{} ({:.0f}%)]\tLoss: {:.6f}'.format(
                    current_epoch, t * len(images), len(self.train_dataloader.dataset),
                    100. * t / len(self.train_dataloader), loss.item()))
                if self.args.dry_run:
                    break

        return total_loss / len(self.train_dataloader)

    def eval_fn(self, current_epoch):
        self.model.eval()
        total_loss = 0.0
        for t, data in enumerate(self.val_dataloader):
            images, labels = data
            images, labels = images.to(self.device), labels.to(self.device)

            logits = self.model(images)
            loss = self.criterion(logits, labels)

            total_loss += loss.item()

        return total_loss / len(self.val_dataloader)

    def train(self):
        best_valid_loss = np.inf
        best_train_loss = np.inf
        for i in range(self.epoch):
            train_loss = self.train_fn(i)
            val_loss = self.eval_fn(i)

            if val_loss < best_valid_loss:
                torch.save(self.model.state_dict(), "best-weights.pt")
                print("Saved Best Weights")
                best_valid_loss = val_loss
                best_train_loss = train_loss
        print(f"Training Loss : {best_train_loss:.6f}")
        print(f"Valid Loss : {best_valid_loss:.6f}")


def main():
    parser = argparse.ArgumentParser(description='Vision Transformer in PyTorch')
    parser.add_argument('--no-cuda', action='store_true', default=False,
                        help='disables CUDA training')
    parser.add_argument('--patch-size', type=int, default=16,
                        help='patch size for images (default : 16)')
    parser.add_argument('--latent-size', type=int, default=768,
                        help='latent size (default : 768)')
    parser.add_argument('--n-channels', type=int, default=3,
                        help='number of channels in images (default : 3 for RGB)')
    parser.add_argument('--num-heads', type=int, default=12,
                        help='(default : 12)')
    parser.add_argument('--num-encoders', type=int, default=12,
                        help='number of encoders (default : 12)')
    parser.add_argument('--dropout', type=int, default=0.1,
                        help='dropout value (default : 0.1)')
    parser.add_argument('--img-size', type=int, default=224,
                        help='image size to be reshaped to (default : 224')
    parser.add_argument('--num-classes', type=int, default=10,
                        help='number of classes in dataset (default : 10 for CIFAR10)')
    parser.add_argument('--epochs', type=int, default=10,
                        help='number of epochs (default : 10)')
    parser.add_argument('--lr', type=float, default=1e-2,
                        help='base learning rate (default : 0.01)')
    parser.add_argument('--weight-decay', type=int, default=3e-2,
                        help='weight decay value (default : 0.03)')
    parser.add_argument('--batch-size', type=int, default=4,
                        help='batch size (default : 4)')
    parser.add_argument('--dry-run', action='store_true', default=False,
                        help='quickly check a single pass')
    parser.add_argument('--log-interval', type=int, default=10,
                        help='how many batches to wait before logging training status')
    args = parser.parse_args(["--no-cuda", "--patch-size", "4", "--latent-size", "32", "--num-heads", "4",
                              "--num-encoders", "2", "--img-size", "16", "--epochs", "2", "--lr", "1e-3",
                              "--log-interval", "3"])
    print("args", args.dropout, args.weight_decay, args.batch_size, args.no_cuda)

    use_cuda = not args.no_cuda and torch.cuda.is_available()
    device = torch.device("cuda" if use_cuda else "cpu")
    torch.manual_seed(0)
    # (CIFAR-10 through T.Resize / T.ToTensor in the original)
    train_data = TensorDataset(torch.rand(32, args.n_channels, args.img_size, args.img_size),
                               torch.randint(0, args.num_classes, (32,)))
    valid_data = TensorDataset(torch.rand(16, args.n_channels, args.img_size, args.img_size),
                               torch.randint(0, args.num_classes, (16,)))
    train_loader = DataLoader(train_data, batch_size=args.batch_size, shuffle=True)
    valid_loader = DataLoader(valid_data, batch_size=args.batch_size, shuffle=True)

    model = ViT(args).to(device)
    print("parameters", sum(p.numel() for p in model.parameters()),
          [n for n, _ in model.named_parameters()][:4])
    patches = PatchExtractor(args.patch_size)(train_data[0][0][None])
    print("patches", tuple(patches.shape), f"{patches.sum().item():.4f}")
    try:
        PatchExtractor(5)(train_data[0][0][None])
    except AssertionError as e:
        print("AssertionError:", e)
    optimizer = torch.optim.Adam(model.parameters(), lr=args.lr, weight_decay=args.weight_decay)
    criterion = nn.CrossEntropyLoss()

    TrainEval(args, model, train_loader, valid_loader, optimizer, criterion, device).train()
    best = torch.load("best-weights.pt")
    print("best weights", len(best), list(best)[:3], tuple(best["embedding.class_token"].shape))

    # the training step of one encoder block's MLP (eval: no dropout) under
    # torch.compile (a whole block's step takes seconds of LLVM, cold)
    block = model.encoders[0].enc_MLP
    block.eval()
    x = model.encoders[0].norm(model.embedding(train_data.tensors[0][:args.batch_size])).detach()
    opt = torch.optim.SGD(block.parameters(), lr=0.1, momentum=0.9)

    def block_step(x):
        opt.zero_grad()
        loss = block(x).pow(2).mean()
        loss.backward()
        opt.step()
        return loss

    state, opt_state = copy.deepcopy(block.state_dict()), copy.deepcopy(opt.state_dict())
    eager = [block_step(x).item() for _ in range(2)]
    after = {k: v.clone() for k, v in block.state_dict().items()}
    block.load_state_dict(state)
    opt.load_state_dict(opt_state)
    cstep = torch.compile(block_step)
    compiled = [cstep(x).item() for _ in range(2)]
    print("compiled losses", [f"{v:.6f}" for v in compiled])
    print("compiled == eager:", all(abs(a - b) <= 1e-4 * max(1.0, abs(b)) for a, b in zip(compiled, eager)),
          all(torch.allclose(block.state_dict()[k], after[k], rtol=1e-4, atol=1e-5) for k in after))


if __name__ == '__main__':
    main()
