"""Click models over UBI events (issue 23): ``python -m benchmarks.clicks``.

1. Throughput: 10 million generated events (about 970,000 searches over 50,000 synthetic
   queries, 10 results each) -> weighted groups (built 1 million events at a time) -> each
   model; events/s and the peak memory of that step (tracemalloc: NumPy's allocations; the
   event columns themselves, 17 bytes per event, are held before it). Reading files is
   measured apart: ``python -m benchmarks.clicks reading`` (clicks_reading.md).
2. Kendall tau: 20,000 simulated searches over the first stage's real top 10 of every
   judged Cranfield query (the node's), position bias theta_r = 1/(r+1) (the simulator's
   defaults, ``ltr_toolkit.clicks.simulate``); each model's grades (and raw estimates) vs
   the true grades, 5 seeds.
3. A reranker trained only on click judgments (PBM, 20,000 searches) vs the first stage,
   scored on the human Cranfield judgments: live 5-fold cross-validation with library
   defaults, paired randomisation test.

4. ``python -m benchmarks.clicks choice``: the click model ``--model auto`` takes (least
   held-out perplexity) against the best model's Kendall tau, with and without position
   bias, 5 seeds (``clicks_choice.md``).

Table + PNG in benchmarks/results/ (clicks.*). Needs a node with the LTR plugin.
"""

from __future__ import annotations

import json
import tempfile
import time
import tracemalloc
from pathlib import Path

import numpy as np
from scipy.stats import kendalltau

from ltr_toolkit.clicks.judging import clickmodels, grades
from ltr_toolkit.clicks.events import groups, sessions
from ltr_toolkit.clicks import simulate as S
from ltr_toolkit.clicks.judging.heldout import choose_model
from ltr_toolkit.clicks.judging.judge import ClickSettings, judge
from ltr_toolkit.clicks.judging.output import qid_for
from ltr_toolkit.query.requests import msearch_ids
from ltr_toolkit.data.judgments import JudgmentList
from ltr_toolkit.datasets import cranfield
from ltr_toolkit.pipeline.crossval import cross_validate

from ._live import INDEX, STAGE, connect, prepare, workdir
from ._report import finish, pyplot, write_table

SESSIONS = 20_000
SEEDS = (0, 1, 2, 3, 4)


def top10(conn) -> dict[str, list[str]]:
    jl = cranfield.judgments()
    qids = jl.judged_qids()
    ids = msearch_ids(conn, INDEX, [jl.query_params(q) for q in qids], STAGE, 10)
    return {q: r for q, r in zip(qids, ids) if r}


def synthetic(n_queries=50_000, n_docs=1_000_000, seed=0):
    rng = np.random.default_rng(seed)
    docs = rng.integers(0, n_docs, (n_queries, 10))
    rankings = {f"q{i}": [f"d{d}" for d in row] for i, row in enumerate(docs)}
    truth = {(q, d): float(g) for q, ds in rankings.items()
             for d, g in zip(ds, rng.choice(5, 10, p=[.5, .2, .15, .1, .05]))}
    return rankings, {q: f"query {q}" for q in rankings}, truth


def throughput(n_events=10_000_000) -> list[list]:
    rankings, texts, truth = synthetic()
    sim = S.simulate(rankings, texts, truth, int(n_events / 10.3), seed=1)
    log = S.event_log(sim)
    del sim
    rows = []
    for m in clickmodels.MODELS:
        tracemalloc.start()
        t0 = time.perf_counter()
        est = clickmodels.estimate(groups.aggregate(log), m)
        grades.to_grades(est)
        secs = time.perf_counter() - t0
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        rows.append([m, len(log), round(secs, 1), round(len(log) / secs), round(peak / 2**20),
                     est.info.get("iterations", "")])
        del est
    return rows


def _write_events(path: Path, n_events: int, bulk: bool) -> None:
    rankings, texts, truth = synthetic(5_000, 100_000)
    sim = S.simulate(rankings, texts, truth, int(n_events / 11.3), seed=2)
    with open(path, "w") as fh:
        for kind, doc in S.ubi_documents(sim):
            if bulk:
                fh.write(json.dumps({"index": {"_index": kind}}) + "\n")
            fh.write(json.dumps(doc) + "\n")


_READ = ("import sys, time, resource; from ltr_toolkit.clicks.events import files\n"
         "if sys.argv[2] == 'lines': files._Parser = lambda: (lambda buf: None)  # every block line by line\n"
         "t0 = time.perf_counter(); log = files.read_file(sys.argv[1]); s = time.perf_counter() - t0\n"
         "print(len(log), log.lines, s, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)")


