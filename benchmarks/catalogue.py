"""MSRD at full size (#52): Elastic's own learning-to-rank data (9,750 movies, 16,279
queries, 384,755 judgments) through the README's own-index path, live:
``python -m benchmarks.catalogue [--sets NAME[,NAME]] [--queries N] [--budget SECONDS]
[--engine E]``.

Every step is the ``ltr`` command a user types (docs/catalogue.md), run as a
subprocess against one node, on the files as Elastic ships them (gzip'd JSONL corpus,
gzip'd TSV judgments):

1. ``ltr index jsonl movies-corpus.jsonl.gz --index bench-msrd --vector-fields none``
2. three feature sets, uploaded with ``ltr featureset upload FILE --index bench-msrd``:
   *generated* (``ltr featureset init --index bench-msrd``, as written, unreviewed),
   *text* (the toolkit's shipped lexical set, ``feature_sets/cranfield-lexical.json``,
   its fields renamed to MSRD's: abstract -> overview, the first stage's score over
   the first stage's fields) and *elastic5* (the notebook's five features,
   ``benchmarks/data/msrd-elastic5.json``: popularity without painless);
3. per set, ``ltr evaluate cv JUDGMENTS --first-stage FS --algo lambdamart --budget S``:
   5-fold cross-validation, live, the same folds (seed 42) and the same first stage
   (the notebook's: ``multi_match`` over title, overview, actors, director, tags,
   characters), each held-out query reranked by the plugin; the generated set's with
   ``--deploy bench-msrd-generated`` (docs/catalogue.md step 4: the recommended
   reranker trained on all judged queries, uploaded with its serving contract);
4. the deployed model served as ``ltr query search`` serves it (``Serving.served``, then
   ``Serving.search``) against its first stage alone, on ``--latency-queries`` of the
   queries: one client, window 100, size 10, interleaved in one loop
   (``benchmarks.latency._run``: per query both, in a random order), a warm-up pass,
   then two measured passes: p50, p99 and their ratios. Then where the time goes, as
   ``benchmarks.latency_breakdown`` measures it: the same requests prepared as bodies,
   the set's features as one linear model, each feature alone as a one-feature linear
   model: p50 added to the first stage's body (results/catalogue_features.md).

``--sets generated`` runs the generated set alone (its latency with it); the other sets'
rows are then not in the table. ``--max-cost R`` runs the generated set's
cross-validation as docs/catalogue.md step 3b gives it (its feature set chosen in each
training fold under R x the first stage's p50, and on all queries for the deployed
model): results in catalogue_max_cost.*, its workdir catalogue_max_cost. The table
compares each set's "chosen per fold" system (what the recommendation deploys: settings
and "keep the first stage" chosen inside the training folds) with the first stage and
with the generated set, per query (paired randomisation test, max-T corrected over the
family, W/T/L). Phases are timed from the commands' own log lines. Results:
benchmarks/results/catalogue.md, .csv, .png (and catalogue_features.md, .csv, .png).
Needs MSRD in ../shared/data/msrd-movies and a node with the LTR plugin (``LTR_URL`` or
the local node).
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import random
import re
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import numpy as np

from ltr_toolkit.data.featuresets import load_featureset
from ltr_toolkit.data.judgments import load_judgments
from ltr_toolkit.data.querytext import fit_params
from ltr_toolkit.query.requests import Rescore, search_body
from ltr_toolkit.rank import stats
from ltr_toolkit.serving import rerank
from ltr_toolkit.serving.rerank import serving_params
from ltr_toolkit.serving.serving import Serving
from ltr_toolkit.transport.client import call
from ltr_toolkit.transport.engine import detect

from ._live import connect, workdir
from ._report import SHARED, finish, pyplot, write_table
from .latency import _run
from .latency_breakdown import _linear

ROOT = Path(__file__).resolve().parent.parent
MSRD = SHARED / "data" / "msrd-movies"
INDEX = "bench-msrd"
FIELDS = ["title", "overview", "actors", "director", "tags", "characters"]
FIRST_STAGE = {"query": {"multi_match": {"query": "{{keywords}}", "fields": FIELDS}}}
PIPELINE = "chosen per fold"
SETS = ("generated", "text", "elastic5")
DEPLOY = "bench-msrd-generated"
#: the generated set's NDCG@10 before the lean default (30 features, run of 2026-11-27)
OLD_GENERATED = 0.8994
WINDOW, SIZE, PASSES, CHUNK = 100, 10, 2, 100
FIRST, SERVED = "first stage", "generated, deployed"
FIRST_BODY = "first stage, body"
OWN = "the toolkit's own work for a served query alone (no request)"


class Timed:
    """A ``ltr`` subprocess whose stderr lines are kept with the second they arrived."""

    def __init__(self, env: dict):
        self.env = env

    def run(self, *argv: str) -> list[tuple[float, str]]:
        t0 = time.monotonic()
        proc = subprocess.Popen([sys.executable, "-m", "ltr_toolkit.cli", *argv], env=self.env,
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        lines = []
        for line in proc.stdout:
            lines.append((time.monotonic() - t0, line.rstrip("\n")))
            print(f"  [{lines[-1][0]:7.1f}s] {lines[-1][1]}", flush=True)
        if proc.wait() not in (0, 3):
            raise SystemExit(f"ltr {' '.join(argv[:3])} ... failed (exit {proc.returncode})")
        lines.append((time.monotonic() - t0, ""))
        return lines


def _text_set(path: Path) -> Path:
    """The shipped lexical set on MSRD's fields: abstract is overview; the first stage's
    score is the notebook's first stage."""
    spec = json.loads((ROOT / "feature_sets" / "cranfield-lexical.json").read_text())
    spec["featureset"]["name"] = "bench-msrd-text"
    for f in spec["featureset"]["features"]:
        if f["name"] == "first_stage_bm25":
            f["template"] = FIRST_STAGE["query"]
            continue
        f["name"] = f["name"].replace("abstract", "overview")
        f["template"] = json.loads(json.dumps(f["template"]).replace('"abstract', '"overview'))
    path.write_text(json.dumps(spec, indent=2))
    return path


