"""Feature templates rendered in Python as the LTR plugin renders them.

The plugin (``PrecompiledTemplateFeature`` + ``CustomMustacheFactory``, copied from
the cluster's mustache module) keeps every template as JSON text -- an object template
is serialised first --, renders it with mustache.java and parses the result as a query.
Its rules, reproduced here:

* ``{{name}}``: the value as text (Java's ``toString``: ``true``, ``3``, ``0.5``,
  ``1.0E-5``, ``[a, b]``), JSON-escaped (Jackson's ``quoteAsString``: the value stays one
  JSON string wherever the template quotes it); ``{{{name}}}`` and ``{{&name}}``: the
  text unescaped; a missing value renders nothing; dotted names walk into objects;
* ``{{#toJson}}name{{/toJson}}``: lists and objects as JSON, other values as text;
* ``{{#join}}name{{/join}}`` / ``{{#join delimiter='; '}}name{{/join}}``: a list's items
  as text, joined (``,`` by default);
* ``{{! comment}}``: nothing.

Other sections, inverted sections, partials and delimiter changes are refused with the
feature's name (the toolkit's templates do not use them). What is sent is the parsed
query, so two renderings that differ only in JSON spelling (``\\u001f`` vs ``\\u001F``,
``1e-05`` vs ``1.0E-5`` inside ``toJson``) are the same query.
"""

from __future__ import annotations

import json
import re
from decimal import Decimal

from ..errors import UserError

_TAG = re.compile(
    r"\{\{\s*#\s*(?P<fn>toJson|join(?:\s+delimiter='(?P<delim>.*?)')?)\s*\}\}"
    r"(?P<arg>[^{}]*)\{\{\s*/\s*(?P<end>toJson|join)\s*\}\}"
    r"|\{\{\{\s*(?P<raw>[\w.]+)\s*\}\}\}"
    r"|\{\{\s*!.*?\}\}"
    r"|\{\{\s*(?P<amp>&)?\s*(?P<var>[\w.]+)\s*\}\}"
    r"|(?P<other>\{\{.*?\}\})", re.S | re.I)


def java_text(value) -> str:
    """``value.toString()`` as Java gives it for the JSON types a template parameter has."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return _java_double(value)
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(java_text(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k}={java_text(v)}" for k, v in value.items()) + "}"
    return str(value)


def _java_double(x: float) -> str:
    """``Double.toString``: plain decimals in [1e-3, 1e7), else ``d.dddE±n``."""
    if x != x:
        return "NaN"
    if x in (float("inf"), float("-inf")):
        return "Infinity" if x > 0 else "-Infinity"
    sign, a = ("-" if str(x).startswith("-") else ""), abs(x)
    if a == 0.0 or 1e-3 <= a < 1e7:
        return sign + repr(a)
    t = Decimal(repr(a)).as_tuple()
    digits = "".join(map(str, t.digits)).rstrip("0") or "0"
    exponent = len(t.digits) - 1 + t.exponent
    return f"{sign}{digits[0]}.{digits[1:] or '0'}E{exponent}"


def _json_escaped(text: str) -> str:
    return json.dumps(text, ensure_ascii=False)[1:-1]


def _lookup(params: dict, name: str):
    value = params
    for part in name.split("."):
        if not isinstance(value, dict) or part not in value:
            return None
        value = value[part]
    return value


def _function(m: re.Match, params: dict, feature: str) -> str:
    fn, arg = m.group("fn"), m.group("arg").strip()
    if fn.split()[0].lower() != m.group("end").lower():
        raise UserError(f"feature {feature}: the template opens {{{{#{fn}}}}} and closes "
                        f"{{{{/{m.group('end')}}}}}")
    value = _lookup(params, arg)
    if value is None:
        return ""
    if fn.lower() == "tojson":
        return json.dumps(value) if isinstance(value, (list, tuple, dict)) else java_text(value)
    if not isinstance(value, (list, tuple)):
        return java_text(value)
    delim = m.group("delim") if m.group("delim") is not None else ","
    return delim.join(java_text(v) for v in value)


def render_text(text: str, params: dict, feature: str = "?") -> str:
    """The template text with ``params`` substituted (see the module docstring)."""
    def sub(m: re.Match) -> str:
        if m.group("other"):
            raise UserError(f"feature {feature}: the template uses {m.group('other')}, a "
                            "mustache construct the toolkit does not render",
                            "use {{name}}, {{{name}}}, {{#toJson}}name{{/toJson}} or "
                            "{{#join}}name{{/join}}")
        if m.group("fn"):
            return _function(m, params, feature)
        if m.group("raw"):
            return java_text(_lookup(params, m.group("raw")))
        if m.group("var"):
            text = java_text(_lookup(params, m.group("var")))
            return text if m.group("amp") else _json_escaped(text)
        return ""                                           # a comment
    return _TAG.sub(sub, text)


def template_text(template) -> str:
    """A feature's template as the JSON text the plugin stores and renders."""
    return template if isinstance(template, str) else json.dumps(template, ensure_ascii=False)


def render_query(feature: dict, params: dict) -> dict:
    """One feature's query for one query's parameters: its template rendered and parsed,
    as the plugin does before it scores the feature."""
    name = feature.get("name", "?")
    lang = feature.get("template_language", "mustache")
    if lang != "mustache":
        raise UserError(f"feature {name} is a {lang} feature: only mustache query templates "
                        "can be sent as queries", "log it with the plugin (--via plugin)")
    text = render_text(template_text(feature["template"]), params, name)
    try:
        query = json.loads(text)
    except ValueError as exc:
        raise UserError(f"feature {name}: its rendered template is not JSON ({exc})",
                        "quote {{name}} inside strings, or use {{#toJson}}name{{/toJson}}") from None
    if not isinstance(query, dict):
        raise UserError(f"feature {name}: its rendered template is not a query object")
    return query
