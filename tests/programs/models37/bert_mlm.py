# A Hugging-Face-free BERT masked-LM pretraining step, with the masking
# written as transformers' DataCollatorForLanguageModeling.torch_mask_tokens
# writes it: labels = inputs.clone(), probability_matrix =
# torch.full(labels.shape, self.mlm_probability), the special_tokens_mask
# from tokenizer.get_special_tokens_mask(val, already_has_special_tokens=True)
# as torch.tensor(..., dtype=torch.bool), probability_matrix.masked_fill_(
# special_tokens_mask, value=0.0), masked_indices =
# torch.bernoulli(probability_matrix).bool(), labels[~masked_indices] = -100,
# indices_replaced = torch.bernoulli(torch.full(labels.shape, 0.8)).bool() &
# masked_indices, inputs[indices_replaced] = mask_token_id, indices_random
# = torch.bernoulli(torch.full(labels.shape, 0.5)).bool() & masked_indices &
# ~indices_replaced, random_words = torch.randint(len(tokenizer),
# labels.shape, dtype=torch.long), inputs[indices_random] =
# random_words[indices_random].  The model is a tiny BERT (word / position /
# token-type embeddings, LayerNorm, dropout 0.1, nn.TransformerEncoder with
# gelu and batch_first, the MLM head's dense / gelu / LayerNorm and a
# decoder tied to the word embeddings, attention_mask turned into
# src_key_padding_mask), BERT's _init_weights (normal_(0, 0.02), padding
# row zeroed, LayerNorm ones / zeros), AdamW with the no_decay parameter
# groups, get_linear_schedule_with_warmup written out as a LambdaLR, and
# clip_grad_norm_.  Changes for a CPU test: a toy whitespace tokenizer with
# a 30-word vocabulary, hidden 32, 2 layers, sequences of 12, batch 4,
# 3 steps; then the eval-mode (dropout off) MLM loss and its gradients
# under torch.compile checked against eager.
import math

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.optim.lr_scheduler import LambdaLR

torch.manual_seed(42)


class ToyTokenizer:
    """The parts of a BERT tokenizer the collator uses."""
    special = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]

    def __init__(self, words):
        self.vocab = {w: i for i, w in enumerate(self.special + words)}
        self.pad_token_id = self.vocab["[PAD]"]
        self.cls_token_id = self.vocab["[CLS]"]
        self.sep_token_id = self.vocab["[SEP]"]
        self.mask_token = "[MASK]"
        self.all_special_ids = [self.vocab[t] for t in self.special]

    def __len__(self):
        return len(self.vocab)

    def convert_tokens_to_ids(self, token):
        return self.vocab.get(token, self.vocab["[UNK]"])

    def __call__(self, text, max_length):
        ids = [self.cls_token_id] + [self.convert_tokens_to_ids(w) for w in text.split()][:max_length - 2] \
            + [self.sep_token_id]
        attn = [1] * len(ids) + [0] * (max_length - len(ids))
        ids = ids + [self.pad_token_id] * (max_length - len(ids))
        return {"input_ids": ids, "attention_mask": attn}

    def get_special_tokens_mask(self, token_ids, already_has_special_tokens=False):
        return [1 if t in self.all_special_ids else 0 for t in token_ids]


WORDS = ("the a cat dog sat ran on under mat log big small red blue fast slow "
         "jumps sleeps over near and quietly today").split()
tokenizer = ToyTokenizer(WORDS)
texts = ["the cat sat on the mat", "a big dog ran fast over the log",
         "the small red cat sleeps quietly", "a blue dog jumps over a cat today",
         "the slow dog sat near the big mat", "a fast cat ran under the log",
         "the dog and the cat sat", "a red log near the blue mat"]


