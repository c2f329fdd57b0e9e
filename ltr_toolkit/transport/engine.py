"""The connected engine, described once per connection from what the cluster says: the
one place where OpenSearch and Elasticsearch differ for the code that talks to them.

:func:`detect` asks ``GET /_nodes/plugins`` (never ``GET /``, which Elasticsearch's
test distribution answers with 405): the engine from the ``X-Elastic-Product`` header
Elasticsearch puts on every answer (and its ``x-pack`` modules, behind a proxy that
drops headers), its version and plugins from every node, and the script languages the
cluster runs from ``GET /_script_language``. The rest of the toolkit asks the
:class:`Engine` (its vector support, the module a script language needs, its label)
instead of branching on the engine's name.

Semantic features differ the most: OpenSearch scores a query vector with the k-NN
plugin's ``knn_score`` script (any document that has a vector); Elasticsearch with its
``knn`` query, which scores only the
documents it collects, so the feature is restricted to the reranked window by an
``ids`` filter: every candidate gets its exact cosine, at logging and serving alike
(the window's ids are the derived parameter :data:`WINDOW_IDS`). Both score a cosine
similarity as ``(1 + cos) / 2``.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

from ..errors import ClusterError
from .client import Connection, request
from .lookups import fact

OPENSEARCH, ELASTICSEARCH = "opensearch", "elasticsearch"
ENGINES = (OPENSEARCH, ELASTICSEARCH)
#: each engine's name in messages
LABELS = {OPENSEARCH: "OpenSearch", ELASTICSEARCH: "Elasticsearch"}

#: the template parameter of the reranked window's document ids (Elasticsearch's
#: semantic feature is restricted to them)
WINDOW_IDS = "window_ids"
#: the template parameter of the query's vector
QUERY_VECTOR = "query_vector"
#: the most documents Elasticsearch's knn query collects per shard (its num_candidates cap)
KNN_MAX = 10_000

#: script languages and the module (or plugin) that provides each
LANGUAGE_MODULES = {"painless": "lang-painless", "expression": "lang-expression",
                    "mustache": "lang-mustache", "knn": "the k-NN plugin (opensearch-knn)"}


@dataclass(frozen=True)
class VectorKind:
    """How an engine stores document vectors and scores a query vector against them."""
    field_type: str          # the mapping type of the vector field
    dims_key: str            # the mapping's key for its dimension
    score: str               # the feature's value in terms of the cosine
    needs: str | None        # the plugin it needs, named in errors (None: built in)

    def mapping(self, dim: int, approximate: bool = True) -> dict:
        """The vector field of ``dim`` dimensions, cosine, exact float scores."""
        if self.field_type == "knn_vector":
            spec = {"type": "knn_vector", "dimension": int(dim)}
            if approximate:
                spec["method"] = {"name": "hnsw", "engine": "lucene", "space_type": "cosinesimil"}
            return spec
        # float HNSW, not 8.x's default int8_hnsw: the window's scores are exact cosines
        return {"type": "dense_vector", "dims": int(dim), "similarity": "cosine",
                "index": True, "index_options": {"type": "hnsw"}}

    def index_settings(self) -> dict:
        return {"knn": True} if self.field_type == "knn_vector" else {}

    def approximate_on(self, index_settings: dict) -> bool:
        """Whether a vector field added to an index of these settings (``GET
        /{index}/_settings``'s ``index`` object) may have an HNSW graph: on OpenSearch only
        in an index made with ``index.knn``; Elasticsearch needs no index setting."""
        return not self.index_settings() or str(index_settings.get("knn")).lower() == "true"

    def feature_template(self, field: str) -> str:
        """The feature's template (a string: the vector goes in through ``toJson``)."""
        vector = "{{#toJson}}" + QUERY_VECTOR + "{{/toJson}}"
        if self.field_type == "knn_vector":
            return ('{"script_score": {"query": {"exists": {"field": ' + json.dumps(field) + '}}, '
                    '"script": {"source": "knn_score", "lang": "knn", "params": {"field": '
                    + json.dumps(field) + ', "query_value": ' + vector
                    + ', "space_type": "cosinesimil"}}}}')
        ids = "{{#toJson}}" + WINDOW_IDS + "{{/toJson}}"
        return ('{"knn": {"field": ' + json.dumps(field) + ', "query_vector": ' + vector
                + f', "k": {KNN_MAX}, "num_candidates": {KNN_MAX}, '
                + '"filter": {"ids": {"values": ' + ids + '}}}}')

    def feature_params(self) -> list[str]:
        return [QUERY_VECTOR] if self.field_type == "knn_vector" else [QUERY_VECTOR, WINDOW_IDS]

    def cosine(self, value: float) -> float:
        """The cosine a logged value stands for (both engines score ``(1 + cos) / 2``:
        measured live, tests/test_engines.py)."""
        return 2.0 * value - 1.0


KNN_PLUGIN_VECTORS = VectorKind("knn_vector", "dimension", "(1 + cos) / 2", "the k-NN plugin (opensearch-knn)")
DENSE_VECTORS = VectorKind("dense_vector", "dims", "(1 + cos) / 2", None)
VECTOR_KINDS = (KNN_PLUGIN_VECTORS, DENSE_VECTORS)


@dataclass(frozen=True)
class Engine:
    name: str                     # "opensearch" | "elasticsearch"
    version: str                  # the lowest of its nodes'
    plugins: frozenset            # plugins every node has
    languages: frozenset | None   # script languages it runs (None: it did not say)

    @property
    def label(self) -> str:
        return f"{LABELS[self.name]} {self.version}"

    @property
    def vectors(self) -> VectorKind | None:
        """How this cluster stores and scores vectors, None when it cannot."""
        if self.name == ELASTICSEARCH:
            return DENSE_VECTORS
        return KNN_PLUGIN_VECTORS if "opensearch-knn" in self.plugins else None

    @property
    def flat_object(self) -> str:
        """The mapping type of an object indexed as keywords, whatever its keys (the UBI
        queries' ``query_attributes``): OpenSearch's ``flat_object``, Elasticsearch's
        ``flattened``."""
        return "flattened" if self.name == ELASTICSEARCH else "flat_object"

    def missing_language(self, languages) -> str | None:
        """The first of ``languages`` the cluster does not run (None: all, or unknown)."""
        if self.languages is None:
            return None
        return next((lang for lang in languages if lang not in self.languages), None)

    @property
    def missing_rule(self) -> str:
        """What a feature that did not match is worth to the plugin's tree models, and so
        how logged data must read it for ``ltr predict`` to score as the cluster serves
        (``data.logged``): ``"zero"`` where the plugin reads it as 0.0 whatever the tree
        says (OpenSearch's plugin before 3.2: measured on 2.19.6.0, the node's ``missing``
        ignored), else ``"absent"`` (NaN, down the branch the node's ``missing`` names,
        which the toolkit's export sets to ``no``: OpenSearch 3.2-3.7 always go ``no``,
        3.8 and the Elasticsearch plugin follow ``missing``; measured on 3.6.0.0, 3.8.0.0,
        1.5.10-es8.17.0/8.18.6 and 1.5.12-es9.0.8). Linear models and networks read a
        missing feature as 0.0 on every version."""
        return "zero" if self.name == OPENSEARCH and self.version_tuple() < (3, 2) else "absent"

    def version_tuple(self) -> tuple[int, ...]:
        return tuple(int(x) for x in re.findall(r"\d+", self.version)[:3])


def _nodes(conn: Connection) -> tuple[dict, dict]:
    """(``GET /_nodes/plugins``'s nodes, the answer's headers)."""
    c = conn.client()
    try:     # the raw connection gives the headers too (the Elasticsearch product header)
        status, headers, raw = c.transport.get_connection().perform_request(
            "GET", "/_nodes/plugins", timeout=conn.timeout)
        return json.loads(raw).get("nodes", {}), {k.lower(): v for k, v in dict(headers).items()}
    except Exception:  # noqa: BLE001 (any failure: the ordinary path names its cause)
        return request(conn, "GET", "/_nodes/plugins").get("nodes", {}), {}


def _languages(conn: Connection) -> frozenset | None:
    try:
        resp = request(conn, "GET", "/_script_language")
    except Exception:  # noqa: BLE001 (older versions, no permission: not known)
        return None
    return frozenset(x.get("language") for x in resp.get("language_contexts", []))


def detect(conn: Connection) -> Engine:
    """The connected engine (asked once per connection, then kept: ``lookups``)."""
    def compute() -> Engine:
        nodes, headers = _nodes(conn)
        modules = {m.get("name", "") for n in nodes.values() for m in n.get("modules", [])}
        elastic = (headers.get("x-elastic-product") == "Elasticsearch"
                   or any(m.startswith("x-pack") for m in modules))
        found = sorted((n.get("version", "0") for n in nodes.values()),
                       key=lambda v: tuple(int(x) for x in re.findall(r"\d+", v)[:3]))
        sets = [{p.get("name") for p in n.get("plugins", [])} for n in nodes.values()]
        plugins = frozenset(set.intersection(*sets)) if sets else frozenset()
        return Engine(ELASTICSEARCH if elastic else OPENSEARCH, found[0] if found else "?",
                      plugins, _languages(conn))
    return fact(conn, ("engine",), compute)


def vector_kind(conn: Connection) -> VectorKind | None:
    """How the connected cluster stores and scores vectors (None: it cannot)."""
    return detect(conn).vectors


def require_vectors(conn: Connection, what: str) -> VectorKind:
    """The cluster's vector support, or a one-line error naming what ``what`` needs."""
    kind = vector_kind(conn)
    if kind is None:
        raise ClusterError(f"{what} needs the k-NN plugin (opensearch-knn), which "
                           f"{conn.display_url} does not have", "install it on every node "
                           "(`ltr cluster start` does), or use a feature set without semantic features")
    return kind
