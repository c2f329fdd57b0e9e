"""A dirty catalogue (issue 58): negative numbers, numbers written as text, SQL-export and
missing dates, repeating ``*_id`` codes, tag arrays, SKUs and model numbers queried
exactly, a user's own ``*_len`` fields. Generated offline, each template sound; live on
each engine: indexed by ``ltr index jsonl``, generated, uploaded, logged and served with
no node error, served = ``ltr predict``. And a lean default on 5,000 sparse attributes."""

from __future__ import annotations

import datetime as dt
import json
import pathlib
import random
import tempfile

import pytest

from ltr_toolkit.features.generate import DEFAULT_MAX_FEATURES, generate
from conftest import run_cli
from test_catalogue import _jsonl, served_equals_predict

NOW = dt.datetime(2026, 11, 1, tzinfo=dt.timezone.utc)
BRANDS = ["Acme", "Globex", "Initech", "Umbrella", "Hooli"]
WORDS = "drill saw hammer lamp cable battery charger screwdriver sander grinder".split()


def _dirty(n: int, seed: int = 0) -> list[dict]:
    rng = random.Random(seed)
    docs = []
    for i in range(n):
        d = {"id": f"p{i}", "title": f"{' '.join(rng.sample(WORDS, 2))} {rng.choice(['pro', 'mini', 'max'])}",
             "brand": rng.choice(BRANDS), "sku": f"AB-{i:05d}", "model": f"GSR{i % 97:03d}X{i}",
             "category_id": rng.choice([3, 7, 11, 17]), "tags": rng.sample(["sale", "new", "cordless", "eco"], 2),
             "discount": round(rng.uniform(-20, 10), 1),          # negative values
             "price": round(rng.uniform(5, 500), 2), "cable_len": rng.choice([1.5, 2, 3, 5]),
             "title_len": rng.randint(100, 200)}                   # the user's, not a token count
        if i % 3 == 0:
            d["price"] = f"{d['price']:.2f}"                        # a number written as text
        if i % 4:                                                    # a quarter without a date
            day = NOW - dt.timedelta(days=rng.randint(1, 1500))
            d["released"] = day.strftime("%Y-%m-%d %H:%M:%S" if i % 2 else "%Y-%m-%d")
        if i % 5:
            d["rating"] = round(rng.uniform(1, 5), 1)              # missing in a fifth
        docs.append(d)
    return docs


def _mapping_of(docs) -> tuple[dict, dict, set]:
    """The (fields, keyword forms, shaped text) featureset init reads of the index
    `ltr index jsonl` makes of ``docs``."""
    from ltr_toolkit.features.generate import keyword_forms, mapped_fields, shaped_text
    from ltr_toolkit.indexing.documents import mapping, read_jsonl_documents
    with tempfile.TemporaryDirectory() as d:
        p = pathlib.Path(d) / "p.jsonl"
        _jsonl(p, docs)
        coll = read_jsonl_documents(p)
    props = mapping("standard", coll.text_fields, typed=coll.properties("standard"))["mappings"]["properties"]
    return mapped_fields(props), keyword_forms(props), shaped_text(props)


