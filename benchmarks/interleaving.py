"""Interleaving vs an A/B test of CTR (issue 32): ``python -m benchmarks.interleaving``.

Rankers: first stages served by the node on the Cranfield index (``bench-cranfield``):
BM25 over title and abstract (the toolkit's default first stage), over the abstract
alone and over the title alone; each judged query's top 10. Their NDCG@10 on the human
grades is the truth an online test should find. Every pair of rankers whose NDCG@10
differs by at least 0.01 is tested: 200 simulated experiments each, users drawn from
the click simulator (``ltr_toolkit.clicks.simulate``; with position bias 1/(r+1), and
without it), a query drawn uniformly per impression.

* interleaving: each impression shows a team-draft interleaving (a fresh coin per
  round); the experiment's winner is the team with more won impressions after N
  impressions (and, stricter, only when the sign test gives p < 0.05);
* debiased interleaving (``ltr evaluate interleaving``'s debiased credit): the same
  impressions, each click weighted by 1 / the examination probability of its rank under
  the PBM fitted by EM on those N impressions alone (clipped at 0.1); the winner has the
  higher mean credit per impression (stricter: the z-test's p < 0.05);
* A/B: the same N impressions split in two halves, one ranker each; the winner has the
  higher clicks per impression.

Correct = the winner is the ranker of higher NDCG@10. Table + PNG in
benchmarks/results/ (interleaving.*). Needs a node with the LTR plugin.
"""

from __future__ import annotations

import itertools

import numpy as np

from ltr_toolkit.clicks.debias import DEFAULT_CLIP
from ltr_toolkit.clicks.interleaving import debiased_credit
from ltr_toolkit.clicks.simulate import UserModel, sample_clicks
from ltr_toolkit.data.judgments import JudgmentList
from ltr_toolkit.datasets import cranfield
from ltr_toolkit.evaluation.report import run_metrics
from ltr_toolkit.query.firststage import FirstStage
from ltr_toolkit.query.requests import msearch_ids
from ltr_toolkit.rank.interleave import credit_test, outcomes, tally, team_draft

from ._live import INDEX, connect, prepare
from ._report import finish, pyplot, write_table

RANKERS = {"title+abstract": ("title", "abstract"), "abstract": ("abstract",), "title": ("title",)}
EXPERIMENTS = 200
GRID = (100, 200, 500, 1000, 2000, 5000, 10000, 20000)
POOL = 64          # team-draft lists drawn per query (10 results: at most 32 distinct)
USERS = {"position bias 1/(r+1)": UserModel(), "no position bias": UserModel(eta=0.0)}


def rankings(conn) -> tuple[list[str], dict[str, list[list[str]]], JudgmentList]:
    """(qids, ranker -> top 10 per query, the human judgments)."""
    jl = cranfield.judgments()
    qids = jl.judged_qids()
    params = [jl.query_params(q) for q in qids]
    lists = {name: [r or [] for r in msearch_ids(conn, INDEX, params, FirstStage.from_fields(f), 10)]
             for name, f in RANKERS.items()}
    return qids, lists, jl


def ndcg(lists: list[list[str]], qids: list[str], jl: JudgmentList, k: int = 10) -> np.ndarray:
    """Per query NDCG@k of ranked lists against the human grades (``ltr evaluate``'s)."""
    return run_metrics(lists, qids, jl, k)[f"ndcg@{k}"]


def _grade_rows(lists, qids, grades) -> np.ndarray:
    g = np.zeros((len(lists), 10))
    for i, ids in enumerate(lists):
        g[i, :len(ids)] = [grades.get((qids[i], d), 0.0) for d in ids[:10]]
    return g


def pools(a, b, qids, grades, rng):
    """Per query, POOL team-draft interleavings: grades [query, POOL, 10], team b?, shown,
    document codes."""
    g = np.zeros((len(qids), POOL, 10))
    tb = np.zeros((len(qids), POOL, 10), bool)
    shown = np.zeros((len(qids), POOL, 10), bool)
    code = np.zeros((len(qids), POOL, 10), np.int32)
    docs: dict[str, int] = {}
    for i, q in enumerate(qids):
        for j in range(POOL):
            ids, teams = team_draft(a[i], b[i], 10, rng)
            g[i, j, :len(ids)] = [grades.get((q, d), 0.0) for d in ids]
            tb[i, j, :len(ids)] = [t == "b" for t in teams]
            shown[i, j, :len(ids)] = True
            code[i, j, :len(ids)] = [docs.setdefault(d, len(docs)) for d in ids]
    return g, tb, shown, code


def debiased(q, shown, code, clicks, tb) -> tuple[int, bool]:
    """The debiased credit's verdict over these impressions (+1 a, -1 b) and whether its
    z-test is significant: ``ltr evaluate interleaving``'s credit, PBM propensities fitted
    on the impressions themselves (``q``: each impression's query)."""
    s, r = np.nonzero(shown)
    w, _ = debiased_credit(q, s, code[s, r], tb[s, r], clicks[s, r], "pbm", DEFAULT_CLIP)
    test = credit_test(w[:, 0], w[:, 1])
    return int(np.sign(test.credit_a - test.credit_b)), test.winner() is not None


