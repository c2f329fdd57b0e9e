"""Dense vectors in the index and the query vector as a derived parameter, live on the
session's node (the k-NN plugin from Maven Central next to the LTR plugin)."""

from __future__ import annotations

import json
import textwrap
import uuid

import numpy as np
import pytest

from ltr_toolkit.transport.client import request
from ltr_toolkit.features.featurelog import log_features
from ltr_toolkit.indexing.documents import index_documents
from ltr_toolkit.serving.serving import Serving
from ltr_toolkit.indexing.vectors import FIELD, add_vectors, index_vectors, with_query_vectors
from ltr_toolkit.data.svmlight import load_logged
from ltr_toolkit.datasets import cranfield
from ltr_toolkit.encoders import default_encoder, fingerprint
from ltr_toolkit.errors import UserError

pytestmark = [pytest.mark.cluster, pytest.mark.ltr]

DOCS = [{"id": f"d{i}", "title": t, "body": b} for i, (t, b) in enumerate([
    ("supersonic flow over a cone", "pressure distribution measured on cones at mach 2"),
    ("boundary layer transition", "laminar to turbulent transition on flat plates"),
    ("heat transfer in hypersonic flow", "stagnation point heating of blunt bodies"),
    ("panel flutter", "aeroelastic instability of thin panels in supersonic flow"),
    ("wing buffeting", "unsteady loads on wings at high angles of attack"),
    ("", ""),                                           # no text: no vector
    ("jet noise", "sound radiated by turbulent jets"),
])]


def _mapping(conn, index):
    return next(iter(request(conn, "GET", f"/{index}/_mapping").values()))["mappings"]


def test_the_collection_index_holds_cosine_vectors_recorded_with_their_encoder(ltr_cluster, cranfield_index):
    conn = ltr_cluster.conn()
    m = _mapping(conn, cranfield_index["index"])
    spec = m["properties"][FIELD]
    assert spec["type"] == "knn_vector" and spec["dimension"] == 384
    assert spec["method"]["engine"] == "lucene" and spec["method"]["space_type"] == "cosinesimil"
    assert FIELD in m["_source"]["excludes"]            # not fetched with every hit
    rec = m["_meta"]["vectors"]
    assert rec["encoder"] == default_encoder().identity()
    assert rec["text_fields"] == ["title", "abstract"] and rec["field"] == FIELD
    count = request(conn, "POST", f"/{cranfield_index['index']}/_count",
                    {"query": {"exists": {"field": FIELD}}})["count"]
    with_text = sum(1 for d in cranfield.documents() if (d["title"] + d["abstract"]).strip())
    assert count == with_text > 1390           # a document without text has no vector


@pytest.fixture(scope="module")
def semantic_logged(ltr_cluster, cranfield_index, shipped_featureset, tmp_path_factory):
    conn, name = ltr_cluster.conn(), shipped_featureset
    jl = cranfield.split_judgments("test")
    jl = jl.subset(jl.judged_qids()[:6])
    out = tmp_path_factory.mktemp("sem") / "logged.txt"
    side = log_features(conn, jl, name, cranfield_index["index"], out)
    return conn, name, jl, out, side


def test_the_logged_cosine_is_the_encoders_cosine(semantic_logged):
    """The plugin's value is (1 + cos) / 2 of the query's and the document's vectors, as
    the encoder computes them here (the feature is exact, not approximate)."""
    conn, name, jl, out, side = semantic_logged
    assert side["encoder"] == default_encoder().identity() and side["vector_field"] == FIELD
    ds = load_logged(out)
    col = side["feature_names"].index("query_doc_cosine")
    docs = {d["id"]: d for d in cranfield.documents()}
    enc = default_encoder()
    checked = 0
    for q_i, q in enumerate(ds.qids[:6]):
        rows = range(ds.offsets[q_i], ds.offsets[q_i + 1])
        ids = [str(ds.doc_ids[r]) for r in rows]
        qv = enc.encode([jl.queries[str(q)]], kind="query")[0]
        dv = enc.encode([f"{docs[i]['title']}\n{docs[i]['abstract']}".strip() for i in ids])
        expect = (1.0 + dv @ qv) / 2.0
        assert np.allclose(ds.X[list(rows), col], expect, atol=2e-3)
        checked += len(ids)
    assert checked > 20