class DataCollatorForLanguageModeling:
    def __init__(self, tokenizer, mlm=True, mlm_probability=0.15):
        self.tokenizer = tokenizer
        self.mlm = mlm
        self.mlm_probability = mlm_probability

    def __call__(self, examples):
        batch = {
            "input_ids": torch.tensor([e["input_ids"] for e in examples], dtype=torch.long),
            "attention_mask": torch.tensor([e["attention_mask"] for e in examples], dtype=torch.long),
        }
        special_tokens_mask = batch.pop("special_tokens_mask", None)
        if self.mlm:
            batch["input_ids"], batch["labels"] = self.torch_mask_tokens(
                batch["input_ids"], special_tokens_mask=special_tokens_mask
            )
        else:
            labels = batch["input_ids"].clone()
            if self.tokenizer.pad_token_id is not None:
                labels[labels == self.tokenizer.pad_token_id] = -100
            batch["labels"] = labels
        return batch

    def torch_mask_tokens(self, inputs, special_tokens_mask=None):
        """
        Prepare masked tokens inputs/labels for masked language modeling: 80% MASK, 10% random, 10% original.
        """
        labels = inputs.clone()
        # We sample a few tokens in each sequence for MLM training (with probability `self.mlm_probability`)
        probability_matrix = torch.full(labels.shape, self.mlm_probability)
        if special_tokens_mask is None:
            special_tokens_mask = [
                self.tokenizer.get_special_tokens_mask(val, already_has_special_tokens=True) for val in labels.tolist()
            ]
            special_tokens_mask = torch.tensor(special_tokens_mask, dtype=torch.bool)
        else:
            special_tokens_mask = special_tokens_mask.bool()

        probability_matrix.masked_fill_(special_tokens_mask, value=0.0)
        masked_indices = torch.bernoulli(probability_matrix).bool()
        labels[~masked_indices] = -100  # We only compute loss on masked tokens

        # 80% of the time, we replace masked input tokens with tokenizer.mask_token ([MASK])
        indices_replaced = torch.bernoulli(torch.full(labels.shape, 0.8)).bool() & masked_indices
        inputs[indices_replaced] = self.tokenizer.convert_tokens_to_ids(self.tokenizer.mask_token)

        # 10% of the time, we replace masked input tokens with random word
        indices_random = torch.bernoulli(torch.full(labels.shape, 0.5)).bool() & masked_indices & ~indices_replaced
        random_words = torch.randint(len(self.tokenizer), labels.shape, dtype=torch.long)
        inputs[indices_random] = random_words[indices_random]

        # The rest of the time (10% of the time) we keep the masked input tokens unchanged
        return inputs, labels


class BertConfig:
    vocab_size = len(tokenizer)
    hidden_size = 32
    num_hidden_layers = 2
    num_attention_heads = 4
    intermediate_size = 64
    hidden_dropout_prob = 0.1
    attention_probs_dropout_prob = 0.1
    max_position_embeddings = 16
    type_vocab_size = 2
    initializer_range = 0.02
    layer_norm_eps = 1e-12
    pad_token_id = 0


