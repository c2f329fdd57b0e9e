"""Indexing resumes after a kill (issue 60, Deliver 3): the vectors are kept per batch of
texts as they are encoded, so a run killed part-way, run again, encodes at most one
batch again and gives the same vectors bit for bit; an index whose load did not finish
is marked so, and never taken for a complete one."""

from __future__ import annotations

import hashlib
import json
import signal
import subprocess
import sys
import textwrap
import time
import uuid

import numpy as np
import pytest

from ltr_toolkit.encoders import PROBE_TEXT, Encoder
from ltr_toolkit.indexing import vectors as vx
from conftest import ROOT


class Hashed(Encoder):
    """A small fake encoder (16 dimensions from each text's sha256) that counts the
    collection texts it encodes (not the probe text of the vectors' key)."""
    name, dim = "hashed", 16

    def __init__(self):
        self.encoded = 0

    def _encode(self, texts, kind):
        self.encoded += sum(t != PROBE_TEXT for t in texts)
        return np.array([np.frombuffer(hashlib.sha256(t.encode()).digest()[:16], np.uint8)
                         for t in texts], dtype=np.float32) - 127.5

    @property
    def sha256(self):
        return "hashed-encoder-1"


class Killed(Exception):
    pass


def _killed_after(n: int):
    """``encode_batches`` that encodes batches here and is killed while on the n+1-th
    (it was encoded, never kept)."""
    def encode(encoder, todo):
        for i, done in enumerate(vx.encode_here(encoder, todo)):
            if i == n:
                raise Killed
            yield done
    return encode


