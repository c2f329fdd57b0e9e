"""What a JSONL collection's fields are, read from their values, and how each is mapped:
a catalogue's prices, dates, flags, lists of names and sparse attributes as well as its
text.

* strings and arrays of strings: ``text``; the main ones (in at least half the
  documents) get the toolkit's BM25 shape (LM Dirichlet and DFR multi-fields, a token
  count), the others a ``keyword`` sub-field for exact matches;
* numbers: ``long`` (whole numbers only) or ``double`` (also where some are written as
  text, ``"12.50"``: the engines coerce them); booleans: ``boolean``;
* strings that are all ISO dates: ``date``, with a format that takes an SQL export's
  ``2025-06-01 10:00:00`` too (:data:`..data.fields.DATE_FORMAT`);
* identifiers (strings without a space, a different value in at least
  :data:`IDENTIFIER_SHARE` of the documents: URLs, SKUs, EANs), and arrays of them (each
  value counted: a product's list of EANs): ``keyword``, matched exactly and kept out of
  the BM25 text, the vectors and the neighbours (a list of repeated words, tags, stays
  text);
* objects: their fields, as dotted paths; nulls and empty arrays: absent.

A field whose values disagree (a number on one line, a string on another) is refused at
the line where it changes, naming both."""

from __future__ import annotations

from dataclasses import dataclass

from ..data.fields import DATE_FORMAT, NUMERIC_TEXT, is_date, object_value, sub_properties, walk
from ..errors import InputError

TEXT, LONG, DOUBLE, BOOLEAN, DATE, KEYWORD = "text", "long", "double", "boolean", "date", "keyword"
#: a number written as text (``"12.50"``): a number beside real numbers, else text
NUMTEXT = "numeric text"
#: the exact form of a text field (``FIELD.keyword``)
KEYWORD_FORM = {"type": "keyword", "ignore_above": 256}
#: the prefix of the toolkit's own fields in an index it makes (a main text field's token
#: count): a name no catalogue uses, so a user's ``title_len`` is never overwritten
HELPER_PREFIX = "ltr_toolkit__"
#: a text field in at least this share of the documents is a main one (the BM25 shape)
MAIN_SHARE = 0.5
#: the mapping fields an index may have before the toolkit raises the engine's limit
DEFAULT_FIELD_LIMIT = 1000
#: a spaceless text field with a different value in at least this share is an identifier
IDENTIFIER_SHARE = 0.9
#: distinct values remembered per field to tell an identifier (memory stays bounded)
_DISTINCT_CAP = 100_000


@dataclass
class Field:
    path: str
    kind: str
    docs: int          # documents with a value
    line: int          # where its kind was first seen
    spaced: bool = False                  # a text value with white space seen
    distinct: set | None = None           # text values seen (up to _DISTINCT_CAP)
    counted: int = 0                      # values (an array's each) that went into ``distinct``
    noted: int = 0                        # documents whose values went into ``distinct``

    def note(self, value) -> None:
        """Remember a text value, each of an array's (a list of EANs is a list of
        identifiers): whether it has spaces, how many differ."""
        values = [v for v in value if v is not None] if isinstance(value, list) else [value]
        if self.spaced or not all(isinstance(v, str) and not any(c.isspace() for c in v)
                                  for v in values):
            self.spaced = True
            return
        if self.distinct is None:
            self.distinct = set()
        self.noted += 1
        for v in values:
            if len(self.distinct) >= _DISTINCT_CAP:
                break
            self.distinct.add(v)
            self.counted += 1

    def identifier(self) -> bool:
        return (self.kind == TEXT and not self.spaced and self.noted > 1
                and len(self.distinct or ()) >= IDENTIFIER_SHARE * self.counted)


def _kind(value, path: str, line: int, where) -> str | None:
    """The kind of one value (None: no value)."""
    if value is None:
        return None
    if isinstance(value, bool):
        return BOOLEAN
    if isinstance(value, int):
        return LONG
    if isinstance(value, float):
        return DOUBLE
    if isinstance(value, str):
        return DATE if is_date(value) else NUMTEXT if NUMERIC_TEXT.match(value) else TEXT
    if isinstance(value, list):
        kinds = {k for v in value if (k := _kind(v, path, line, where)) is not None}
        merged = _merge(kinds) if kinds else None
        if kinds and merged is None:
            raise InputError(where, line, f"field {path!r} mixes {' and '.join(sorted(kinds))} "
                             "in one array: one type per field")
        return merged
    raise InputError(where, line, f"field {path!r} holds {type(value).__name__}: expected text, "
                     "numbers, booleans, dates, arrays of them or objects")


