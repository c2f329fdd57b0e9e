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


def connect() -> cl.Connection:
    url = os.environ.get("LTR_URL")
    if not url:
        from ltr_toolkit.transport import localnode
        info, _ = localnode.start()
        url = info.url
    conn = cl.Connection(url=url, timeout=120)
    cl.check_ltr(conn)
    return conn


def prepare(conn) -> str:
    """Index (re-made when older), default store, feature set; returns the set's name."""
    if corpus_version(conn, INDEX) != CORPUS_VERSION or stale_vectors(conn, INDEX):
        index_documents(conn, INDEX, cranfield.documents(), recreate=True)
    st.init_store(conn, None)
    name, _ = st.upload_featureset_versioned(conn, load_featureset(cranfield.FEATURE_SET))
    return name


def workdir() -> Path:
    d = Path(os.environ.get("LTR_BENCH_DIR", "/tmp/ltr-bench"))
    d.mkdir(parents=True, exist_ok=True)
    return d
