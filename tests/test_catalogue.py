"""Catalogues (issue #52): a feature set generated from an index's mapping and a sample of
its documents, templates held against the mapping before upload, dead features named
after logging; live on each engine, a generated set logs and serves what `ltr predict`
scores."""

from __future__ import annotations

import datetime as dt
import json
import random

import numpy as np
import pytest

from ltr_toolkit.data.featuresets import validate_featureset
from ltr_toolkit.features.check import all_paths, dead_features, problems
from ltr_toolkit.features.generate import generate, mapped_fields

NOW = dt.datetime(2026, 11, 1, tzinfo=dt.timezone.utc)
MAPPING = {"properties": {
    "sku": {"type": "keyword"}, "brand": {"type": "keyword"},
    "title": {"type": "text", "fields": {"keyword": {"type": "keyword"}}},
    "price": {"type": "float"}, "popularity": {"type": "long"}, "rating": {"type": "float"},
    "released": {"type": "date"}, "in_stock": {"type": "boolean"},
    "attrs": {"properties": {"voltage": {"type": "text"}, "color": {"type": "text"}}},
    "emb": {"type": "knn_vector", "dimension": 4}, "variants": {"type": "nested"}}}
BRANDS = ["Acme", "Globex", "Initech", "Umbrella"]
WORDS = "drill saw hammer lamp cable battery charger screwdriver".split()


def _products(n: int, seed: int = 0) -> list[dict]:
    rng = random.Random(seed)
    return [{"id": f"p{i}", "sku": f"SKU {i}", "brand": rng.choice(BRANDS),
             "title": " ".join(rng.sample(WORDS, 2)) + f" {rng.choice(BRANDS).lower()}",
             "price": round(rng.uniform(5, 500), 2), "popularity": int(rng.paretovariate(1.2) * 10),
             "rating": round(rng.uniform(1, 5), 1),
             "released": (NOW - dt.timedelta(days=rng.randint(1, 2000))).date().isoformat(),
             "in_stock": rng.random() < 0.7,
             **({"attrs": {"voltage": "18 V"}} if i % 50 == 0 else {})} for i in range(n)]


def test_generated_features_follow_each_fields_type():
    docs = _products(400)
    doc = generate(mapped_fields(MAPPING["properties"]), docs, "shop", now=NOW)
    fs = validate_featureset(doc)                         # the plugin's shape, checked
    names = [f["name"] for f in fs["features"]]
    why, skipped = doc["generated"]["why"], doc["generated"]["skipped"]
    assert {"title_bm25", "title_all_terms", "title_phrase", "brand_is_query", "price",
            "popularity", "rating", "released_recency", "in_stock_true"} <= set(names)
    assert set(why) == set(names) and all(why.values())
    by_name = {f["name"]: f for f in fs["features"]}
    # skewed popularity is log-scaled; the roughly uniform price is not
    assert by_name["popularity"]["template"]["function_score"]["field_value_factor"]["modifier"] == "log1p"
    assert "modifier" not in by_name["price"]["template"]["function_score"]["field_value_factor"]
    # no default for a product without a price: it does not match (missing), nor does a
    # negative price indexed later (field_value_factor would make the score negative)
    assert "missing" not in by_name["price"]["template"]["function_score"]["field_value_factor"]
    assert by_name["price"]["template"]["function_score"]["query"] == {"range": {"price": {"gte": 0}}}
    # the decay's half-life is the sample's median age
    ages = [(NOW - dt.datetime.fromisoformat(d["released"]).replace(tzinfo=dt.timezone.utc)).days
            for d in docs]
    scale = by_name["released_recency"]["template"]["function_score"]["functions"][0]["exp"]["released"]["scale"]
    assert abs(int(scale[:-1]) - np.median(ages)) <= 1
    # an identifier is matched exactly; left out, each with its reason: sparse
    # attributes, nested, an unrecorded vector
    assert "sku_exact" in names and "sku" not in skipped
    assert "2.0% of the sampled documents" in skipped["attrs.voltage"]
    assert "nested" in skipped["variants"] and "no encoder" in skipped["emb"]
    assert not any(n.startswith(("attrs", "variants", "emb")) for n in names)
    assert problems(fs, "shop", all_paths(MAPPING["properties"])) == []