def test_the_artifact_records_the_encoder_and_upload_refuses_another_index(semantic_logged, tmp_path, cli):
    conn, name, jl, out, side = semantic_logged
    model = tmp_path / "m.json"
    r = cli("train", str(out), "--algo", "linear", "--epochs", "3", "-o", str(model))
    assert r.returncode == 0, r.stderr
    art = json.loads(model.read_text())
    assert art["encoder"] == side["encoder"] and art["vector_field"] == FIELD
    other = f"vec-other-{uuid.uuid4().hex[:6]}"
    src = tmp_path / "docs.jsonl"
    src.write_text("".join(json.dumps({"id": d["id"], "title": d["title"], "abstract": d["body"]}) + "\n"
                           for d in DOCS))
    r = cli("--url", conn.url, "index", "jsonl", str(src), "--index", other, "--neighbours", "0")
    assert r.returncode == 0, r.stderr
    try:   # the other index's vectors claim another model: refused before anything is stored
        meta = _mapping(conn, other)["_meta"]
        meta["vectors"]["encoder"] = dict(meta["vectors"]["encoder"], sha256="0" * 64, name="other")
        request(conn, "PUT", f"/{other}/_mapping", {"_meta": meta})
        r = cli("--url", conn.url, "model", "upload", str(model), "--name", "vec-refused", "--featureset",
                name, "--index", other)
        assert r.returncode == 2 and "encoder" in r.stderr and "Traceback" not in r.stderr
        assert len(r.stderr.strip().splitlines()) == 1
    finally:
        conn.client().indices.delete(index=other, ignore_unavailable=True)


def test_another_encoder_is_refused_at_logging_and_serving(semantic_logged, tmp_path, cli):
    conn, name, jl, out, side = semantic_logged
    (tmp_path / "enc384.py").write_text(textwrap.dedent("""
        import numpy as np
        def encode(texts):
            rng = np.random.default_rng(0)
            return rng.normal(size=(len(texts), 384))
    """))
    env = {"PYTHONPATH": str(tmp_path), "LTR_ENCODER": "enc384:encode"}
    jfile = tmp_path / "j.txt"
    jfile.write_text("".join(f"# qid:{q}: {jl.queries[q]}\n" + "".join(
        f"{int(g)} qid:{q} # {d}\n" for d, g in jl.docs_of(q)) for q in jl.judged_qids()[:2]))
    r = cli("--url", conn.url, "log", str(jfile), "--featureset", name, "--fields", "title,abstract", "--index", "cranfield-test",
            "-o", str(tmp_path / "x.txt"), env=env)
    assert r.returncode == 2 and "came from encoder" in r.stderr and "enc384:encode" in r.stderr
    assert not (tmp_path / "x.txt").exists() and "Traceback" not in r.stderr


def test_a_query_vector_passed_in_is_used_and_checked(semantic_logged, tmp_path):
    conn, name, jl, out, side = semantic_logged
    from ltr_toolkit.stores.model_store import upload
    from ltr_toolkit.pipeline.train import load_model, train_from_files
    model = tmp_path / "lin.json"
    train_from_files(out, "linear", output=model, epochs=3)
    art, est = load_model(model)
    stored = upload(conn, art, est, f"vec-lin-{uuid.uuid4().hex[:6]}", name)["name"]
    try:
        serving = Serving("cranfield-test").for_model(stored)
        q = jl.queries[jl.judged_qids()[0]]
        computed = serving.search(conn, {"keywords": q})
        vec = with_query_vectors(conn, "cranfield-test", [{"keywords": q}], ["query_vector"])[0]
        passed = serving.search(conn, vec)
        assert [h["id"] for h in passed] == [h["id"] for h in computed]
        assert np.allclose([h["score"] for h in passed], [h["score"] for h in computed], rtol=1e-6)
        # a vector pointing elsewhere changes the order: the passed vector is what is used
        other = with_query_vectors(conn, "cranfield-test", [{"keywords": "jet noise"}], ["query_vector"])[0]
        moved = serving.search(conn, {"keywords": q, "query_vector": other["query_vector"]})
        assert [h["score"] for h in moved] != [h["score"] for h in computed]
        with pytest.raises(UserError, match="384"):
            serving.search(conn, {"keywords": q, "query_vector": [0.1] * 12})
    finally:
        request(conn, "DELETE", f"/_ltr/_model/{stored}")