def _judgments(out: Path, queries: int | None, seed: int) -> Path:
    """All judgments as shipped, or a sample of ``queries`` queries (for a quick look)."""
    src = MSRD / "movies-judgments.tsv.gz"
    if not queries:
        return src
    with gzip.open(src, "rt", encoding="utf-8") as fh:
        head, *rows = fh.read().splitlines()
    qids = sorted({r.split("\t", 1)[0] for r in rows})
    keep = set(random.Random(seed).sample(qids, queries))
    out.write_text("\n".join([head] + [r for r in rows if r.split("\t", 1)[0] in keep]) + "\n")
    return out


def _phases(lines: list[tuple[float, str]]) -> dict:
    """Seconds of logging, fits, serving (the live reranking and the report) and, with
    ``--deploy``, deploying (from the recommendation to the upload) of one ``ltr evaluate
    cv`` run, from its log lines."""
    logged = next(t for t, s in lines if s.startswith("logged "))
    fitted = max((t for t, s in lines if " fitted in " in s), default=logged)
    told = next((t for t, s in lines if s.startswith("recommendation: ")), lines[-1][0])
    return {"logging": logged, "fits": fitted - logged, "serving": told - fitted,
            "deploy": lines[-1][0] - told}


def _setup(run: Timed, work: Path, sets: list[str]) -> tuple[dict, dict]:
    """Index, the feature set files of ``sets`` uploaded: ({set: stored name}, {step:
    seconds})."""
    took = {}
    t0 = time.monotonic()
    run.run("index", "jsonl", str(MSRD / "movies-corpus.jsonl.gz"), "--index", INDEX,
            "--vector-fields", "none", "--recreate")
    took["index"] = time.monotonic() - t0
    run.run("store", "init")
    files = {"generated": work / "generated.json", "text": work / "text.json",
             "elastic5": ROOT / "benchmarks" / "data" / "msrd-elastic5.json"}
    files = {s: files[s] for s in sets}
    if "text" in files:
        _text_set(files["text"])
    if "generated" in files:
        t0 = time.monotonic()
        run.run("featureset", "init", "--index", INDEX, "-o", str(files["generated"]))
        took["featureset init"] = time.monotonic() - t0
    t0 = time.monotonic()
    names = {}
    for name, path in files.items():
        out = run.run("featureset", "upload", str(path), "--index", INDEX)
        names[name] = next(s.split()[2] for _, s in out if s.startswith("feature set "))
    took["uploads"] = time.monotonic() - t0
    return names, took


