"""Feature set files (``feature_sets/*.json``), validated locally before upload.

A file holds the plugin's feature set JSON, either bare (``{"name", "features"}``) or
wrapped as ``{"featureset": {...}}``. Every problem is reported as ``file:line``.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from ..versions import PLUGIN_MAX_FEATURES
from ..errors import InputError
from ..io.text import read_json

MAX_FEATURES = PLUGIN_MAX_FEATURES
_MUSTACHE_VAR = re.compile(r"{{\s*[#^/&{]?\s*([A-Za-z_][\w.]*)\s*}?}}")
#: the plugin's Mustache function that writes a parameter as JSON (e.g. a query vector)
_TO_JSON = re.compile(r"{{\s*#\s*toJson\s*}}\s*([A-Za-z_][\w.]*)\s*{{\s*/\s*toJson\s*}}")


def template_params(template) -> set[str]:
    """The parameter names a Mustache template uses (``{{name}}``, sections, and
    ``{{#toJson}}name{{/toJson}}``)."""
    text = template if isinstance(template, str) else json.dumps(template)
    return (set(_MUSTACHE_VAR.findall(_TO_JSON.sub("", text))) | set(_TO_JSON.findall(text)))


def _line_of(text: str, needle: str, start: int = 0) -> int:
    pos = text.find(needle, start)
    return text.count("\n", 0, pos) + 1 if pos >= 0 else 1


def load_featureset(path) -> dict:
    path = Path(path)
    doc, text = read_json(path)
    return validate_featureset(doc, path, text)


def validate_featureset(doc, path="<featureset>", text: str = "") -> dict:
    if isinstance(doc, dict) and "featureset" in doc and isinstance(doc["featureset"], dict):
        inner = dict(doc["featureset"])
        inner.setdefault("name", doc.get("name"))
        doc = inner
    if not isinstance(doc, dict):
        raise InputError(path, 1, "a feature set must be a JSON object")
    name = doc.get("name")
    if not isinstance(name, str) or not name.strip():
        raise InputError(path, 1, 'feature set needs a non-empty "name"')
    feats = doc.get("features")
    if not isinstance(feats, list) or not feats:
        raise InputError(path, _line_of(text, '"features"'), 'feature set needs a non-empty "features" list')
    if len(feats) > MAX_FEATURES:
        raise InputError(path, _line_of(text, '"features"'),
                         f"{len(feats)} features: the plugin allows at most {MAX_FEATURES}")
    seen: dict[str, int] = {}
    cursor = 0
    for i, f in enumerate(feats):
        fname = f.get("name") if isinstance(f, dict) else None
        if fname and isinstance(fname, str) and text.find(f'"{fname}"', cursor) >= 0:
            pos = text.find(f'"{fname}"', cursor)
            line = text.count("\n", 0, pos) + 1
            cursor = pos + 1
        else:
            line = _line_of(text, '"features"')
        if not isinstance(f, dict):
            raise InputError(path, line, f"feature #{i + 1} must be an object")
        if not isinstance(fname, str) or not fname.strip():
            raise InputError(path, line, f'feature #{i + 1} needs a "name"')
        if fname in seen:
            raise InputError(path, line, f'duplicate feature name "{fname}" (first at feature #{seen[fname] + 1})')
        seen[fname] = i
        lang = f.get("template_language", "mustache")
        if lang not in ("mustache", "derived_expression", "script_feature"):
            raise InputError(path, line, f'feature "{fname}": unknown template_language "{lang}"')
        if "template" not in f:
            raise InputError(path, line, f'feature "{fname}" has no "template"')
        params = f.get("params", [])
        if not isinstance(params, list) or not all(isinstance(p, str) for p in params):
            raise InputError(path, line, f'feature "{fname}": "params" must be a list of names')
        if lang == "mustache":
            used = template_params(f["template"])
            unused = [p for p in params if p not in used]
            if unused:
                raise InputError(path, line, f'feature "{fname}": declared param(s) {unused} not used in its template')
            undeclared = sorted(u for u in used if u not in params)
            if undeclared:
                raise InputError(path, line, f'feature "{fname}": template uses undeclared param(s) {undeclared}')
    return {"name": name, "features": feats}


# --------------------------------------------------------------------------- what a feature needs

def _parsed(template):
    """A template as JSON, its ``toJson`` sections and ``{{params}}`` read as null/strings
    (None when it does not parse even so)."""
    if not isinstance(template, str):
        return template
    text = _MUSTACHE_VAR.sub("x", _TO_JSON.sub("null", template))
    try:
        return json.loads(text)
    except ValueError:
        return None


def _walk(node):
    """Every dict inside ``node`` (itself first)."""
    stack = [node]
    while stack:
        x = stack.pop()
        if isinstance(x, dict):
            yield x
            stack.extend(x.values())
        elif isinstance(x, list):
            stack.extend(x)


def script_languages(feature: dict) -> list[str]:
    """The script languages a feature needs the cluster to run, in order: ``expression``
    for ``derived_expression`` features and ``term_stat`` queries (the plugin compiles
    both with it), a script's ``lang`` (default ``painless``) for ``script_feature``
    features and ``script``/``script_score`` clauses in a template."""
    lang = feature.get("template_language", "mustache")
    template = feature.get("template")
    if lang == "derived_expression":
        return ["expression"]
    if lang == "script_feature":
        return [template.get("lang", "painless") if isinstance(template, dict) else "painless"]
    needed: list[str] = []
    for d in _walk(_parsed(template)):
        script = d.get("script")
        if isinstance(script, dict):
            needed.append(script.get("lang", "painless"))
        elif isinstance(script, str):
            needed.append("painless")
        if "term_stat" in d:
            needed.append("expression")
    return list(dict.fromkeys(needed))


def semantic_field(feature: dict) -> str | None:
    """The vector field of a semantic feature -- the cosine of the query's vector
    (``query_vector``) and a document vector field, as written for either engine:
    OpenSearch's ``knn_score`` script (cosinesimil) or Elasticsearch's ``knn`` query --
    else None."""
    if "query_vector" not in (feature.get("params") or []):
        return None
    parsed = _parsed(feature.get("template"))
    if not isinstance(parsed, dict) or len(parsed) != 1:
        return None
    knn = parsed.get("knn")
    if isinstance(knn, dict) and isinstance(knn.get("field"), str):
        return knn["field"]
    script = (parsed.get("script_score") or {}).get("script") if isinstance(parsed.get("script_score"), dict) else None
    if isinstance(script, dict) and script.get("source") == "knn_score":
        params = script.get("params") or {}
        if params.get("space_type") == "cosinesimil" and isinstance(params.get("field"), str):
            return params["field"]
    return None
