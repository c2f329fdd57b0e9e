"""Indexing a synthetic catalogue with vectors and neighbours, in one process and on Dask
workers started as separate processes, and a cost model for 10M products:
``python -m benchmarks.index_scale [--products N] [--workers 1,2] [--fit-products M]``
(issue 60, Deliver 5).

N products of ``datasets.synthetic`` (seed 0) are written to a temporary JSONL file and
indexed by ``ltr index jsonl FILE --index bench-scale-... --recreate --neighbours 3``
run as a subprocess (the code path a user runs): once in one process, then for each W of
``--workers`` with ``--dask ADDRESS`` on a cluster made as on several machines: a
``dask scheduler`` process and W ``dask worker --nthreads 1 --nworkers 1`` processes,
started for that run and stopped after it. With ``--fit-products M`` (default N/5; 0:
none) the runs are made again on M products, so the cost model has two sizes.

Each run has its own vectors cache (``LTR_CACHE``, the derived encoder linked in), so it
encodes every document. Its stderr lines are stamped as they arrive and cut into the
steps ``ltr index jsonl`` reports: start (Python, reading the file, the Dask client),
vectors, neighbours' first load, neighbours (a more_like_this per document), loading
(the bulk load) and merge (force-merge, to the process's end). The vectors of each run
are compared with the first run of its size: the batches it kept (every document's
vector, bit for bit) and, in the index, the exact k-NN scores of a sample of documents
against two fixed vectors. Each index is deleted once compared.

Cost model: ``seconds = max(a * docs / workers + ca, b * docs + cb) + m * docs``: on
Dask the encoding runs beside the node's path (first load, neighbours, the load
streaming behind the vectors), then the merge (:func:`fit`). Its residuals on every Dask
run's total, and its predictions for 10M products on 1, 2, 8 and 32 workers. Tables (Markdown + CSV: index_scale.*,
index_scale_model.*) and PNG in benchmarks/results/; sizes under the defaults are
labelled a smoke run under 5,000 products (a smaller measurement says its size).
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from ltr_toolkit.datasets.synthetic import write_jsonl

from ltr_toolkit.indexing.ahead import IN_MEMORY

from ._live import connect
from ._report import finish, pyplot, write_table

NAME = "index_scale"
PREFIX = "bench-scale-"
PRODUCTS, NEIGHBOURS, SAMPLE = 50_000, 3, 500
PREDICT_DOCS, PREDICT_WORKERS = 10_000_000, (1, 2, 8, 32)
ROOT = Path(__file__).resolve().parent.parent
#: the steps: each from the first stderr line matching its start pattern to the last
#: matching its end pattern (a step's own done == total line), else to the first line of
#: the step after it in this order; on Dask the vectors run beside the neighbours
STEPS = (("vectors", r"^\[\s*[\d.]+s\] vectors: encoding ", r"^vectors: (\d+)/\1\b"),
         ("neighbours (first load)", r"^\[\s*[\d.]+s\] neighbours: \d+ per document", None),
         ("neighbours", r"^neighbours: 0/", r"^neighbours: (\d+)/\1\b"),
         ("loading", r"^\[\s*[\d.]+s\] loading \d+ documents", None),
         ("merge", r"^\[\s*[\d.]+s\] merging ", None))
#: the node's path (first load, neighbours, load) before the merge
NODE_STEPS = ("neighbours (first load)", "neighbours", "loading")


# --------------------------------------------------------------------------- a Dask cluster of processes

def _python(module: str, *args) -> list[str]:
    return [sys.executable, "-m", module, *map(str, args)]


def _stop(procs) -> None:
    """Each process this benchmark started, asked to stop (SIGTERM), killed after 30 s."""
    for p in procs:
        if p.poll() is None:
            p.terminate()
    for p in procs:
        try:
            p.wait(timeout=30)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()


@contextlib.contextmanager
def dask_cluster(workers: int, tmp: Path, env: dict):
    """A ``dask scheduler`` process and ``workers`` ``dask worker`` processes (one
    thread, one process each), as on several machines; yields the scheduler's address."""
    from distributed import Client
    info, procs = tmp / f"scheduler-{workers}.json", []
    logs = [open(tmp / f"dask-{workers}-{k}.log", "w") for k in range(workers + 1)]
    try:
        procs.append(subprocess.Popen(
            _python("distributed.cli.dask_scheduler", "--host", "127.0.0.1", "--port", "0",
                    "--no-dashboard", "--scheduler-file", info), env=env, cwd=ROOT,
            stdout=logs[0], stderr=subprocess.STDOUT))
        deadline = time.monotonic() + 60
        while not info.is_file() and time.monotonic() < deadline:
            time.sleep(0.2)
        address = json.loads(info.read_text())["address"]
        for k in range(workers):
            procs.append(subprocess.Popen(
                _python("distributed.cli.dask_worker", "--scheduler-file", info, "--nthreads", 1,
                        "--nworkers", 1, "--no-dashboard", "--name", f"w{k}",
                        "--local-directory", tmp / f"worker-{workers}-{k}"),
                env=env, cwd=ROOT, stdout=logs[k + 1], stderr=subprocess.STDOUT))
        with Client(address, timeout="60s") as client:
            client.wait_for_workers(workers, timeout=120)
            assert sorted(client.nthreads().values()) == [1] * workers, client.nthreads()
        yield address
    finally:
        _stop(procs[::-1])
        for log in logs:
            log.close()