def _cv(run: Timed, work: Path, judgments: Path, featureset: str, budget: float,
        deploy: str | None = None, max_cost: float | None = None) -> tuple[dict, dict, str | None]:
    """(report, phases, the uploaded model's name: None without ``deploy`` or when the
    run keeps the first stage). With ``max_cost`` (``--max-cost``, docs/catalogue.md step
    3b): the phases also hold the selection's seconds (from timing each feature to the
    last fold's choice) and the command's own lines about it."""
    report = work / f"{featureset}.report.json"
    lines = run.run("evaluate", "cv", str(judgments), "--index", INDEX, "--featureset", featureset,
                    "--first-stage", str(work / "first-stage.json"), "--algo", "lambdamart",
                    "--budget", str(budget), "--workdir", str(work / f"cv-{featureset}"),
                    "-o", str(report), *(("--deploy", deploy) if deploy else ()),
                    *(("--max-cost", str(max_cost)) if max_cost else ()))
    up = next((s.split()[1].rstrip(":") for _, s in lines if s.startswith("uploaded ")), None)
    phases = _phases(lines)
    if max_cost:
        start = next((t for t, s in lines if s.startswith("timing each feature")), None)
        chose = [t for t, s in lines if re.match(r"fold \d+/\d+: \d+ features", s)]
        phases["selection"] = chose[-1] - start if start is not None and chose else None
        phases["lines"] = [s for _, s in lines if s.startswith(("timing each feature", "cost model:"))
                           or re.match(r"fold \d+/\d+: \d+ features", s) or " deployed as " in s]
    return json.loads(report.read_text()), phases, up


def _verdict(report: dict) -> str:
    """What the run's recommendation says: deploy (and what each fold served), or keep."""
    deploy = report["recommendation"].get("deploy")
    if not deploy:
        return "keep the first stage"
    kept = sum(1 for c in report["settings"][PIPELINE] if c.get("first_stage"))
    return f"deploy ({len(report['settings'][PIPELINE]) - kept} of {report['folds']} folds served a model)"


def _parity(run: Timed, work: Path, featureset: str, judgments: Path, n: int = 20) -> dict:
    """The README's serving path on the generated set: a LambdaMART trained on the
    candidates its cross-validation logged (``ltr train``), uploaded (``ltr model
    upload``), and ``ltr query search --model`` on ``n`` queries against ``ltr predict``
    of the same rows: hits compared, the largest relative difference."""
    data, model = work / f"cv-{featureset}" / "candidates.txt", work / "parity-model.json"
    run.run("train", str(data), "--algo", "lambdamart", "--trees", "100", "--depth", "4", "-o", str(model))
    up = run.run("model", "upload", str(model), "--name", f"{featureset}-parity")
    name = next(s.split("uploaded ")[1].split()[0] for _, s in up if "uploaded " in s)
    run.run("predict", str(model), str(data), "-o", str(work / "parity-scores.txt"))
    local = np.loadtxt(work / "parity-scores.txt")
    where = {}
    with open(data, encoding="utf-8") as fh:
        for line in fh:
            if not line.startswith("#"):
                where[(line.split()[1][4:], line.rsplit("# ", 1)[1].split()[0])] = len(where)
    texts = load_judgments(judgments).queries
    worst, compared = 0.0, 0
    for q in random.Random(1).sample(sorted(texts), n):
        hits = json.loads(subprocess.run(
            [sys.executable, "-m", "ltr_toolkit.cli", "query", "search", texts[q], "--index", INDEX,
             "--model", name, "--json"], env=run.env, capture_output=True, text=True, check=True).stdout)
        for h in hits:
            if (q, h["id"]) in where:
                mine = local[where[(q, h["id"])]]
                worst = max(worst, abs(h["score"] - mine) / max(abs(mine), 1e-6))
                compared += 1
    return {"model": name, "queries": n, "hits": compared, "max_rel_diff": worst}


def _loop(systems: dict, queries: list, label: str, seed: int) -> dict[str, list[float]]:
    """``latency._run`` (one client; per query, every system in a random order) over
    ``queries``: a warm-up pass, then :data:`PASSES` measured ones, in chunks, a progress
    line with an ETA after each."""
    times = {s: [] for s in systems}
    total, done, t0 = len(queries) * (PASSES + 1), 0, time.monotonic()
    for rep in range(PASSES + 1):
        for i in range(0, len(queries), CHUNK):
            got = _run(systems, queries[i:i + CHUNK], 1, seed + 1000 * rep + i)
            for s, t in got.items():
                if rep:
                    times[s] += t
            done += len(queries[i:i + CHUNK])
            spent = time.monotonic() - t0
            print(f"  {label}: {'warm-up' if not rep else f'pass {rep}/{PASSES}'}, "
                  f"{done}/{total} (queries x passes), {spent:.0f} s, "
                  f"ETA {spent / done * (total - done):.0f} s", flush=True)
    return times


