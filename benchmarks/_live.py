"""Shared set-up of the live benchmarks: a node with the LTR plugin, the Cranfield index
(``bench-cranfield``), the demo's feature set, and first-stage candidates of the train split."""

from __future__ import annotations

import os
from pathlib import Path

from ltr_toolkit.transport import client as cl
from ltr_toolkit.stores import store as st
from ltr_toolkit.query.firststage import FirstStage
from ltr_toolkit.indexing.documents import CORPUS_VERSION, corpus_version, index_documents
from ltr_toolkit.indexing.vectors import stale_vectors
from ltr_toolkit.datasets import cranfield
from ltr_toolkit.data.featuresets import load_featureset

INDEX = "bench-cranfield"
STAGE = FirstStage.from_fields(("title", "abstract"))


def connect(engine: str | None = None) -> cl.Connection:
    """The benchmark's node: ``LTR_URL``, else the local node (started when none runs).
    With ``engine`` ("opensearch" | "elasticsearch"): ``LTR_<ENGINE>_URL``, else that
    engine's local node (a running one is used as it is, never restarted); the node is
    checked to be of that engine."""
    url = os.environ.get(f"LTR_{engine.upper()}_URL" if engine else "LTR_URL")
    if not url:
        from ltr_toolkit.localnode import process
        info, _ = process.start(engine=engine)
        url = info.url
    conn = cl.Connection(url=url, timeout=120)
    cl.check_ltr(conn)
    if engine:
        from ltr_toolkit.transport.engine import detect
        found = detect(conn)
        if found.name != engine:
            raise SystemExit(f"{conn.display_url} is {found.label}, not {engine}")
    return conn


def prepare(conn, store: str | None = None) -> str:
    """Index (re-made when older), the store (None: the default one), feature set; returns
    the set's name."""
    if corpus_version(conn, INDEX) != CORPUS_VERSION or stale_vectors(conn, INDEX):
        index_documents(conn, INDEX, cranfield.documents(), recreate=True)
    st.init_store(conn, store)
    name, _ = st.upload_featureset_versioned(conn, load_featureset(cranfield.FEATURE_SET), store)
    return name


def workdir() -> Path:
    d = Path(os.environ.get("LTR_BENCH_DIR", "/tmp/ltr-bench"))
    d.mkdir(parents=True, exist_ok=True)
    return d
