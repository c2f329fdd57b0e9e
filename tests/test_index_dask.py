"""`ltr index jsonl --dask`: the vectors encoded on a real dask.distributed LocalCluster
(2 worker processes, one thread each), the same bit for bit as one process encodes them,
the encoder loaded once per worker; a worker that encodes otherwise is refused (issue 60,
Deliver 2)."""

from __future__ import annotations

import json
import uuid

import numpy as np
import pytest

from ltr_toolkit.distributed import connect
from ltr_toolkit.distributed import encoding as de
from ltr_toolkit.encoders import default_encoder
from ltr_toolkit.errors import UserError
from ltr_toolkit.indexing import vectors as vx
from test_index_resume import _scores

BRANDS = ["Acme", "Globex", "Initech", "Umbrella", "Hooli"]
THINGS = ["cordless drill", "circular saw", "desk lamp", "usb cable", "garden hose", "kettle"]


def _texts(n: int) -> list[str]:
    return [f"{BRANDS[i % 5]} {THINGS[i % 6]} {i}\nA {THINGS[(i * 7) % 6]} with {i % 4 + 1} "
            f"settings, {i % 9 + 1} m cable and a case; model {i * 13 % 97}" for i in range(n)]


@pytest.fixture(scope="module")
def client():
    """A LocalCluster of 2 worker processes of one thread each."""
    with connect("local:2", threads_per_worker=1) as c:
        assert sorted(c.nthreads().values()) == [1, 1]
        yield c


def test_vectors_encoded_on_two_workers_equal_one_process_bit_for_bit(client, tmp_path, monkeypatch):
    texts = _texts(300)
    encoder = default_encoder()
    monkeypatch.setenv("LTR_CACHE", str(tmp_path / "here"))
    here = vx.document_vectors(encoder, texts)
    monkeypatch.setenv("LTR_CACHE", str(tmp_path / "dask"))
    seen = []
    there = vx.document_vectors(encoder, texts, encode_batches=de.batches_on(client), progress=seen.append)
    assert there.dtype == here.dtype and np.array_equal(there, here)
    assert seen[0] == 0 and seen[-1] == 300 and len(seen) == 1 + 3      # one report per batch
    # each worker process loaded the encoder once, with one onnxruntime thread
    loaded = client.run(lambda: [(k, e._session.get_session_options().intra_op_num_threads)
                                 for k, e in de._worker_encoders.items()])
    assert all(v == [((None, encoder.sha256), 1)] for v in loaded.values()), loaded
    # kept per batch by the client: run again, nothing is submitted
    assert np.array_equal(vx.document_vectors(encoder, texts, encode_batches=de.batches_on(client)), here)


def test_a_worker_that_encodes_otherwise_is_refused(client, tmp_path, monkeypatch):
    from ltr_toolkit import encoders
    sha = default_encoder().sha256

    def other_cpu():            # this worker's vector of the probe text differs from ours
        enc = de._worker_encoder(None, sha)
        encoders._fingerprints[(id(enc), enc.sha256)] = b"another machine"
    client.run(other_cpu)
    monkeypatch.setenv("LTR_CACHE", str(tmp_path))
    try:
        with pytest.raises(UserError, match="encodes differently from this machine"):
            vx.document_vectors(default_encoder(), _texts(20), encode_batches=de.batches_on(client))
    finally:
        client.run(lambda: encoders._fingerprints.clear())


@pytest.mark.cluster
def test_index_jsonl_dask_local_gives_the_index_of_one_process(ltr_cluster, cli, tmp_path):
    conn, a, b = ltr_cluster.conn(), f"dask-a-{uuid.uuid4().hex[:6]}", f"dask-b-{uuid.uuid4().hex[:6]}"
    src = tmp_path / "p.jsonl"
    src.write_text("".join(json.dumps({"id": f"p{i}", "title": t.split("\n")[0], "description": t.split("\n")[1]})
                           + "\n" for i, t in enumerate(_texts(200))))
    try:
        r = cli("--url", conn.url, "index", "jsonl", str(src), "--index", a, "--neighbours", "1",
                "--dask", "local:2", env={"LTR_CACHE": str(tmp_path / "a")})
        assert r.returncode == 0, r.stderr
        assert "Dask: the vectors are encoded by 2 workers" in r.stderr and "vectors: 200/200 (" in r.stderr
        r = cli("--url", conn.url, "index", "jsonl", str(src), "--index", b, "--neighbours", "1",
                env={"LTR_CACHE": str(tmp_path / "b")})
        assert r.returncode == 0, r.stderr
        got = _scores(conn, a, dim=384)
        assert len(got) == 200 and got == _scores(conn, b, dim=384)
    finally:
        for index in (a, b):
            conn.client().indices.delete(index=index, ignore_unavailable=True)


def test_a_malformed_dask_address_is_one_line(cli, tmp_path):
    src = tmp_path / "p.jsonl"
    src.write_text(json.dumps({"id": "1", "title": "x"}) + "\n")
    r = cli("index", "jsonl", str(src), "--index", "x", "--dask", "local:0")
    assert r.returncode == 2 and "local:N with N >= 1" in r.stderr and "Traceback" not in r.stderr


def test_the_encoding_runs_beside_the_node_only_where_the_workers_leave_it_cores(monkeypatch):
    from types import SimpleNamespace

    from ltr_toolkit.distributed import encoding
    monkeypatch.setattr(encoding.os, "cpu_count", lambda: 2)

    def client(*addresses):
        return SimpleNamespace(nthreads=lambda: {a: 1 for a in addresses})
    local = "http://127.0.0.1:9200"
    assert encoding.leaves_node_cores(client("tcp://127.0.0.1:4001"), local)
    assert not encoding.leaves_node_cores(client("tcp://127.0.0.1:4001", "tcp://localhost:4002"), local)
    assert encoding.leaves_node_cores(client("tcp://10.255.0.7:4001", "tcp://10.255.0.8:4001"), local)
    assert not encoding.leaves_node_cores(client("inproc://10.0.0.1/1/1", "tcp://127.0.0.1:2"), local)
    assert encoding.leaves_node_cores(client("tcp://127.0.0.1:1", "tcp://127.0.0.1:2"),
                                      "https://search.example.invalid:9200")