def _latency(conn, model: str, texts: dict, n: int, seed: int) -> dict:
    """The deployed model served as ``ltr query search`` serves it (its serving contract
    settled, then ``Serving.search``) and its first stage alone (the contract's first
    stage and budget), on ``n`` queries, interleaved: {system: [ms]} and the serving."""
    served = Serving(INDEX).for_model(model).served(conn)
    assert served.depth == WINDOW, f"the model is served over {served.depth}, not {WINDOW}"
    first = Serving(INDEX, served.first_stage, served.window, max_terms=served.max_terms)
    queries = [{"keywords": texts[q]} for q in random.Random(seed).sample(sorted(texts), min(n, len(texts)))]
    systems = {FIRST: lambda p: first.search(conn, p, SIZE),
               SERVED: lambda p: served.search(conn, p, SIZE)}
    times = _loop(systems, queries, "served vs first stage", seed)
    return {"times": times, "served": served, "queries": queries,
            "requests": _requests(conn, served, queries)}


def _requests(conn, served: Serving, queries: list) -> list[int]:
    """How many search requests ``Serving.search`` sends for each query (untimed, after
    the loop). One is the reranked query; more: a deeper fetch (a tie at the cut) and the
    tie check (the first stage's order of hits the model tied)."""
    sent, counts = [0], []
    real = rerank._search

    def counting(*a, **kw):
        sent[0] += 1
        return real(*a, **kw)
    rerank._search = counting
    try:
        for p in queries:
            sent[0] = 0
            served.search(conn, p, SIZE)
            counts.append(sent[0])
    finally:
        rerank._search = real
    return counts


def _by_requests(lat: dict) -> str:
    """The served latency split by the requests each query needed (counted after the
    loop): p50 served and first stage on the same queries."""
    n, counts = len(lat["queries"]), lat["requests"]
    parts = []
    for c, k in sorted(Counter(counts).items()):
        pick = [i for i in range(len(lat["times"][SERVED])) if counts[i % n] == c]
        sv, fs = (float(np.percentile([lat["times"][key][i] for i in pick], 50)) for key in (SERVED, FIRST))
        parts.append(f"{c}: {k} queries, served p50 {sv:.2f} ms vs first stage {fs:.2f} ({sv / fs:.2f}x)")
    return ("requests per served query (counted after the loop, untimed; 2: the reranked query "
            "and the tie check, the first stage's order of hits the model tied; 3: a tie at the "
            "cut reached the last hit fetched, so a deeper fetch too): " + "; ".join(parts))


def _breakdown(conn, served: Serving, featureset_file: Path, queries: list, seed: int) -> list:
    """Where the served query's time goes (``benchmarks.latency_breakdown``'s method):
    the first stage and the deployed model as bodies prepared before the loop, the set's
    features as one linear model, each alone as a one-feature linear model; rows of
    (row, p50, p99, p50 added to the first stage's body)."""
    features = load_featureset(featureset_file)["features"]
    models = {f"linear, all {len(features)} features": _linear(conn, "bench-msrd-linear", features)}
    for f in features:
        models[f"one feature: {f['name']}"] = _linear(conn, f"bench-msrd-one-{f['name']}", [f])
    stage, terms = served.first_stage, served.max_terms
    bodies = []
    for raw in queries:
        params = fit_params(raw, terms)
        mp = serving_params(conn, INDEX, [raw], stage, served.rescore, max_terms=terms)[0]
        b = {FIRST_BODY: search_body(stage, params, SIZE),
             f"{SERVED}, body": search_body(stage, params, SIZE + 1, served.rescore, model_params=mp)}
        for row, m in models.items():
            b[row] = search_body(stage, params, SIZE + 1, Rescore(m, WINDOW), model_params=mp)
        bodies.append(b)

    def send(row):
        return lambda i: call(conn, conn.client().search, index=INDEX, body=bodies[i][row],
                              search_type=stage.search_type)
    first = Serving(INDEX, stage, served.window, max_terms=terms)
    systems = {f"{FIRST}, search()": lambda i: first.search(conn, queries[i], SIZE),
               f"{SERVED}, search()": lambda i: served.search(conn, queries[i], SIZE)}
    systems.update({row: send(row) for row in bodies[0]})
    systems[OWN] = lambda i: search_body(
        stage, fit_params(queries[i], terms), SIZE + 1, served.rescore,
        model_params=serving_params(conn, INDEX, [queries[i]], stage, served.rescore, max_terms=terms)[0])
    times = _loop(systems, list(range(len(queries))), "where the time goes", seed)
    base = float(np.percentile(times[FIRST_BODY], 50))
    rows = []
    for row, t in times.items():
        p50, p99 = np.percentile(t, [50, 99])
        rows.append([row, round(float(p50), 2), round(float(p99), 2),
                     "" if row == OWN else round(float(p50) - base, 2)])
    return rows


