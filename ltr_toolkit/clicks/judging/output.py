"""The judgment list clicks give, its per-pair counts, and the files they go to.

A query's id is stable across runs and sources: ``q`` + the first 12 hex digits of the
SHA-1 of its text (:func:`qid_for`), so two days of events give the same qids.

Files, written atomically: the judgment list in any format the toolkit reads (chosen by
``fmt`` or the output's name by the table reading goes by too, ``data.judgments.SUFFIXES``:
``.qrels`` (TREC, with the queries in ``OUT.queries``), ``.tsv``, ``.csv``, ``.jsonl`` /
``.ndjson``, each gzip'd when the name adds ``.gz``; anything else RankLib), so that what
is written reads back the same; and beside it

* ``OUT.counts.csv``: ``qid, query, docid, grade, impressions, clicks, estimate`` for every
  pair (also those below the minimum number of impressions, with an empty grade). The
  counts are not columns of the judgment file itself: the CSV/JSONL readers take extra
  columns as per-query template parameters;
* ``OUT.json``: the report (model, settings, counts, the bad data seen).
"""

from __future__ import annotations

import csv
import hashlib
from pathlib import Path

import numpy as np

from ...data.judgments import FORMATS, JudgmentList, format_of, save_judgments
from ...errors import UserError
from ...io.atomic import atomic_write, write_json
from .grades import keep_mask, to_grades
from .clickmodels import Estimates

OUTPUT_FORMATS = FORMATS


def qid_for(text: str) -> str:
    return "q" + hashlib.sha1(text.encode("utf-8")).hexdigest()[:12]


def judgment_list(est: Estimates, texts, docs, grades: np.ndarray, keep: np.ndarray,
                  source: str) -> JudgmentList:
    jl = JudgmentList(source=source)
    for i in np.flatnonzero(keep):         # one entry per judged pair: the output itself
        text = texts[est.query[i]]
        qid = qid_for(text)
        jl.queries.setdefault(qid, text)
        jl.grades[(qid, docs[est.doc[i]])] = float(grades[i])
    return jl


def click_judgments(est: Estimates, texts, docs, mapping="levels", levels=4, min_impressions=5,
                    source="clicks"):
    """(judgment list, per-pair rows for ``OUT.counts.csv``)."""
    grades = to_grades(est, mapping, levels)
    keep = keep_mask(est, min_impressions)
    jl = judgment_list(est, texts, docs, grades, keep, source)
    rows = [[qid_for(texts[q]), texts[q], docs[d], (f"{g:g}" if k else ""), int(n), int(c), round(float(e), 6)]
            for q, d, g, k, n, c, e in zip(est.query, est.doc, grades, keep, est.impressions,
                                           est.clicks, est.estimate)]
    return jl, rows


def output_format(path: Path, fmt: str | None) -> str:
    if fmt:
        if fmt not in OUTPUT_FORMATS:
            raise UserError(f"format {fmt!r}", f"use one of {', '.join(OUTPUT_FORMATS)}")
        return fmt
    return format_of(path)


def write_judgments(jl: JudgmentList, path, fmt: str | None = None) -> list[Path]:
    """Write ``jl``; returns the files written (TREC: the qrels and ``OUT.queries``)."""
    path = Path(path)
    return save_judgments(jl, path, output_format(path, fmt))


def write_counts(rows, path) -> Path:
    path = Path(path)
    out = path.with_name(path.name + ".counts.csv")
    with atomic_write(out) as fh:
        w = csv.writer(fh, lineterminator="\n")
        w.writerow(["qid", "query", "docid", "grade", "impressions", "clicks", "estimate"])
        w.writerows(rows)
    return out


def write_report(report: dict, path) -> Path:
    path = Path(path)
    out = path.with_name(path.name + ".json")
    write_json(out, report)
    return out