# --------------------------------------------------------------------------- one run of ltr index jsonl

def fresh_cache(path: Path) -> Path:
    """An empty vectors cache with this machine's derived encoder linked in (not derived
    again, not timed)."""
    from ltr_toolkit.encoders import default_encoder
    from ltr_toolkit.io.cache import cache_dir
    default_encoder()                   # derived once per machine, when missing
    path.mkdir(parents=True)
    (path / "encoders").symlink_to(cache_dir() / "encoders", target_is_directory=True)
    return path


def index_run(url: str, source: Path, index: str, env: dict, tmp: Path, dask: str | None) -> dict:
    """``ltr index jsonl`` in a subprocess: its steps' seconds and its whole time."""
    args = _python("ltr_toolkit.cli", "--url", url, "index", "jsonl", source, "--index", index,
                   "--recreate", "--neighbours", NEIGHBOURS) + (["--dask", dask] if dask else [])
    load0, lines = os.getloadavg()[0], []
    with open(tmp / f"{index}.out", "w") as out:
        t0 = time.perf_counter()
        proc = subprocess.Popen(args, env=env, cwd=ROOT, stdout=out, stderr=subprocess.PIPE, text=True)
        for line in proc.stderr:
            lines.append((time.perf_counter() - t0, line.rstrip()))
            print(f"  {lines[-1][0]:7.1f}s | {lines[-1][1]}", flush=True)
        code = proc.wait()
        total = time.perf_counter() - t0
    if code != 0:
        raise SystemExit(f"ltr index jsonl failed ({code}):\n" + "\n".join(ln for _, ln in lines[-30:]))
    fields = next((m.group(1) for _, ln in lines if (m := re.search(r"more_like_this over (.+)$", ln))), "?")
    return {"total": total, "steps": steps(lines, total), "load": (load0, os.getloadavg()[0]),
            "fields": fields, "eta": eta_errors(lines)}


_PROGRESS = re.compile(r"^(?P<step>[a-z][a-z ()]*): (?P<done>\d+)/(?P<total>\d+) \([^)]*?(?:ETA (?P<eta>[\dhms]+))?\)$")


def _seconds(text: str) -> float:
    """``45s``, ``12m05s``, ``2h03m`` (ltr_toolkit.io.pace.duration) in seconds."""
    parts = dict((u, int(v)) for v, u in re.findall(r"(\d+)([hms])", text))
    return 3600 * parts.get("h", 0) + 60 * parts.get("m", 0) + parts.get("s", 0)


