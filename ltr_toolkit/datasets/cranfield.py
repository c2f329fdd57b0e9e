"""The bundled Cranfield 1400 collection (see cranfield/README.md): documents, queries,
graded judgments, and the fixed seeded 60/20/20 query split every command uses.

Grades are mapped to gains as the collection's README suggests: gain = 5 - grade for
grades 1..4, and 0 for -1 (one row per query, undefined by the original readme).
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

import numpy as np

from ..data.judgments import JudgmentList
from ..data.smart import records

DATA = Path(__file__).resolve().parent / "cranfield"
#: The demo's feature set (also at feature_sets/cranfield.json in the source tree).
FEATURE_SET = DATA / "featureset.json"
#: The same without its semantic feature (a cluster without the k-NN plugin).
LEXICAL_FEATURE_SET = DATA / "featureset-lexical.json"
SPLIT_SEED = 20261121
SPLITS = ("train", "valid", "test")


@lru_cache(maxsize=1)
def documents() -> list[dict]:
    text = (DATA / "cran.all.1400").read_text()
    return [{"id": str(int(i)), "title": f.get("T", ""), "authors": f.get("A", ""),
             "source": f.get("B", ""), "abstract": f.get("W", "")}
            for i, f in records(text)]


@lru_cache(maxsize=1)
def queries() -> dict[str, str]:
    """qid -> text; qid is the query's position (1..225), as the qrels number them."""
    text = (DATA / "cran.qry").read_text()
    return {str(n): f.get("W", "") for n, (_, f) in enumerate(records(text), start=1)}


def gain(grade: int) -> float:
    return float(5 - grade) if 1 <= grade <= 4 else 0.0


@lru_cache(maxsize=1)
def judgments() -> JudgmentList:
    jl = JudgmentList(source=str(DATA / "cranqrel"))
    qs = queries()
    for q, t in qs.items():
        jl.add_query(q, t)
    path = DATA / "cranqrel"
    for i, line in enumerate(path.read_text().splitlines(), start=1):
        parts = line.split()
        if not parts:
            continue
        qid, docid, grade = parts[0], parts[1], int(parts[2])
        jl.add(qid, docid, gain(grade), path, i)
    return jl


def split_qids() -> dict[str, list[str]]:
    """The fixed seeded 60/20/20 split of the 225 queries."""
    qids = sorted(queries(), key=int)
    perm = np.random.default_rng(SPLIT_SEED).permutation(len(qids))
    n = len(qids)
    a, b = int(round(0.6 * n)), int(round(0.8 * n))
    pick = lambda idx: sorted((qids[i] for i in idx), key=int)  # noqa: E731
    return {"train": pick(perm[:a]), "valid": pick(perm[a:b]), "test": pick(perm[b:])}


def split_judgments(split: str = "all") -> JudgmentList:
    jl = judgments()
    if split == "all":
        return jl
    if split not in SPLITS:
        raise ValueError(f"split must be one of {SPLITS} or all")
    return jl.subset(split_qids()[split])
