"""sentence-transformers as its quickstart uses it, on a tiny BERT built from
a config and a BertTokenizer over an in-memory vocabulary (saved to a
temporary folder, no downloads): SentenceTransformer from modules
(Transformer, mean Pooling, Normalize), encode to tensors and NumPy,
similarity, util.cos_sim / semantic_search / paraphrase_mining, a few
training steps with MultipleNegativesRankingLoss, CosineSimilarityLoss and
MatryoshkaLoss, save / load round trip, and a CrossEncoder's scores and
rank, then trained with its BCE, LambdaLoss, ListNet and in-batch-negative
losses."""
import random
import tempfile

import numpy as np
import torch
from sentence_transformers import CrossEncoder, SentenceTransformer, util
from sentence_transformers.cross_encoder import losses as ce_losses
from sentence_transformers.sentence_transformer import losses
from sentence_transformers.sentence_transformer import modules as models
from transformers import BertConfig, BertForSequenceClassification, BertModel, BertTokenizer

torch.manual_seed(0)
random.seed(0)
np.random.seed(0)

words = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "a", "cat", "dog", "sat", "ran",
         "on", "mat", "park", "in", "big", "small", "sun", "is", "hot", "cold", "fish", "swims",
         "bird", "flies", "sky", "blue", "red", "car", "fast"]
sentences = ["the cat sat on the mat", "a dog ran in the park", "the sun is hot",
             "a fish swims", "the bird flies in the blue sky", "a red car is fast",
             "the big dog sat", "a small cat ran"]


def fmt(t, n=5):
    return " ".join(f"{v:.5f}" for v in np.asarray(t).flatten()[:n].tolist())


def bert_dir(d, cls=BertModel, **kw):
    torch.manual_seed(1)
    cfg = BertConfig(vocab_size=len(words), hidden_size=16, num_hidden_layers=2,
                     num_attention_heads=2, intermediate_size=32, max_position_embeddings=32,
                     **kw)
    cls(cfg).save_pretrained(d)
    BertTokenizer(vocab={w: i for i, w in enumerate(words)}).save_pretrained(d)
    return d


with tempfile.TemporaryDirectory() as root:
    word = models.Transformer(bert_dir(f"{root}/bert"), max_seq_length=16)
    pool = models.Pooling(word.get_word_embedding_dimension(), pooling_mode="mean")
    model = SentenceTransformer(modules=[word, pool, models.Normalize()], device="cpu")
    print(model)
    emb = model.encode(sentences)
    print("encode", type(emb).__name__, emb.shape, fmt(emb[0]))
    emb_t = model.encode(sentences[:3], convert_to_tensor=True, batch_size=2)
    print("tensor", tuple(emb_t.shape), fmt(emb_t[2]), "norms", fmt(emb_t.norm(dim=1)))
    sim = model.similarity(emb_t, emb_t)
    print("similarity", fmt(sim, 9))
    hits = util.semantic_search(emb_t[:1], model.encode(sentences, convert_to_tensor=True),
                                top_k=3)
    print("semantic_search", [(h["corpus_id"], f"{h['score']:.5f}") for h in hits[0]])
    pairs = util.paraphrase_mining(model, sentences, top_k=1)
    print("paraphrase_mining", [(i, j, f"{s:.5f}") for s, i, j in pairs[:4]])
    print("cos_sim", fmt(util.cos_sim(emb_t[0], emb_t[1:])), "dot",
          fmt(util.dot_score(emb_t[:2], emb_t[:2]), 4))

    # training: in-batch negatives, then cosine regression, then Matryoshka
    feats = lambda texts: model.tokenize(texts)     # noqa: E731
    anchors, positives = sentences[:4], sentences[4:]
    mnrl = losses.MultipleNegativesRankingLoss(model)
    cos = losses.CosineSimilarityLoss(model)
    mat = losses.MatryoshkaLoss(model, losses.MultipleNegativesRankingLoss(model), [16, 8, 4])
    opt = torch.optim.AdamW(model.parameters(), lr=5e-3)
    model.train()
    torch.manual_seed(2)
    for step in range(3):
        for name, loss_fn, labels in [("mnrl", mnrl, None),
                                      ("cosine", cos, torch.tensor([0.9, 0.1, 0.2, 0.8])),
                                      ("matryoshka", mat, None)]:
            loss = loss_fn([feats(anchors), feats(positives)], labels)
            loss.backward()
            opt.step()
            opt.zero_grad()
            print("train", step, name, f"{loss.item():.5f}")
    model.eval()
    after = model.encode(sentences[:2], convert_to_tensor=True)
    print("after training", fmt(after[1]))

    model.save(f"{root}/st")
    again = SentenceTransformer(f"{root}/st", device="cpu")
    diff = (again.encode(sentences[:2], convert_to_tensor=True) - after).abs().max().item()
    print("reloaded max diff", f"{diff:.6f}")

    ce = CrossEncoder(bert_dir(f"{root}/ce", BertForSequenceClassification, num_labels=1,
                              initializer_range=0.5),
                      device="cpu")
    scores = ce.predict([(sentences[0], s) for s in sentences[1:4]])
    print("cross-encoder", type(scores).__name__, fmt(scores))
    ranks = ce.rank(sentences[2], sentences, top_k=3)
    print("rank", [(r["corpus_id"], f"{r['score']:.5f}") for r in ranks])

    # the CrossEncoder trained: pointwise, listwise and in-batch-negative losses
    queries, docs = sentences[:4], sentences[4:]
    ranking = [[docs[0], docs[1], docs[2]], [docs[3], docs[0], docs[1]]]
    opt = torch.optim.AdamW(ce.parameters(), lr=1e-2)
    ce.train()
    torch.manual_seed(3)
    for step in range(2):
        for name, loss_fn, inputs, labels in [
                ("bce", ce_losses.BinaryCrossEntropyLoss(ce), [queries, docs],
                 torch.tensor([1.0, 0.0, 0.0, 1.0])),
                ("lambda", ce_losses.LambdaLoss(ce), [queries[:2], ranking],
                 [torch.tensor([2.0, 1.0, 0.0]), torch.tensor([0.0, 1.0, 2.0])]),
                ("listnet", ce_losses.ListNetLoss(ce), [queries[:2], ranking],
                 [torch.tensor([2.0, 1.0, 0.0]), torch.tensor([0.0, 1.0, 2.0])]),
                ("mnrl", ce_losses.MultipleNegativesRankingLoss(ce, num_negatives=2),
                 [queries, docs], None)]:
            loss = loss_fn(inputs, labels)
            loss.backward()
            opt.step()
            opt.zero_grad()
            print("cross-encoder train", step, name, f"{loss.item():.5f}")
    ce.eval()
    print("cross-encoder after", fmt(ce.predict([(queries[0], d) for d in docs])))


# ----------------------------------------------------------------------------
# sentence_transformers_sparse (one program: the libraries are imported once)
# More of sentence-transformers: a SPLADE SparseEncoder (MLMTransformer over
# a tiny BertForMaskedLM, SpladePooling) encoding sparse tensors, decoding
# top tokens, trained with SpladeLoss over SparseMultipleNegativesRankingLoss
# (FLOPS regularizers); a CSR SparseEncoder (SparseAutoEncoder's top-k over a
# dense model) with CSRLoss; a StaticEmbedding model (nn.EmbeddingBag over a
# tokenizers WordLevel tokenizer) trained with MatryoshkaLoss; truncate_dim,
# embedding quantization (int8, binary) and normalize_embeddings.
# ----------------------------------------------------------------------------
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