def test_numbers_that_identify_products_get_no_feature():
    """An EAN or a product id typed as a number (unique per product) is no popularity;
    nor is a number named like one that repeats (a store id of 4 stores: a code, not a
    magnitude); a unique number with another name (a popularity score) keeps its
    feature."""
    props = {"ean": {"type": "long"}, "productId": {"type": "long"}, "store_id": {"type": "long"},
             "popularity": {"type": "double"}}
    rng = random.Random(2)
    docs = [{"ean": 4006381333931 + 17 * i, "productId": 1000 + i, "store_id": i % 4,
             "popularity": rng.random() * 1000} for i in range(200)]
    doc = generate(mapped_fields(props), docs, "shop", now=NOW)
    names = {f["name"] for f in doc["featureset"]["features"]}
    skipped = doc["generated"]["skipped"]
    assert {"ean", "productId", "store_id"} <= set(skipped)
    assert "identifies documents" in skipped["ean"]
    assert "4 distinct values repeated" in skipped["store_id"] and "not a magnitude" in skipped["store_id"]
    assert names == {"popularity"}


def test_templates_are_held_against_the_mapping():
    paths = all_paths(MAPPING["properties"])
    fs = {"name": "x", "features": [
        {"name": "ok", "params": ["keywords"], "template": {"match": {"title.keyword": "{{keywords}}"}}},
        {"name": "typo", "params": ["keywords"], "template": {"match": {"titel": "{{keywords}}"}}},
        {"name": "eland", "params": ["query"], "template": {"match": {"title": "{{query}}"}}},
        {"name": "cat", "params": ["category"], "template": {"term": {"brand": "{{category}}"}}},
        {"name": "decay", "params": [], "template": {"function_score": {"functions": [
            {"gauss": {"title": {"origin": "now", "scale": "1d"}}}]}}},
        {"name": "age", "params": [], "template": {"function_score": {"functions": [
            {"gauss": {"released": {"origin": "now", "scale": "1d"}}}]}}},
        {"name": "vec", "params": ["query_vector"], "template":
            '{"knn": {"field": "emb", "query_vector": {{#toJson}}query_vector{{/toJson}}, "k": 5}}'},
        {"name": "multi", "params": ["keywords"], "template": {"multi_match": {
            "query": "{{keywords}}", "fields": ["title^2", "attrs.color", "nope"]}}}]}
    found = problems(fs, "shop", paths, query_params=["category"])
    assert len(found) == 4, found
    assert [line.split(":")[0] for line in found] == ["feature typo", "feature eland",
                                                      "feature decay", "feature multi"]
    assert "'titel'" in found[0] and "{{query}}" in found[1] and "{{keywords}}" in found[1]
    assert "text field" in found[2] and "'nope'" in found[3]
    assert any("{{category}}" in line for line in problems(fs, "shop", paths))   # undeclared


def test_dead_features_are_named():
    X = np.array([[1.0, np.nan, 0.0, 2.0], [2.0, np.nan, 0.0, np.nan], [3.0, np.nan, 0.0, 1.0]])
    lines = dead_features(X, ["a", "gone", "flat", "sparse"])
    assert len(lines) == 2 and "gone is missing on every" in lines[0] and "flat is 0 on every" in lines[1]


# ------------------------------------------------------------------------------- live

@pytest.fixture(scope="module")
def shop(engine_cluster, tmp_path_factory):
    """A small product index on the engine's node (no analyzer the test node lacks)."""
    conn = engine_cluster.conn()
    index = f"shop-{engine_cluster.engine}"
    client = conn.client()
    client.indices.delete(index=index, ignore_unavailable=True)
    props = {k: v for k, v in MAPPING["properties"].items() if k not in ("emb",)}
    client.indices.create(index=index, body={"settings": {"number_of_shards": 1},
                                             "mappings": {"properties": props}})
    docs = _products(300)
    for d in docs:
        client.index(index=index, id=d["id"], body=d)
    client.indices.refresh(index=index)
    d = tmp_path_factory.mktemp(index)
    rng = random.Random(1)
    lines = ["qid,query,docid,grade"]
    for q in range(30):
        text = rng.choice(WORDS) + " " + rng.choice(BRANDS).lower()
        hits = [x for x in docs if all(w in x["title"] for w in text.split())][:6]
        for x in docs[q * 5:(q * 5) + 5] + hits:
            lines.append(f"{q},{text},{x['id']},{3 if x in hits else rng.choice([0, 0, 1])}")
    (d / "judgments.csv").write_text("\n".join(lines) + "\n")
    yield conn, index, d
    client.indices.delete(index=index, ignore_unavailable=True)