def eta_errors(lines: list[tuple[float, str]]) -> dict:
    """Per step longer than 15 s: its seconds, and the worst distance between the end an
    ETA line predicted (its time + its ETA) and the step's real end (its done == total
    line), as a share of the step's time (issue 60: within 25%)."""
    seen: dict = {}
    for t, ln in lines:
        m = _PROGRESS.match(ln)
        if m:
            seen.setdefault(m["step"], []).append((t, int(m["done"]), int(m["total"]), m["eta"]))
    out = {}
    for step, rows in seen.items():
        ends = [t for t, d, n, _ in rows if d >= n]
        if not ends or ends[-1] - rows[0][0] <= 15.0:
            continue
        took = ends[-1] - rows[0][0]
        worst = max((abs(t + _seconds(e) - ends[-1]) / took for t, _, _, e in rows if e), default=None)
        out[step] = {"seconds": round(took, 1), "worst_eta_error": worst}
    return out


def steps(lines: list[tuple[float, str]], total: float) -> dict:
    """{step: seconds} from the stamped stderr lines (:data:`STEPS`; None: not
    reported), "start" before the first step. Steps may overlap."""
    found = {name: next((t for t, ln in lines if re.search(start, ln)), None)
             for name, start, _ in STEPS}
    out = {"start": min((t for t in found.values() if t is not None), default=total)}
    for k, (name, _, end) in enumerate(STEPS):
        begin = found[name]
        if begin is None:
            out[name] = None
            continue
        ends = [t for t, ln in lines if end and t >= begin and re.search(end, ln)]
        after = [found[n] for n, _, _ in STEPS[k + 1:] if found[n] is not None and found[n] >= begin]
        out[name] = round((ends[-1] if ends else min(after, default=total)) - begin, 3)
    return out


def kept_vectors(cache: Path) -> dict:
    """{batch file: sha256 of its bytes} of the vectors a run kept."""
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted((cache / "vectors").glob("*.npy"))}


def sample_scores(conn, index: str, ids: list[str]) -> dict:
    """{id: (score against vector 1, against vector 2)}: exact k-NN (cosine) scores of
    ``ids``; equal scores, equal vectors."""
    got: dict = {}
    for k, phase in enumerate((1.7, 0.3)):
        query = np.cos(np.arange(384) * phase + k).tolist()
        body = {"size": len(ids), "_source": False, "query": {"script_score": {
            "query": {"ids": {"values": ids}}, "script": {
                "source": "knn_score", "lang": "knn", "params": {
                    "field": "vector", "query_value": query, "space_type": "cosinesimil"}}}}}
        for hit in conn.client().search(index=index, body=body)["hits"]["hits"]:
            got.setdefault(hit["_id"], []).append(hit["_score"])
    return {i: tuple(v) for i, v in got.items()}


# --------------------------------------------------------------------------- the runs

def plan(products: int, fit_products: int, workers: list[int]) -> list[tuple[int, int]]:
    """(products, workers) per run, 0 workers: one process; the first of each size is
    what the others of that size are compared with."""
    runs = [(products, 0)] + [(products, w) for w in workers]
    if fit_products and fit_products != products:
        runs += [(fit_products, w) for w in [0] + workers]
    return runs


def one_run(conn, tmp: Path, size: int, workers: int, sources: dict) -> dict:
    tag = f"{size}-{'single' if not workers else f'dask{workers}'}"
    index = PREFIX + tag
    cache = fresh_cache(tmp / f"cache-{tag}")
    env = {**os.environ, "LTR_CACHE": str(cache), "COLUMNS": "200", "PYTHONUNBUFFERED": "1"}
    print(f"== {size} products, " + (f"{workers} Dask workers" if workers else "one process"), flush=True)
    try:
        if workers:
            with dask_cluster(workers, tmp, env) as address:
                res = index_run(conn.url, sources[size][0], index, env, tmp, address)
        else:
            res = index_run(conn.url, sources[size][0], index, env, tmp, None)
        res["scores"] = sample_scores(conn, index, sources[size][1])
    finally:
        conn.client().indices.delete(index=index, ignore_unavailable=True)
    res.update(products=size, workers=workers, kept=kept_vectors(cache))
    (cache / "encoders").unlink()           # the link only, then the run's own vectors
    shutil.rmtree(cache)
    print(f"   total {res['total']:.1f} s: {res['steps']}", flush=True)
    return res


