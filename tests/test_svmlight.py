"""SVMlight / RankLib reader and writer."""

from __future__ import annotations

import numpy as np
import pytest

from ltr_toolkit.data.svmlight import load_svmlight, save_svmlight
from ltr_toolkit.errors import InputError


def test_round_trip_with_comments_sparse_and_qid_order(tmp_path):
    p = tmp_path / "a.txt"
    p.write_text(
        "# a header comment\n"
        "2 qid:7 1:0.5 3:1.25 # doc-a\n"
        "\n"
        "0 qid:7 2:3 # doc-b extra words\n"
        "1 qid:3 1:-1e-3 2:7 3:8 # doc-c\n"
        "4 qid:7 1:0.1 # doc-d\n")
    ds = load_svmlight(p)
    assert list(ds.qids) == ["7", "3"]                 # order of first appearance
    assert list(ds.group_sizes) == [3, 1]               # qid 7's late row joins its query
    assert list(ds.doc_ids) == ["doc-a", "doc-b", "doc-d", "doc-c"]
    np.testing.assert_array_equal(ds.y, [2, 0, 4, 1])
    np.testing.assert_array_equal(ds.X[1], np.array([0, 3, 0], dtype=np.float32))  # missing -> 0
    assert ds.X.dtype == np.float32
    out = tmp_path / "b.txt"
    save_svmlight(ds, out)
    again = load_svmlight(out)
    np.testing.assert_array_equal(again.X, ds.X)
    np.testing.assert_array_equal(again.y, ds.y)
    assert list(again.qids) == list(ds.qids) and list(again.doc_ids) == list(ds.doc_ids)


def test_float32_values_round_trip_exactly(tmp_path):
    rng = np.random.default_rng(0)
    from ltr_toolkit.data.dataset import RankingDataset
    X = (rng.normal(size=(50, 4)) * 10.0 ** rng.integers(-6, 6, size=(50, 4))).astype(np.float32)
    ds = RankingDataset(X=X, y=rng.integers(0, 3, 50), offsets=[0, 20, 50], qids=["1", "2"])
    save_svmlight(ds, tmp_path / "x.txt")
    np.testing.assert_array_equal(load_svmlight(tmp_path / "x.txt").X, X)


def test_missing_fill_value(tmp_path):
    p = tmp_path / "m.txt"
    p.write_text("1 qid:1 2:5\n0 qid:1 1:1 2:2\n")
    ds = load_svmlight(p, missing=np.nan)
    assert np.isnan(ds.X[0, 0]) and ds.X[1, 0] == 1


@pytest.mark.parametrize("text,line,fragment", [
    ("1 qid:1 1:0.5\nfoo qid:1 1:2\n", 2, "not a number"),
    ("1 qid:1 1:0.5\n1 1:2\n", 2, "qid:N"),
    ("1 qid:1 1:0.5\n0 qid:1 1:x\n", 2, "bad feature"),
    ("1 qid:1 1:0.5\n0 qid:1 0:1\n", 2, ">= 1"),
    ("1 qid:1 1:0.5 oops\n", 1, "bad feature token"),
])
def test_errors_name_file_and_line(tmp_path, text, line, fragment):
    p = tmp_path / "bad.txt"
    p.write_text(text)
    with pytest.raises(InputError) as ei:
        load_svmlight(p)
    assert f"bad.txt:{line}:" in str(ei.value) and fragment in str(ei.value)


def test_mslr_loads(mslr_paths):
    ds = load_svmlight(mslr_paths[0])
    assert ds.X.shape == (5000, 136) and ds.n_queries == 43
    assert np.bincount(ds.y.astype(int)).tolist() == [2792, 1458, 665, 55, 30]