def test_a_generated_set_uploads_logs_and_serves_what_predict_scores(shop, engine_cluster, cli):
    conn, index, d = shop
    base = ("--url", engine_cluster.url)
    r = cli(*base, "featureset", "init", "--index", index, "-o", str(d / "fs.json"), "--name", index)
    assert r.returncode == 0, r.stderr
    generated = json.loads((d / "fs.json").read_text())
    assert "price" in generated["generated"]["why"]
    cli(*base, "store", "init")
    r = cli(*base, "featureset", "upload", str(d / "fs.json"), "--index", index)
    assert r.returncode == 0, r.stderr
    fs_name = r.stdout.split("feature set ")[1].split()[0]     # a changed set is a new version
    r = cli(*base, "log", str(d / "judgments.csv"), "--featureset", fs_name, "--index", index,
            "--fields", "title", "--window", "20", "-o", str(d / "c.txt"))
    assert r.returncode == 0, r.stderr
    judged = json.loads((d / "c.txt.json").read_text())
    compared = served_equals_predict(cli, base, d, index, queries=8)
    assert compared >= 40 and judged["rows"] > 0


def served_equals_predict(cli, base, d, index: str, queries: int) -> int:
    """Train a small lambdamart on ``d``/c.txt, upload it, and check that ``ltr query
    search`` serves the first ``queries`` judged queries with the scores ``ltr predict``
    gives their logged rows; returns the pairs compared."""
    r = cli("train", str(d / "c.txt"), "--algo", "lambdamart", "--trees", "20", "--depth", "3",
            "-o", str(d / "m.json"))
    assert r.returncode == 0, r.stderr
    r = cli(*base, "model", "upload", str(d / "m.json"), "--name", f"{index}-mart")
    assert r.returncode == 0, r.stderr
    name = r.stdout.split("uploaded ")[-1].split()[0]
    r = cli("predict", str(d / "m.json"), str(d / "c.txt"), "-o", str(d / "scores.txt"))
    assert r.returncode == 0, r.stderr
    local = np.loadtxt(d / "scores.txt")           # one score per row, in the file's order
    rows = [(line.split()[1][4:], line.split("# ")[1].split()[0])
            for line in (d / "c.txt").read_text().splitlines() if not line.startswith("#")]
    where = {pair: i for i, pair in enumerate(rows)}
    compared = 0
    for q, text in list(_queries(d / "judgments.csv").items())[:queries]:
        r = cli(*base, "query", "search", text, "--index", index, "--model", name, "--json")
        assert r.returncode == 0, r.stderr
        for h in json.loads(r.stdout):
            if (q, h["id"]) in where:
                np.testing.assert_allclose(h["score"], local[where[(q, h["id"])]], rtol=1e-5)
                compared += 1
    return compared


def _queries(path) -> dict:
    rows = [line.split(",") for line in path.read_text().splitlines()[1:]]
    return {q: text for q, text, _, _ in rows}


# ------------------------------------------------------------------------------- ltr index jsonl

def _jsonl(path, docs) -> None:
    path.write_text("".join(json.dumps(d) + "\n" for d in docs))


def test_a_catalogue_file_is_typed_by_its_values(tmp_path):
    from ltr_toolkit.errors import InputError
    from ltr_toolkit.indexing.documents import read_jsonl_documents
    docs = [{"id": 1, "title": "red drill", "price": 10, "tags": ["tools", "power"], "released": "2024-01-02",
             "in_stock": True, "short_description": None, "attrs": {"voltage": "18 V", "weight": 1.5}},
            {"id": "2", "title": "blue saw", "price": 12.5, "tags": [], "released": "2023-05-06T10:00:00Z",
             "in_stock": False, "attrs": {"weight": 2}}]
    _jsonl(tmp_path / "p.jsonl", docs)
    coll = read_jsonl_documents(tmp_path / "p.jsonl")
    kinds = {p: f.kind for p, f in coll.fields.items()}
    assert kinds == {"title": "text", "price": "double", "tags": "text", "released": "date",
                     "in_stock": "boolean", "attrs.voltage": "text", "attrs.weight": "double"}
    assert coll.text_fields == ("title", "tags") and [d["id"] for d in coll.docs] == ["1", "2"]
    props = coll.properties("standard")
    assert props["price"] == {"type": "double"} and props["attrs"]["properties"]["weight"] == {"type": "double"}
    assert props["attrs"]["properties"]["voltage"]["fields"]["keyword"]["type"] == "keyword"
    rows = {r["field"]: r for r in coll.report()}
    assert rows["attrs.voltage"]["documents"] == 1 and rows["title"]["mapped"].startswith("BM25")
    docs.append({"id": "3", "title": "saw", "price": "cheap"})
    _jsonl(tmp_path / "bad.jsonl", docs)
    with pytest.raises(InputError) as info:
        read_jsonl_documents(tmp_path / "bad.jsonl")
    assert info.value.line == 3 and "'price'" in str(info.value) and "line 1" in str(info.value)