def _rows(reports: dict, phases: dict, sizes: dict, lat: dict | None) -> tuple[list, list]:
    base = reports["generated"] if "generated" in reports else next(iter(reports.values()))
    qids = list(base["per_query"][base["baseline"]])
    ndcg = {FIRST: [base["per_query"][base["baseline"]][q]["ndcg@10"] for q in qids]}
    for s, rep in reports.items():
        assert list(rep["per_query"][rep["baseline"]]) == qids, "the runs judged other queries"
        ndcg[s] = [rep["per_query"][PIPELINE][q]["ndcg@10"] for q in qids]
    vs_first = stats.compare(ndcg, FIRST, alternative="two-sided")
    others = {s: v for s, v in ndcg.items() if s != FIRST}
    vs_gen = stats.compare(others, "generated") if "generated" in others and len(others) > 1 else None
    p = {}
    if lat:
        for s, key in ((FIRST, FIRST), ("generated", SERVED)):
            p[s] = np.percentile(lat["times"][key], [50, 99])
    rows = []
    for s in ndcg:
        t, g = vs_first.tests.get(s), vs_gen.tests.get(s) if vs_gen else None
        ms = [round(float(v), 2) for v in p[s]] if s in p else ["", ""]
        ratio = [round(float(p[s][i] / p[FIRST][i]), 2) for i in (0, 1)] if s in p and s != FIRST else ["", ""]
        rows.append([s, sizes.get(s, ""), round(float(np.mean(ndcg[s])), 4),
                     round(t.mean_delta, 4) if t else "", f"{t.p_corrected:.4f}" if t else "",
                     f"{t.wins}/{t.ties}/{t.losses}" if t else "",
                     round(-g.mean_delta, 4) if g else "", f"{g.p_corrected:.4f}" if g else "",
                     f"{g.losses}/{g.ties}/{g.wins}" if g else "",
                     _verdict(reports[s]) if s in reports else "",
                     *(round(phases[s][k]) if s in phases else "" for k in ("logging", "fits", "serving")),
                     round(phases[s].get("deploy", 0)) if s in phases and s == "generated" else "",
                     *ms, *ratio])
    return rows, ndcg


def _plot(ndcg: dict, seconds: dict, name: str, lat: dict | None) -> None:
    plt = pyplot()
    fig, axes = plt.subplots(1, 3 if lat else 2, figsize=(16 if lat else 11, 4))
    a, b = axes[0], axes[1]
    names = list(ndcg)
    a.bar(names, [np.mean(ndcg[s]) for s in names], color=["grey", "C0", "C1", "C2"][:len(names)])
    lo = min(np.mean(v) for v in ndcg.values())
    a.axhline(OLD_GENERATED, color="C0", ls=":", lw=1, label=f"generated before the lean default ({OLD_GENERATED})")
    a.set_ylim(lo - 0.05, max(OLD_GENERATED, *(np.mean(v) for v in ndcg.values())) + 0.02)
    a.legend(fontsize=8, loc="lower right")
    a.set_title(f"MSRD, {len(ndcg[FIRST])} queries: NDCG@10, 5-fold CV, live")
    phases = ("logging", "fits", "serving", "deploy")
    sets = [s for s in SETS if s in seconds]
    bottom = np.zeros(len(sets))
    for k in phases:
        v = np.array([seconds[s].get(k, 0) for s in sets])
        b.bar(sets, v / 60, bottom=bottom / 60, label=k)
        bottom += v
    b.set_ylabel("minutes")
    b.set_title("time per feature set (this machine)")
    b.legend(fontsize=8)
    if lat:
        c = axes[2]
        x = np.arange(2)
        for i, (key, label) in enumerate(((FIRST, "first stage"), (SERVED, "generated, served"))):
            c.bar(x + (i - 0.5) * 0.4, np.percentile(lat["times"][key], [50, 99]), width=0.4, label=label)
        c.set_xticks(x, ["p50", "p99"])
        c.set_ylabel("ms")
        c.set_title(f"served (ltr query search's path) vs first stage\n{len(lat['queries'])} queries "
                    f"x {PASSES}, one client, window {WINDOW}, interleaved")
        c.legend(fontsize=8)
    finish(fig, name)