def test_vectors_added_to_an_existing_index_resume_after_a_kill(ltr_cluster, tmp_path, cli):
    conn = ltr_cluster.conn()
    index = f"vec-own-{uuid.uuid4().hex[:6]}"
    conn.client().indices.create(index=index, body={"mappings": {"properties": {
        "title": {"type": "text"}, "body": {"type": "text"}}}})
    try:
        for d in DOCS:
            conn.client().index(index=index, id=d["id"], body={"title": d["title"], "body": d["body"]})
        conn.client().indices.refresh(index=index)

        class Killed(Exception):
            pass

        def kill(step, done, total):
            raise Killed
        with pytest.raises(Killed):          # killed after its first batch of 2 documents
            add_vectors(conn, index, ("title", "body"), batch=2, progress=kill)
        conn.client().indices.refresh(index=index)
        first = request(conn, "POST", f"/{index}/_count", {"query": {"exists": {"field": FIELD}}})["count"]
        assert first == 2
        r = cli("--url", conn.url, "index", "vectors", "--index", index, "--vector-fields", "title,body")
        assert r.returncode == 0, r.stderr
        assert "for 4 documents" in r.stdout and "1 without text" in r.stdout   # only the rest
        assert index_vectors(conn, index)["text_fields"] == ["title", "body"]
        hit = request(conn, "GET", f"/{index}/_doc/d3")["_source"][FIELD]
        expect = default_encoder().encode(["panel flutter\naeroelastic instability of thin panels in supersonic flow"])[0]
        assert np.allclose(hit, expect, atol=1e-6)
        again = cli("--url", conn.url, "index", "vectors", "--index", index, "--vector-fields", "title,body")
        assert again.returncode == 0 and "for 0 documents" in again.stdout
    finally:
        conn.client().indices.delete(index=index, ignore_unavailable=True)


def test_vectors_written_by_the_users_pipeline_are_named_not_recomputed(ltr_cluster, cli):
    conn = ltr_cluster.conn()
    index = f"vec-pipe-{uuid.uuid4().hex[:6]}"
    conn.client().indices.create(index=index, body={"settings": {"index": {"knn": True}}, "mappings": {
        "properties": {"title": {"type": "text"}, "emb": {"type": "knn_vector", "dimension": 384,
                       "method": {"name": "hnsw", "engine": "lucene", "space_type": "cosinesimil"}}}}})
    try:
        texts = [d["title"] for d in DOCS if d["title"]]
        vecs = default_encoder().encode(texts)
        for i, (t, v) in enumerate(zip(texts, vecs)):
            conn.client().index(index=index, id=str(i), body={"title": t, "emb": v.tolist()})
        conn.client().indices.refresh(index=index)
        r = cli("--url", conn.url, "index", "vectors", "--index", index, "--existing", "--vector-field", "emb",
                "--vector-fields", "title")
        assert r.returncode == 0 and "median cosine 1.0000" in r.stdout, r.stdout + r.stderr
        rec = index_vectors(conn, index)
        assert rec["field"] == "emb" and rec["written_by"] == "user"
        r = cli("--url", conn.url, "index", "vectors", "--index", index, "--existing", "--vector-field", "emb",
                "--vector-fields", "title", env={"LTR_ENCODER": "no_such_mod:f"})
        assert r.returncode == 2 and "cannot be loaded" in r.stderr
        r = cli("--url", conn.url, "index", "vectors", "--index", index, "--existing", "--vector-field", "title")
        assert r.returncode == 2 and "no knn_vector field 'title'" in r.stderr
    finally:
        conn.client().indices.delete(index=index, ignore_unavailable=True)


