# rasbt/LLMs-from-scratch ch06 (finetuning for classification) and appendix
# E (LoRA), written the way the repo's gpt_class_finetune.py and
# appendix-E notebook have them: SpamDataset (encode, truncate to
# max_length, pad with pad_token_id=50256-style end-of-text id, the
# _longest_encoded_length scan), DataLoaders with shuffle=True /
# drop_last=True for training, the pretrained GPTModel's out_head replaced
# by torch.nn.Linear(in_features=cfg["emb_dim"], out_features=num_classes),
# all parameters frozen and requires_grad = True set again on
# model.trf_blocks[-1] and model.final_norm, logits = model(input_batch)[:,
# -1, :], calc_accuracy_loader with torch.argmax, calc_loss_batch /
# calc_loss_loader, train_classifier_simple with examples_seen and
# eval_freq, classify_review with its truncate / pad / unsqueeze(0); then
# appendix E's LoRALayer (kaiming_uniform_(self.A, a=math.sqrt(5)), B =
# torch.nn.Parameter(torch.zeros(rank, out_dim)), alpha scaling),
# LinearWithLoRA, replace_linear_with_lora recursing over
# model.named_children(), the trainable-parameter counts before / after
# freezing, and LoRA finetuning of the same classifier.
# Changes for a CPU test: a tiny GPT (vocab 160, context 20, emb 16, 2
# heads, 2 layers) trained from its torch.manual_seed(123) default init in
# place of the downloaded GPT-2 weights, a whitespace tokenizer and an
# inline 24-message spam / ham table in place of the SMS Spam Collection
# CSVs (pandas), 2 epochs; then one LoRA step on the classifier
# (model.eval(), no dropout) under torch.compile checked against eager.
import copy
import math

import torch
import torch.nn as nn
from torch.utils.data import Dataset, DataLoader


class MultiHeadAttention(nn.Module):
    def __init__(self, d_in, d_out, context_length, dropout, num_heads, qkv_bias=False):
        super().__init__()
        assert d_out % num_heads == 0, "d_out must be divisible by num_heads"

        self.d_out = d_out
        self.num_heads = num_heads
        self.head_dim = d_out // num_heads

        self.W_query = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_key = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_value = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.out_proj = nn.Linear(d_out, d_out)
        self.dropout = nn.Dropout(dropout)
        self.register_buffer("mask", torch.triu(torch.ones(context_length, context_length), diagonal=1))

    def forward(self, x):
        b, num_tokens, d_in = x.shape

        keys = self.W_key(x)
        queries = self.W_query(x)
        values = self.W_value(x)

        keys = keys.view(b, num_tokens, self.num_heads, self.head_dim)
        values = values.view(b, num_tokens, self.num_heads, self.head_dim)
        queries = queries.view(b, num_tokens, self.num_heads, self.head_dim)

        keys = keys.transpose(1, 2)
        queries = queries.transpose(1, 2)
        values = values.transpose(1, 2)

        attn_scores = queries @ keys.transpose(2, 3)
        mask_bool = self.mask.bool()[:num_tokens, :num_tokens]
        attn_scores.masked_fill_(mask_bool, -torch.inf)

        attn_weights = torch.softmax(attn_scores / keys.shape[-1]**0.5, dim=-1)
        attn_weights = self.dropout(attn_weights)

        context_vec = (attn_weights @ values).transpose(1, 2)
        context_vec = context_vec.reshape(b, num_tokens, self.d_out)
        context_vec = self.out_proj(context_vec)

        return context_vec


class LayerNorm(nn.Module):
    def __init__(self, emb_dim):
        super().__init__()
        self.eps = 1e-5
        self.scale = nn.Parameter(torch.ones(emb_dim))
        self.shift = nn.Parameter(torch.zeros(emb_dim))

    def forward(self, x):
        mean = x.mean(dim=-1, keepdim=True)
        var = x.var(dim=-1, keepdim=True, unbiased=False)
        norm_x = (x - mean) / torch.sqrt(var + self.eps)
        return self.scale * norm_x + self.shift