def _runs(run: Timed, work: Path, args) -> tuple:
    """(judgments, stored set names, reports, phases, set-up seconds by step, total
    seconds, the deployed model) of the index, feature sets and cross-validations of
    ``args.sets``; with ``--reuse``, those of the last run in the same workdir (its
    timings included: the latency, parity and tables are new)."""
    saved = work / "run.json"
    if args.reuse:
        r = json.loads(saved.read_text())
        reports = {s: json.loads((work / f"{n}.report.json").read_text()) for s, n in r["names"].items()}
        return (Path(r["judgments"]), r["names"], reports, r["phases"], r["setup"], r["total"],
                r.get("deployed"))
    t0 = time.monotonic()
    names, setup = _setup(run, work, args.sets)
    judgments = _judgments(work / "judgments.tsv", args.queries, args.seed)
    reports, phases, deployed = {}, {}, None
    for s in args.sets:
        gen = s == "generated"
        reports[s], phases[s], up = _cv(run, work, judgments, names[s], args.budget,
                                        DEPLOY if gen else None, args.max_cost if gen else None)
        deployed = up if gen else deployed
    total = time.monotonic() - t0
    saved.write_text(json.dumps({"names": names, "judgments": str(judgments), "phases": phases,
                                 "setup": setup, "total": total, "budget": args.budget,
                                 "queries": args.queries, "seed": args.seed, "deployed": deployed}))
    return judgments, names, reports, phases, setup, total, deployed


