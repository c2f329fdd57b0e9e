"""The null variation of the drift statistics (``ltr_toolkit.evaluation.drift``): what
PSI and KS reach when nothing changed.

An unchanged index re-logged gives byte-identical rows (``benchmarks/monitor.py`` checks
it), so the variation a monitor must tolerate is that of the judged queries themselves.
Cranfield is logged once (the shipped feature set, the first stage's top 100 of the 135
queries, on the OpenSearch node, index ``mon-cranfield``), then pairs of independent
bootstrap resamples of its queries (with replacement) are compared: the first
``DRAWS`` pairs calibrate (the pooled quantiles of the scaled statistics, over every
feature), the next ``DRAWS`` pairs validate (how often the whole feature set is ``ok``
with the thresholds the calibration gives). The table goes into
``benchmarks/results/monitor_null.md``; its quantiles are what
``drift.NULL_QUANTILES`` records.

    python -m benchmarks.monitor_null
    python -m benchmarks.monitor_null --validate LOGGED [NAME]

``--validate``: the recorded thresholds (``drift.NULL_QUANTILES``, calibrated on
Cranfield) held against another logged file's null (e.g. the catalogue of
``benchmarks/monitor.py``, with a numeric popularity feature): how often its whole
feature set is ``ok`` over ``DRAWS`` pairs of bootstrap resamples, and each feature's
flag rate; into ``benchmarks/results/monitor_null_NAME.md``.
"""

from __future__ import annotations

import numpy as np

from benchmarks._live import connect, workdir
from benchmarks._report import write_table
from ltr_toolkit.data.svmlight import load_logged
from ltr_toolkit.evaluation import drift

INDEX = "mon-cranfield"
DRAWS = 200
LEVELS = (0.9, 0.95, 0.99, 0.995, 0.999)


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


def resample_rows(offsets: np.ndarray, picks: np.ndarray) -> np.ndarray:
    """The row indices of the queries ``picks`` (repeats kept), in that order."""
    starts, sizes = offsets[picks], np.diff(offsets)[picks]
    first = np.repeat(np.cumsum(sizes) - sizes, sizes)
    return np.repeat(starts, sizes) + np.arange(sizes.sum()) - first


def null_draws(X: np.ndarray, offsets: np.ndarray, draws: int, seed: int) -> np.ndarray:
    """[draws, 2, features]: PSI and KS between two independent bootstrap resamples of the
    queries, scaled (``drift.scaled``)."""
    q = len(offsets) - 1
    out = np.empty((draws, 2, X.shape[1]))
    for d in range(draws):
        rng = np.random.default_rng([seed, d])
        a = X[resample_rows(offsets, rng.integers(0, q, q))]
        b = X[resample_rows(offsets, rng.integers(0, q, q))]
        stats = [(drift.psi(a[:, j], b[:, j]), drift.ks(a[:, j], b[:, j])) for j in range(X.shape[1])]
        p, k = drift.scaled(*np.array(stats).T, q, q)
        out[d] = p, k
    return out


def calibrate(cal: np.ndarray) -> dict:
    """``drift.NULL_QUANTILES`` from calibration draws: pooled over features."""
    return {"levels": LEVELS,
            "psi": tuple(float(v) for v in np.quantile(cal[:, 0].ravel(), LEVELS)),
            "ks": tuple(float(v) for v in np.quantile(cal[:, 1].ravel(), LEVELS))}


def ok_rate(val: np.ndarray, null: dict, n_features: int) -> float:
    """The share of validation draws in which every feature is under both thresholds
    (scaled units: the thresholds at one query a side, times 2, undone)."""
    th = drift.thresholds(n_features, 1, 1, null=null)
    ok = (val[:, 0] <= th.psi / 2).all(axis=1) & (val[:, 1] <= th.ks / np.sqrt(2)).all(axis=1)
    return float(ok.mean())


def main() -> None:
    conn = connect("opensearch")
    ensure_index(conn)
    path = workdir() / "mon-null.txt"
    log(conn, INDEX, featureset(conn), path)
    ds = load_logged(path)
    names = ds.meta["sidecar"]["feature_names"]
    X = ds.X.astype(np.float64)
    cal = null_draws(X, ds.offsets, DRAWS, seed=1)
    val = null_draws(X, ds.offsets, DRAWS, seed=2)
    null = calibrate(cal)
    th = drift.thresholds(len(names), ds.n_queries, ds.n_queries, null=null)
    rows = [[n, *np.quantile(cal[:, 0, j], (0.5, 0.95, 0.99)), cal[:, 0, j].max(),
             *np.quantile(cal[:, 1, j], (0.5, 0.95, 0.99)), cal[:, 1, j].max()]
            for j, n in enumerate(names)]
    rows.append(["pooled", *np.quantile(cal[:, 0], (0.5, 0.95, 0.99)), cal[:, 0].max(),
                 *np.quantile(cal[:, 1], (0.5, 0.95, 0.99)), cal[:, 1].max()])
    rate = ok_rate(val, null, len(names))
    notes = [f"Cranfield, {ds.n_queries} queries, {ds.n_docs} rows (top 100 of the first stage), "
             f"{len(names)} features, OpenSearch node, index {INDEX}",
             f"{DRAWS} calibration pairs of independent bootstrap resamples of the queries (seed 1), "
             f"{DRAWS} validation pairs (seed 2); statistics scaled: PSI / (2/Q), KS / sqrt(2/Q), Q = {ds.n_queries}",
             f"NULL_QUANTILES = {null!r}",
             f"thresholds at Bonferroni level 1 - 0.05/(2x{len(names)}) = {th.level:.4f}, "
             f"{ds.n_queries} queries a side: PSI {th.psi:.4f}, KS {th.ks:.4f}",
             f"validation: the whole feature set ok in {rate:.1%} of {DRAWS} null draws (target >= 95%)"]
    write_table("monitor_null", ["feature", "psi p50", "psi p95", "psi p99", "psi max",
                                 "ks p50", "ks p95", "ks p99", "ks max"], rows, notes)
    print("\n".join(notes))


def validate(path, name: str = "catalogue") -> None:
    ds = load_logged(path)
    names = ds.meta["sidecar"]["feature_names"]
    val = null_draws(ds.X.astype(np.float64), ds.offsets, DRAWS, seed=3)
    null = drift.NULL_QUANTILES
    rate = ok_rate(val, null, len(names))
    th = drift.thresholds(len(names), 1, 1, null=null)
    flag = (val[:, 0] > th.psi / 2) | (val[:, 1] > th.ks / np.sqrt(2))
    rows = [[n, f"{flag[:, j].mean():.1%}"] for j, n in enumerate(names)]
    notes = [f"{path}: {ds.n_queries} queries, {ds.n_docs} rows, {len(names)} features",
             f"{DRAWS} pairs of independent bootstrap resamples of its queries (seed 3), the "
             "thresholds recorded from Cranfield's calibration (drift.NULL_QUANTILES), not refitted",
             f"validation: the whole feature set ok in {rate:.1%} of {DRAWS} null draws (target >= 95%)"]
    write_table(f"monitor_null_{name}", ["feature", "flagged in null draws"], rows, notes)
    print("\n".join(notes))


if __name__ == "__main__":
    import sys
    if sys.argv[1:2] == ["--validate"]:
        validate(sys.argv[2], *sys.argv[3:4])
    else:
        main()
