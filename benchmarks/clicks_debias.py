"""Position-debiased training from clicks (issue 32, item 2):
``python -m benchmarks.clicks_debias CANDIDATES.txt [NAME]`` (results: NAME, default clicks_debias).

CANDIDATES.txt is a logged candidates file (``label qid:Q 1:.. # docid`` with its
``.json`` sidecar: feature names), the first stage's top 100 of every judged query in its
order, human grades as labels; ``ltr log --candidates 100`` writes one from the node (or
the ``--workdir`` of ``ltr featureset cost`` keeps it). Needs a node: each seed's
simulated searches are written to UBI indices on it (``ubi_queries`` records, an
impression per shown result, a click per click) and read back from them (point in time
+ search_after, as ``ltr judgments click-features`` reads the cluster); training uses
the events read back.

Per user model (position bias ``theta_r = 1/(r+1)``, the simulator's default; none:
eta 0, the cascade stop only) and seed (5): 20,000 simulated searches
(``clicks.simulate``), the human grades as the truth, each showing one of three rankers'
top 10 of a query's logged candidates (:data:`RANKERS`: the first stage's order, and
the candidates sorted by title BM25 and by abstract BM25), as logs spanning several
rankers are: PBM needs a document seen at several ranks to tell position from relevance. 5-fold cross-validation over queries: the training folds' searches only train,
four ways, each on the same events:

* naive: one group per search (``clicks.debias.join``), label clicked / skipped;
* click-model grades (today's path): PBM judgments (``clicks.judging.judge``, 0..4, >= 5
  impressions, else 0) of the training queries' top 10s;
* debiased (``ltr train --propensity pbm``): the naive groups, every pair weighted by the
  clicked document's examination probability under the PBM fitted by EM on the same
  searches (clipped at 0.1) to the power -1 (plain inverse propensity weighting) and to
  the power -0.5 (damped): ``clicks.debias.POWERS``, the default of ``ltr train``, is 1
  for linear models and networks and 0.5 for trees.

Identical searches are merged into one group whose weights count them
(``clicks.debias.merge_identical``: the same tree gradients, fewer groups). Each model
reranks the held-out queries' top 10 (and top 100), scored by NDCG@10 on the HUMAN
grades (IDCG over the window's candidates); a click metric on the held-out queries'
searches: the mean reciprocal rank, in the model's order of the 10 shown, of the clicked
documents (the first stage's own order is favoured by it under position bias: that is
what "better at clicks but not at ranking" looks like). Paired t-test over queries
(per-query NDCG averaged over seeds): debiased vs the best other.
"""

from __future__ import annotations

import os
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import replace

import numpy as np
from scipy.stats import ttest_rel

from ltr_toolkit.clicks import debias as D
from ltr_toolkit.clicks import simulate as S
from ltr_toolkit.clicks.events import ubi
from ltr_toolkit.clicks.events.eventlog import EventLog
from ltr_toolkit.clicks.events.groups import slice_log
from ltr_toolkit.clicks.judging.judge import ClickSettings, judge
from ltr_toolkit.clicks.judging.output import qid_for
from ltr_toolkit.data.dataset import RankingDataset
from ltr_toolkit.data.svmlight import load_logged
from ltr_toolkit.models.neural import NeuralRanker
from ltr_toolkit.models.trees import LambdaMART
from ltr_toolkit.rank.metrics import ndcg

from ._live import connect
from ._report import finish, pyplot, write_table

SESSIONS, SEEDS, FOLDS, DEPTH, K = 20_000, (0, 1, 2, 3, 4), 5, 10, 10
USERS = {"position bias 1/(r+1)": S.UserModel(), "no position bias (eta 0)": S.UserModel(eta=0.0)}
METHODS = ("naive clicks", "click-model grades (PBM)", "debiased, power 1 = plain IPW (PBM propensities)",
           "debiased, power 0.5 (PBM propensities)")
#: the methods debiased training is compared with (the best of them by mean NDCG@10)
OTHERS, DEBIASED = METHODS[:2], METHODS[2:]
ALGOS = {"linear": lambda seed: NeuralRanker(algo="linear", seed=seed),
         "lambdamart": lambda seed: LambdaMART(seed=seed, nthread=1)}


def top(ds: RankingDataset, n: int) -> RankingDataset:
    """Each query's first n rows (the first stage's top n)."""
    keep = np.arange(ds.n_docs) - np.repeat(ds.offsets[:-1], ds.group_sizes) < n
    sizes = np.minimum(ds.group_sizes, n)
    return RankingDataset(X=ds.X[keep], y=ds.y[keep], offsets=np.r_[0, np.cumsum(sizes)], qids=ds.qids,
                          doc_ids=ds.doc_ids[keep], feature_names=ds.feature_names)