def json_reading(n_events=10_000_000, line_events=1_000_000) -> list[list]:
    """Files of UBI events read by ``ltr judgments clicks``: the block reader (pyarrow) on
    ``n_events`` in NDJSON and in the bulk format, the line reader on ``line_events``;
    each in a fresh process (peak RSS: the whole process's, columns and interned strings
    included); no tracemalloc while timing (it slows allocation-heavy Python ~15x)."""
    import subprocess
    import sys
    rows = []
    with tempfile.TemporaryDirectory() as d:
        for name, n, bulk, how in (("NDJSON", n_events, False, "arrow"), ("bulk", n_events, True, "arrow"),
                                   ("NDJSON", line_events, False, "lines")):
            path = Path(d) / f"{name}-{n}.ndjson"
            if not path.exists():
                _write_events(path, n, bulk)
            out = subprocess.run([sys.executable, "-c", _READ, str(path), how], capture_output=True,
                                 text=True, check=True).stdout.split()
            events, lines, secs, rss = int(out[0]), int(out[1]), float(out[2]), int(out[3])
            rows.append([f"read {name} ({'pyarrow blocks' if how == 'arrow' else 'line by line'})",
                         events, round(secs, 1), round(events / secs), round(rss / 1024),
                         f"{round(lines / secs):,} lines/s"])
            print(rows[-1], flush=True)
    return rows


def taus(rankings, user=None) -> dict[str, list[tuple[float, float]]]:
    jl = cranfield.judgments()
    out: dict[str, list] = {m: [] for m in clickmodels.MODELS}
    for seed in SEEDS:
        sim = S.simulate(rankings, jl.queries, jl.grades, SESSIONS, model=user, seed=seed)
        table = sessions.build_table(S.event_log(sim))
        truth = S.true_grades(sim, jl.grades)
        for m in clickmodels.MODELS:
            est = clickmodels.estimate(table, m)
            keep = grades.keep_mask(est)
            true = [truth[(table.texts[q], table.docs[d])] for q, d in zip(est.query[keep], est.doc[keep])]
            out[m].append((kendalltau(grades.to_grades(est)[keep], true).statistic,
                           kendalltau(est.estimate[keep], true).statistic))
    return out


def human_by_text() -> JudgmentList:
    """Cranfield's human judgments under the qids click judgments give (from the text)."""
    jl = cranfield.judgments()
    out = JudgmentList(source="cranfield human judgments")
    for q, t in jl.queries.items():
        out.queries[qid_for(t)] = t
    out.grades = {(qid_for(jl.queries[q]), d): g for (q, d), g in jl.grades.items()}
    return out


def click_reranker(conn, fs, rankings, window: int) -> dict:
    jl = cranfield.judgments()
    sim = S.simulate(rankings, jl.queries, jl.grades, SESSIONS, seed=0)
    clicks, _, report = judge(S.event_log(sim), ClickSettings(model="pbm"), "simulated clicks (pbm)")
    rep = cross_validate(conn, INDEX, clicks, fs, {"linear": {}, "lambdamart": {}},
                         workdir() / f"clicks-cv-{window}", folds=5, window=window,
                         first_stage=STAGE, name_prefix="bench-clicks", log=print,
                         evaluate_on=human_by_text())
    rep["click_counts"] = report["counts"]
    return rep


def main() -> None:
    conn = connect()
    fs = prepare(conn)
    rankings = top10(conn)
    rows = []
    for window in (10, 100):
        rep = click_reranker(conn, fs, rankings, window)
        base = rep["systems"][rep["baseline"]]["ndcg@10"]
        for a in ("linear", "lambdamart"):
            t = rep["tests"][a]
            rows.append(["reranker on click judgments", f"{a}, window {window}", "NDCG@10 (human)",
                         round(base, 4), round(rep["systems"][a]["ndcg@10"], 4), round(t["mean_delta"], 4),
                         round(t["p_value"], 4), f"{t['wins']}/{t['ties']}/{t['losses']}"])
    tau = taus(rankings)
    for name, user, result in (("position bias 1/(r+1)", None, tau),
                               ("no position bias (eta 0), cascade stop only", S.UserModel(eta=0.0), None)):
        for m, vals in (result or taus(rankings, user)).items():
            g, e = np.array(vals).T
            rows.append([f"Kendall tau vs true grades, {name}", m, "grades / estimates", round(g.mean(), 4),
                         round(g.std(), 4), round(e.mean(), 4), round(e.std(), 4), ""])
    speed = throughput()            # reading files: `reading` (clicks_reading.md)
    for r in speed:
        rows.append(["throughput", r[0], "events, seconds, events/s, peak MiB, EM iterations", *r[1:]])
    write_table("clicks", ["part", "what", "columns", "a", "b", "c", "d", "e"], rows, notes(tau))
    plot(tau, speed)