def write_source(path: Path, n: int) -> tuple[Path, list[str]]:
    """The JSONL of ``n`` products and the ids of a sample of them, evenly spread."""
    write_jsonl(path, n, seed=0)
    keep = set(np.linspace(0, n - 1, min(SAMPLE, n)).round().astype(int).tolist())
    with open(path) as fh:
        ids = [json.loads(line)["id"] for i, line in enumerate(fh) if i in keep]
    return path, ids


def run_all(products: int, fit_products: int, workers: list[int]) -> list[dict]:
    conn = connect()
    results = []
    with tempfile.TemporaryDirectory(prefix="index-scale-") as tmp:
        tmp = Path(tmp)
        sizes = sorted({s for s, _ in plan(products, fit_products, workers)})
        sources = {s: write_source(tmp / f"products-{s}.jsonl", s) for s in sizes}
        first: dict = {}
        for size, w in plan(products, fit_products, workers):
            res = one_run(conn, tmp, size, w, sources)
            ref = first.setdefault(size, res)
            res["same_kept"] = res["kept"] == ref["kept"] and len(res["kept"]) > 0
            res["same_index"] = res["scores"] == ref["scores"] and len(res["scores"]) > 0
            results.append(res)
    return results


# --------------------------------------------------------------------------- the cost model

def _line(x: np.ndarray, y: np.ndarray, intercept: bool = True) -> tuple[float, float]:
    """Least-squares slope and intercept of y on x (intercept 0 when not asked, or when
    x has one value only)."""
    if intercept and len(set(x.tolist())) > 1:
        slope, icpt = np.linalg.lstsq(np.c_[x, np.ones_like(x)], y, rcond=None)[0]
        return float(slope), float(icpt)
    return float(np.dot(x, y) / np.dot(x, x)), 0.0


def fit(results: list[dict]) -> dict:
    """The cost model ``seconds = max(a * docs / workers + ca, b * docs + cb) + m * docs``:
    the encoding (a, ca: the Dask runs' vectors step) beside the node's path (b, cb: the
    first load, the neighbours and the load of the one-process runs, where the node
    neither waits for vectors nor shares the cores with the encoder), then the merge (m:
    the one-process runs' merge)."""
    dask = [r for r in results if r["workers"]]
    single = [r for r in results if not r["workers"]]
    enc = np.array([r["products"] / r["workers"] for r in dask], dtype=float)
    a, ca = _line(enc, np.array([r["steps"]["vectors"] for r in dask]))
    docs = np.array([r["products"] for r in single], dtype=float)
    b, cb = _line(docs, np.array([node_seconds(r) for r in single]))
    m, _ = _line(docs, np.array([r["steps"]["merge"] or 0.0 for r in single]), intercept=False)
    return {"a": a, "b": b, "m": m, "c_encoding": ca, "c_node": cb,
            "sizes": sorted({r["products"] for r in results})}


def node_seconds(r: dict) -> float:
    return sum(r["steps"][s] or 0.0 for s in NODE_STEPS)


def encoding(model: dict, docs: float, workers: int) -> float:
    return model["a"] * docs / workers + model["c_encoding"]


def node(model: dict, docs: float) -> float:
    return model["b"] * docs + model["c_node"]


def predict(model: dict, docs: float, workers: int) -> float:
    return max(encoding(model, docs, workers), node(model, docs)) + model["m"] * docs


# --------------------------------------------------------------------------- report

def report(results: list[dict], model: dict, args) -> None:
    header = ["setup", "products", "workers", "start (s)", "vectors (s)",
              "neighbours first load (s)", "neighbours (s)", "loading (s)", "merge (s)",
              "total (s)", "vectors docs/s", "speed-up vs 1 worker", "model (s)",
              "residual (s)", "vectors = first run (kept batches)", "vectors = first run (index sample)"]
    write_table(NAME, header, [_row(r, results, model) for r in results], notes(results, model, args))
    write_table(f"{NAME}_model", ["workers", f"predicted seconds for {PREDICT_DOCS:,} products",
                                  "hours", "encoding (s)", "node's path (s)", "merge (s)", "bound by"],
                [_model_row(model, w) for w in PREDICT_WORKERS], model_notes(model, args))
    plot(results, model)