#: the rankers whose top 10s the simulated searches show, an equal share each: the first
#: stage's, and the candidates re-sorted by one feature (logs that span several rankers,
#: as an interleaving test or past models leave them: the same document at several ranks,
#: which is what lets PBM tell position from relevance; over one fixed list per query
#: it cannot, and its propensities come out nearly flat)
RANKERS = ("first stage", "title_bm25", "abstract_bm25")


def rankings(ds: RankingDataset) -> tuple[dict, dict]:
    """({ranked list id: top 10 doc ids}, {list id: query}): per query, each ranker's top
    10 among its logged candidates."""
    names = list(ds.feature_names or [])
    lists, text = {}, {}
    for i, q in enumerate(ds.qids):
        rows = ds.query(i)
        ids = ds.doc_ids[rows]
        for k, r in enumerate(RANKERS):
            order = np.arange(len(ids)) if r == "first stage" else \
                np.argsort(-ds.X[rows, names.index(r) if r in names else k], kind="stable")
            lists[f"{q}#{k}"], text[f"{q}#{k}"] = list(ids[order[:DEPTH]]), str(q)
    return lists, text


def simulation(ds: RankingDataset, user, seed: int) -> S.Simulation:
    lists, text = rankings(ds)
    grade = {(str(q), d): float(y) for i, q in enumerate(ds.qids)
             for d, y in zip(ds.doc_ids[ds.query(i)], ds.y[ds.query(i)])}
    truth = {(lid, d): grade.get((text[lid], d), 0.0) for lid, docs in lists.items() for d in docs}
    user = replace(user, max_grade=float(ds.y.max()))
    return S.simulate(lists, text, truth, SESSIONS, model=user, depth=DEPTH, seed=seed)


def searches_of(sim: S.Simulation, queries: np.ndarray) -> S.Simulation:
    """The searches of some query indices (the simulation's)."""
    m = np.isin(sim.query, queries)
    return replace(sim, query=sim.query[m], shown=sim.shown[m], clicks=sim.clicks[m])


def through_node(conn, sim: S.Simulation, tag: str) -> EventLog:
    """The simulation written to UBI indices on the node and read back from them (point in
    time + search_after, as ``ltr judgments click-features`` reads them)."""
    qi, ev = f"bench-debias-queries-{tag}", f"bench-debias-events-{tag}"
    ubi.create_indices(conn, qi, ev, recreate=True)
    ubi.write_documents(conn, S.ubi_documents(sim), qi, ev, chunk=5000)
    conn.client().indices.refresh(index=f"{qi},{ev}")
    log = ubi.read_event_log(conn, {"match_all": {}}, qi, ev)
    conn.client().indices.delete(index=f"{qi},{ev}")
    return log


def of_queries(log: EventLog, texts: set[str]) -> EventLog:
    """The searches (events and records) of some query texts."""
    codes = {c for name, c in log.texts.codes.items() if name in texts}
    records = {q for q, t in log.record_text.items() if t in codes}
    return slice_log(log, np.isin(log.text, np.fromiter(codes, np.int64, len(codes))), records)


def training_sets(log: EventLog, sim: S.Simulation, ds: RankingDataset, train_q: np.ndarray) -> dict:
    """(dataset, weights or None) of each method, from the training queries' searches
    (``log``: all searches, read from the node)."""
    lists = np.flatnonzero(np.isin(_list_query(sim, ds), train_q))
    log = of_queries(log, {str(q) for q in ds.qids[train_q]})
    cd = D.join(log, ds, base="auto", depth=DEPTH)
    naive, ones = D.merge_identical(cd, np.ones(cd.data.n_docs))
    p = D.propensities(cd, "pbm")                   # one EM fit for both powers (``D.ipw``'s weights)
    plain, w1 = D.merge_identical(cd, p ** -1.0)
    damped, w5 = D.merge_identical(cd, p ** -0.5)
    shown = {(sim.texts[i], d) for i in lists for d in sim.lists[i]}
    graded = graded_by(log, ds.subset(train_q), shown)
    return {METHODS[0]: (naive.data, ones), METHODS[1]: (graded, None), METHODS[2]: (plain.data, w1),
            METHODS[3]: (damped.data, w5)}


def graded_by(log, graded: RankingDataset, shown: set) -> RankingDataset:
    """The training queries' shown candidates, labelled by PBM's judgments."""
    jl, _, _ = judge(log, ClickSettings(model="pbm"), "simulated")
    keys = list(zip(graded.qids[graded.row_query].astype(str), graded.doc_ids))
    graded = _rows(graded, np.array([k in shown for k in keys]))
    graded.y = np.array([jl.grades.get((qid_for(str(q)), d), 0.0) for q, d in
                         zip(graded.qids[graded.row_query], graded.doc_ids)])
    return graded


