"""MSRD at full size (#52): Elastic's own learning-to-rank data (9,750 movies, 16,279
queries, 384,755 judgments) through the README's own-index path, live:
``python -m benchmarks.catalogue [--queries N] [--budget SECONDS] [--engine E]``.

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
   characters), each held-out query reranked by the plugin.

The table compares each set's "chosen per fold" system (what the recommendation
deploys: settings and "keep the first stage" chosen inside the training folds) with the
first stage and with the generated set, per query (paired randomisation test, max-T
corrected over the family, W/T/L). Phases are timed from the commands' own log lines.
Results: benchmarks/results/catalogue.md, .csv, .png. Needs MSRD in
../shared/data/msrd-movies and a node with the LTR plugin (``LTR_URL`` or the local
node).
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import random
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from ltr_toolkit.data.judgments import load_judgments
from ltr_toolkit.rank import stats
from ltr_toolkit.transport.engine import detect

from ._live import connect, workdir
from ._report import SHARED, finish, pyplot, write_table

ROOT = Path(__file__).resolve().parent.parent
MSRD = SHARED / "data" / "msrd-movies"
INDEX = "bench-msrd"
FIELDS = ["title", "overview", "actors", "director", "tags", "characters"]
FIRST_STAGE = {"query": {"multi_match": {"query": "{{keywords}}", "fields": FIELDS}}}
PIPELINE = "chosen per fold"
SETS = ("generated", "text", "elastic5")


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
    """Seconds of logging, fits and serving (the live reranking and the report) of one
    ``ltr evaluate cv`` run, from its log lines."""
    logged = next(t for t, s in lines if s.startswith("logged "))
    fitted = max((t for t, s in lines if " fitted in " in s), default=logged)
    return {"logging": logged, "fits": fitted - logged, "serving": lines[-1][0] - fitted}


def _setup(run: Timed, work: Path) -> tuple[dict, float]:
    """Index, the three feature set files uploaded: ({set: stored name}, seconds)."""
    t0 = time.monotonic()
    run.run("index", "jsonl", str(MSRD / "movies-corpus.jsonl.gz"), "--index", INDEX,
            "--vector-fields", "none", "--recreate")
    run.run("store", "init")
    files = {"generated": work / "generated.json", "text": _text_set(work / "text.json"),
             "elastic5": ROOT / "benchmarks" / "data" / "msrd-elastic5.json"}
    run.run("featureset", "init", "--index", INDEX, "-o", str(files["generated"]))
    names = {}
    for name, path in files.items():
        out = run.run("featureset", "upload", str(path), "--index", INDEX)
        names[name] = next(s.split()[2] for _, s in out if s.startswith("feature set "))
    return names, time.monotonic() - t0


def _cv(run: Timed, work: Path, judgments: Path, featureset: str, budget: float) -> tuple[dict, dict]:
    report = work / f"{featureset}.report.json"
    lines = run.run("evaluate", "cv", str(judgments), "--index", INDEX, "--featureset", featureset,
                    "--first-stage", str(work / "first-stage.json"), "--algo", "lambdamart",
                    "--budget", str(budget), "--workdir", str(work / f"cv-{featureset}"),
                    "-o", str(report))
    return json.loads(report.read_text()), _phases(lines)


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


def _rows(reports: dict, phases: dict) -> tuple[list, list]:
    gen = reports["generated"]
    qids = list(gen["per_query"][gen["baseline"]])
    ndcg = {"first stage": [gen["per_query"][gen["baseline"]][q]["ndcg@10"] for q in qids]}
    for s, rep in reports.items():
        assert list(rep["per_query"][rep["baseline"]]) == qids, "the runs judged other queries"
        ndcg[s] = [rep["per_query"][PIPELINE][q]["ndcg@10"] for q in qids]
    vs_first = stats.compare(ndcg, "first stage", alternative="two-sided")
    vs_gen = stats.compare({s: v for s, v in ndcg.items() if s != "first stage"}, "generated")
    rows = []
    for s in ndcg:
        t, g = vs_first.tests.get(s), vs_gen.tests.get(s)
        rows.append([s, round(float(np.mean(ndcg[s])), 4),
                     round(t.mean_delta, 4) if t else "", f"{t.p_corrected:.4f}" if t else "",
                     f"{t.wins}/{t.ties}/{t.losses}" if t else "",
                     round(-g.mean_delta, 4) if g else "", f"{g.p_corrected:.4f}" if g else "",
                     f"{g.losses}/{g.ties}/{g.wins}" if g else "",
                     _verdict(reports[s]) if s in reports else "",
                     *(round(phases[s][k]) if s in phases else "" for k in ("logging", "fits", "serving"))])
    return rows, ndcg


def _plot(ndcg: dict, rows: list, seconds: dict, name: str) -> None:
    plt = pyplot()
    fig, (a, b) = plt.subplots(1, 2, figsize=(11, 4))
    names = list(ndcg)
    a.bar(names, [np.mean(ndcg[s]) for s in names], color=["grey", "C0", "C1", "C2"][:len(names)])
    lo = min(np.mean(v) for v in ndcg.values())
    a.set_ylim(lo - 0.05, max(np.mean(v) for v in ndcg.values()) + 0.02)
    a.set_title(f"MSRD, {len(ndcg['first stage'])} queries: NDCG@10, 5-fold CV, live")
    phases = ("logging", "fits", "serving")
    sets = [s for s in SETS if s in seconds]
    bottom = np.zeros(len(sets))
    for k in phases:
        v = np.array([seconds[s][k] for s in sets])
        b.bar(sets, v / 60, bottom=bottom / 60, label=k)
        bottom += v
    b.set_ylabel("minutes")
    b.set_title("time per feature set (this machine)")
    b.legend(fontsize=8)
    finish(fig, name)


def _runs(run: Timed, work: Path, args) -> tuple:
    """(judgments, stored set names, reports, phases, set-up seconds, total seconds) of the
    index, feature sets and three cross-validations; with ``--reuse``, those of the last
    run in the same workdir (its timings included: only the parity and tables are new)."""
    saved = work / "run.json"
    if args.reuse:
        r = json.loads(saved.read_text())
        reports = {s: json.loads((work / f"{n}.report.json").read_text()) for s, n in r["names"].items()}
        return Path(r["judgments"]), r["names"], reports, r["phases"], r["setup_s"], r["total"]
    t0 = time.monotonic()
    names, setup_s = _setup(run, work)
    judgments = _judgments(work / "judgments.tsv", args.queries, args.seed)
    reports, phases = {}, {}
    for s in SETS:
        reports[s], phases[s] = _cv(run, work, judgments, names[s], args.budget)
    total = time.monotonic() - t0
    saved.write_text(json.dumps({"names": names, "judgments": str(judgments), "phases": phases,
                                 "setup_s": setup_s, "total": total, "budget": args.budget,
                                 "queries": args.queries, "seed": args.seed}))
    return judgments, names, reports, phases, setup_s, total


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--queries", type=int, default=None, help="a sample of this many queries (default: all)")
    ap.add_argument("--budget", type=float, default=120.0, help="seconds for choosing settings, per run")
    ap.add_argument("--engine", choices=("opensearch", "elasticsearch"), default=None)
    ap.add_argument("--seed", type=int, default=7, help="the sample's seed (with --queries)")
    ap.add_argument("--reuse", action="store_true",
                    help="the index, feature sets and reports of the last run in the same workdir")
    args = ap.parse_args(argv)
    conn = connect(args.engine)
    env = dict(os.environ, LTR_URL=conn.url, COLUMNS="120")
    work = workdir() / "catalogue"
    work.mkdir(parents=True, exist_ok=True)
    (work / "first-stage.json").write_text(json.dumps(FIRST_STAGE))
    run = Timed(env)
    judgments, names, reports, phases, setup_s, total = _runs(run, work, args)
    parity = _parity(run, work, names["generated"], judgments)
    rows, ndcg = _rows(reports, phases)
    header = ["system", "NDCG@10", "vs first stage", "p (max-T)", "W/T/L vs first stage",
              "generated minus this", "p vs generated (max-T)", "W/T/L generated vs this",
              "recommendation", "logging s", "fits s", "serving s"]
    # logging: the first stage's candidates and their features; fits: from there to the
    # last fold fitted (loading the rows, the first stage's ranking of every query for the
    # evaluation, the choice and the fits); serving: the rest (the last fold's live
    # reranking, the report)
    sizes = {s: len(json.loads(Path(p).read_text())["featureset"]["features"])
             for s, p in (("generated", work / "generated.json"), ("text", work / "text.json"),
                          ("elastic5", ROOT / "benchmarks" / "data" / "msrd-elastic5.json"))}
    notes = [
        f"{len(ndcg['first stage'])} queries{' (a sample, seed ' + str(args.seed) + ')' if args.queries else ' (all)'}, "
        f"5-fold cross-validation, seed 42, window 100, NDCG@10 over the judged documents of each "
        "query's reranked top 10; each system is its run's 'chosen per fold' (lambdamart, settings "
        f"and 'keep the first stage' chosen in the training folds, --budget {args.budget:g} s)",
        "features: " + ", ".join(f"{s} {n}" for s, n in sizes.items()),
        "first stage: the notebook's multi_match over " + ", ".join(FIELDS) + " (best_fields)",
        f"whole run on this machine: {total / 60:.1f} min (index and feature sets "
        f"{setup_s:.0f} s, then the three cross-validations)",
        "phases of each cross-validation, from its log: logging = the first stage's candidates and "
        "their features; fits = from there to the last fold fitted (loading the rows, the first "
        "stage's ranking of every query for the evaluation, each fold's choice and fit, each fold's "
        "live reranking as it lands); serving = the rest (the last fold's reranking, the report)",
        "p: paired randomisation test, 10,000 sign flips, max-T corrected within each family "
        "(vs the first stage; vs the generated set)",
        f"served = local, generated set: a LambdaMART (100 trees, depth 4) trained on the logged "
        f"candidates, uploaded as {parity['model']}; `ltr query search --model` on {parity['queries']} "
        f"queries against `ltr predict` of the same rows: {parity['hits']} hits compared, largest "
        f"relative difference {parity['max_rel_diff']:.1e}",
        f"engine: {detect(conn).label}",
    ]
    name = "catalogue" if args.engine in (None, "opensearch") else f"catalogue_{args.engine}"
    write_table(name, header, rows, notes)
    _plot(ndcg, rows, phases, name)


if __name__ == "__main__":
    main()