def test_a_killed_encoding_resumes_at_its_batch_with_the_same_vectors(tmp_path, monkeypatch):
    texts = [f"item {i} cordless drill {i % 7} with case and {i % 3} batteries" for i in range(1000)]
    batches = -(-len(texts) // vx.BATCH)
    monkeypatch.setenv("LTR_CACHE", str(tmp_path / "whole"))
    whole_run = Hashed()
    expect = vx.document_vectors(whole_run, texts)           # uninterrupted
    assert whole_run.encoded == len(texts)

    monkeypatch.setenv("LTR_CACHE", str(tmp_path / "killed"))
    enc = Hashed()
    with pytest.raises(Killed):
        vx.document_vectors(enc, texts, encode_batches=_killed_after(3))
    assert enc.encoded == 4 * vx.BATCH                     # three kept, the fourth lost
    enc.encoded, seen = 0, []
    got = vx.document_vectors(enc, texts, progress=seen.append)
    assert enc.encoded == len(texts) - 3 * vx.BATCH         # only the batches not kept
    assert seen[0] == 3 * vx.BATCH and seen[-1] == len(texts) and len(seen) == batches - 3 + 1
    assert got.dtype == expect.dtype and np.array_equal(got, expect)    # bit for bit
    enc.encoded = 0
    assert np.array_equal(vx.document_vectors(enc, texts), expect) and enc.encoded == 0


def test_the_whole_lists_kept_vectors_are_still_found(tmp_path, monkeypatch):
    """Vectors kept under the whole list's key (the shipped Cranfield vectors, an earlier
    version's cache) are used as they are."""
    monkeypatch.setenv("LTR_CACHE", str(tmp_path))
    enc = Hashed()
    texts = [f"text {i}" for i in range(300)]
    kept = np.arange(300 * 16, dtype=np.float32).reshape(300, 16)
    path = tmp_path / "vectors" / f"{vx.vectors_key(enc, texts)}.npy"
    path.parent.mkdir(parents=True)
    np.save(path, kept)
    assert np.array_equal(vx.document_vectors(enc, texts), kept) and enc.encoded == 0


# ------------------------------------------------------------------------- live: the CLI

ENCODER = """
    import os, time, zlib
    import numpy as np
    def encode(texts):
        mine = [t for t in texts if t.startswith("item")]
        if mine:
            with open(os.environ["ENCODED_LOG"], "a") as fh:
                fh.write(f"{len(mine)}\\n")
            time.sleep(0.01 * len(mine))
        return np.array([[zlib.crc32(f"{t}/{k}".encode()) % 101 - 50 for k in range(8)]
                         for t in texts], dtype=np.float32)
"""


@pytest.fixture
def catalogue(tmp_path):
    (tmp_path / "count_enc.py").write_text(textwrap.dedent(ENCODER))
    src = tmp_path / "p.jsonl"
    src.write_text("".join(json.dumps({"id": f"p{i}", "title": f"item {i} drill {i % 9}",
                                       "description": f"a {i % 4}-speed drill with case {i % 11}"}) + "\n"
                           for i in range(600)))
    return src


def _env(tmp_path, name: str) -> dict:
    return {"PYTHONPATH": str(tmp_path), "LTR_ENCODER": "count_enc:encode",
            "LTR_CACHE": str(tmp_path / f"cache-{name}"), "ENCODED_LOG": str(tmp_path / f"{name}.log")}


def _encoded(tmp_path, name: str) -> int:
    log = tmp_path / f"{name}.log"
    return sum(map(int, log.read_text().split())) if log.exists() else 0


def _scores(conn, index, dim: int = 8) -> dict:
    """Each document's cosine to a fixed vector of ``dim`` (exact k-NN scoring): equal
    scores, equal vectors."""
    query = np.cos(np.arange(dim) * 1.7).tolist()
    body = {"size": 1000, "_source": False, "query": {"script_score": {
        "query": {"match_all": {}}, "script": {"source": "knn_score", "lang": "knn", "params": {
            "field": "vector", "query_value": query, "space_type": "cosinesimil"}}}}}
    return {h["_id"]: h["_score"] for h in conn.client().search(index=index, body=body)["hits"]["hits"]}


@pytest.mark.cluster
def test_sigkill_while_encoding_then_again_encodes_at_most_one_batch_twice(cluster, tmp_path, catalogue, cli):
    import os
    conn, a, b = cluster.conn(), f"resume-a-{uuid.uuid4().hex[:6]}", f"resume-b-{uuid.uuid4().hex[:6]}"
    args = [sys.executable, "-m", "ltr_toolkit.cli", "--url", cluster.url, "index", "jsonl",
            str(catalogue), "--index", a, "--neighbours", "0"]
    proc = subprocess.Popen(args, env={**os.environ, **_env(tmp_path, "a")}, cwd=str(ROOT),
                            stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True)
    try:
        for line in proc.stderr:                       # killed once 256 texts are kept
            if line.startswith("vectors: ") and 256 <= int(line.split()[1].split("/")[0]) < 600:
                proc.send_signal(signal.SIGKILL)
                break
        proc.wait(timeout=60)
        assert proc.returncode == -signal.SIGKILL
        first = _encoded(tmp_path, "a")
        assert 256 <= first < 600
        r = cli(*args[3:], env=_env(tmp_path, "a"))         # again, as it was
        assert r.returncode == 0, r.stderr
        assert _encoded(tmp_path, "a") <= 600 + 128         # at most one batch twice
        r = cli(*args[3:-4], "--index", b, "--neighbours", "0", env=_env(tmp_path, "b"))
        assert r.returncode == 0, r.stderr
        assert _encoded(tmp_path, "b") == 600                # uninterrupted, another cache
        got, expect = _scores(conn, a), _scores(conn, b)
        assert len(got) == 600 and got == expect
    finally:
        proc.kill()
        for index in (a, b):
            conn.client().indices.delete(index=index, ignore_unavailable=True)


@pytest.mark.cluster
def test_an_index_whose_load_stopped_is_incomplete_until_loaded_again(cluster, tmp_path, catalogue, cli,
                                                                    monkeypatch):
    from ltr_toolkit.encoders import load_encoder
    from ltr_toolkit.indexing.documents import corpus_version, index_documents, read_jsonl_documents
    for k, v in _env(tmp_path, "c").items():
        monkeypatch.setenv(k, v)
    monkeypatch.syspath_prepend(str(tmp_path))
    conn, index = cluster.conn(), f"unfinished-{uuid.uuid4().hex[:6]}"
    coll = read_jsonl_documents(catalogue)

    def stop(step, done, total):
        if step == "loading" and done >= 500:
            raise Killed
    try:
        with pytest.raises(Killed):                     # stopped after its first bulk request
            index_documents(conn, index, coll.docs, fields=coll.text_fields, meta="jsonl:p.jsonl",
                            expansion=None, vector_fields=coll.text_fields, encoder=load_encoder(),
                            progress=stop)
        assert "(incomplete: its load of 600 documents" in corpus_version(conn, index)
        encoded = _encoded(tmp_path, "c")
        for again in (["index", "jsonl", str(catalogue), "--index", index],
                      ["index", "vectors", "--index", index, "--vector-fields", "title"],
                      ["index", "neighbours", "--index", index, "--neighbour-fields", "title"],
                      # what reads it: generation samples it, candidates search it
                      ["featureset", "init", "--index", index, "-o", str(tmp_path / "fs.json")],
                      ["query", "search", "red shoe", "--index", index, "--fields", "title"]):
            r = cli("--url", cluster.url, *again, env=_env(tmp_path, "c"))
            assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
            assert f"index {index} is incomplete: its load of 600 documents" in r.stderr
            assert "--recreate" in r.stderr and len(r.stderr.strip().splitlines()) == 1
        r = cli("--url", cluster.url, "index", "jsonl", str(catalogue), "--index", index, "--recreate",
                "--neighbours", "0", env=_env(tmp_path, "c"))
        assert r.returncode == 0, r.stderr
        assert "indexed 600 documents" in r.stdout and _encoded(tmp_path, "c") == encoded
        assert corpus_version(conn, index) == "jsonl:p.jsonl"
    finally:
        conn.client().indices.delete(index=index, ignore_unavailable=True)
