"""Judgment lists: one internal model, three file formats in, the toolkit's format out.

Formats (chosen by ``fmt``, else by the file's name: :data:`SUFFIXES`, the one table
reading and writing both go by):

* ``ranklib`` — what hello-ltr writes: headers ``# qid:N: keywords`` then rows
  ``grade qid:N # docid`` (the toolkit's own format; written by :func:`save_ranklib`);
* ``trec`` — TREC qrels ``qid iter docid grade`` plus a queries file (``qid<TAB>text``
  or ``qid text``), by default the one beside the qrels, ``OUT.queries``
  (:func:`queries_beside`);
* ``csv`` / ``jsonl`` — columns / keys ``qid``, ``query``, ``docid``, ``grade`` (a
  ``.tsv`` file's columns tab-separated); any other column / key is a per-query
  parameter (the same value on every row of a query), handed to the first-stage template
  and the feature set's templates beside ``keywords``.

A name ending in ``.gz`` is read unzipped and written gzip'd. The RankLib files and the
TREC queries files the toolkit writes start with :data:`JUDGMENTS_MARK`: their ids and
texts are percent-escaped (:mod:`.ids`); other tools' files are read as they are.
:func:`save_judgments` writes every format, so that what it writes reads back the same.

Every problem names ``file:line``. A pair judged twice with the same grade is a
duplicate (kept once, reported); with different grades it is a conflict (an error).
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import re
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import InputError
from ..io.atomic import atomic_gzip, atomic_write
from ..io.text import read_text
from .ids import MARK, escape_id, escape_text, is_marked, unescape

#: The first line of the RankLib judgments and of the TREC queries files the toolkit
#: writes: their ids and texts are percent-escaped (:mod:`.ids`).
JUDGMENTS_MARK = MARK + "judgments: ids and query texts percent-escaped"

#: Judgment files by name, reading and writing alike: the suffix before an optional
#: ``.gz`` -> (format, CSV delimiter); any other name is RankLib.
SUFFIXES = {".qrels": ("trec", None), ".csv": ("csv", ","), ".tsv": ("csv", "\t"),
            ".jsonl": ("jsonl", None), ".ndjson": ("jsonl", None)}
#: What TREC qrels ``OUT``'s queries file adds to its name (``OUT.queries``; beside
#: ``OUT.gz``, ``OUT.queries.gz``).
QUERIES_SUFFIX = ".queries"


@dataclass
class JudgmentList:
    """Queries (qid -> text, in order of appearance) and graded (qid, docid) pairs."""

    queries: dict[str, str] = field(default_factory=dict)
    grades: dict[tuple[str, str], float] = field(default_factory=dict)
    duplicates: list[str] = field(default_factory=list)
    source: str | None = None
    params: dict[str, dict] = field(default_factory=dict)   # qid -> extra per-query params

    def query_params(self, qid: str) -> dict:
        """The template parameters of a query: ``keywords`` and its extra parameters."""
        return {"keywords": self.queries[qid], **self.params.get(qid, {})}

    def add_params(self, qid: str, params: dict, path=None, line=None) -> None:
        old = self.params.get(qid)
        if old is not None and old != params:
            raise InputError(path, line, f"query {qid} has two sets of parameters: {old} and {params}")
        if params:
            self.params[qid] = dict(params)

    def add_query(self, qid: str, text: str, path=None, line=None) -> None:
        old = self.queries.get(qid)
        if old is not None and old != text and text:
            raise InputError(path, line, f"query {qid} has two texts: {old!r} and {text!r}")
        if old is None or not old:
            self.queries[qid] = text

    def add(self, qid: str, docid: str, grade: float, path=None, line=None) -> None:
        key = (qid, docid)
        if key in self.grades:
            if self.grades[key] != grade:
                raise InputError(path, line, f"conflicting grades for query {qid}, doc {docid}: "
                                             f"{self.grades[key]:g} and {grade:g}")
            self.duplicates.append(f"{path}:{line}: duplicate judgment for query {qid}, doc {docid}")
            return
        self.grades[key] = grade
        self.queries.setdefault(qid, "")

    # ------------------------------------------------------------------ views
    def qids(self) -> list[str]:
        return list(self.queries)

    def docs_of(self, qid: str) -> list[tuple[str, float]]:
        return self.by_query().get(qid, [])

    def judged_qids(self) -> list[str]:
        """Queries with at least one judged document, in order."""
        return [q for q, docs in self.by_query().items() if docs]

    def by_query(self) -> dict[str, list[tuple[str, float]]]:
        out: dict[str, list[tuple[str, float]]] = {q: [] for q in self.queries}
        for (q, d), g in self.grades.items():
            out[q].append((d, g))
        return out

    def subset(self, qids) -> "JudgmentList":
        keep = set(qids)
        jl = JudgmentList(source=self.source)
        for q in self.queries:
            if q in keep:
                jl.queries[q] = self.queries[q]
        jl.grades = {k: g for k, g in self.grades.items() if k[0] in keep}
        jl.params = {q: p for q, p in self.params.items() if q in keep}
        return jl

    def content_hash(self) -> str:
        h = hashlib.sha256()
        for q, t in self.queries.items():
            h.update(f"Q\t{q}\t{t}\n".encode())
        for (q, d), g in sorted(self.grades.items()):
            h.update(f"J\t{q}\t{d}\t{g!r}\n".encode())
        for q, p in sorted(self.params.items()):
            h.update(f"P\t{q}\t{json.dumps(p, sort_keys=True)}\n".encode())
        return h.hexdigest()

    def __len__(self) -> int:
        return len(self.grades)

    def to_dict(self) -> dict:
        """A JSON-ready copy (order kept, so :meth:`content_hash` survives the round trip)."""
        return {"source": self.source, "queries": [[q, t] for q, t in self.queries.items()],
                "grades": [[q, d, g] for (q, d), g in self.grades.items()],
                "params": self.params}

    @classmethod
    def from_dict(cls, data: dict) -> "JudgmentList":
        return cls(queries={q: t for q, t in data["queries"]},
                   grades={(q, d): float(g) for q, d, g in data["grades"]},
                   source=data.get("source"), params=dict(data.get("params") or {}))


def _grade(text: str, path, line) -> float:
    try:
        g = float(text)
    except ValueError:
        raise InputError(path, line, f"grade {text!r} is not a number") from None
    if g != g or g in (float("inf"), float("-inf")):
        raise InputError(path, line, f"grade {text!r} is not finite")
    if g < 0:   # the policy: grades are gains; map e.g. -1 ("junk") to 0 before use
        raise InputError(path, line, f"grade {text!r} is negative: grades are gains >= 0 "
                                     "(map negative judgments to 0)")
    return g


_HEADER = re.compile(r"^#\s*qid:(\S+?):\s?(.*)$")


def read_ranklib(path) -> JudgmentList:
    """RankLib judgments; ids and texts decoded in a file with the toolkit's mark
    (:mod:`.ids`), as they are in any other."""
    path = Path(path)
    jl = JudgmentList(source=str(path))
    lines = _lines(path)
    esc = is_marked(lines[0])
    for i, raw in enumerate(lines, start=1):
        line = raw.strip()
        if not line:
            continue
        if line.startswith("#"):
            m = _HEADER.match(line)
            if m:
                jl.add_query(unescape(m.group(1), esc), unescape(m.group(2).strip(), esc), path, i)
            continue
        body, _, comment = line.partition("#")
        parts = body.split()
        if len(parts) < 2 or not parts[1].startswith("qid:") or len(parts[1]) == 4:
            raise InputError(path, i, "expected `grade qid:N # docid`")
        docid = unescape(comment.split()[0], esc) if comment.strip() else ""
        if not docid:
            raise InputError(path, i, "no `# docid` comment: the judged document is unknown")
        jl.add(unescape(parts[1][4:], esc), docid, _grade(parts[0], path, i), path, i)
    return _non_empty(jl, path)


def read_trec(qrels, queries) -> JudgmentList:
    """TREC qrels and their queries file; ids and texts of both decoded when the queries
    file has the toolkit's mark (qrels carry none: other tools read exactly four fields
    a line), as they are otherwise."""
    qrels, queries = Path(qrels), Path(queries)
    jl = JudgmentList(source=str(qrels))
    lines = _lines(queries)
    esc = is_marked(lines[0])
    for i, raw in enumerate(lines[1:] if esc else lines, start=2 if esc else 1):
        line = raw.rstrip("\n")
        if not line.strip():
            continue
        qid, sep, text = line.partition("\t")
        if not sep:
            qid, _, text = line.strip().partition(" ")
        if not text.strip():
            raise InputError(queries, i, "expected `qid<TAB>query text`")
        jl.add_query(unescape(qid.strip(), esc), unescape(text.strip(), esc), queries, i)
    for i, raw in enumerate(_lines(qrels), start=1):
        parts = raw.split()
        if not parts:
            continue
        if len(parts) != 4:
            raise InputError(qrels, i, f"expected `qid iteration docid grade`, got {len(parts)} fields")
        qid, docid = unescape(parts[0], esc), unescape(parts[2], esc)
        if qid not in jl.queries:
            raise InputError(qrels, i, f"query {qid} is not in {queries.name}")
        jl.add(qid, docid, _grade(parts[3], qrels, i), qrels, i)
    return _non_empty(jl, qrels)


#: Column names other tools give the four columns (Elastic's learning-to-rank notebook,
#: Quepid-style exports): read as the toolkit's own.
_ALIASES = {"query_id": "qid", "doc_id": "docid", "document_id": "docid",
            "keywords": "query", "query_text": "query", "relevance": "grade", "rating": "grade"}


def _delimiter(text: str) -> str:
    """Comma, tab or semicolon: the one the header line holds (a comma first)."""
    header = text.split("\n", 1)[0]
    return next((d for d in (",", "\t", ";") if d in header), ",")


def read_csv(path) -> JudgmentList:
    path = Path(path)
    jl = JudgmentList(source=str(path))
    text = read_text(path)
    # the csv module on the whole text: it alone knows which line breaks end a row
    reader = csv.DictReader(io.StringIO(text, newline=""), delimiter=_delimiter(text))
    if reader.fieldnames:
        reader.fieldnames = [_ALIASES.get(f.strip().lower(), f.strip()) for f in reader.fieldnames]
    need = {"qid", "docid", "grade"}
    if not reader.fieldnames or not need <= set(reader.fieldnames):
        raise InputError(path, 1, f"header must name qid, query, docid, grade (got {reader.fieldnames})")
    for row in reader:
        i = reader.line_num
        if None in row.values() or None in row:
            raise InputError(path, i, "wrong number of columns")
        _add_row(jl, row, path, i)
    return _non_empty(jl, path)


def read_jsonl(path) -> JudgmentList:
    path = Path(path)
    jl = JudgmentList(source=str(path))
    for i, raw in enumerate(_lines(path), start=1):
        if not raw.strip():
            continue
        try:
            row = json.loads(raw)
        except json.JSONDecodeError as exc:
            raise InputError(path, i, f"invalid JSON: {exc.msg}") from None
        if not isinstance(row, dict) or not {"qid", "docid", "grade"} <= set(row):
            raise InputError(path, i, "each line needs qid, docid, grade (and query)")
        _add_row(jl, row, path, i)
    return _non_empty(jl, path)


_COLUMNS = {"qid", "query", "docid", "grade"}


def _add_row(jl, row, path, i):
    qid, docid = str(row["qid"]).strip(), str(row["docid"]).strip()
    if not qid or not docid:
        raise InputError(path, i, "empty qid or docid")
    jl.add_query(qid, str(row.get("query") or "").strip(), path, i)
    jl.add(qid, docid, _grade(str(row["grade"]), path, i), path, i)
    extra = {k: v for k, v in row.items() if k not in _COLUMNS}
    bad = [k for k in extra if not re.fullmatch(r"[A-Za-z_]\w*", str(k))]
    if bad:
        raise InputError(path, i, f"column {bad[0]!r} is not a usable parameter name (letters, digits, _)")
    jl.add_params(qid, extra, path, i)


def _lines(path: Path) -> list[str]:
    """The file's lines, broken at \\n (and \\r\\n) only: U+2028, NEL or a form feed in
    a JSON string or a query text is no line break."""
    return [line[:-1] if line.endswith("\r") else line
            for line in read_text(path).split("\n")]


def _non_empty(jl: JudgmentList, path) -> JudgmentList:
    if not jl.grades:
        raise InputError(path, None, "no judgments found")
    missing = [q for q, t in jl.queries.items() if not t]
    if missing:
        raise InputError(path, None, f"{len(missing)} judged queries have no text (e.g. qid {missing[0]}): "
                                     "feature logging needs the keywords")
    return jl


#: The judgment file formats :func:`load_judgments` reads and :func:`save_judgments` writes.
FORMATS = ("ranklib", "trec", "csv", "jsonl")


def _unzipped(path: Path) -> tuple[Path, bool]:
    """(``path`` without a ``.gz``, whether it had one)."""
    gz = path.suffix.lower() == ".gz"
    return (path.with_suffix("") if gz else path), gz


def format_of(path) -> str:
    """The format a judgment file's name says (:data:`SUFFIXES`; RankLib otherwise)."""
    return SUFFIXES.get(_unzipped(Path(path))[0].suffix.lower(), ("ranklib",))[0]


