"""The first stage: the user's own query, whose top hits the LTR model reranks.

Two forms, recorded in logged data's sidecar and in the model artifact so that training
and serving use the same one:

* a field list (the simple case): ``multi_match`` ``best_fields`` over the fields, with
  a tie breaker (``FirstStage.from_fields(["title", "abstract"])``);
* a search template file: JSON holding ``{"query": {...}}`` with Mustache variables such
  as ``"{{keywords}}"`` (``FirstStage.from_file(path)``).

Term statistics (``statistics``): ``"dfs"`` (the default) runs every search the toolkit
sends for this first stage -- the first stage itself, feature logging and the ``sltr``
rescore -- as ``dfs_query_then_fetch``, so BM25 and the other features see the whole
index's statistics and the first stage's ranking, the logged values and the served scores
do not depend on how the index is sharded (on one shard OpenSearch skips the extra
phase). ``"shard"`` keeps OpenSearch's default ``query_then_fetch`` (each shard's own
statistics) at logging and at serving alike. The choice is recorded with the first stage
(sidecar, model artifact, CV report), so logging and serving use the same one.

Rendering is Mustache's variable substitution on the JSON tree: a string that is exactly
``"{{name}}"`` becomes the parameter's value with its JSON type (a number, a list), and
``{{name}}`` inside a longer string is replaced by the value's text. Sections and partials
are not supported (an error names them). Parameters: ``keywords`` (the query text) and
any per-query parameters the judgment list carries.
"""

from __future__ import annotations

import fnmatch
import json
import re
from dataclasses import dataclass, field
from pathlib import Path

from ..data.fields import sub_properties, subfields, walk
from ..errors import InputError, UserError
from ..indexing.unfinished import check_finished
from ..io.text import read_json
from ..transport.client import request

VAR = re.compile(r"\{\{\{?\s*([A-Za-z_][\w.]*)\s*\}?\}\}")
SECTION = re.compile(r"\{\{\s*[#^/>!&]")
DEFAULT_FIELDS = ("title", "abstract")
STATISTICS = {"dfs": "dfs_query_then_fetch", "shard": "query_then_fetch"}
#: query types whose object keys are field names, and keys that hold field lists
_FIELD_KEYED = {"match", "match_phrase", "match_phrase_prefix", "match_bool_prefix", "term",
                "terms", "range", "prefix", "wildcard", "fuzzy", "regexp", "span_term",
                "intervals"}
_FIELD_LISTS = {"fields"}