def notes(tau) -> list[str]:
    return [
        "reranker rows: a = first stage NDCG@10, b = reranked, c = delta, d = p (paired "
        "randomisation test, 10,000 sign flips), e = W/T/L; trained only on PBM click judgments "
        f"from {SESSIONS:,} simulated searches, scored on the human Cranfield judgments, 5-fold CV, "
        "library defaults, first stage multi_match over title and abstract",
        f"tau rows: a = mean tau of the grades (0..4), b = its sd over {len(SEEDS)} seeds, c = mean "
        "tau of the raw estimates, d = its sd; pairs with >= 5 impressions; simulator: theta_r = "
        "1/(r+1), attractiveness 0.05 + 0.95 (2^g - 1)/15, stop after a click 0.2 + 0.6 g/4",
        "throughput rows: rows -> model -> grades on 10M generated events (one model per row, "
        "the aggregation included each time), EM to convergence (SQUAREM); reading UBI files: "
        "clicks_reading.md (`python -m benchmarks.clicks reading`), the cluster's indices: ubi_reading.md",
    ]


def plot(tau, speed) -> None:
    plt = pyplot()
    fig, axes = plt.subplots(1, 2, figsize=(10, 4))
    ms = list(tau)
    g = [np.mean([v[0] for v in tau[m]]) for m in ms]
    e = [np.mean([v[1] for v in tau[m]]) for m in ms]
    axes[0].bar(np.arange(len(ms)) - 0.2, g, width=0.4, label="grades")
    axes[0].bar(np.arange(len(ms)) + 0.2, e, width=0.4, label="estimates")
    axes[0].set_xticks(range(len(ms)), ms)
    axes[0].set_title(f"Kendall tau vs true grades ({SESSIONS:,} searches)")
    axes[0].legend(fontsize=8)
    axes[1].bar([r[0] for r in speed], [r[3] / 1e6 for r in speed])
    axes[1].set_title("million events / s")
    finish(fig, "clicks")


# --------------------------------------------------------------------------- model choice

USERS = {"position bias 1/(r+1)": None, "no position bias (eta 0), cascade stop only": S.UserModel(eta=0.0)}


def choice(rankings) -> list[list]:
    """Per user model and seed: every click model's held-out perplexity (the later 20% of
    searches), the one ``--model auto`` takes, and every model's Kendall tau (its grades
    vs the true grades, fitted on all searches, as ``taus``)."""
    jl = cranfield.judgments()
    rows = []
    for name, user in USERS.items():
        perp = {m: [] for m in clickmodels.MODELS}
        tau = {m: [] for m in clickmodels.MODELS}
        auto_tau, picked = [], []
        for seed in SEEDS:
            sim = S.simulate(rankings, jl.queries, jl.grades, SESSIONS, model=user, seed=seed)
            log = S.event_log(sim)
            rep = choose_model(log)
            table = sessions.build_table(S.event_log(sim))
            truth = S.true_grades(sim, jl.grades)
            for m in clickmodels.MODELS:
                perp[m].append(rep["models"][m]["perplexity"])
                est = clickmodels.estimate(table, m)
                keep = grades.keep_mask(est)
                true = [truth[(table.texts[q], table.docs[d])] for q, d in zip(est.query[keep], est.doc[keep])]
                tau[m].append(kendalltau(grades.to_grades(est)[keep], true).statistic)
            picked.append(rep["chosen"])
            auto_tau.append(tau[rep["chosen"]][-1])
        best = max(clickmodels.MODELS, key=lambda m: np.mean(tau[m]))
        for m in clickmodels.MODELS:
            rows.append([name, m, round(float(np.mean(perp[m])), 5), round(float(np.std(perp[m])), 5),
                         round(float(np.mean(tau[m])), 4), round(float(np.std(tau[m])), 4), ""])
        rows.append([name, "auto", "", "", round(float(np.mean(auto_tau)), 4), round(float(np.std(auto_tau)), 4),
                     f"chose {', '.join(f'{m} x{picked.count(m)}' for m in dict.fromkeys(picked))}; "
                     f"best tau: {best} {np.mean(tau[best]):.4f}; auto - best {np.mean(auto_tau) - np.mean(tau[best]):+.4f}"])
        print(rows[-1], flush=True)
    write_table("clicks_choice", ["user model", "click model", "held-out perplexity", "sd",
                                  "Kendall tau (grades)", "sd", "auto"], rows,
                [f"{SESSIONS:,} simulated searches over the first stage's top 10 of every judged "
                 f"Cranfield query, {len(SEEDS)} seeds; perplexity on the last 20% of searches, "
                 "models fitted on the first 80%; tau of each model fitted on all searches"])
    return rows


if __name__ == "__main__":
    import sys
    if sys.argv[1:] == ["choice"]:
        choice(top10(connect()))
    elif sys.argv[1:] == ["reading"]:
        write_table("clicks_reading", ["file", "events", "seconds", "events/s", "peak RSS MiB", "lines/s"],
                    json_reading(), ["UBI events as written by the simulator (query records and "
                                     "impressions/clicks mixed); each read in a fresh process"])
    else:
        main()