def test_a_dirty_catalogue_gets_sound_templates():
    docs = _dirty(400)
    fields, exact, shaped = _mapping_of(docs)
    assert fields["price"] == "double" and fields["ltr_toolkit__title_len"] == "integer"
    assert fields["title_len"] == "long" and fields["released"] == "date"
    sources = [{k: v for k, v in d.items() if k != "id"} for d in docs]
    doc = generate(fields, sources, "dirty", now=NOW, exact=exact, shaped=shaped,
                   stats={"discount": (-20.0, 10.0)}, max_features=0)
    fs = {f["name"]: f["template"] for f in doc["featureset"]["features"]}
    skipped = doc["generated"]["skipped"]
    text = json.dumps(fs)
    assert "missing" not in text and "now" not in text          # no default value, no drifting day
    # negative values: no field_value_factor, an affine map onto (0, 1]
    disc = fs["discount"]["function_score"]
    assert "field_value_factor" not in disc and disc["query"] == {"exists": {"field": "discount"}}
    lin = disc["functions"][0]["linear"]["discount"]
    assert lin["origin"] - lin["offset"] == 10.0 and lin["scale"] == 30.0
    # numbers written as text are numbers; a user's *_len fields are kept, the helper not
    assert {"price", "cable_len", "title_len"} <= set(fs)
    assert "toolkit" in skipped["ltr_toolkit__title_len"]
    assert "not a magnitude" in skipped["category_id"]
    # dates at a fixed reference date; a product without one does not match
    rec = fs["released_recency"]["function_score"]
    assert rec["query"] == {"exists": {"field": "released"}}
    assert doc["generated"]["reference_date"] == "2026-11-01"
    # exact matches: brand on its keyword form, SKU and model number per query word
    assert fs["brand_is_query"]["constant_score"]["filter"]["term"]["brand.keyword"]["case_insensitive"]
    assert {"sku_exact", "model_exact"} <= set(fs)
    # tags repeat across documents: compared as values, no identifier
    assert "tags_exact" not in fs and "tags" not in skipped


def test_the_default_set_is_lean_and_ranked():
    docs = [{k: v for k, v in d.items() if k != "id"} for d in _dirty(400)]
    fields, exact, shaped = _mapping_of(_dirty(400))
    doc = generate(fields, docs, "dirty", now=NOW, exact=exact, shaped=shaped)
    names = [f["name"] for f in doc["featureset"]["features"]]
    assert len(names) == DEFAULT_MAX_FEATURES < doc["generated"]["pool"]
    assert names[:2] == ["all_text_bm25", "title_bm25"] or "title_bm25" in names[:3]
    assert set(doc["generated"]["not_selected"]) and all(doc["generated"]["not_selected"].values())
    # judged queries that never use a sparse attribute's words leave it out
    docs[0]["notes"] = "warranty voided"
    fields["notes"] = "text"
    judged = generate(fields, docs, "dirty", now=NOW, exact=exact, shaped=shaped,
                      queries=["cordless drill", "AB-00012"], min_coverage=0.0)
    assert "none of the judged queries" in judged["generated"]["skipped"]["notes"]


def _attribute_docs(n_docs: int, n_attrs: int, seed: int = 4) -> list[dict]:
    rng = random.Random(seed)
    return [{"id": f"p{i}", "title": f"{rng.choice(WORDS)} {rng.choice(WORDS)} {rng.choice(BRANDS)}",
             "description": " ".join(rng.choice(WORDS) for _ in range(12)), "brand": rng.choice(BRANDS),
             "price": round(rng.uniform(1, 99), 2),
             "attributes": {f"attr_{(i * 4 + j) % n_attrs}": f"value {rng.randint(1, 9)}" for j in range(4)}}
            for i in range(n_docs)]


def test_five_thousand_sparse_attributes_give_the_default_set(cluster, cli, tmp_path):
    """`featureset init` on 5,000 attribute names, each in a few documents: the default
    number of features, each left-out field with its reason (counted per reason, the
    first named; every one in the file)."""
    docs = _attribute_docs(1250, 5000)
    _jsonl(tmp_path / "p.jsonl", docs)
    base = ("--url", cluster.url)
    r = cli(*base, "index", "jsonl", str(tmp_path / "p.jsonl"), "--index", "attr-shop", "--recreate",
            "--neighbours", "0", "--vector-fields", "none")
    try:
        assert r.returncode == 0, r.stderr
        r = cli(*base, "featureset", "init", "--index", "attr-shop", "-o", str(tmp_path / "fs.json"))
        assert r.returncode == 0, r.stderr
        doc = json.loads((tmp_path / "fs.json").read_text())
        assert 0 < len(doc["featureset"]["features"]) <= DEFAULT_MAX_FEATURES
        skipped = doc["generated"]["skipped"]
        attrs = [p for p in skipped if p.startswith("attributes.")]
        assert len(attrs) == 5000 and all(skipped[p] for p in attrs)
        lines = [x for x in r.stderr.splitlines() if x.startswith("left out")]
        assert any("(sparse): 5000 fields (attributes.attr_0" in x for x in lines), r.stderr
        assert len(lines) < 10 and "{" not in r.stderr and "[" not in r.stderr
    finally:
        cluster.conn().client().indices.delete(index="attr-shop", ignore_unavailable=True)