@dataclass
class FirstStage:
    template: dict
    source: str = "fields"
    params: list[str] = field(default_factory=list)
    statistics: str = "dfs"

    def __post_init__(self):
        if self.statistics not in STATISTICS:
            raise UserError(f"statistics {self.statistics!r}: expected one of {', '.join(STATISTICS)}")

    # ------------------------------------------------------------------ construction
    @classmethod
    def from_fields(cls, fields=DEFAULT_FIELDS, statistics: str = "dfs") -> "FirstStage":
        fields = [f.strip() for f in fields if f and f.strip()]
        if not fields:
            raise UserError("the first stage needs at least one field")
        tpl = {"multi_match": {"query": "{{keywords}}", "fields": list(fields),
                               "type": "best_fields", "tie_breaker": 0.3}}
        return cls(template=tpl, source="fields", params=["keywords"], statistics=statistics)

    @classmethod
    def from_file(cls, path, statistics: str = "dfs") -> "FirstStage":
        path = Path(path)
        body, text = read_json(path)
        if not isinstance(body, dict) or set(body) != {"query"} or not isinstance(body["query"], dict):
            raise InputError(path, 1, 'a first-stage template is {"query": {...}} with '
                                      'Mustache variables such as "{{keywords}}"')
        m = SECTION.search(text)
        if m:
            line = text[: m.start()].count("\n") + 1
            raise InputError(path, line, "Mustache sections/partials are not supported in a "
                                         "first-stage template: use plain {{variables}}")
        names = sorted(set(VAR.findall(text)))
        if not names:
            raise InputError(path, 1, "the template uses no {{variable}}: every query would be the same")
        return cls(template=body["query"], source=str(path), params=names, statistics=statistics)

    @classmethod
    def from_dict(cls, d: dict | None) -> "FirstStage":
        if not d:
            return cls.from_fields()
        return cls(template=d["template"], source=d.get("source", "recorded"),
                   params=list(d.get("params", [])),
                   statistics=d.get("statistics", "shard"))    # recorded before the choice

    @classmethod
    def resolve(cls, template=None, fields=None, statistics: str = "dfs") -> "FirstStage":
        """From a template file, else a field list, else the default fields."""
        if template and fields:
            raise UserError("give the first stage as a template or as fields, not both")
        if template:
            return cls.from_file(template, statistics)
        return cls.from_fields(fields or DEFAULT_FIELDS, statistics)

    def to_dict(self) -> dict:
        return {"source": self.source, "params": list(self.params), "template": self.template,
                "statistics": self.statistics}

    @property
    def search_type(self) -> str:
        """The ``search_type`` of every search sent for this first stage."""
        return STATISTICS[self.statistics]

    def feature_column(self, featureset: dict) -> int | None:
        """The column of the feature whose template is this first stage (its score, as
        logged), or None: what lets a model be blended with the first stage."""
        body = featureset.get("featureset", featureset)
        for i, f in enumerate(body.get("features", [])):
            template = f.get("template")
            if isinstance(template, str):
                try:
                    template = json.loads(template)
                except ValueError:
                    continue
            if template == self.template:
                return i
        return None

    # ------------------------------------------------------------------ use
    def query(self, params: dict) -> dict:
        """The query clause for one query's parameters."""
        missing = [p for p in self.params if p not in params]
        if missing:
            raise UserError(f"the first stage needs parameter(s) {', '.join(missing)} "
                            f"that the query does not have",
                            "add them as columns of the judgment list (CSV/JSONL)")
        return _render(self.template, params)

    def fields(self) -> list[str]:
        """The field names (patterns) the template queries."""
        out: list[str] = []
        _collect_fields(self.template, out)
        return out

    def check(self, conn, index: str) -> None:
        """Every field the template names exists in ``index``: an error before any search."""
        known = index_fields(conn, index)
        for f in self.fields():
            name = f.split("^", 1)[0]
            if "{{" in name:
                continue
            if not any(fnmatch.fnmatchcase(k, name) for k in known):
                raise UserError(f"the first stage searches field {name!r}, which index {index} "
                                f"does not have (fields: {', '.join(sorted(known)[:12])})",
                                "fix --fields / the template, or --index")


def _render(node, params):
    if isinstance(node, dict):
        return {_render(k, params): _render(v, params) for k, v in node.items()}
    if isinstance(node, list):
        return [_render(v, params) for v in node]
    if isinstance(node, str):
        m = VAR.fullmatch(node.strip())
        if m:
            return params[m.group(1)]
        return VAR.sub(lambda m: _text(params[m.group(1)]), node)
    return node


def _text(v) -> str:
    return v if isinstance(v, str) else json.dumps(v)


def _collect_fields(node, out: list[str]) -> None:
    if isinstance(node, dict):
        for k, v in node.items():
            if k in _FIELD_KEYED and isinstance(v, dict):
                out.extend(key for key in v if not key.startswith("_") and key != "boost")
            if k in _FIELD_LISTS and isinstance(v, list):
                out.extend(x for x in v if isinstance(x, str))
            if k == "field" and isinstance(v, str):
                out.append(v)
            _collect_fields(v, out)
    elif isinstance(node, list):
        for v in node:
            _collect_fields(v, out)


def index_fields(conn, index: str) -> set[str]:
    """Every field path of ``index`` (multi-fields as ``field.sub``)."""
    resp = request(conn, "GET", f"/{index}/_mapping")
    names: set[str] = set()
    for body in resp.values():
        check_finished(conn, index, body.get("mappings", {}))   # its documents are not all there
        for path, spec in walk(body.get("mappings", {}).get("properties", {}), sub_properties):
            names.add(path)
            names.update(sub for sub, _ in subfields(path, spec))
    return names