def queries_beside(path) -> Path:
    """The queries file that goes with TREC qrels ``path``: ``path.queries``
    (``x.qrels.gz``: ``x.qrels.queries.gz``)."""
    inner, gz = _unzipped(Path(path))
    return inner.with_name(inner.name + QUERIES_SUFFIX + (".gz" if gz else ""))


def load_judgments(path, fmt: str | None = None, queries=None) -> JudgmentList:
    """The judgments of ``path`` in format ``fmt`` (else the one its name says; given
    ``queries``, TREC). TREC qrels without ``queries``: the queries file beside them."""
    path = Path(path)
    fmt = fmt or ("trec" if queries is not None else format_of(path))
    if fmt == "trec":
        if queries is None:
            queries = queries_beside(path)
            if not queries.is_file():
                raise InputError(path, None, f"TREC qrels need their queries file: no "
                                             f"{queries.name} beside them (give --queries FILE)")
        return read_trec(path, queries)
    readers = {"ranklib": read_ranklib, "csv": read_csv, "jsonl": read_jsonl}
    if fmt not in readers:
        raise InputError(path, None, f"unknown judgment format {fmt!r} ({', '.join(FORMATS)})")
    return readers[fmt](path)


# --------------------------------------------------------------------------- writing

def _grade_text(g) -> str:
    return str(int(g)) if float(g).is_integer() else repr(float(g))