#: kinds that hold together in one field, and what they make
_TOGETHER = {frozenset({LONG, DOUBLE}): DOUBLE, frozenset({TEXT, DATE}): TEXT,
             frozenset({TEXT, NUMTEXT}): TEXT, frozenset({DATE, NUMTEXT}): TEXT,
             # a number written as text beside real numbers: the engines coerce it
             frozenset({LONG, NUMTEXT}): DOUBLE, frozenset({DOUBLE, NUMTEXT}): DOUBLE,
             frozenset({LONG, DOUBLE, NUMTEXT}): DOUBLE, frozenset({TEXT, DATE, NUMTEXT}): TEXT}


def _merge(kinds: set[str]) -> str | None:
    """The kind of a field whose values are of ``kinds`` (None: they do not hold together)."""
    return next(iter(kinds)) if len(kinds) == 1 else _TOGETHER.get(frozenset(kinds))


def infer(docs: list[tuple[int, dict]], where) -> dict[str, Field]:
    """{dotted path: Field} of ``docs`` ((line, document) pairs; ``id`` aside)."""
    fields: dict[str, Field] = {}
    for line, doc in docs:
        for path, value in walk(doc, object_value):
            if path == "id" or isinstance(value, dict):
                continue
            kind = _kind(value, path, line, where)
            if kind is None:
                continue
            f = fields.get(path)
            if f is None:                      # its first value: merged with itself below
                f = fields[path] = Field(path, kind, 0, line)
            merged = _merge({f.kind, kind})
            if merged is None:
                raise InputError(where, line, f"field {path!r} is {kind} here but {f.kind} on line "
                                 f"{f.line}: one type per field (make them all {f.kind}, or "
                                 "rename one)")
            f.kind, f.docs = merged, f.docs + 1
            if merged in (TEXT, NUMTEXT):
                f.note(value)
    for f in fields.values():
        if f.kind == NUMTEXT:   # numbers written as text and nothing else: codes, kept as text
            f.kind = TEXT
        if f.identifier():
            f.kind = KEYWORD
        f.distinct = None
    return fields


def main_text(fields: dict[str, Field], n_docs: int) -> tuple[str, ...]:
    """The top-level text fields of at least :data:`MAIN_SHARE` of the documents."""
    return tuple(p for p, f in fields.items()
                 if f.kind == TEXT and "." not in p and f.docs >= MAIN_SHARE * n_docs)


def properties(fields: dict[str, Field], main: tuple[str, ...], analyzer: str) -> dict:
    """The mapping ``properties`` of every field but the main text ones (nested as
    objects along their dotted paths)."""
    props: dict = {}
    for path, f in fields.items():
        if path in main:
            continue
        spec = ({"type": "text", "analyzer": analyzer, "fields": {"keyword": KEYWORD_FORM}}
                if f.kind == TEXT else {"type": DATE, "format": DATE_FORMAT} if f.kind == DATE
                else {"type": f.kind})
        node = props
        parts = path.split(".")
        for part in parts[:-1]:
            node = node.setdefault(part, {"properties": {}})["properties"]
        node[parts[-1]] = spec
    return props


def length_field(field: str) -> str:
    """The toolkit's token count of a main text field (:data:`HELPER_PREFIX`)."""
    return f"{HELPER_PREFIX}{field}_len"


def count_fields(props: dict) -> int:
    """The mapping fields ``props`` makes (objects and sub-fields counted, as the engines
    count them against ``index.mapping.total_fields.limit``)."""
    return sum(1 + len(spec.get("fields", {})) for _, spec in walk(props, sub_properties))


def report(fields: dict[str, Field], main: tuple[str, ...], n_docs: int) -> list[dict]:
    """What was done with each field: its kind, its share of the documents, its mapping."""
    rows = []
    for path, f in fields.items():
        how = ("BM25 text (+ LM Dirichlet, DFR, token count)" if path in main
               else "text + keyword" if f.kind == TEXT
               else "keyword (an identifier: no spaces, a different value nearly everywhere)"
               if f.kind == KEYWORD else f.kind)
        rows.append({"field": path, "kind": f.kind, "documents": f.docs,
                     "share": round(f.docs / n_docs, 4), "mapped": how})
    return rows