# ------------------------------------------------------------------------------- live, each engine

@pytest.fixture(scope="module")
def dirty_shop(engine_cluster, tmp_path_factory):
    index = f"dirty-{engine_cluster.engine}"
    d = tmp_path_factory.mktemp(index)
    docs = _dirty(300)
    _jsonl(d / "p.jsonl", docs)
    r = run_cli("--url", engine_cluster.url, "index", "jsonl", str(d / "p.jsonl"), "--index", index,
            "--recreate", "--neighbours", "0", "--vector-fields", "none")
    assert r.returncode == 0, r.stdout + r.stderr           # no SQL date refused
    rng = random.Random(1)
    lines = ["qid,query,docid,grade"]
    for q in range(36):
        if q % 3 == 0:                                      # a SKU, typed alone
            x = rng.choice(docs)
            text, hits = x["sku"], [x]
        elif q % 3 == 1:                                    # a model number among words
            x = rng.choice(docs)
            text, hits = f"{x['title'].split()[0]} {x['model']}", [x]
        else:
            text = rng.choice(WORDS) + " " + rng.choice(BRANDS).lower()
            hits = [x for x in docs if all(w in (x["title"] + " " + x["brand"]).lower() for w in text.split())][:6]
        for x in docs[q * 5:(q * 5) + 5] + hits:
            lines.append(f"{q},{text},{x['id']},{3 if x in hits else rng.choice([0, 0, 1])}")
    (d / "judgments.csv").write_text("\n".join(lines) + "\n")
    yield engine_cluster.conn(), index, d, docs
    engine_cluster.conn().client().indices.delete(index=index, ignore_unavailable=True)


def test_a_dirty_catalogue_is_indexed_as_written(dirty_shop):
    conn, index, _, docs = dirty_shop
    got = conn.client().get(index=index, id="p1")["_source"]
    assert got["title_len"] == docs[1]["title_len"]                 # the user's, kept
    assert got["ltr_toolkit__title_len"] == len(docs[1]["title"].split())
    assert conn.client().count(index=index)["count"] == len(docs)


def test_a_dirty_catalogue_logs_and_serves_what_predict_scores(dirty_shop, engine_cluster, cli):
    conn, index, d, _ = dirty_shop
    base = ("--url", engine_cluster.url)
    r = cli(*base, "featureset", "init", "--index", index, "-o", str(d / "fs.json"), "--name", index, "--all")
    assert r.returncode == 0, r.stderr
    names = [f["name"] for f in json.loads((d / "fs.json").read_text())["featureset"]["features"]]
    assert {"discount", "price", "released_recency", "sku_exact", "model_exact", "brand_is_query",
            "cable_len", "title_len"} <= set(names)
    cli(*base, "store", "init")
    r = cli(*base, "featureset", "upload", str(d / "fs.json"), "--index", index)
    assert r.returncode == 0, r.stderr
    fs_name = r.stdout.split("feature set ")[1].split()[0]
    r = cli(*base, "log", str(d / "judgments.csv"), "--featureset", fs_name, "--index", index,
            "--fields", "title,brand,sku,model", "--window", "20", "-o", str(d / "c.txt"))
    assert r.returncode == 0, r.stderr
    rows = [line for line in (d / "c.txt").read_text().splitlines() if not line.startswith("#")]
    sku = names.index("sku_exact") + 1
    assert any(f" {sku}:1" in line for line in rows)                # the SKU matched exactly
    assert served_equals_predict(cli, base, d, index, queries=12) >= 30