class BertEmbeddings(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.word_embeddings = nn.Embedding(config.vocab_size, config.hidden_size, padding_idx=config.pad_token_id)
        self.position_embeddings = nn.Embedding(config.max_position_embeddings, config.hidden_size)
        self.token_type_embeddings = nn.Embedding(config.type_vocab_size, config.hidden_size)
        self.LayerNorm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        self.dropout = nn.Dropout(config.hidden_dropout_prob)
        self.register_buffer(
            "position_ids", torch.arange(config.max_position_embeddings).expand((1, -1)), persistent=False
        )
        self.register_buffer(
            "token_type_ids", torch.zeros(self.position_ids.size(), dtype=torch.long), persistent=False
        )

    def forward(self, input_ids):
        seq_length = input_ids.size(1)
        position_ids = self.position_ids[:, :seq_length]
        buffered_token_type_ids = self.token_type_ids[:, :seq_length]
        token_type_ids = buffered_token_type_ids.expand(input_ids.size(0), seq_length)
        embeddings = self.word_embeddings(input_ids) + self.token_type_embeddings(token_type_ids)
        embeddings += self.position_embeddings(position_ids)
        embeddings = self.LayerNorm(embeddings)
        return self.dropout(embeddings)


class BertForMaskedLM(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.config = config
        self.embeddings = BertEmbeddings(config)
        layer = nn.TransformerEncoderLayer(config.hidden_size, config.num_attention_heads,
                                           config.intermediate_size, config.hidden_dropout_prob,
                                           activation="gelu", layer_norm_eps=config.layer_norm_eps,
                                           batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, config.num_hidden_layers, enable_nested_tensor=False)
        # BertLMPredictionHead
        self.transform_dense = nn.Linear(config.hidden_size, config.hidden_size)
        self.transform_LayerNorm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        self.decoder = nn.Linear(config.hidden_size, config.vocab_size, bias=False)
        self.bias = nn.Parameter(torch.zeros(config.vocab_size))
        self.decoder.bias = self.bias
        self.apply(self._init_weights)
        self.decoder.weight = self.embeddings.word_embeddings.weight   # tie_weights

    def _init_weights(self, module):
        """Initialize the weights"""
        if isinstance(module, nn.Linear):
            module.weight.data.normal_(mean=0.0, std=self.config.initializer_range)
            if module.bias is not None:
                module.bias.data.zero_()
        elif isinstance(module, nn.Embedding):
            module.weight.data.normal_(mean=0.0, std=self.config.initializer_range)
            if module.padding_idx is not None:
                module.weight.data[module.padding_idx].zero_()
        elif isinstance(module, nn.LayerNorm):
            module.bias.data.zero_()
            module.weight.data.fill_(1.0)

    def forward(self, input_ids, attention_mask=None, labels=None):
        hidden = self.embeddings(input_ids)
        src_key_padding_mask = None if attention_mask is None else attention_mask == 0
        hidden = self.encoder(hidden, src_key_padding_mask=src_key_padding_mask)
        hidden = self.transform_LayerNorm(F.gelu(self.transform_dense(hidden)))
        prediction_scores = self.decoder(hidden)
        masked_lm_loss = None
        if labels is not None:
            loss_fct = nn.CrossEntropyLoss()  # -100 index = padding token
            masked_lm_loss = loss_fct(prediction_scores.view(-1, self.config.vocab_size), labels.view(-1))
        return masked_lm_loss, prediction_scores


def get_linear_schedule_with_warmup(optimizer, num_warmup_steps, num_training_steps, last_epoch=-1):
    def lr_lambda(current_step: int):
        if current_step < num_warmup_steps:
            return float(current_step) / float(max(1, num_warmup_steps))
        return max(
            0.0, float(num_training_steps - current_step) / float(max(1, num_training_steps - num_warmup_steps))
        )

    return LambdaLR(optimizer, lr_lambda, last_epoch)


config = BertConfig()
model = BertForMaskedLM(config)
collator = DataCollatorForLanguageModeling(tokenizer, mlm_probability=0.15)
examples = [tokenizer(t, max_length=12) for t in texts]

no_decay = ["bias", "LayerNorm.weight", "norm1.weight", "norm2.weight"]
optimizer_grouped_parameters = [
    {"params": [p for n, p in model.named_parameters() if not any(nd in n for nd in no_decay)],
     "weight_decay": 0.01},
    {"params": [p for n, p in model.named_parameters() if any(nd in n for nd in no_decay)],
     "weight_decay": 0.0},
]
print('param groups', [len(g["params"]) for g in optimizer_grouped_parameters])
optimizer = torch.optim.AdamW(optimizer_grouped_parameters, lr=5e-4, eps=1e-8)
scheduler = get_linear_schedule_with_warmup(optimizer, num_warmup_steps=1, num_training_steps=4)

model.train()
for step in range(3):
    batch = collator([examples[(2 * step + k) % len(examples)] for k in range(4)])
    print('step', step, 'masked', (batch["labels"] != -100).sum().item(),
          'inputs', batch["input_ids"][0].tolist())
    loss, _ = model(batch["input_ids"], attention_mask=batch["attention_mask"], labels=batch["labels"])
    loss.backward()
    gnorm = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    optimizer.step()
    scheduler.step()
    optimizer.zero_grad()
    print('step %d loss %.5f grad norm %.5f lr %.6f' % (step, loss.item(), gnorm.item(), scheduler.get_last_lr()[0]))

print('word emb[5,:4]', [round(v, 5) for v in model.embeddings.word_embeddings.weight[5, :4].tolist()])
print('tied', model.decoder.weight is model.embeddings.word_embeddings.weight)

# the eval-mode MLM loss and its gradients, compiled against eager
model.eval()
batch = collator(examples[4:8])


def mlm_loss_and_grads(input_ids, attention_mask, labels):
    loss, _ = model(input_ids, attention_mask=attention_mask, labels=labels)
    grads = torch.autograd.grad(loss, [model.transform_dense.weight, model.bias])
    return loss, grads


le, ge = mlm_loss_and_grads(batch["input_ids"], batch["attention_mask"], batch["labels"])
lc, gc = torch.compile(mlm_loss_and_grads)(batch["input_ids"], batch["attention_mask"], batch["labels"])
same = torch.allclose(le, lc, atol=1e-5) and all(torch.allclose(a, b, atol=1e-5) for a, b in zip(ge, gc))
print('eval loss %.5f' % le.item(), 'compiled == eager:', same)