def _sets(text: str) -> list[str]:
    sets = [s.strip() for s in text.split(",") if s.strip()]
    bad = [s for s in sets if s not in SETS]
    if bad or not sets:
        raise argparse.ArgumentTypeError(f"--sets: {', '.join(bad) or 'none'} (sets: {', '.join(SETS)})")
    return [s for s in SETS if s in sets]


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sets", type=_sets, default=list(SETS),
                    help=f"the feature sets run, comma-separated (default: {','.join(SETS)})")
    ap.add_argument("--queries", type=int, default=None, help="a sample of this many queries (default: all)")
    ap.add_argument("--budget", type=float, default=120.0, help="seconds for choosing settings, per run")
    ap.add_argument("--latency-queries", type=int, default=2000,
                    help="queries timed, served vs the first stage (generated set)")
    ap.add_argument("--breakdown-queries", type=int, default=200,
                    help="queries timed per feature (where the time goes; 0: not measured)")
    ap.add_argument("--max-cost", type=float, default=None,
                    help="the generated set's cross-validation with --max-cost R (docs/catalogue.md "
                         "step 3b: its feature set chosen in the folds under R x the first stage's "
                         "p50); results in catalogue_max_cost.*")
    ap.add_argument("--engine", choices=("opensearch", "elasticsearch"), default=None)
    ap.add_argument("--seed", type=int, default=7, help="the sample's seed (with --queries)")
    ap.add_argument("--reuse", action="store_true",
                    help="the index, feature sets and reports of the last run in the same workdir")
    args = ap.parse_args(argv)
    conn = connect(args.engine)
    env = dict(os.environ, LTR_URL=conn.url, COLUMNS="120", PYTHONUNBUFFERED="1")
    suffix = "_max_cost" if args.max_cost else ""
    work = workdir() / f"catalogue{suffix}"
    work.mkdir(parents=True, exist_ok=True)
    (work / "first-stage.json").write_text(json.dumps(FIRST_STAGE))
    run = Timed(env)
    t_start = time.monotonic()
    judgments, names, reports, phases, setup, total, deployed = _runs(run, work, args)
    lat, breakdown, took = None, None, {}
    if "generated" in reports and deployed:
        t0 = time.monotonic()
        texts = load_judgments(judgments).queries
        lat = _latency(conn, deployed, texts, args.latency_queries, args.seed)
        took["latency"] = time.monotonic() - t0
        if args.breakdown_queries:
            t0 = time.monotonic()
            breakdown = _breakdown(conn, lat["served"], work / "generated.json",
                                   lat["queries"][:args.breakdown_queries], args.seed)
            took["breakdown"] = time.monotonic() - t0
    parity = None
    if "generated" in reports:
        t0 = time.monotonic()
        parity = _parity(run, work, names["generated"], judgments)
        took["parity"] = time.monotonic() - t0
    sizes = {s: len(json.loads(Path(p).read_text())["featureset"]["features"])
             for s, p in (("generated", work / "generated.json"), ("text", work / "text.json"),
                          ("elastic5", ROOT / "benchmarks" / "data" / "msrd-elastic5.json"))
             if s in reports}
    chosen = phases.get("generated", {}).get("lines") or []
    deployed_on = next((re.search(r" on (\d+) features", x) for x in chosen if " deployed as " in x), None)
    if deployed_on:
        sizes["generated"] = f"{sizes['generated']}, deployed on {deployed_on.group(1)}"
    rows, ndcg = _rows(reports, phases, sizes, lat)
    header = ["system", "features", "NDCG@10", "vs first stage", "p (max-T)", "W/T/L vs first stage",
              "generated minus this", "p vs generated (max-T)", "W/T/L generated vs this",
              "recommendation", "logging s", "fits s", "serving s", "deploy s",
              "served p50 ms", "served p99 ms", "p50 ratio", "p99 ratio"]
    # logging: the first stage's candidates and their features; fits: from there to the
    # last fold fitted (loading the rows, the first stage's ranking of every query for the
    # evaluation, the choice and the fits); serving: to the recommendation (the last
    # fold's live reranking, the report); deploy: from there to the upload
    notes = [
        f"{len(ndcg[FIRST])} queries{' (a sample, seed ' + str(args.seed) + ')' if args.queries else ' (all)'}, "
        f"5-fold cross-validation, seed 42, window 100, NDCG@10 over the judged documents of each "
        "query's reranked top 10; each system is its run's 'chosen per fold' (lambdamart, settings "
        f"and 'keep the first stage' chosen in the training folds, --budget {args.budget:g} s)",
        "sets run: " + ", ".join(reports) + ("" if len(reports) == len(SETS) else
                                              " (--sets; the others' last results: this file's history)"),
        "features: " + ", ".join(f"{s} {n}" for s, n in sizes.items())
        + (" (ltr featureset init's default, unreviewed)" if "generated" in sizes else ""),
        "first stage: the notebook's multi_match over " + ", ".join(FIELDS) + " (best_fields)",
    ]
    if args.max_cost and "generated" in phases:
        sel = phases["generated"].get("selection")
        notes.append(f"--max-cost {args.max_cost:g} (the generated set's run; docs/catalogue.md step "
                     f"3b): the feature set chosen in each training fold under that multiple of the "
                     f"first stage's p50, and on all judged queries for --deploy"
                     + (f"; timing the features and choosing in the 5 folds took {sel:.0f} s" if sel else "")
                     + "; the command's lines: " + " | ".join(chosen))
    if "generated" in reports:
        g = float(np.mean(ndcg["generated"]))
        notes.append(f"generated minus the generated set before the lean default (30 features, "
                     f"{OLD_GENERATED} on all 16,279 queries, run of 2026-11-27): {g - OLD_GENERATED:+.4f}"
                     + (" (a sample here: not the same queries)" if args.queries else ""))
    notes += [
        (f"index, feature sets and cross-validations: an earlier run's (--reuse), {total / 60:.1f} min"
         if args.reuse else f"whole run on this machine: {(time.monotonic() - t_start) / 60:.1f} min; "
         f"index, feature sets and cross-validations {total / 60:.1f} min")
        + ": " + ", ".join(f"{k} {v:.0f} s" for k, v in setup.items())
        + (f"; then{' (this run)' if args.reuse else ''} "
           f"{', '.join(f'{k} {v:.0f} s' for k, v in took.items())}" if took else ""),
        "phases of each cross-validation, from its log: logging = the first stage's candidates and "
        "their features; fits = from there to the last fold fitted (loading the rows, the first "
        "stage's ranking of every query for the evaluation, each fold's choice and fit, each fold's "
        "live reranking as it lands); serving = to the recommendation (the last fold's reranking, "
        f"the report); deploy = `--deploy {DEPLOY}` (the recommended reranker trained on all "
        "judged queries, uploaded)",
        "p: paired randomisation test, 10,000 sign flips, max-T corrected within each family "
        "(vs the first stage; vs the generated set)",
    ]
    if lat:
        sv = lat["served"]
        notes.append(
            f"served p50/p99: the deployed model {deployed} as `ltr query search --model` serves it "
            f"(Serving.served, then Serving.search: window {sv.depth}, size {SIZE}, its contract's "
            f"first stage, budget {sv.max_terms}) and that first stage alone (the same Serving "
            f"without the model), {len(lat['queries'])} queries (seed {args.seed}) x {PASSES} passes "
            "after a warm-up pass, one client, interleaved (per query both, in a random order: "
            "benchmarks.latency._run); ratios: to the first stage's p50 and p99 of the same loop; "
            "the node is shared with other jobs")
        notes.append(_by_requests(lat))
    if breakdown:
        top = sorted((r for r in breakdown if r[0].startswith("one feature: ")), key=lambda r: -r[3])[:3]
        notes.append("where the served time goes (catalogue_features.md; p50 added to the first "
                     "stage's body): " + "; ".join(f"{r[0]} {r[3]:+} ms" for r in breakdown
                                                   if r[0] != OWN and not r[0].startswith(("one feature", FIRST_BODY)))
                     + f"; {OWN}: p50 {next(r[1] for r in breakdown if r[0] == OWN)} ms"
                     + "; costliest alone: " + ", ".join(f"{r[0][13:]} +{r[3]} ms" for r in top))
    if parity:
        notes.append(
            f"served = local, generated set: a LambdaMART (100 trees, depth 4) trained on the logged "
            f"candidates, uploaded as {parity['model']}; `ltr query search --model` on {parity['queries']} "
            f"queries against `ltr predict` of the same rows: {parity['hits']} hits compared, largest "
            f"relative difference {parity['max_rel_diff']:.1e}")
    notes.append(f"engine: {detect(conn).label}")
    name = ("catalogue" if args.engine in (None, "opensearch") else f"catalogue_{args.engine}") + suffix
    if breakdown:
        _write_breakdown(f"{name}_features", breakdown, len(lat["queries"][:args.breakdown_queries]),
                         deployed)
    write_table(name, header, rows, notes)
    _plot(ndcg, phases, name, lat)


