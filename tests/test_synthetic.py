"""The synthetic product catalogue (issue 60, Deliver 5): deterministic per seed, any
size, streamed; typed by `ltr index jsonl` as a catalogue is; written as JSONL by
``python -m ltr_toolkit.datasets.synthetic``. Offline."""

from __future__ import annotations

import gzip
import itertools
import json
import subprocess
import sys

import numpy as np

from ltr_toolkit.datasets.synthetic import BLOCK, products, write_jsonl
from conftest import ROOT


def test_the_same_seed_gives_the_same_products_and_a_run_is_a_prefix_of_a_longer_one():
    first = list(products(BLOCK + 50, seed=3))
    assert first == list(products(BLOCK + 50, seed=3))
    assert list(products(BLOCK + 50, seed=4)) != first
    assert first[:20] == list(products(20, seed=3))                  # within a block
    assert list(itertools.islice(products(None, seed=3), BLOCK + 50)) == first   # without end
    assert len({p["id"] for p in first}) == len(first) == BLOCK + 50


def test_products_look_like_a_catalogue():
    ps = list(products(3000, seed=1))
    assert all({"id", "title", "description", "brand", "category", "price", "release_date", "sku",
                "ean"} <= set(p) for p in ps)
    titles = np.array([len(p["title"]) for p in ps])
    words = np.array([len(p["description"].split()) for p in ps])
    assert 30 < titles.mean() < 80 and 40 < words.mean() < 100 and words.max() < 160
    assert 0.3 < np.mean(["tags" in p for p in ps]) < 0.5
    assert len({k for p in ps for k in p if k.startswith("attr_")}) > 300      # sparse attributes
    assert len({p["brand"] for p in ps}) > 20 and len({p["category"] for p in ps}) == 6
    codes = [e for p in ps for e in p["ean"]]
    assert len(codes) == len(set(codes)) and all(len(e) == 13 for e in codes)
    digits = np.array([[int(c) for c in e] for e in codes])
    assert np.all((digits[:, :12] * np.tile([1, 3], 6)).sum(axis=1) % 10
                  == (10 - digits[:, 12]) % 10)                      # GS1 check digits


def test_a_written_catalogue_is_typed_as_a_catalogue(tmp_path):
    from ltr_toolkit.indexing.documents import read_jsonl_documents
    path = tmp_path / "p.jsonl"
    write_jsonl(path, 400, seed=2)
    coll = read_jsonl_documents(path)
    kinds = {p: f.kind for p, f in coll.fields.items()}
    assert coll.text_fields == ("title", "description", "brand", "category")
    assert (kinds["ean"], kinds["sku"], kinds["price"], kinds["release_date"], kinds["tags"]) == \
        ("keyword", "keyword", "double", "date", "text")


def test_the_module_writes_jsonl_and_gzip(tmp_path):
    for name in ("p.jsonl", "p.jsonl.gz"):
        out = tmp_path / name
        r = subprocess.run([sys.executable, "-m", "ltr_toolkit.datasets.synthetic", "25", "-o", str(out),
                            "--seed", "5"], capture_output=True, text=True, cwd=str(ROOT))
        assert r.returncode == 0, r.stderr
        text = gzip.decompress(out.read_bytes()).decode() if name.endswith(".gz") else out.read_text()
        assert [json.loads(line) for line in text.splitlines()] == list(products(25, seed=5))