def _list_query(sim: S.Simulation, ds: RankingDataset) -> np.ndarray:
    """The query index (in ``ds``) of each ranked list of the simulation."""
    where = {str(q): i for i, q in enumerate(ds.qids)}
    return np.array([where[t] for t in sim.texts])


def _rows(ds: RankingDataset, keep: np.ndarray) -> RankingDataset:
    """``ds`` with only the rows ``keep`` (queries left without rows dropped)."""
    sizes = np.bincount(ds.row_query[keep], minlength=ds.n_queries)
    has = sizes > 0
    return RankingDataset(X=ds.X[keep], y=ds.y[keep], offsets=np.r_[0, np.cumsum(sizes[has])],
                          qids=ds.qids[has], doc_ids=ds.doc_ids[keep], feature_names=ds.feature_names)


def click_mrr(scores10: np.ndarray, sim: S.Simulation, query_of: np.ndarray) -> float:
    """Mean 1 / (1 + rank) of the clicked documents of ``sim``'s searches (of first-stage
    lists) in the order of ``scores10`` ([queries, 10], the first stage's order along the
    columns); ``query_of``: each list's query index."""
    s = scores10[query_of[sim.query]]
    rank = np.argsort(np.argsort(-s, axis=1, kind="stable"), axis=1)
    return float(np.mean(1.0 / (1.0 + rank[sim.clicks]))) if sim.clicks.any() else 0.0


def scores_matrix(scores: np.ndarray, ds10: RankingDataset) -> np.ndarray:
    out = np.full((ds10.n_queries, DEPTH), -np.inf)
    col = np.arange(ds10.n_docs) - np.repeat(ds10.offsets[:-1], ds10.group_sizes)
    out[ds10.row_query, col] = scores
    return out


def one_seed(ds: RankingDataset, user, seed: int, tag: str) -> dict:
    """Per-query NDCG@10 (windows 10 and 100) and click MRR of every system, one seed."""
    ds10 = top(ds, DEPTH)
    sim = simulation(ds, user, seed)
    log = through_node(connect(), sim, tag)
    query_of = _list_query(sim, ds)
    first = np.array([lid.endswith("#0") for lid in sim.qids])
    fold = np.random.default_rng(seed).permutation(ds.n_queries) % FOLDS
    out: dict = {}
    for f in range(FOLDS):
        test_q, train_q = np.flatnonzero(fold == f), np.flatnonzero(fold != f)
        held = searches_of(sim, np.flatnonzero(np.isin(query_of, test_q) & first))
        sets = training_sets(log, sim, ds, train_q)
        systems = {"first stage": None}
        for m, (data, w) in sets.items():
            for a, make in ALGOS.items():
                data.weights = w
                systems[f"{a}, {m}"] = make(seed).fit(data)
        _score(out, systems, ds, ds10, test_q, (held, query_of))
    return out


def _score(out, systems, ds, ds10, test_q, held) -> None:
    for name, model in systems.items():
        r = out.setdefault(name, {"ndcg10": {}, "ndcg100": {}, "clicks": [], "weight": []})
        for key, window in (("ndcg10", ds10.subset(test_q)), ("ndcg100", ds.subset(test_q))):
            s = -np.arange(window.n_docs, dtype=float) if model is None else model.predict(window.X)
            r[key].update(zip(window.qids, ndcg(s, window.y, window.offsets, K)))
        s10 = -np.tile(np.arange(DEPTH, dtype=float), (ds10.n_queries, 1)) if model is None else \
            scores_matrix(model.predict(ds10.X), ds10)
        r["clicks"].append(click_mrr(s10, *held))
        r["weight"].append(int(held[0].clicks.sum()))


def _timed_seed(path: str, uname: str, seed: int) -> dict:
    """One (user model, seed) in a worker process."""
    t0 = time.perf_counter()
    out = one_seed(load_logged(path), USERS[uname], seed, f"{list(USERS).index(uname)}-{seed}")
    print(f"{uname}, seed {seed}: {time.perf_counter() - t0:.0f}s", flush=True)
    return out


def run(path: str, name: str = "clicks_debias") -> None:
    ds = load_logged(path)
    rows, per_query = [], {}
    tasks = [(u, seed) for u in USERS for seed in SEEDS]
    with ProcessPoolExecutor(min(os.cpu_count() or 1, len(tasks))) as pool:
        done = list(pool.map(_timed_seed, [path] * len(tasks), *zip(*tasks)))
    for uname in USERS:
        per_query[uname] = [r for (u, _), r in zip(tasks, done) if u == uname]
        rows += table_rows(uname, per_query[uname])
    write_table(name, ["user model", "system", "NDCG@10 top-10 rerank (human)", "sd",
                                  "NDCG@10 top-100 rerank (human)", "sd", "click MRR held-out", "sd",
                                  "debiased - best other (top-10)", "p (paired t, queries)"],
                rows, notes(path, ds))
    plot(rows, name)