def _pairs(jl: JudgmentList):
    """(qid, docid, grade) of every judgment, query by query in the list's order: read
    back, the list has its queries in the same order (:meth:`JudgmentList.content_hash`)."""
    return [(q, d, g) for q, docs in jl.by_query().items() for d, g in docs]


def format_ranklib(jl: JudgmentList) -> str:
    out = [JUDGMENTS_MARK]
    for q, text in jl.queries.items():
        out.append(f"# qid:{escape_id(q)}: {escape_text(text)}")
    out += [f"{_grade_text(g)} qid:{escape_id(q)} # {escape_id(d)}" for q, d, g in _pairs(jl)]
    return "\n".join(out) + "\n"


def format_qrels(jl: JudgmentList) -> str:
    """TREC qrels (their ids escaped: the queries file beside them has the mark)."""
    return "".join(f"{escape_id(q)} 0 {escape_id(d)} {_grade_text(g)}\n" for q, d, g in _pairs(jl))


def format_queries(jl: JudgmentList) -> str:
    """The queries file beside TREC qrels: the mark, then ``qid<TAB>text`` lines."""
    return JUDGMENTS_MARK + "\n" + "".join(f"{escape_id(q)}\t{escape_text(t)}\n"
                                          for q, t in jl.queries.items())


def format_csv(jl: JudgmentList, delimiter: str = ",") -> str:
    buf = io.StringIO(newline="")
    w = csv.writer(buf, delimiter=delimiter, lineterminator="\n")
    w.writerow(["qid", "query", "docid", "grade"])
    w.writerows([q, jl.queries[q], d, _grade_text(g)] for q, d, g in _pairs(jl))
    return buf.getvalue()


