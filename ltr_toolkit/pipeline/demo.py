"""The main job end to end on the embedded default: the local node (or LTR_URL), the
bundled Cranfield collection, its feature set, and a live 5-fold cross-validation of
rerankers against the first stage (BM25 over title and abstract) over all 225 judged
queries: candidates logged from the first stage's top 100, settings chosen and models
trained per fold, uploaded (versioned, deleted at the end), and every query reranked by
a model that never saw it; the report ends with the recommendation."""

from __future__ import annotations

import time
from pathlib import Path

from ..transport import client as cl
from ..stores import store as st
from ..query.firststage import FirstStage
from ..indexing.documents import CORPUS_VERSION, corpus_version, index_documents
from ..indexing.vectors import index_vectors, stale_vectors
from .crossval import cross_validate
from ..evaluation.html import write_html
from ..serving.explain import doc_titles
from ..datasets import cranfield
from ..errors import UserError
from ..data.featuresets import load_featureset

INDEX = "cranfield"
FIELDS = ("title", "abstract")
#: The rerankers the demo cross-validates, each with the toolkit's defaults: its choice
#: (settings, blend with the first stage, or keeping the first stage) made by inner
#: cross-validation in each training fold, as for any user's collection (nothing here is
#: tuned to Cranfield).
ALGOS = {"linear": None, "lambdarank-nn": None, "lambdamart": None}


def run_demo(conn, workdir, log=print, seed: int = 42, k: int = 10, folds: int = 5,
             window: int = 100, recreate: bool = False, algos: dict | None = None,
             jobs: int | None = None, budget: float | None = None) -> dict:
    workdir = Path(workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    steps: dict[str, float] = {}
    t = time.monotonic()

    def step(name: str, msg: str) -> None:
        nonlocal t
        steps[name] = round(time.monotonic() - t, 2)
        log(f"[{steps[name]:6.1f}s] {msg}")
        t = time.monotonic()

    version = cl.check_ltr(conn)
    st.init_store(conn, None)
    step("plugin", f"LTR plugin {version} at {conn.display_url}; default store ready")
    have = corpus_version(conn, INDEX)
    why = (have or "no corpus marker") if have != CORPUS_VERSION else stale_vectors(conn, INDEX)
    if why:
        if have is not None and not recreate:
            raise UserError(f"index {INDEX} exists but was not made by this version of the demo "
                            f"({why})", "pass --recreate to delete and re-index it")
        res = index_documents(conn, INDEX, cranfield.documents(), recreate=recreate)
        vec = res.get("vectors")
        step("index", f"indexed {res['count']} Cranfield documents ({res['analyzer']} analyzer"
             + (f"; vectors by {vec['encoder']['name']})" if vec else f"; {res['no_vectors']})"))
    else:
        step("index", f"index {INDEX} is up to date")
    semantic = index_vectors(conn, INDEX) is not None
    fs = load_featureset(cranfield.FEATURE_SET if semantic else cranfield.LEXICAL_FEATURE_SET)
    fs_name, what = st.upload_featureset_versioned(conn, fs)
    step("featureset", f"feature set {fs_name} ({len(fs['features'])} features): {what}")
    report = cross_validate(conn, INDEX, cranfield.judgments(), fs_name, algos or ALGOS, workdir,
                            folds=folds, k=k, window=window, first_stage=FirstStage.from_fields(FIELDS),
                            seed=seed, name_prefix="cranfield", baseline_name="bm25",
                            log=lambda m: step("cv", m), jobs=jobs, budget=budget, explain=True)
    step("evaluate", "cross-validated evaluation done")
    ids = {d for lists in report["top"].values() for top in lists.values() for d in top}
    html = write_html(workdir / "report.html", report, cranfield.judgments(),
                      doc_titles(conn, INDEX, ids))
    step("report", f"report with contributions: {html}")
    report["html"] = str(html)
    report["steps_seconds"] = steps
    report["workdir"] = str(workdir)
    report["featureset"] = fs_name
    return report