def table_rows(uname: str, seeds: list[dict]) -> list[list]:
    names = list(seeds[0])
    mean = {n: {k: np.array([np.mean(list(s[n][k].values())) for s in seeds]) for k in ("ndcg10", "ndcg100")}
            for n in names}
    clicks = {n: np.array([np.average(s[n]["clicks"], weights=s[n]["weight"]) for s in seeds]) for n in names}
    rows = []
    for n in names:
        rows.append([uname, n, *_ms(mean[n]["ndcg10"]), *_ms(mean[n]["ndcg100"]), *_ms(clicks[n]), "", ""])
    for a in ALGOS:
        best = max((f"{a}, {other}" for other in OTHERS), key=lambda n: mean[n]["ndcg10"].mean())
        for deb in (f"{a}, {m}" for m in DEBIASED):
            _compare(rows, seeds, deb, best)
    return rows


def _compare(rows: list[list], seeds: list[dict], deb: str, best: str) -> None:
    """Fill ``deb``'s row's last two columns: its mean per-query NDCG@10 minus ``best``'s,
    and the paired t-test's p."""
    qs = sorted(seeds[0][deb]["ndcg10"])
    x = [np.mean([s[deb]["ndcg10"][q] for s in seeds]) for q in qs]
    y = [np.mean([s[best]["ndcg10"][q] for s in seeds]) for q in qs]
    row = next(r for r in rows if r[1] == deb)
    row[8] = f"{np.mean(x) - np.mean(y):+.4f} vs {best.split(', ', 1)[1]}"
    row[9] = round(float(ttest_rel(x, y).pvalue), 4)


def _ms(v: np.ndarray) -> list[float]:
    return [round(float(v.mean()), 4), round(float(v.std()), 4)]


def notes(path: str, ds: RankingDataset) -> list[str]:
    return [f"candidates: {path} ({ds.n_queries} queries, {ds.n_docs} rows, features "
            f"{', '.join(ds.feature_names or [])}); human grades 0..{ds.y.max():g} as the simulator's truth",
            f"{SESSIONS:,} simulated searches per seed, each showing one ranker's top {DEPTH} of a query "
            f"({', '.join(RANKERS)}; the last two: the candidates sorted by that feature); "
            f"{len(SEEDS)} seeds (mean and sd over seeds), {FOLDS}-fold CV over queries per seed; "
            "each seed's searches written to UBI indices on the node and read back (PIT) for training; "
            "simulator: attractiveness 0.05 + 0.95 (2^g - 1)/(2^max - 1), stop after a click 0.2 + 0.6 g/max",
            "models: linear (NumPy, 50 epochs, Adam 1e-3; with group weights the last epoch is kept) and "
            "LambdaMART (library defaults, 300 trees); naive and debiased train on the same merged "
            "per-search groups, debiased with weights max(theta_PBM(rank), 0.1) ** -power (ltr train's "
            "default: power 1 for linear and networks, 0.5 for trees); click-model grades: PBM judgments "
            "of every shown pair",
            "NDCG@10 on the human grades of the held-out fold's queries, IDCG over the reranked window; "
            "click MRR: the held-out queries' searches, mean 1/(1 + rank) of a clicked document among "
            "the 10 shown in the system's order",
            "last two columns: each debiased model minus the better (by mean top-10 NDCG) of naive "
            "clicks and click-model grades for the same algorithm; paired t-test over queries, "
            "per-query NDCG averaged over seeds"]


def plot(rows, name: str) -> None:
    plt = pyplot()
    fig, axes = plt.subplots(1, len(USERS), figsize=(12, 4.5), sharey=True)
    for ax, uname in zip(np.atleast_1d(axes), USERS):
        rs = [r for r in rows if r[0] == uname]
        ax.barh(range(len(rs)), [r[2] for r in rs], xerr=[r[3] for r in rs])
        ax.set_yticks(range(len(rs)), [r[1] for r in rs], fontsize=7)
        ax.set_xlim(min(r[2] for r in rs) - 0.05, max(r[2] for r in rs) + 0.03)
        ax.set_title(f"NDCG@10 (human), top-10 rerank\n{uname}", fontsize=9)
    finish(fig, name)


def main(argv=None) -> None:
    args = sys.argv[1:] if argv is None else argv
    if len(args) not in (1, 2):
        sys.exit("usage: python -m benchmarks.clicks_debias CANDIDATES.txt [NAME] (a logged candidates "
                 "file with its .json sidecar: `ltr log --candidates 100`; results in "
                 "benchmarks/results/NAME.*, default clicks_debias)")
    run(*args)


if __name__ == "__main__":
    main()
