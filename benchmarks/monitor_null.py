"""The drift check's false alarms on real logged data (``ltr_toolkit.evaluation.drift``):
how often an unchanged index is flagged when the judged queries change.

An unchanged index re-logged gives byte-identical rows (``benchmarks/monitor.py`` checks
it), so the variation a monitor must tolerate is that of the judged queries themselves
(issue 59's Why 1: a job whose judgment list grows). Cranfield is logged once (the shipped
feature set, the first stage's top 100 of its judged queries, on the OpenSearch node,
index ``mon-cranfield``), then split at random ``DRAWS`` times into two disjoint halves of
its queries, a reference and a new snapshot, each pair checked as ``ltr monitor`` checks
it (thresholds calibrated on the pair's own queries); the share of pairs with any feature
flagged, with its Wilson 95% interval, and each feature's flag rate go into
``benchmarks/results/monitor_null.md``.

    python -m benchmarks.monitor_null [LOGGED NAME]

With a logged file (e.g. the catalogue of ``benchmarks/monitor.py``, with a numeric
popularity feature): the same on its queries, into ``benchmarks/results/monitor_null_NAME.md``.
"""

from __future__ import annotations

import numpy as np

from benchmarks._live import connect, workdir
from benchmarks._report import write_table
from benchmarks.monitor_sim import wilson
from ltr_toolkit.data.svmlight import load_logged
from ltr_toolkit.evaluation import drift
from ltr_toolkit.pipeline.monitor import DRIFT_ALPHA

INDEX = "mon-cranfield"
DRAWS = 200


def ensure_index(conn, index: str = INDEX, docs=None, **options) -> None:
    """Cranfield (or ``docs``) in ``index``, made when missing (``options``: to
    ``index_documents``: another analyzer, other fields)."""
    from ltr_toolkit.datasets import cranfield
    from ltr_toolkit.indexing.documents import index_documents
    if not conn.client().indices.exists(index=index):
        index_documents(conn, index, cranfield.documents() if docs is None else docs, **options)


def featureset(conn, path=None) -> str:
    """The shipped Cranfield feature set (or ``path``) uploaded; its stored name."""
    from ltr_toolkit.data.featuresets import load_featureset
    from ltr_toolkit.datasets import cranfield
    from ltr_toolkit.stores import store as st
    st.init_store(conn, None)
    name, _ = st.upload_featureset_versioned(conn, load_featureset(path or cranfield.FEATURE_SET), None)
    return name


def log(conn, index: str, fs: str, out, jl=None, fields=("title", "abstract"), window: int = 100) -> dict:
    """``ltr log --window`` of the Cranfield judgments (or ``jl``) into ``out`` (fresh)."""
    from ltr_toolkit.datasets import cranfield
    from ltr_toolkit.features.candidates import judged_candidates
    from ltr_toolkit.features.featurelog import log_features
    from ltr_toolkit.query.firststage import FirstStage
    for p in (out, out.with_suffix(out.suffix + ".json"), out.with_suffix(out.suffix + ".ckpt.json")):
        p.unlink(missing_ok=True)
    stage = FirstStage.from_fields(tuple(fields))
    jl = cranfield.judgments() if jl is None else jl
    jl, info, budget = judged_candidates(conn, index, jl, fs, stage, None, window)
    return log_features(conn, jl, fs, index, out, None, 25, None, stage, info, max_terms=budget)


def halves(ds, seed: int):
    """Two disjoint random halves of ``ds``'s queries: (X, offsets) each."""
    order = np.random.default_rng(seed).permutation(ds.n_queries)
    out = []
    for part in (order[: ds.n_queries // 2], order[ds.n_queries // 2:]):
        sub = ds.subset(np.sort(part))
        out.append((sub.X.astype(np.float64), sub.offsets))
    return out


def false_alarms(ds, names: list[str]) -> tuple[int, np.ndarray]:
    """(pairs with any feature flagged, per feature the pairs it was flagged in)."""
    per = np.zeros(len(names), np.int64)
    alarms = 0
    for d in range(DRAWS):
        (a, oa), (b, ob) = halves(ds, d)
        flags = np.array([f["flag"] != "ok" for f in
                          drift.feature_drift(a, b, names, oa, ob, alpha=DRIFT_ALPHA,
                                              seed=10_000 + d)["features"]])
        per += flags
        alarms += bool(flags.any())
    return alarms, per


def report(path, name: str) -> None:
    ds = load_logged(path)
    names = ds.meta["sidecar"]["feature_names"]
    alarms, per = false_alarms(ds, names)
    lo, hi = wilson(alarms, DRAWS)
    rows = [[n, f"{k / DRAWS:.1%}"] for n, k in zip(names, per)]
    notes = [f"{path}: {ds.n_queries} queries, {ds.n_docs} rows, {len(names)} features",
             f"{DRAWS} random splits into two disjoint halves of its queries (seeds 0..{DRAWS - 1}), "
             "each checked as ltr monitor checks it: thresholds calibrated on its own queries "
             f"(drift.feature_drift at the monitor's drift level {DRIFT_ALPHA:g}, its null splits "
             "seeded apart from the halves')",
             f"whole feature set flagged in {alarms} of {DRAWS} = {alarms / DRAWS:.1%} "
             f"(Wilson 95% [{lo:.1%}, {hi:.1%}]; target <= {DRIFT_ALPHA:.1%})"]
    write_table(name, ["feature", "flagged in null pairs"], rows, notes)
    print("\n".join(notes))


def main() -> None:
    conn = connect("opensearch")
    ensure_index(conn)
    path = workdir() / "mon-null.txt"
    log(conn, INDEX, featureset(conn), path)
    report(path, "monitor_null")


if __name__ == "__main__":
    import sys
    if len(sys.argv) > 1:
        report(sys.argv[1], f"monitor_null_{sys.argv[2] if len(sys.argv) > 2 else 'catalogue'}")
    else:
        main()