def _write_breakdown(name: str, rows: list, n: int, model: str) -> None:
    notes = [f"MSRD, {n} queries x {PASSES} passes (after a warm-up pass), one client, window "
             f"{WINDOW}, size {SIZE} (11 with a rescore: the tie check), interleaved; every row a "
             "request body prepared before the loop (the deployed model's parameters, as serving "
             "makes them), sent through the toolkit's client call: benchmarks.latency_breakdown's "
             "method",
             "search(): Serving.search as `ltr query search` calls it (the first stage: the same "
             "Serving without the model); body: the same request prepared before the loop",
             f"{SERVED}: {model}; linear: the generated set's features weighed 1 each (the plugin's "
             "cost of the features without trees); one feature: that feature alone as a linear model",
             "the toolkit's own work: the model's parameters for the query (serving_params, the kept "
             "plan) and the body, timed alone",
             "added: the row's p50 minus the first stage's body's p50, same loop",
             "the node is shared with other jobs"]
    write_table(name, ["row", "p50 ms", "p99 ms", "p50 added to the first stage's body (ms)"], rows, notes)
    _plot_breakdown(name, rows)


def _plot_breakdown(name: str, rows: list) -> None:
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(9, 0.35 * len(rows) + 1.5))
    y = np.arange(len(rows))
    ax.barh(y, [r[1] if r[0] == OWN else r[3] for r in rows],
            color=["tab:orange" if r[0] == OWN else "tab:blue" for r in rows])
    ax.set_yticks(y, [r[0] for r in rows], fontsize=8)
    ax.invert_yaxis()
    ax.set_xlabel("p50 ms added to the first stage's prepared body (orange: p50 alone)")
    ax.set_title(f"MSRD, the generated set: where a served query's time goes\n(window {WINDOW}, one client)")
    finish(fig, name)


if __name__ == "__main__":
    main()