def test_many_sparse_attributes_are_indexed(cluster, cli, tmp_path):
    """A product file with 1,500 attribute names, each in a few documents: the engine's
    limit of 1,000 mapping fields is raised to fit, and every value is searchable."""
    rng = random.Random(3)
    docs = [{"id": f"p{i}", "title": f"{rng.choice(WORDS)} {rng.choice(WORDS)}", "price": rng.uniform(1, 99),
             "attributes": {f"attr_{(i * 7 + j) % 1500}": f"value {j}" for j in range(4)}}
            for i in range(900)]
    _jsonl(tmp_path / "p.jsonl", docs)
    r = cli("--url", cluster.url, "index", "jsonl", str(tmp_path / "p.jsonl"), "--index", "sparse-shop",
            "--recreate", "--neighbours", "0", "--vector-fields", "none")
    try:
        assert r.returncode == 0, r.stderr
        assert "indexed 900 documents" in r.stdout
        mapping = cluster.conn().client().indices.get_mapping(index="sparse-shop")["sparse-shop"]["mappings"]
        assert len(mapping["properties"]["attributes"]["properties"]) == 1500
        hits = cluster.conn().client().search(index="sparse-shop", body={
            "query": {"match": {"attributes.attr_7": "value"}}})["hits"]["total"]["value"]
        assert hits >= 1
    finally:
        cluster.conn().client().indices.delete(index="sparse-shop", ignore_unavailable=True)


def test_empty_values_are_absent_and_unsampled_fields_kept():
    """An empty string is no value (an identifier with a few blanks is still one); a field
    left out of _source (the toolkit's neighbours) cannot be sampled and is kept."""
    docs = [{"url": f"https://x/{i}.jpg" if i % 50 else ""} for i in range(200)]
    doc = generate({"url": "text", "neighbours": "text"}, docs, "x", now=NOW, unsampled={"neighbours"})
    assert "identifies documents" in doc["generated"]["skipped"]["url"]
    assert "neighbours_bm25" in doc["generated"]["why"]


def test_identifiers_are_keywords_not_text(tmp_path):
    """A URL or SKU (no spaces, a different value in nearly every document) is matched
    exactly, not analysed as BM25 text, nor compared by the neighbours; a repeated
    one-word value (a colour) stays text."""
    from ltr_toolkit.indexing.documents import read_jsonl_documents
    docs = [{"id": i, "title": f"drill model {i}", "url": f"https://shop.example/p/{i}.jpg",
             "sku": f"SKU-{i:05d}", "colour": ["red", "blue"][i % 2]} for i in range(40)]
    _jsonl(tmp_path / "p.jsonl", docs)
    coll = read_jsonl_documents(tmp_path / "p.jsonl")
    kinds = {p: f.kind for p, f in coll.fields.items()}
    assert kinds == {"title": "text", "url": "keyword", "sku": "keyword", "colour": "text"}
    assert coll.text_fields == ("title", "colour")
    assert coll.properties("english")["url"] == {"type": "keyword"}
    assert "identifier" in {r["field"]: r for r in coll.report()}["sku"]["mapped"]