class GELU(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return 0.5 * x * (1 + torch.tanh(
            torch.sqrt(torch.tensor(2.0 / torch.pi)) *
            (x + 0.044715 * torch.pow(x, 3))
        ))


class FeedForward(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.layers = nn.Sequential(
            nn.Linear(cfg["emb_dim"], 4 * cfg["emb_dim"]),
            GELU(),
            nn.Linear(4 * cfg["emb_dim"], cfg["emb_dim"]),
        )

    def forward(self, x):
        return self.layers(x)


class TransformerBlock(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.att = MultiHeadAttention(
            d_in=cfg["emb_dim"],
            d_out=cfg["emb_dim"],
            context_length=cfg["context_length"],
            num_heads=cfg["n_heads"],
            dropout=cfg["drop_rate"],
            qkv_bias=cfg["qkv_bias"])
        self.ff = FeedForward(cfg)
        self.norm1 = LayerNorm(cfg["emb_dim"])
        self.norm2 = LayerNorm(cfg["emb_dim"])
        self.drop_shortcut = nn.Dropout(cfg["drop_rate"])

    def forward(self, x):
        shortcut = x
        x = self.norm1(x)
        x = self.att(x)
        x = self.drop_shortcut(x)
        x = x + shortcut

        shortcut = x
        x = self.norm2(x)
        x = self.ff(x)
        x = self.drop_shortcut(x)
        x = x + shortcut

        return x


class GPTModel(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.tok_emb = nn.Embedding(cfg["vocab_size"], cfg["emb_dim"])
        self.pos_emb = nn.Embedding(cfg["context_length"], cfg["emb_dim"])
        self.drop_emb = nn.Dropout(cfg["drop_rate"])

        self.trf_blocks = nn.Sequential(
            *[TransformerBlock(cfg) for _ in range(cfg["n_layers"])])

        self.final_norm = LayerNorm(cfg["emb_dim"])
        self.out_head = nn.Linear(cfg["emb_dim"], cfg["vocab_size"], bias=False)

    def forward(self, in_idx):
        batch_size, seq_len = in_idx.shape
        tok_embeds = self.tok_emb(in_idx)
        pos_embeds = self.pos_emb(torch.arange(seq_len, device=in_idx.device))
        x = tok_embeds + pos_embeds
        x = self.drop_emb(x)
        x = self.trf_blocks(x)
        x = self.final_norm(x)
        logits = self.out_head(x)
        return logits


class SimpleTokenizer:
    """Whitespace tokens; id 0 plays GPT-2's <|endoftext|> (50256)."""

    def __init__(self, texts, vocab_size):
        words = sorted(set(w for t in texts for w in t.lower().split()))
        self.str_to_int = {"<|endoftext|>": 0, "<|unk|>": 1}
        for w in words[:vocab_size - 2]:
            self.str_to_int[w] = len(self.str_to_int)

    def encode(self, text, allowed_special=None):
        return [self.str_to_int.get(w, 1) for w in text.lower().split()]


MESSAGES = [
    ("ham", "ok lar joking wif u oni"),
    ("spam", "free entry in 2 a wkly comp to win fa cup final tkts text now"),
    ("ham", "u dun say so early hor u c already then say"),
    ("ham", "nah i dont think he goes to usf he lives around here though"),
    ("spam", "winner as a valued network customer you have been selected to receive a prize"),
    ("spam", "urgent you have won a 1 week free membership in our prize jackpot text now"),
    ("ham", "i am gonna be home soon and i dont want to talk about this stuff anymore"),
    ("spam", "had your mobile 11 months or more you are entitled to update to the latest colour mobiles free"),
    ("ham", "i have been searching for the right words to thank you for this breather"),
    ("spam", "six chances to win cash from 100 to 20000 pounds txt now"),
    ("ham", "is that seriously how you spell his name"),
    ("spam", "congrats you have won a free prize call now to claim"),
    ("ham", "so are you going to the movie tonight or not"),
    ("spam", "free ringtone text now to claim your prize"),
    ("ham", "i will call you later when i get home"),
    ("spam", "you are a winner claim your free cash prize now"),
    ("ham", "what time are we meeting for lunch"),
    ("spam", "win a free holiday text win now"),
    ("ham", "sorry i missed your call can you call me back"),
    ("spam", "urgent claim your prize now free text"),
    ("ham", "see you at home later"),
    ("spam", "free cash prize winner call now"),
    ("ham", "did you get the message i sent"),
    ("spam", "you have won free entry text now"),
]


class SpamDataset(Dataset):
    def __init__(self, data, tokenizer, max_length=None, pad_token_id=50256):
        self.data = data

        # Pre-tokenize texts
        self.encoded_texts = [
            tokenizer.encode(text) for _, text in data
        ]

        if max_length is None:
            self.max_length = self._longest_encoded_length()
        else:
            self.max_length = max_length
            # Truncate sequences if they are longer than max_length
            self.encoded_texts = [
                encoded_text[:self.max_length]
                for encoded_text in self.encoded_texts
            ]

        # Pad sequences to the longest sequence
        self.encoded_texts = [
            encoded_text + [pad_token_id] * (self.max_length - len(encoded_text))
            for encoded_text in self.encoded_texts
        ]

    def __getitem__(self, index):
        encoded = self.encoded_texts[index]
        label = {"ham": 0, "spam": 1}[self.data[index][0]]
        return (
            torch.tensor(encoded, dtype=torch.long),
            torch.tensor(label, dtype=torch.long)
        )

    def __len__(self):
        return len(self.data)

    def _longest_encoded_length(self):
        max_length = 0
        for encoded_text in self.encoded_texts:
            encoded_length = len(encoded_text)
            if encoded_length > max_length:
                max_length = encoded_length
        return max_length


def calc_accuracy_loader(data_loader, model, device, num_batches=None):
    model.eval()
    correct_predictions, num_examples = 0, 0

    if num_batches is None:
        num_batches = len(data_loader)
    else:
        num_batches = min(num_batches, len(data_loader))
    for i, (input_batch, target_batch) in enumerate(data_loader):
        if i < num_batches:
            input_batch, target_batch = input_batch.to(device), target_batch.to(device)

            with torch.no_grad():
                logits = model(input_batch)[:, -1, :]  # Logits of last output token
            predicted_labels = torch.argmax(logits, dim=-1)

            num_examples += predicted_labels.shape[0]
            correct_predictions += (predicted_labels == target_batch).sum().item()
        else:
            break
    return correct_predictions / num_examples


def calc_loss_batch(input_batch, target_batch, model, device):
    input_batch, target_batch = input_batch.to(device), target_batch.to(device)
    logits = model(input_batch)[:, -1, :]  # Logits of last output token
    loss = torch.nn.functional.cross_entropy(logits, target_batch)
    return loss


def calc_loss_loader(data_loader, model, device, num_batches=None):
    total_loss = 0.
    if len(data_loader) == 0:
        return float("nan")
    elif num_batches is None:
        num_batches = len(data_loader)
    else:
        num_batches = min(num_batches, len(data_loader))
    for i, (input_batch, target_batch) in enumerate(data_loader):
        if i < num_batches:
            loss = calc_loss_batch(input_batch, target_batch, model, device)
            total_loss += loss.item()
        else:
            break
    return total_loss / num_batches


def evaluate_model(model, train_loader, val_loader, device, eval_iter):
    model.eval()
    with torch.no_grad():
        train_loss = calc_loss_loader(train_loader, model, device, num_batches=eval_iter)
        val_loss = calc_loss_loader(val_loader, model, device, num_batches=eval_iter)
    model.train()
    return train_loss, val_loss


def train_classifier_simple(model, train_loader, val_loader, optimizer, device, num_epochs,
                            eval_freq, eval_iter):
    # Initialize lists to track losses and tokens seen
    train_losses, val_losses, train_accs, val_accs = [], [], [], []
    examples_seen, global_step = 0, -1

    # Main training loop
    for epoch in range(num_epochs):
        model.train()  # Set model to training mode

        for input_batch, target_batch in train_loader:
            optimizer.zero_grad()  # Reset loss gradients from previous batch iteration
            loss = calc_loss_batch(input_batch, target_batch, model, device)
            loss.backward()  # Calculate loss gradients
            optimizer.step()  # Update model weights using loss gradients
            examples_seen += input_batch.shape[0]  # New: track examples instead of tokens
            global_step += 1

            # Optional evaluation step
            if global_step % eval_freq == 0:
                train_loss, val_loss = evaluate_model(
                    model, train_loader, val_loader, device, eval_iter)
                train_losses.append(train_loss)
                val_losses.append(val_loss)
                print(f"Ep {epoch+1} (Step {global_step:06d}): "
                      f"Train loss {train_loss:.3f}, Val loss {val_loss:.3f}")

        # Calculate accuracy after each epoch
        train_accuracy = calc_accuracy_loader(train_loader, model, device, num_batches=eval_iter)
        val_accuracy = calc_accuracy_loader(val_loader, model, device, num_batches=eval_iter)
        print(f"Training accuracy: {train_accuracy*100:.2f}% | ", end="")
        print(f"Validation accuracy: {val_accuracy*100:.2f}%")
        train_accs.append(train_accuracy)
        val_accs.append(val_accuracy)

    return train_losses, val_losses, train_accs, val_accs, examples_seen


def classify_review(text, model, tokenizer, device, max_length=None, pad_token_id=50256):
    model.eval()

    # Prepare inputs to the model
    input_ids = tokenizer.encode(text)
    supported_context_length = model.pos_emb.weight.shape[0]
    # Note: In the book, this was originally written as pos_emb.weight.shape[1] by mistake
    # It didn't break the code but would have caused unnecessary truncation (to 768 instead of 1024)

    # Truncate sequences if they too long
    input_ids = input_ids[:min(max_length, supported_context_length)]

    # Pad sequences to the longest sequence
    input_ids += [pad_token_id] * (max_length - len(input_ids))
    input_tensor = torch.tensor(input_ids, device=device).unsqueeze(0)  # add batch dimension

    # Model inference
    with torch.no_grad():
        logits = model(input_tensor)[:, -1, :]  # Logits of the last output token
    predicted_label = torch.argmax(logits, dim=-1).item()

    # Return the classified result
    return "spam" if predicted_label == 1 else "not spam"


# appendix E
class LoRALayer(torch.nn.Module):
    def __init__(self, in_dim, out_dim, rank, alpha):
        super().__init__()
        self.A = torch.nn.Parameter(torch.empty(in_dim, rank))
        torch.nn.init.kaiming_uniform_(self.A, a=math.sqrt(5))  # similar to standard weight initialization
        self.B = torch.nn.Parameter(torch.zeros(rank, out_dim))
        self.alpha = alpha

    def forward(self, x):
        x = self.alpha * (x @ self.A @ self.B)
        return x


class LinearWithLoRA(torch.nn.Module):
    def __init__(self, linear, rank, alpha):
        super().__init__()
        self.linear = linear
        self.lora = LoRALayer(
            linear.in_features, linear.out_features, rank, alpha
        )

    def forward(self, x):
        return self.linear(x) + self.lora(x)


def replace_linear_with_lora(model, rank, alpha):
    for name, module in model.named_children():
        if isinstance(module, torch.nn.Linear):
            # Replace the Linear layer with LinearWithLoRA
            setattr(model, name, LinearWithLoRA(module, rank, alpha))
        else:
            # Recursively apply the same function to child modules
            replace_linear_with_lora(module, rank, alpha)


BASE_CONFIG = {
    "vocab_size": 160,       # Vocabulary size
    "context_length": 20,    # Context length
    "drop_rate": 0.0,        # Dropout rate
    "qkv_bias": True,        # Query-key-value bias
    "emb_dim": 16,
    "n_layers": 2,
    "n_heads": 2,
}

tokenizer = SimpleTokenizer([t for _, t in MESSAGES], BASE_CONFIG["vocab_size"])
print([0])  # tokenizer.encode("<|endoftext|>", allowed_special={"<|endoftext|>"})
pad_token_id = 0

# random_split's role: the first 16 train, the next 4 validation, the last 4 test
train_dataset = SpamDataset(MESSAGES[:16], max_length=None, tokenizer=tokenizer, pad_token_id=pad_token_id)
val_dataset = SpamDataset(MESSAGES[16:20], max_length=train_dataset.max_length, tokenizer=tokenizer,
                          pad_token_id=pad_token_id)
test_dataset = SpamDataset(MESSAGES[20:], max_length=train_dataset.max_length, tokenizer=tokenizer,
                           pad_token_id=pad_token_id)
print(train_dataset.max_length)

num_workers = 0
batch_size = 4

torch.manual_seed(123)

train_loader = DataLoader(
    dataset=train_dataset,
    batch_size=batch_size,
    shuffle=True,
    num_workers=num_workers,
    drop_last=True,
)

val_loader = DataLoader(
    dataset=val_dataset,
    batch_size=batch_size,
    num_workers=num_workers,
    drop_last=False,
)

test_loader = DataLoader(
    dataset=test_dataset,
    batch_size=batch_size,
    num_workers=num_workers,
    drop_last=False,
)

print("Train loader:")
for input_batch, target_batch in train_loader:
    pass

print("Input batch dimensions:", input_batch.shape)
print("Label batch dimensions", target_batch.shape)
print(f"{len(train_loader)} training batches")
print(f"{len(val_loader)} validation batches")
print(f"{len(test_loader)} test batches")

torch.manual_seed(123)
model = GPTModel(BASE_CONFIG)
model.eval()

for param in model.parameters():
    param.requires_grad = False

torch.manual_seed(123)

num_classes = 2
model.out_head = torch.nn.Linear(in_features=BASE_CONFIG["emb_dim"], out_features=num_classes)

for param in model.trf_blocks[-1].parameters():
    param.requires_grad = True

for param in model.final_norm.parameters():
    param.requires_grad = True

inputs = torch.tensor(tokenizer.encode("do you have time")).unsqueeze(0)
print("Inputs:", inputs)
print("Inputs dimensions:", inputs.shape)  # shape: (batch_size, num_tokens)
with torch.no_grad():
    outputs = model(inputs)

print("Outputs:\n", outputs)
print("Outputs dimensions:", outputs.shape)  # shape: (batch_size, num_tokens, num_classes)
print("Last output token:", outputs[:, -1, :])
probas = torch.softmax(outputs[:, -1, :], dim=-1)
label = torch.argmax(probas)
print("Class label:", label.item())

device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
model.to(device)  # no assignment model = model.to(device) necessary for nn.Module classes

torch.manual_seed(123)  # For reproducibility due to the shuffling in the training data loader

train_accuracy = calc_accuracy_loader(train_loader, model, device, num_batches=10)
val_accuracy = calc_accuracy_loader(val_loader, model, device, num_batches=10)
test_accuracy = calc_accuracy_loader(test_loader, model, device, num_batches=10)

print(f"Training accuracy: {train_accuracy*100:.2f}%")
print(f"Validation accuracy: {val_accuracy*100:.2f}%")
print(f"Test accuracy: {test_accuracy*100:.2f}%")

with torch.no_grad():  # Disable gradient tracking for efficiency because we are not training, yet
    train_loss = calc_loss_loader(train_loader, model, device, num_batches=5)
    val_loss = calc_loss_loader(val_loader, model, device, num_batches=5)
    test_loss = calc_loss_loader(test_loader, model, device, num_batches=5)

print(f"Training loss: {train_loss:.3f}")
print(f"Validation loss: {val_loss:.3f}")
print(f"Test loss: {test_loss:.3f}")

torch.manual_seed(123)
optimizer = torch.optim.AdamW(model.parameters(), lr=5e-5 * 40, weight_decay=0.1)

num_epochs = 2
train_losses, val_losses, train_accs, val_accs, examples_seen = train_classifier_simple(
    model, train_loader, val_loader, optimizer, device,
    num_epochs=num_epochs, eval_freq=2, eval_iter=5,
)
print("examples seen:", examples_seen)
frozen = [n for n, p in model.named_parameters() if p.grad is None]
print("untouched params:", len(frozen), frozen[:3])

text_1 = (
    "you are a winner you have been specially"
    " selected to receive 1000 cash or a 2000 award"
)
print(classify_review(text_1, model, tokenizer, device, max_length=train_dataset.max_length,
                      pad_token_id=pad_token_id))
text_2 = (
    "hey just wanted to check if we are still on"
    " for dinner tonight let me know"
)
print(classify_review(text_2, model, tokenizer, device, max_length=train_dataset.max_length,
                      pad_token_id=pad_token_id))

# appendix E: LoRA on the classifier
torch.manual_seed(123)
model = GPTModel(BASE_CONFIG)
model.out_head = torch.nn.Linear(in_features=768 // 48, out_features=num_classes)
model.eval()

total_params = sum(p.numel() for p in model.parameters() if p.requires_grad)
print(f"Total trainable parameters before: {total_params:,}")

for param in model.parameters():
    param.requires_grad = False

total_params = sum(p.numel() for p in model.parameters() if p.requires_grad)
print(f"Total trainable parameters after: {total_params:,}")

replace_linear_with_lora(model, rank=4, alpha=8)

total_params = sum(p.numel() for p in model.parameters() if p.requires_grad)
print(f"Total trainable LoRA parameters: {total_params:,}")
print(model.trf_blocks[0].att)
print(model.out_head.lora.A[:2])

torch.manual_seed(123)
print(f"Training accuracy: {calc_accuracy_loader(train_loader, model, device, num_batches=10)*100:.2f}%")

lora_init = copy.deepcopy(model)
torch.manual_seed(123)
optimizer = torch.optim.AdamW(model.parameters(), lr=5e-5 * 40, weight_decay=0.1)
train_losses, val_losses, train_accs, val_accs, examples_seen = train_classifier_simple(
    model, train_loader, val_loader, optimizer, device,
    num_epochs=1, eval_freq=2, eval_iter=5,
)
print("lora B norm %.6f" % model.out_head.lora.B.norm().item(),
      "base W unchanged:", torch.equal(model.out_head.linear.weight, lora_init.out_head.linear.weight))

# one LoRA training step on the classifier, compiled against eager
models = [copy.deepcopy(model), copy.deepcopy(model)]
for m in models:
    m.eval()
opts = [torch.optim.AdamW(m.parameters(), lr=2e-3, weight_decay=0.1) for m in models]
input_batch, target_batch = next(iter(val_loader))


def lora_step(m, opt, x, y):
    opt.zero_grad()
    loss = calc_loss_batch(x, y, m, device)
    loss.backward()
    opt.step()
    return loss


loss_e = lora_step(models[0], opts[0], input_batch, target_batch)
loss_c = torch.compile(lora_step)(models[1], opts[1], input_batch, target_batch)
same = torch.allclose(loss_e, loss_c, atol=1e-6) and all(
    torch.allclose(a, b, atol=1e-6) for a, b in zip(models[0].parameters(), models[1].parameters()))
print('lora step loss %.6f' % loss_e.item(), 'compiled == eager:', same)
