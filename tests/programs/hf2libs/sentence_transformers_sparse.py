"""More of sentence-transformers: a SPLADE SparseEncoder (MLMTransformer over
a tiny BertForMaskedLM, SpladePooling) encoding sparse tensors, decoding
top tokens, trained with SpladeLoss over SparseMultipleNegativesRankingLoss
(FLOPS regularizers); a CSR SparseEncoder (SparseAutoEncoder's top-k over a
dense model) with CSRLoss; a StaticEmbedding model (nn.EmbeddingBag over a
tokenizers WordLevel tokenizer) trained with MatryoshkaLoss; truncate_dim,
embedding quantization (int8, binary) and normalize_embeddings."""
import random
import tempfile

import numpy as np
import torch
from sentence_transformers import SentenceTransformer, SparseEncoder
from sentence_transformers.quantization import quantize_embeddings
from sentence_transformers.sentence_transformer import losses
from sentence_transformers.sentence_transformer import modules as models
from sentence_transformers.sparse_encoder import losses as sparse_losses
from sentence_transformers.sparse_encoder.modules import (MLMTransformer, SparseAutoEncoder,
                                                          SpladePooling)
from tokenizers import Tokenizer
from tokenizers.models import WordLevel
from tokenizers.pre_tokenizers import Whitespace
from transformers import BertConfig, BertForMaskedLM, BertModel, BertTokenizer

torch.manual_seed(0)
random.seed(0)
np.random.seed(0)

words = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "a", "cat", "dog", "sat", "ran",
         "on", "mat", "park", "in", "big", "small", "sun", "is", "hot", "cold", "fish", "swims",
         "bird", "flies", "sky", "blue", "red", "car", "fast"]
queries = ["the cat sat", "a dog ran", "the sun is hot", "a fish swims"]
docs = ["the cat sat on the mat", "a dog ran in the park", "the big sun is hot",
        "a small fish swims"]


def fmt(t, n=6):
    t = t.to_dense() if isinstance(t, torch.Tensor) and t.is_sparse else t
    return " ".join(f"{v:.5f}" for v in np.asarray(t).flatten()[:n].tolist())


def bert_dir(d, cls, **kw):
    torch.manual_seed(1)
    cls(BertConfig(vocab_size=len(words), hidden_size=16, num_hidden_layers=1,
                   num_attention_heads=2, intermediate_size=32, max_position_embeddings=32,
                   **kw)).save_pretrained(d)
    BertTokenizer(vocab={w: i for i, w in enumerate(words)}).save_pretrained(d)
    return d


def train(name, model, loss_fn, steps=3, lr=1e-2):
    opt = torch.optim.AdamW(model.parameters(), lr=lr)
    model.train()
    for step in range(steps):
        loss = loss_fn([model.preprocess(queries), model.preprocess(docs)], None)
        if isinstance(loss, dict):        # the components, as the trainer sums them
            print(name, step, {k: f"{v.item():.5f}" for k, v in loss.items()})
            loss = sum(loss.values())
        loss.backward()
        opt.step()
        opt.zero_grad()
        print(name, step, f"loss {loss.item():.5f}")
    model.eval()


with tempfile.TemporaryDirectory() as root:
    splade = SparseEncoder(modules=[MLMTransformer(bert_dir(f"{root}/mlm", BertForMaskedLM,
                                                            initializer_range=0.2)),
                                    SpladePooling("max")], device="cpu")
    q = splade.encode_query(queries)
    print("splade", type(q).__name__, q.is_sparse, tuple(q.shape), fmt(q[0].to_dense()[:12], 12))
    print("active dims", splade.sparsity(q))
    print("decode", [(t, f"{w:.4f}") for t, w in splade.decode(q[0], top_k=4)])
    d = splade.encode_document(docs)
    print("similarity", fmt(splade.similarity(q, d), 8))
    torch.manual_seed(2)
    train("splade", splade, sparse_losses.SpladeLoss(
        splade, sparse_losses.SparseMultipleNegativesRankingLoss(splade),
        document_regularizer_weight=3e-3, query_regularizer_weight=5e-3))

    word = models.Transformer(bert_dir(f"{root}/bert", BertModel))
    torch.manual_seed(3)
    csr = SparseEncoder(modules=[word, models.Pooling(16, "mean"),
                                 SparseAutoEncoder(16, hidden_dim=32, k=4, k_aux=8)],
                        device="cpu")
    e = csr.encode(docs, convert_to_tensor=True)
    print("csr", tuple(e.shape), "nonzero per row", (e.to_dense() != 0).sum(1).tolist(),
          fmt(e.to_dense()[0], 8))
    torch.manual_seed(4)
    train("csr", csr, sparse_losses.CSRLoss(csr, sparse_losses.SparseMultipleNegativesRankingLoss(
        csr)), lr=5e-3)

    tok = Tokenizer(WordLevel({w: i for i, w in enumerate(words)}, unk_token="[UNK]"))
    tok.pre_tokenizer = Whitespace()
    torch.manual_seed(5)
    static = SentenceTransformer(modules=[models.StaticEmbedding(tok, embedding_dim=12)],
                                 device="cpu")
    emb = static.encode(docs, convert_to_tensor=True)
    print("static", tuple(emb.shape), fmt(emb[1]))
    torch.manual_seed(6)
    train("static", static, losses.MatryoshkaLoss(
        static, losses.MultipleNegativesRankingLoss(static), [12, 6, 3]), lr=0.02)
    small = SentenceTransformer(modules=[models.StaticEmbedding(tok, embedding_weights=
                                                                static[0].embedding.weight)],
                                device="cpu", truncate_dim=6)
    emb6 = small.encode(docs, normalize_embeddings=True)
    print("truncated", emb6.shape, fmt(emb6[2]), fmt(np.linalg.norm(emb6, axis=1), 4))
    full = static.encode(docs + queries)
    for precision in ["int8", "uint8", "binary", "ubinary"]:
        qe = quantize_embeddings(full, precision=precision)
        print("quantize", precision, qe.dtype, qe.shape, qe[0][:6].tolist())