def format_jsonl(jl: JudgmentList) -> str:
    return "".join(json.dumps({"qid": q, "query": jl.queries[q], "docid": d, "grade": g}) + "\n"
                   for q, d, g in _pairs(jl))


def _write(path: Path, text: str) -> Path:
    """``text`` written atomically, gzip'd when the name ends with ``.gz``."""
    with (atomic_gzip(path) if _unzipped(path)[1] else atomic_write(path)) as fh:
        fh.write(text)
    return path


def save_judgments(jl: JudgmentList, path, fmt: str | None = None) -> list[Path]:
    """``jl`` in format ``fmt`` (else the one the name says, :data:`SUFFIXES`), gzip'd
    when the name ends with ``.gz``; returns the files written (TREC: the qrels and the
    queries file beside them, :func:`queries_beside`). Queries and grades are written,
    not per-query parameters; CSV and JSONL hold judged queries only."""
    path = Path(path)
    fmt = fmt or format_of(path)
    if fmt == "trec":
        return [_write(path, format_qrels(jl)), _write(queries_beside(path), format_queries(jl))]
    if fmt == "csv":
        delimiter = SUFFIXES.get(_unzipped(path)[0].suffix.lower(), (None, ","))[1] or ","
        return [_write(path, format_csv(jl, delimiter))]
    writers = {"ranklib": format_ranklib, "jsonl": format_jsonl}
    if fmt not in writers:
        raise InputError(path, None, f"unknown judgment format {fmt!r} ({', '.join(FORMATS)})")
    return [_write(path, writers[fmt](jl))]


def save_ranklib(jl: JudgmentList, path) -> None:
    save_judgments(jl, path, "ranklib")