def test_genuine_vectors_of_short_texts_pass_and_another_models_are_refused(ltr_cluster, cli):
    """The user's pipeline wrote sentence-transformers' float all-MiniLM-L6-v2 vectors of
    two-word titles (median cosine about 0.985 to the default encoder's: refused at the
    former 0.99): recorded; paraphrase-MiniLM-L3-v2's of the same titles: refused in one
    line (tests/data/encoder_agreement.npz, see test_vector_check.py)."""
    from pathlib import Path
    fixture = np.load(Path(__file__).resolve().parent / "data" / "encoder_agreement.npz")
    conn = ltr_cluster.conn()
    for source, code in (("genuine", 0), ("other", 2)):
        index = f"vec-{source}-{uuid.uuid4().hex[:6]}"
        conn.client().indices.create(index=index, body={"settings": {"index": {"knn": True}}, "mappings": {
            "properties": {"title": {"type": "text"}, "emb": {"type": "knn_vector", "dimension": 384,
                           "method": {"name": "hnsw", "engine": "lucene", "space_type": "cosinesimil"}}}}})
        try:
            for i, (t, v) in enumerate(zip(fixture["texts"], fixture[source])):
                conn.client().index(index=index, id=str(i), body={"title": str(t), "emb": v.tolist()})
            conn.client().indices.refresh(index=index)
            r = cli("--url", conn.url, "index", "vectors", "--index", index, "--existing", "--vector-field", "emb",
                    "--vector-fields", "title")
            assert r.returncode == code, r.stdout + r.stderr
            if code == 0:
                assert "median cosine 0.98" in r.stdout and index_vectors(conn, index)["field"] == "emb"
            else:
                assert "does not hold encoder" in r.stderr and len(r.stderr.strip().splitlines()) == 1
                assert not index_vectors(conn, index)
        finally:
            conn.client().indices.delete(index=index, ignore_unavailable=True)


def test_a_filtered_source_is_refused_before_any_update(ltr_cluster, cranfield_index, cli):
    conn = ltr_cluster.conn()
    index = f"vec-nosrc-{uuid.uuid4().hex[:6]}"
    res = index_documents(conn, index, [{"id": d["id"], "title": d["title"], "abstract": d["body"]}
                                        for d in DOCS], fields=("title", "abstract"),
                          vector_fields=None, merge=False)
    try:
        assert res["vectors"] is None
        r = cli("--url", conn.url, "index", "vectors", "--index", index)
        assert r.returncode == 2 and "_source" in r.stderr and "Traceback" not in r.stderr
        assert request(conn, "POST", f"/{index}/_count", {"query": {"exists": {"field": FIELD}}})["count"] == 0
    finally:
        conn.client().indices.delete(index=index, ignore_unavailable=True)


def test_upload_refuses_a_model_trained_on_another_feature_set_version(semantic_logged, tmp_path, cli):
    """The artifact's feature-set hash is compared with the stored set's (#30): the lexical
    set has other content, so a model logged with the semantic set is refused there."""
    conn, name, jl, out, side = semantic_logged
    model = tmp_path / "m.json"
    assert cli("train", str(out), "--algo", "linear", "--epochs", "2", "-o", str(model)).returncode == 0
    from ltr_toolkit.stores import store as st
    from ltr_toolkit.data.featuresets import load_featureset
    other, _ = st.upload_featureset_versioned(conn, load_featureset(cranfield.LEXICAL_FEATURE_SET))
    r = cli("--url", conn.url, "model", "upload", str(model), "--name", "wrong-set", "--featureset", other)
    assert r.returncode == 2 and "another version of feature set" in r.stderr, r.stderr
    assert f"--featureset {name}" in r.stderr and "Traceback" not in r.stderr
    r = cli("--url", conn.url, "model", "upload", str(model), "--name", "right-set", "--featureset", name)
    assert r.returncode == 0, r.stderr


def test_the_demo_collection_ships_with_its_vectors(tmp_path, monkeypatch):
    """The bundled Cranfield documents' vectors by the default encoder come with the
    package (a first ``ltr demo`` does not spend 30 s encoding them): found with an empty
    cache and no encoding, equal to the encoder's own for a sample; another encoder's (or
    other texts') are encoded as before."""
    from ltr_toolkit.indexing import vectors as vx
    from ltr_toolkit.indexing.documents import document_text
    monkeypatch.setenv("LTR_CACHE", str(tmp_path))
    enc = default_encoder()
    texts = [t for d in cranfield.documents() if (t := document_text(d, ("title", "abstract")))]
    sample = [0, 1, 500, len(texts) - 1]
    fresh = enc.encode([texts[i] for i in sample], kind="document")
    fingerprint(enc)            # the one probe text of how this machine encodes: not refused

    def refuse(*a, **k):
        raise AssertionError("encoded instead of using the shipped vectors")
    monkeypatch.setattr(enc, "encode", refuse)
    got = vx.document_vectors(enc, texts)
    assert got.shape == (len(texts), enc.dim)
    np.testing.assert_allclose(got[sample], fresh, atol=1e-6)
    with pytest.raises(AssertionError, match="encoded instead"):
        vx.document_vectors(enc, texts[:-1])           # other texts: not shipped