def test_refused_documents_are_named_and_the_run_is_partial(cluster, cli, tmp_path):
    """Documents the engine refuses (a date that is no date, a whole number past a long)
    are named with their field, value and the engine's why; the run exits 3 and the
    others are indexed."""
    docs = [{"id": f"d{i}", "title": f"{WORDS[i % len(WORDS)]} drill", "released": f"2023-01-{i + 1:02d}",
             "stock": i} for i in range(12)]
    docs[3]["released"] = "2023-13-45"
    docs[7]["stock"] = 10 ** 20
    _jsonl(tmp_path / "p.jsonl", docs)
    r = cli("--url", cluster.url, "index", "jsonl", str(tmp_path / "p.jsonl"), "--index", "refusing-shop",
            "--recreate", "--neighbours", "0", "--vector-fields", "none")
    try:
        assert r.returncode == 3, r.stderr
        assert "Traceback" not in r.stderr
        failed = [line for line in r.stderr.splitlines() if line.startswith("failed: document ")]
        assert len(failed) == 2, r.stderr
        assert failed[0].startswith("failed: document d3: field released (date) value '2023-13-45': ")
        assert "date" in failed[0].split(": ", 3)[-1]
        assert failed[1].startswith(f"failed: document d7: field stock (long) value '{10 ** 20}': ")
        assert "error: 2 documents failed" in r.stderr and str(tmp_path / "p.jsonl") in r.stderr
        count = cluster.conn().client().count(index="refusing-shop")["count"]
        assert count == len(docs) - 2 and f"indexed {count} documents" in r.stdout
    finally:
        cluster.conn().client().indices.delete(index="refusing-shop", ignore_unavailable=True)


def test_a_refusal_is_shown_on_one_line_its_text_escaped():
    from ltr_toolkit.indexing.rejections import describe, rejection
    hostile = "x[red]\x1b[2J" + "y" * 200
    item = {"index": {"_id": "7", "status": 400, "error": {
        "type": "mapper_parsing_exception",
        "reason": f"failed to parse field [a [b]] of type [long] in document with id '7'. "
                  f"Preview of field's value: '{hostile}'",
        "caused_by": {"type": "illegal_argument_exception", "reason": f'For input string: "{hostile}"\n at x'}}}}
    r = rejection(item)
    assert (r["id"], r["field"], r["type"], r["value"]) == ("7", "a [b]", "long", hostile)
    line = describe(r)
    assert "\x1b" not in line and "\n" not in line and "\\x1b" in line
    assert line.startswith("field a [b] (long) value 'x[red]\\x1b[2Jyy") and len(line) < len(hostile) + 120
    assert describe(rejection({"index": {"_id": "8", "status": 429, "error": {
        "type": "es_rejected_execution_exception", "reason": "queue full"}}})) == "queue full"


def test_unique_titles_are_text_to_search_not_identifiers():
    """A product's title (or a paper's abstract) differs in every document, as an SKU
    does, but it is text of several words: it gets the main text features, not an exact
    match, and is not left out; a spaceless code unique per document is an identifier."""
    mapping = {"title": {"type": "text"}, "code": {"type": "text"}}
    docs = [{"title": f"{WORDS[i % len(WORDS)]} {WORDS[(i * 7) % len(WORDS)]} model {i}",
             "code": f"XK{i:05d}"} for i in range(200)]
    doc = generate(mapped_fields(mapping), docs, "shop", now=NOW)
    names, skipped = [f["name"] for f in doc["featureset"]["features"]], doc["generated"]["skipped"]
    assert "title_bm25" in names and "title" not in skipped, (names, skipped)
    assert not any(n.startswith("title_") and "exact" in n for n in names)
    assert not any(n.startswith("code_") and "bm25" in n for n in names), names


def test_many_main_text_fields_leave_room_for_numbers_and_exact_matches():
    """Seven main text fields (as MSRD's movies have) do not fill the default cap with
    their BM25 and phrase variants: the combined match, the three most covered fields'
    BM25, the brand's exact match and four of the five numbers are kept."""
    texts = [f"t{i}" for i in range(7)]
    numbers = ["price", "popularity", "rating", "votes", "weight"]
    mapping = {**{t: {"type": "text"} for t in texts}, "brand": {"type": "keyword"},
               **{n: {"type": "float"} for n in numbers}}
    rng = random.Random(1)
    docs = [{**{t: " ".join(rng.sample(WORDS, 3)) for t in texts}, "brand": rng.choice(BRANDS),
             **{n: round(rng.uniform(1, 500), 2) for n in numbers}} for _ in range(300)]
    doc = generate(mapped_fields(mapping), docs, "shop", now=NOW)
    names = [f["name"] for f in doc["featureset"]["features"]]
    assert len(names) == 12
    assert "brand_is_query" in names and sum(n in numbers for n in names) == 4, names
    assert sum(n.endswith("_bm25") and n[:-5] in texts for n in names) >= 3
    assert any(n.endswith("_phrase") for n in names) and not any(n.endswith("_all_terms") for n in names)