def _row(r: dict, results: list[dict], model: dict) -> list:
    one = next((o for o in results if o["workers"] == 1 and o["products"] == r["products"]), None)
    s, w = r["steps"], r["workers"]
    modelled = predict(model, r["products"], w) if w else None
    return [f"Dask, {w} worker(s)" if w else "1 process", r["products"], w or "-",
            *(s[k] for k in ("start", "vectors", "neighbours (first load)", "neighbours", "loading", "merge")),
            round(r["total"], 1), round(r["products"] / s["vectors"], 1) if s["vectors"] else "",
            round(one["total"] / r["total"], 2) if one and w else "",
            "" if modelled is None else round(modelled, 1),
            "" if modelled is None else round(r["total"] - modelled, 1),
            "yes" if r["same_kept"] else "NO", "yes" if r["same_index"] else "NO"]


def _model_row(model: dict, workers: int) -> list:
    total = predict(model, PREDICT_DOCS, workers)
    enc, path = encoding(model, PREDICT_DOCS, workers), node(model, PREDICT_DOCS)
    return [workers, round(total), round(total / 3600, 2), round(enc), round(path),
            round(model["m"] * PREDICT_DOCS), "the encoding" if enc > path else "the node"]


#: below this many products a run only shows that the script works
SMOKE = 5_000


def _smoke(args) -> list[str]:
    if args.products >= PRODUCTS:
        return []
    if args.products >= SMOKE:
        return [f"{args.products} products, fewer than the issue's {PRODUCTS} (time on a shared "
                f"session); `python -m benchmarks.index_scale` runs {PRODUCTS}"]
    return [f"**smoke size: not the measurement** ({args.products} products; the measurement: "
            "`python -m benchmarks.index_scale` on a quiet machine)"]


def notes(results: list[dict], model: dict, args) -> list[str]:
    main = [r for r in results if r["products"] == args.products]
    by_w = {r["workers"]: r for r in main}
    found = _smoke(args) + [
        f"`ltr index jsonl FILE --index {PREFIX}... --recreate --neighbours {NEIGHBOURS}` in a "
        "subprocess; products from datasets.synthetic (seed 0); the main text fields it picks "
        f"({results[0]['fields']}) encoded and compared by more_like_this for the neighbours",
        "Dask: a `dask scheduler` process and W `dask worker --nthreads 1 --nworkers 1` "
        "processes, started before each run (not timed) and stopped after it; the encoder is "
        "loaded by each worker within the run's vectors step",
        "steps: from each step's first stderr line to its own last one (done = total), "
        "else to the next step's first, stamped as they arrive; the vectors are encoded "
        "while the node finds the neighbours, the load streaming behind them, where the "
        "workers leave the node cores (here: 1 worker; the steps overlap, their sum is not "
        "the total), else first (one process, 2 workers on these 2 cores); "
        "start: Python, imports, reading the file, the Dask client; merge: the force-merge "
        "to the process's end",
        "vectors = first run: every batch of vectors the run kept (its own empty cache) has "
        f"the same bytes as the first run's of that size; index sample: exact k-NN scores of "
        f"{min(SAMPLE, args.products)} documents against two fixed vectors are equal",
    ]
    if 1 in by_w and 2 in by_w:
        total = by_w[1]["total"] / by_w[2]["total"]
        vec = by_w[1]["steps"]["vectors"] / by_w[2]["steps"]["vectors"]
        found.append(f"2 workers vs 1 on {args.products} products: {total:.2f}x in all, {vec:.2f}x "
                     f"on the vectors step; issue 60's acceptance (>= 1.7x): "
                     f"{'met' if total >= 1.7 else 'NOT met'}")
    found.append("ETA (steps over 15 s; the worst distance between an ETA line's predicted end "
                 "and the step's real end, as a share of the step's time; issue 60: within 25%): "
                 + "; ".join(f"{r['products']}/{r['workers'] or 'one process'}: " + ", ".join(
                     f"{step} {v['seconds']:.0f} s, {v['worst_eta_error']:.0%}"
                     for step, v in r.get("eta", {}).items() if v["worst_eta_error"] is not None)
                     for r in results))
    found.append("machine: 1-min load average before -> after each run: " + "; ".join(
        f"{r['products']}/{r['workers'] or 'one process'}: {r['load'][0]:.1f} -> {r['load'][1]:.1f}"
        for r in results) + f"; {os.cpu_count()} cores shared by the node, the workers and the client")
    return found