def experiment(pool, ga, gb, user, rng) -> dict:
    """One experiment of max(GRID) impressions: per N, the interleaving's verdict (+1 a,
    -1 b, 0 none), whether the sign test was significant, A/B's verdict, the debiased
    credit's verdict and whether its z-test was significant."""
    g, tb, shown, code = pool
    n = max(GRID)
    q, j = rng.integers(0, g.shape[0], n), rng.integers(0, POOL, n)
    clicks = sample_clicks(g[q, j], shown[q, j], user, rng)
    sh, cd, team = shown[q, j], code[q, j], tb[q, j]
    won = outcomes((clicks & ~tb[q, j]).sum(1), (clicks & tb[q, j]).sum(1))
    qa, qb = rng.integers(0, ga.shape[0], n // 2), rng.integers(0, gb.shape[0], n // 2)
    ca = sample_clicks(ga[qa], ga[qa] >= 0, user, rng).sum(1)
    cb = sample_clicks(gb[qb], gb[qb] >= 0, user, rng).sum(1)
    out = {}
    for m in GRID:
        t = tally(won[:m])
        out[m] = (np.sign(t.wins_a - t.wins_b), t.p_value < 0.05,
                  np.sign(ca[:m // 2].mean() - cb[:m // 2].mean()),
                  *debiased(q[:m], sh[:m], cd[:m], clicks[:m], team[:m]))
    return out


def run_pair(a, b, sign, qids, grades, seed) -> list[list]:
    rows = []
    for uname, user in USERS.items():
        rng = np.random.default_rng(seed)
        pool = pools(a, b, qids, grades, rng)
        ga, gb = _grade_rows(a, qids, grades), _grade_rows(b, qids, grades)
        res = [experiment(pool, ga, gb, user, rng) for _ in range(EXPERIMENTS)]
        for m in GRID:
            v = np.array([r[m] for r in res], float)
            rows.append([uname, m, float((v[:, 0] == sign).mean()),
                         float(((v[:, 0] == sign) & (v[:, 1] > 0)).mean()),
                         float(((v[:, 0] == -sign) & (v[:, 1] > 0)).mean()),
                         float((v[:, 2] == sign).mean()),
                         float((v[:, 3] == sign).mean()),
                         float(((v[:, 3] == sign) & (v[:, 4] > 0)).mean()),
                         float(((v[:, 3] == -sign) & (v[:, 4] > 0)).mean())])
    return rows


def needed(rows, col) -> int | None:
    """The fewest impressions (of the grid) with at least 95% correct."""
    ok = [r[1] for r in rows if r[col] >= 0.95]
    return min(ok) if ok else None


def main() -> None:
    conn = connect()
    prepare(conn)
    qids, lists, jl = rankings(conn)
    grades = jl.grades
    nd = {k: ndcg(v, qids, jl) for k, v in lists.items()}
    shallow = {name: [round(ndcg(v, qids, jl, k).mean(), 4) for k in (1, 3)] for name, v in lists.items()}
    table, curves = [], {}
    for x, y in itertools.combinations(RANKERS, 2):
        diff = nd[x].mean() - nd[y].mean()
        if abs(diff) < 0.01:
            continue
        rows = run_pair(lists[x], lists[y], 1 if diff > 0 else -1, qids, grades, seed=len(table))
        curves[(x, y)] = rows
        for r in rows:
            table.append([f"{x} vs {y}", round(nd[x].mean(), 4), round(nd[y].mean(), 4),
                          round(abs(diff), 4), *r])
    write_table("interleaving", ["pair", "NDCG@10 a", "NDCG@10 b", "|diff|", "users", "impressions",
                                 "interleaving correct", "interleaving correct, p<0.05",
                                 "interleaving wrong, p<0.05", "A/B CTR correct", "debiased correct",
                                 "debiased correct, p<0.05", "debiased wrong, p<0.05"], table, notes(curves, shallow))
    plot(curves)


def notes(curves, shallow) -> list[str]:
    out = [f"{EXPERIMENTS} experiments per pair and user model; correct = the winner after N "
           "impressions is the ranker of higher NDCG@10 on Cranfield's human grades (225 queries, "
           "each ranker's top 10 from the node); 'p<0.05': also significant by the sign test over "
           "impressions with a winner (debiased: by the z-test of the mean credit); debiased: clicks "
           "weighted by 1 / PBM examination (fitted on the N impressions, clipped at 0.1); A/B: N/2 impressions per ranker, clicks per impression"]
    for (x, y), rows in curves.items():
        for u in USERS:
            sub = [r for r in rows if r[0] == u]
            out.append(f"{x} vs {y}, {u}: 95% correct from {needed(sub, 2)} impressions by "
                       f"interleaving (counted wins), {needed(sub, 6)} by debiased interleaving, "
                       f"{needed(sub, 5)} by A/B (None: not within {max(GRID)})")
    out.append("NDCG@1 / NDCG@3 of each ranker (the top the simulated users mostly see): " +
               "; ".join(f"{name} {a} / {b}" for name, (a, b) in shallow.items()))
    return out


def plot(curves) -> None:
    plt = pyplot()
    fig, axes = plt.subplots(1, len(curves), figsize=(5 * len(curves), 4), squeeze=False)
    for ax, ((x, y), rows) in zip(axes[0], curves.items()):
        for u, style in zip(USERS, ("-", "--")):
            sub = [r for r in rows if r[0] == u]
            ax.plot([r[1] for r in sub], [r[2] for r in sub], "o" + style, label=f"interleaving, {u}")
            ax.plot([r[1] for r in sub], [r[6] for r in sub], "^" + style, label=f"debiased interleaving, {u}")
            ax.plot([r[1] for r in sub], [r[5] for r in sub], "s" + style, label=f"A/B CTR, {u}")
        ax.axhline(0.95, color="grey", lw=0.8)
        ax.set_xscale("log")
        ax.set_title(f"{x} vs {y}", fontsize=9)
        ax.set_xlabel("impressions")
        ax.set_ylabel("experiments naming the better ranker")
    axes[0][0].legend(fontsize=7)
    finish(fig, "interleaving")


if __name__ == "__main__":
    main()