def model_notes(model: dict, args) -> list[str]:
    floor = node(model, PREDICT_DOCS) + model["m"] * PREDICT_DOCS
    return _smoke(args) + [
        f"seconds = max(a * docs / workers + ca, b * docs + cb) + m * docs: the encoding on "
        f"the workers beside the node's path, then the merge; a = {model['a'] * 1000:.3f} s "
        f"per 1,000 documents per worker, ca = {model['c_encoding']:.1f} s (the Dask runs' "
        f"vectors step); b = {model['b'] * 1000:.3f} s per 1,000 documents, cb = "
        f"{model['c_node']:.1f} s (first load, neighbours and load of the one-process runs, "
        f"after their encoding); m = {model['m'] * 1000:.3f} s per 1,000 documents (their "
        f"merge); fitted on sizes {', '.join(map(str, model['sizes']))}"
        + ("" if len(model["sizes"]) > 1 else " (one size: the intercepts are taken as 0)"),
        f"the floor, whatever the workers: the node's path and the merge, "
        f"{floor / 3600:.2f} h for {PREDICT_DOCS:,} products (the neighbours' more_like_this "
        "searches run on a one-shard copy of the collection, so that a document's neighbours "
        "are the same whatever the index's shards: one shard's searches, which neither Dask "
        "workers nor more nodes spread; the bulk load is spread by the index's shards)",
        "not in the model: more_like_this per document costs more in a larger index (b is "
        "measured at the sizes above, a lower bound at 10M); workers and a node sharing "
        "cores (here: 2 for all) slow each other, so the Dask runs here take longer than the "
        "model (their residuals in benchmarks/results/index_scale.md)",
        "memory: the client holds the documents and the neighbours' text; vectors stream "
        f"through it (at most {IN_MEMORY} batches in memory, the others in a temporary "
        "directory until loaded)",
    ]


def plot(results: list[dict], model: dict) -> None:
    plt = pyplot()
    fig, (a, b) = plt.subplots(1, 2, figsize=(12, 4.5))
    names = [f"{r['products']}, {('W=' + str(r['workers'])) if r['workers'] else '1 proc'}"
             for r in results]
    left = np.zeros(len(results))
    for step in ("start",) + tuple(s for s, _, _ in STEPS):
        secs = np.array([r["steps"][step] or 0.0 for r in results])
        a.barh(names, secs, left=left, label=step)
        left += secs
    a.scatter([r["total"] for r in results], names, color="black", marker="|", s=200,
              label="total (steps overlap on Dask)", zorder=3)
    a.invert_yaxis()
    a.set_xlabel("seconds")
    a.legend(fontsize=7)
    a.set_title("ltr index jsonl: seconds per step")
    w = np.array([1, 2, 4, 8, 16, 32, 64])
    b.plot(w, [predict(model, PREDICT_DOCS, k) / 3600 for k in w], "o-", label="model")
    b.axhline((node(model, PREDICT_DOCS) + model["m"] * PREDICT_DOCS) / 3600, color="tab:red",
              ls="--", label="floor (the node's path and merge)")
    b.set_xscale("log", base=2)
    b.set_xlabel("Dask workers (one thread each)")
    b.set_ylabel(f"hours for {PREDICT_DOCS:,} products")
    b.legend()
    b.set_title("cost model")
    finish(fig, NAME)


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--products", type=int, default=PRODUCTS, help="products indexed (default %(default)s)")
    ap.add_argument("--workers", default="1,2", help="Dask worker counts, comma-separated (default %(default)s)")
    ap.add_argument("--fit-products", type=int, help="a second size for the Dask runs, for the "
                    "cost model (default: products / 5; 0: none)")
    args = ap.parse_args(argv)
    workers = sorted({int(w) for w in args.workers.split(",") if w.strip()})
    fit_products = args.products // 5 if args.fit_products is None else args.fit_products
    results = run_all(args.products, fit_products, workers)
    model = fit(results)
    report(results, model, args)


if __name__ == "__main__":
    main()
