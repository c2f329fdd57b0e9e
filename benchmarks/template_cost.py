"""The cheapest equivalent template for each signal, measured in the plugin (issue 58,
Deliver 4): ``python -m benchmarks.template_cost``.

The plugin renders, parses and builds every feature's query on each request
(benchmarks/results/latency_breakdown.md: ~0.3-0.4 ms a feature on that run's node), so
on a catalogue the template each signal is written with is part of the serving cost. Here every shape of a
signal is served as the only thing an ``sltr`` rescore computes -- its own feature set
and a ``model/linear`` weighing each feature 1 (no trees), window 100, size 10,
``query_weight`` 0 as serving sends it -- over the first stage of the toolkit's default
form (``multi_match`` best_fields, dfs), on:

* Cranfield (the ``cranfield`` index ``ltr demo`` makes, read only; else Cranfield is
  indexed into ``bench-template-cost`` and deleted at the end): text over two fields
  (two per-field ``match`` vs one ``multi_match`` / ``bool`` / ``dis_max`` /
  ``combined_fields``), all terms, phrase, and N copies (1, 5, 10, 20) of a trivial
  constant feature and of a per-field ``match``: the per-feature slope;
* a synthetic product catalogue generated here with a seed (``bench-template-cost-
  catalogue``, 4,000 products: title, description, brand, category, tags, SKU, price,
  popularity, release date; deleted at the end): numbers (``function_score`` /
  ``field_value_factor`` with and without a query inside, ``script_score``,
  ``rank_feature``, a ``script_feature``), recency (exp / gauss / linear decay, painless),
  exact matches on a keyword and on an identifier, features without parameters.

The shape the toolkit generates today (``features/templates.py`` when it is importable,
else the copies below) is each signal's reference. Each shape is timed as one copy (what
serving it alone costs) and as ten copies in one set (x10: its cost a feature, ten times
above the timing noise; copies cost as distinct features do, see the slope table's 20
distinct row). One client; in one interleaved loop every row is sent for a Cranfield
query and a catalogue query, in a random order each step, so a slow moment of this
shared machine falls on all rows alike; the loop runs for ``BUDGET_S`` seconds (at most
8 passes). Per row: p50/p99 of the client's wall time and of the node's ``took``; the ms
it adds to the first stage (median of the paired per-step differences, bootstrap 95%
interval); a feature's ms, the x10 row's minus the rescore's fixed cost (the intercept
of the trivial feature's copies) over its features; and against the signal's reference,
paired the same way. The values each shape returns are logged (``ltr_log``, top 100 of
75 queries an index) and compared with the reference's: identical, proportional,
monotone or different, and where the documents matched differ. The recommendation per
signal is computed from these: the cheapest shape whose values are identical or
proportional to the reference's, when its paired saving a copy is below 0 with 95%
confidence and at least ``MIN_SAVING`` of the reference's own cost.

Every feature set and model is uploaded under ``bench-tc-`` and deleted at the end."""

from __future__ import annotations

import datetime as _dt
import math
import os
import random
import time
from dataclasses import dataclass, field

import numpy as np

from ltr_toolkit.data.querytext import KEYWORDS
from ltr_toolkit.datasets import cranfield
from ltr_toolkit.query.firststage import FirstStage
from ltr_toolkit.stores import store as st
from ltr_toolkit.stores.model_store import delete_models, model_names
from ltr_toolkit.transport.client import call, request

from ._live import connect
from ._report import RESULTS, _fmt, finish, machine, pyplot, write_table

try:                                    # the templates ``ltr featureset init`` writes today
    from ltr_toolkit.features import templates as T
except ImportError:                     # pragma: no cover -- older trees: see _fallback
    T = None

NAME = "template_cost"
PREFIX = "bench-tc-"
CRANFIELD, OWN_CRANFIELD, CATALOGUE = "cranfield", "bench-template-cost", "bench-template-cost-catalogue"
WINDOW, SIZE = 100, 10
N_DOCS, SEED = 4000, 58
#: the catalogue's dates are relative to this day (recency's reference date)
REFERENCE = _dt.date(2026, 1, 1)
QUERIES = 225                           # per index (Cranfield has 225)
WARM_STEPS = 30
#: seconds of timed steps (after the warm-up): steps run until this budget is spent, at
#: most MAX_STEPS (every query once a pass, in a new order each pass)
BUDGET_S = float(os.environ.get("LTR_BENCH_TC_BUDGET", 230))
MAX_STEPS = 8 * QUERIES
#: a saving counts when its interval is below 0 and it is at least this share of the
#: generated shape's own cost (a copy, from the x10 rows)
MIN_SAVING = 0.10
VALUE_QUERIES = 75
if os.environ.get("LTR_BENCH_TC_QUICK"):     # a smoke run of the whole path (results overwritten)
    WARM_STEPS, MAX_STEPS, VALUE_QUERIES = 3, 10, 5
BOOT = 2000
Q = "{{" + KEYWORDS + "}}"
STAGES = {"cranfield": FirstStage.from_fields(("title", "abstract")),
          "catalogue": FirstStage.from_fields(("title", "description"))}


# ---------------------------------------------------------------------------- shapes
def feat(name: str, template, params=(KEYWORDS,), language: str = "mustache") -> dict:
    return {"name": name, "params": list(params), "template_language": language,
            "template": template}


@dataclass
class Row:
    """One timed request: a feature set (None: the first stage alone) on one index."""
    key: str
    corpus: str                     # "cranfield" | "catalogue"
    label: str
    features: list[dict] | None
    combine: str = "one"            # how its logged features make one value: one | sum
    needs: str = ""                 # what the shape needs beyond the generated mapping
    copies: int = 0                 # N of an N-copies row (slope)
    of: str = ""                    # a x10 row: the shape row it repeats ten times
    extra: bool = False             # timed, in no signal's table (set in code)
    error: str = ""                 # why the node refused it (then not timed)
    index_name: str = ""            # the index it is sent to (set in main)


@dataclass
class Signal:
    name: str
    reference: str                  # the generated shape's row
    rows: list[str]
    what: str = ""
    claims: dict = field(default_factory=dict)   # row -> the equivalence it claims


def _fallback():
    """The generated shapes as features/templates.py wrote them when this was written
    (used only when the module is not importable)."""
    class F:
        @staticmethod
        def bm25(f):
            return feat(f"{f}_bm25", {"match": {f: Q}}), ""

        @staticmethod
        def phrase(f):
            return feat(f"{f}_phrase", {"match_phrase": {f: {"query": Q, "slop": 2}}}), ""

        @staticmethod
        def all_terms(f):
            return feat(f"{f}_all_terms", {"match": {f: {"query": Q, "operator": "and"}}}), ""

        @staticmethod
        def combined(fields):
            return feat("all_text_bm25", {"multi_match": {"query": Q, "fields": fields,
                                                          "type": "best_fields", "tie_breaker": 0.3}}), ""

        @staticmethod
        def is_query(f, exact):
            return feat(f"{f}_is_query", {"constant_score": {"filter": {"term": {
                exact: {"value": Q, "case_insensitive": True}}}}}), ""

        @staticmethod
        def identifier(f, exact):
            each = {"match": {exact: {"query": Q, "analyzer": "whitespace"}}}
            whole = {"term": {exact: {"value": Q, "case_insensitive": True}}}
            return feat(f"{f}_exact", {"constant_score": {"filter": {"bool": {
                "should": [each, whole], "minimum_should_match": 1}}}}), ""

        @staticmethod
        def number(f, values, low, high):
            fvf = {"field": f, "modifier": "log1p"}
            return feat(f, {"function_score": {"query": {"range": {f: {"gte": 0}}},
                                               "field_value_factor": fvf, "boost_mode": "replace"}},
                        params=()), ""

        @staticmethod
        def recency(f, values, reference):
            start = _dt.datetime.combine(reference, _dt.time(), _dt.timezone.utc)
            ages = [(start - _dt.datetime.fromisoformat(v).replace(tzinfo=_dt.timezone.utc)
                     ).total_seconds() / 86400 for v in values]
            days = max(1, int(round(float(np.median(np.maximum(ages, 0))))))
            origin = (reference + _dt.timedelta(days=36500)).isoformat()
            decay = {"exp": {f: {"origin": origin, "offset": "36500d", "scale": f"{days}d", "decay": 0.5}}}
            return feat(f"{f}_recency", {"function_score": {"query": {"exists": {"field": f}},
                                                            "functions": [decay], "boost_mode": "replace"}},
                        params=()), ""
    return F


def _gen():
    return T if T is not None else _fallback()


def const(query: dict) -> dict:
    return {"constant_score": {"filter": query}}


def _named(feature: dict, name: str) -> dict:
    return dict(feature, name=name)


def terms_and_phrase(prefix: str, corpus: str, field: str) -> list[Row]:
    """All terms (``operator`` and vs ``minimum_should_match`` 100%) and the phrase (slop 2
    vs 0) on ``field``: rows ``{prefix}_and``, ``_msm``, ``_phrase2``, ``_phrase0``."""
    g = _gen()
    return [Row(f"{prefix}_and", corpus, f"match {field}, operator and (generated)", [g.all_terms(field)[0]]),
            Row(f"{prefix}_msm", corpus, f"match {field}, minimum_should_match 100%",
                [feat("msm", {"match": {field: {"query": Q, "minimum_should_match": "100%"}}})]),
            Row(f"{prefix}_phrase2", corpus, f"match_phrase {field}, slop 2 (generated)", [g.phrase(field)[0]]),
            Row(f"{prefix}_phrase0", corpus, f"match_phrase {field}, slop 0",
                [feat("phrase0", {"match_phrase": {field: {"query": Q}}})])]


def cranfield_rows() -> tuple[list[Row], list[Signal]]:
    g = _gen()
    title, abstract = g.bm25("title")[0], g.bm25("abstract")[0]
    tie = {"tie_breaker": 0.3}
    trivial = feat("trivial", {"match_all": {}}, params=())
    rows = [
        Row("c_first", "cranfield", "first stage alone (no rescore)", None),
        *[Row(f"c_trivial_{n}", "cranfield", f"{n} x trivial constant feature (match_all, no params)",
              [_named(trivial, f"trivial_{i}") for i in range(n)], copies=n) for n in (1, 5, 10, 20)],
        *[Row(f"c_title_{n}", "cranfield", f"{n} x match on title ({{{{keywords}}}})",
              [_named(title, f"title_{i}") for i in range(n)], copies=n) for n in (1, 5, 10, 20)],
        Row("c_title_20d", "cranfield", "20 distinct match on title (boosts 1.00-1.19)",
            [feat(f"title_d{i}", {"match": {"title": {"query": Q, "boost": 1 + i / 100}}}) for i in range(20)],
            extra=True),
        Row("c_pair", "cranfield", "2 features: match title + match abstract (generated)",
            [title, abstract], combine="sum"),
        Row("c_best", "cranfield", "multi_match best_fields, tie 0.3 (generated all_text_bm25)",
            [g.combined(["title", "abstract"])[0]]),
        Row("c_dismax", "cranfield", "dis_max of the two match, tie 0.3",
            [feat("dismax", {"dis_max": {"queries": [{"match": {"title": Q}}, {"match": {"abstract": Q}}],
                                         **tie}})]),
        Row("c_most", "cranfield", "multi_match most_fields",
            [feat("most", {"multi_match": {"query": Q, "fields": ["title", "abstract"], "type": "most_fields"}})]),
        Row("c_should", "cranfield", "bool should of the two match",
            [feat("should", {"bool": {"should": [{"match": {"title": Q}}, {"match": {"abstract": Q}}]}})]),
        Row("c_combined", "cranfield", "combined_fields (BM25F)",
            [feat("combined", {"combined_fields": {"query": Q, "fields": ["title", "abstract"]}})]),
        *terms_and_phrase("c", "cranfield", "abstract"),
    ]
    signals = [
        Signal("text over two fields (Cranfield: title, abstract)", "c_pair",
               ["c_pair", "c_best", "c_dismax", "c_most", "c_should", "c_combined"],
               "the reference is the sum of the two per-field BM25 (what a linear model with equal "
               "weights sees); one feature instead of two loses the model's separate weights"),
        Signal("all terms (Cranfield: abstract)", "c_and", ["c_and", "c_msm"]),
        Signal("phrase (Cranfield: abstract)", "c_phrase2", ["c_phrase2", "c_phrase0"],
               "Cranfield's queries are sentences: the values column says whether the whole query as a "
               "phrase matches any of the top 100 at all (the catalogue's short queries below do)"),
    ]
    return rows, signals


def catalogue_rows(docs: list[dict]) -> tuple[list[Row], list[Signal]]:
    g = _gen()
    pop = [d["popularity"] for d in docs if "popularity" in d]
    dates = [d["released"] for d in docs if "released" in d]
    number = g.number("popularity", pop, float(min(pop)), float(max(pop)))[0]
    recency = g.recency("released", dates, REFERENCE)[0]
    decay = recency["template"]["function_score"]["functions"][0]
    kind = next(iter(decay))
    spec = dict(decay[kind]["released"])
    scale_days = float(str(spec["scale"]).rstrip("d"))
    ref_ms = int(_dt.datetime.combine(REFERENCE, _dt.time(), _dt.timezone.utc).timestamp() * 1000)
    median = float(np.median(pop))
    log10 = "Math.log10(1 + doc['popularity'].value)"
    exp_src = ("Math.pow(0.5, Math.max(0, params.ref - doc['released'].value.toInstant().toEpochMilli())"
               " / (86400000.0 * params.days))")
    sparams = {"ref": ref_ms, "days": scale_days}
    exists = {"exists": {"field": "released"}}

    def decay_of(name):
        return {"function_score": {"query": exists, "functions": [{name: {"released": spec}}],
                                   "boost_mode": "replace"}}
    trivial = feat("trivial", {"match_all": {}}, params=())
    unused = dict(number, params=[KEYWORDS])
    rendered = feat("popularity_named", {"function_score": dict(number["template"]["function_score"],
                                                                 _name=Q)})
    rows = [
        Row("k_first", "catalogue", "first stage alone (no rescore)", None),
        Row("k_trivial_1", "catalogue", "1 x trivial constant feature", [_named(trivial, "trivial_0")], copies=1),
        Row("k_trivial_10", "catalogue", "10 x trivial constant feature",
            [_named(trivial, f"trivial_{i}") for i in range(10)], copies=10),
        # all terms and phrase on short queries (Cranfield's long ones rarely match a phrase)
        *terms_and_phrase("k", "catalogue", "title"),
        # numbers: popularity (skewed, >= 1, missing in 5%)
        Row("k_num_gen", "catalogue", "function_score fvf log1p, query range >= 0 (generated)", [number]),
        Row("k_num_old", "catalogue", "function_score fvf log1p, missing median, query match_all (be494b5)",
            [feat("pop_old", {"function_score": {"query": {"match_all": {}}, "field_value_factor": {
                "field": "popularity", "modifier": "log1p", "missing": median}, "boost_mode": "replace"}},
                params=())]),
        Row("k_num_noq", "catalogue", "function_score fvf log1p, no query inside, no missing",
            [feat("pop_noq", {"function_score": {"field_value_factor": {"field": "popularity", "modifier": "log1p"},
                                                 "boost_mode": "replace"}}, params=())]),
        Row("k_num_exists", "catalogue", "function_score fvf log1p, query exists",
            [feat("pop_exists", {"function_score": {"query": {"exists": {"field": "popularity"}},
                                                    "field_value_factor": {"field": "popularity", "modifier": "log1p"},
                                                    "boost_mode": "replace"}}, params=())]),
        Row("k_num_noq0", "catalogue", "function_score fvf log1p, no query inside, missing 0",
            [feat("pop_noq0", {"function_score": {"field_value_factor": {
                "field": "popularity", "modifier": "log1p", "missing": 0}, "boost_mode": "replace"}}, params=())]),
        Row("k_num_script", "catalogue", "script_score painless log10(1+x), query exists",
            [feat("pop_script", {"script_score": {"query": {"exists": {"field": "popularity"}},
                                                  "script": {"source": log10}}}, params=())]),
        Row("k_num_rank", "catalogue", "rank_feature log (scaling 1) on a rank_feature copy",
            [feat("pop_rank", {"rank_feature": {"field": "popularity_rf", "log": {"scaling_factor": 1}}},
                  params=())], needs="a rank_feature field (a second copy of the value) in the mapping"),
        Row("k_num_sf", "catalogue", "script_feature painless (no template to render/parse)",
            [feat("pop_sf", {"lang": "painless", "params": {},
                             "source": f"doc['popularity'].size() == 0 ? 0.0 : {log10}"},
                  params=(), language="script_feature")]),
        Row("k_num_unused", "catalogue", "the generated number, params [keywords] declared, unused",
            [_named(unused, "pop_unused")]),
        Row("k_num_named", "catalogue", "the generated number, {{keywords}} rendered into _name",
            [rendered]),
        # recency: released (missing in 10%)
        Row("k_rec_gen", "catalogue", f"function_score {kind} decay, query exists (generated)", [recency]),
        Row("k_rec_old", "catalogue", "function_score exp decay from now/d, query match_all (be494b5)",
            [feat("rec_old", {"function_score": {"query": {"match_all": {}}, "functions": [{"exp": {"released": {
                "origin": "now/d", "scale": spec["scale"], "decay": 0.5}}}], "boost_mode": "replace"}},
                params=())]),
        Row("k_rec_gauss", "catalogue", "function_score gauss decay (same origin/offset/scale)",
            [feat("rec_gauss", decay_of("gauss"), params=())]),
        Row("k_rec_linear", "catalogue", "function_score linear decay (same origin/offset/scale)",
            [feat("rec_linear", decay_of("linear"), params=())]),
        Row("k_rec_script", "catalogue", "script_score painless 0.5^(age/scale), query exists",
            [feat("rec_script", {"script_score": {"query": exists, "script": {
                "source": exp_src, "params": sparams}}}, params=())]),
        Row("k_rec_sf", "catalogue", "script_feature painless 0.5^(age/scale)",
            [feat("rec_sf", {"lang": "painless", "params": sparams,
                             "source": f"doc['released'].size() == 0 ? 0.0 : {exp_src}"},
                  params=(), language="script_feature")]),
        # exact match: brand (keyword, values capitalised, queries typed lower case)
        Row("k_ex_gen", "catalogue", "constant_score term case_insensitive (generated)",
            [g.is_query("brand", "brand")[0]]),
        Row("k_ex_term_ci", "catalogue", "term case_insensitive, no constant_score",
            [feat("brand_term_ci", {"term": {"brand": {"value": Q, "case_insensitive": True}}})]),
        Row("k_ex_term", "catalogue", "constant_score term (case-sensitive)",
            [feat("brand_term", {"constant_score": {"filter": {"term": {"brand": Q}}}})]),
        Row("k_ex_match", "catalogue", "match on the keyword (scored)", [feat("brand_match", {"match": {"brand": Q}})]),
        Row("k_ex_terms", "catalogue", "constant_score terms [query]",
            [feat("brand_terms", {"constant_score": {"filter": {"terms": {"brand": [Q]}}}})]),
        Row("k_ex_norm", "catalogue", "constant_score term on a lowercase-normalized keyword",
            [feat("brand_norm", {"constant_score": {"filter": {"term": {"brand.lower": Q}}}})],
            needs="a keyword sub-field with a lowercase normalizer in the mapping"),
        # identifier: sku
        Row("k_id_gen", "catalogue", "constant_score bool: a word (whitespace) or the whole query (ci) (generated)",
            [g.identifier("sku", "sku")[0]]),
        Row("k_id_words", "catalogue", "constant_score match, whitespace analyzer (each word, as typed)",
            [feat("sku_words", const({"match": {"sku": {"query": Q, "analyzer": "whitespace"}}}))]),
        Row("k_id_whole", "catalogue", "constant_score term case_insensitive (whole query)",
            [feat("sku_whole", const({"term": {"sku": {"value": Q, "case_insensitive": True}}}))]),
        Row("k_id_norm", "catalogue",
            "constant_score match on a lowercase-normalized keyword, lowercase whitespace analyzer",
            [feat("sku_norm", const({"match": {"sku.lower": {"query": Q, "analyzer": "ws_lower"}}}))],
            needs="a lowercase-normalized keyword sub-field and a lowercase whitespace analyzer in the index "
                  "(it also matches a lower-cased SKU among other words, which the generated shape misses)"),
    ]
    signals = [
        Signal("all terms (catalogue: title)", "k_and", ["k_and", "k_msm"]),
        Signal("phrase (catalogue: title)", "k_phrase2", ["k_phrase2", "k_phrase0"]),
        Signal("number (catalogue: popularity, skewed, log-scaled)", "k_num_gen",
               ["k_num_gen", "k_num_old", "k_num_exists", "k_num_noq", "k_num_noq0", "k_num_script",
                "k_num_rank", "k_num_sf"]),
        Signal("recency (catalogue: release date)", "k_rec_gen",
               ["k_rec_gen", "k_rec_old", "k_rec_gauss", "k_rec_linear", "k_rec_script", "k_rec_sf"]),
        Signal("exact match (catalogue: brand keyword = the whole query)", "k_ex_gen",
               ["k_ex_gen", "k_ex_term_ci", "k_ex_term", "k_ex_match", "k_ex_terms", "k_ex_norm"]),
        Signal("identifier (catalogue: SKU)", "k_id_gen", ["k_id_gen", "k_id_words", "k_id_whole", "k_id_norm"]),
        Signal("parameters (catalogue: one number feature)", "k_num_gen",
               ["k_num_gen", "k_num_unused", "k_num_named", "k_num_sf", "k_trivial_1"],
               "a feature without parameters is still rendered, parsed and built on every request; "
               "a script_feature is compiled once (the script cache) and skips both"),
    ]
    return rows, signals


# ---------------------------------------------------------------------------- catalogue
NOUNS = ("laptop headphones speaker camera monitor keyboard mouse router tablet phone charger cable "
         "watch printer projector microphone drone lamp kettle blender toaster vacuum backpack jacket "
         "sneakers tent bicycle helmet drill saw").split()
ADJS = ("wireless portable compact smart ergonomic waterproof foldable gaming professional mini ultra "
        "silent rechargeable digital classic premium lightweight bluetooth solar electric stainless "
        "leather outdoor travel vintage modern").split()
COLOURS = "black white silver red blue green grey gold".split()
WORDS = ("with and for the battery life design quality easy use fast charging durable high "
         "performance sound display power home office warranty included set pack edition series "
         "model new best long lasting strong light").split()
SYLLABLES = ("ka zo ri ven tor lu mi dex sa nor pel qui bra fen gal hon jet lax mor nex pix ros sul tam "
             "vel wex yor zan cor").split()


def catalogue(rng: np.random.Generator) -> tuple[list[dict], list[str]]:
    """(products, queries): a seeded synthetic catalogue and its queries, typed as users do
    (lower case, except most SKUs)."""
    brands: list[str] = []
    while len(brands) < 60:
        b = "".join(rng.choice(SYLLABLES, 2)).capitalize()
        if b not in brands:
            brands.append(b)
    zipf = 1 / np.arange(1, len(brands) + 1)
    zipf /= zipf.sum()
    docs = []
    for i in range(N_DOCS):
        brand, noun = brands[rng.choice(len(brands), p=zipf)], str(rng.choice(NOUNS))
        adj = " ".join(rng.choice(ADJS, int(rng.integers(1, 3)), replace=False))
        code = f"{rng.choice(list('XZQRT'))}{int(rng.integers(10, 999))}"
        title = f"{brand} {adj} {noun} {rng.choice(COLOURS)} {code}"
        desc = " ".join(rng.choice(WORDS + NOUNS + ADJS, int(rng.integers(12, 30))))
        d = {"id": f"p{i}", "title": title, "description": desc, "brand": brand, "category": noun,
             "tags": list(rng.choice(ADJS + COLOURS, int(rng.integers(1, 5)), replace=False)),
             "sku": f"{brand[:3].upper()}-{i:05d}-{code}", "price": round(float(rng.lognormal(3.5, 1.0)), 2)}
        if rng.random() > 0.05:
            d["popularity"] = d["popularity_rf"] = int(rng.lognormal(3, 1.5)) + 1
        if rng.random() > 0.10:
            d["released"] = (REFERENCE - _dt.timedelta(days=int(rng.integers(0, 2000)))).isoformat()
        docs.append(d)
    queries = []
    for _ in range(QUERIES):
        r, d = rng.random(), docs[int(rng.integers(len(docs)))]
        adj, noun = str(rng.choice(ADJS)), str(rng.choice(NOUNS))
        if r < 0.35:
            q = f"{adj} {noun}"
        elif r < 0.55:
            q = f"{d['brand'].lower()} {noun}"
        elif r < 0.70:
            q = d["brand"].lower()
        elif r < 0.80:
            q = noun
        elif r < 0.90:
            q = d["sku"] if rng.random() < 0.6 else d["sku"].lower()
        elif r < 0.95:
            q = f"{d['brand'].lower()} {adj} {noun}"
        else:           # a SKU among other words, as typed
            q = f"{d['category']} {d['sku']}"
        queries.append(q)
    return docs, queries


CATALOGUE_INDEX = {
    "settings": {"number_of_shards": 1, "number_of_replicas": 0,
                 "analysis": {"normalizer": {"lower": {"type": "custom", "filter": ["lowercase"]}},
                              "analyzer": {"ws_lower": {"type": "custom", "tokenizer": "whitespace",
                                                        "filter": ["lowercase"]}}}},
    "mappings": {"properties": {
        "title": {"type": "text", "analyzer": "english"},
        "description": {"type": "text", "analyzer": "english"},
        "brand": {"type": "keyword", "fields": {"lower": {"type": "keyword", "normalizer": "lower"}}},
        "category": {"type": "keyword"}, "tags": {"type": "keyword"},
        "sku": {"type": "keyword", "fields": {"lower": {"type": "keyword", "normalizer": "lower"}}},
        "price": {"type": "float"}, "popularity": {"type": "integer"},
        "popularity_rf": {"type": "rank_feature"}, "released": {"type": "date"}}}}


def index_catalogue(conn, docs: list[dict]) -> None:
    from opensearchpy import helpers
    c = conn.client()
    if c.indices.exists(index=CATALOGUE):
        c.indices.delete(index=CATALOGUE)
    c.indices.create(index=CATALOGUE, body=CATALOGUE_INDEX)
    helpers.bulk(c, ({"_index": CATALOGUE, "_id": d["id"], "_source": {k: v for k, v in d.items() if k != "id"}}
                     for d in docs), chunk_size=1000)
    c.indices.forcemerge(index=CATALOGUE, max_num_segments=1)
    c.indices.refresh(index=CATALOGUE)


def cranfield_index(conn) -> tuple[str, bool]:
    """(index, made here): ``ltr demo``'s Cranfield when present, else our own copy."""
    c = conn.client()
    if c.indices.exists(index=CRANFIELD) and c.count(index=CRANFIELD)["count"] == 1400:
        return CRANFIELD, False
    from ltr_toolkit.indexing.documents import index_documents
    index_documents(conn, OWN_CRANFIELD, cranfield.documents(), recreate=True, expansion=None,
                    vector_fields=None)
    return OWN_CRANFIELD, True


# ---------------------------------------------------------------------------- store
def _delete_featureset(conn, name: str) -> None:
    try:
        request(conn, "DELETE", f"{st.store_path(None)}/_featureset/{name}")
    except Exception:           # noqa: BLE001 -- absent
        pass


def clean(conn) -> None:
    """Every ``bench-tc-`` model and feature set (a previous run's too)."""
    delete_models(conn, model_names(conn, None, prefix=PREFIX))
    for fs in st.list_elements(conn, "_featureset", None, prefix=PREFIX):
        _delete_featureset(conn, fs["name"])
    st.refresh_store(conn, None)


def upload(conn, row: Row, index: str) -> None:
    """The row's feature set and a linear model weighing each feature 1, validated by the
    plugin on ``index`` (a shape the node refuses is kept with its reason, not timed)."""
    name = PREFIX + row.key.replace("_", "-")
    try:
        st.upload_featureset(conn, {"name": name, "features": row.features})
        request(conn, "POST", f"{st.store_path(None)}/_featureset/{name}/_createmodel", body={
            "model": {"name": name, "model": {"type": "model/linear",
                                              "definition": {f["name"]: 1.0 for f in row.features}}},
            "validation": {"params": {KEYWORDS: "wireless laptop"}, "index": index}})
    except Exception as exc:    # noqa: BLE001 -- reported in the table
        row.error = " ".join(str(exc).split())[:240]


def body(row: Row, stage: FirstStage, text: str) -> dict:
    params = {KEYWORDS: text}
    b = {"query": stage.query(params), "size": SIZE, "_source": False}
    if row.features is not None:
        b["rescore"] = {"window_size": WINDOW, "query": {
            "rescore_query": st.sltr(params, model=PREFIX + row.key.replace("_", "-")),
            "query_weight": 0.0, "rescore_query_weight": 1.0}}
    return b


# ---------------------------------------------------------------------------- values
def logged_values(conn, index: str, stage: FirstStage, rows: list[Row], texts: list[str]) -> dict:
    """{row key: [value or None per (query, document)]} over the first stage's top 100 of
    ``texts``, every row's features logged in one feature set (names made unique)."""
    features, owner = [], []
    for r in rows:
        for f in r.features:
            features.append(_named(f, f"{r.key}__{f['name']}"))
            owner.append(r.key)
    name = f"{PREFIX}log-{index}"
    st.upload_featureset(conn, {"name": name, "features": features})
    out: dict[str, list] = {r.key: [] for r in rows}
    for text in texts:
        params = {KEYWORDS: text}
        resp = request(conn, "POST", f"/{index}/_search", params={"search_type": stage.search_type}, body={
            "query": {"bool": {"must": [stage.query(params)],
                               "filter": [st.sltr(params, featureset=name, name="log")]}},
            "size": WINDOW, "_source": False,
            "ext": {"ltr_log": {"log_specs": [{"name": "log", "named_query": "log", "missing_as_zero": False}]}}})
        for hit in resp["hits"]["hits"]:
            vals: dict[str, list] = {}
            for (o, entry) in zip(owner, hit["fields"]["_ltrlog"][0]["log"]):
                vals.setdefault(o, []).append(entry.get("value"))
            for r in rows:
                got = [v for v in vals[r.key] if v is not None]
                out[r.key].append(None if not got else (sum(got) if r.combine == "sum" else got[0]))
    _delete_featureset(conn, name)
    return out


def compare(ref: list, got: list) -> tuple[str, bool]:
    """How ``got`` relates to the reference ``ref`` (same documents): (text, equivalent:
    identical or proportional, and the same documents matched)."""
    ref_in = np.array([v is not None for v in ref])
    got_in = np.array([v is not None for v in got])
    n = len(ref)
    only_ref, only_got = int((ref_in & ~got_in).sum()), int((got_in & ~ref_in).sum())
    both = ref_in & got_in
    a = np.array([v for v, b in zip(ref, both) if b], dtype=float)
    b = np.array([v for v, k in zip(got, both) if k], dtype=float)
    parts = []
    if only_ref or only_got:
        parts.append(f"matches differ on {only_ref + only_got} of {n} documents "
                     f"({only_ref} only the reference, {only_got} only this)")
    if not len(a):
        return ("; ".join(parts) or "no document matched either"), False
    tol = 1e-4 * np.maximum(1.0, np.abs(a))
    if np.all(np.abs(a - b) <= tol):
        how, eq = "identical values", True
    else:
        pos = np.abs(a) > 1e-6
        ratio = b[pos] / a[pos]
        spread = (ratio.max() - ratio.min()) / abs(np.median(ratio)) if pos.any() else np.inf
        zeros_ok = np.all(np.abs(b[~pos]) <= 1e-4)
        if pos.any() and spread < 2e-3 and zeros_ok:
            how, eq = f"proportional (x{np.median(ratio):.4g})", True
        else:
            order = np.lexsort((b, a))
            sa, sb = a[order], b[order]
            step = np.diff(sa) > 1e-4 * np.maximum(1.0, np.abs(sa[1:]))
            mono = np.all(np.diff(sb)[step] > -1e-4 * np.maximum(1.0, np.abs(sb[1:][step])))
            rel = np.abs(a - b) / np.maximum(1e-6, np.abs(a))
            differ = int((np.abs(a - b) > tol).sum())
            how = ("monotone in the reference (same order, other values)" if mono else
                   f"other values on {differ} of {len(a)} documents both match (median relative "
                   f"difference {np.median(rel[np.abs(a - b) > tol]):.2g})")
            eq = False
    parts.insert(0, how)
    return "; ".join(parts), eq and not (only_ref or only_got)


# ---------------------------------------------------------------------------- timing
def run(conn, rows: list[Row], bodies: dict, steps: list[int], rng: random.Random,
        times: dict, took: dict, loads: list, deadline: float = math.inf) -> int:
    """Send every row for each step (a random order each step); stops after the step
    during which ``deadline`` (``time.perf_counter``) passes. Returns the steps done."""
    client = conn.client()
    for j, i in enumerate(steps):
        if time.perf_counter() > deadline:
            return j
        order = list(rows)
        rng.shuffle(order)
        for r in order:
            b = bodies[r.key][i]
            t0 = time.perf_counter()
            resp = call(conn, client.search, index=r.index_name, body=b,
                        search_type=STAGES[r.corpus].search_type)
            times[r.key].append((time.perf_counter() - t0) * 1e3)
            took[r.key].append(resp["took"])
        if j % 50 == 0:
            loads.append(os.getloadavg()[0])
    return len(steps)


def paired(x, y, rng: np.random.Generator) -> tuple[float, float, float]:
    """Median of the paired differences x - y, and its bootstrap 95% interval."""
    d = np.asarray(x) - np.asarray(y)
    idx = rng.integers(0, len(d), (BOOT, len(d)))
    meds = np.median(d[idx], axis=1)
    return float(np.median(d)), float(np.percentile(meds, 2.5)), float(np.percentile(meds, 97.5))


def line(ns, ys) -> tuple[float, float]:
    """(intercept, slope) of the least-squares line."""
    slope, intercept = np.polyfit(np.asarray(ns, float), np.asarray(ys, float), 1)
    return float(intercept), float(slope)


# ---------------------------------------------------------------------------- main
TENFOLD = 10


def tenfold(shapes: list[Row]) -> list[Row]:
    """Each shape's features ten times over (names made unique): its cost a feature, ten
    times above the timing's noise (copies cost as distinct features do: see the slope
    table's 20 distinct row)."""
    return [Row(f"{r.key}_x10", r.corpus, f"{r.label} (x{TENFOLD})",
                [_named(f, f"{f['name']}_c{c}") for c in range(TENFOLD) for f in r.features],
                r.combine, r.needs, of=r.key)
            for r in shapes if r.features and not r.copies and not r.extra]


def main():
    t_start = time.time()
    conn = connect()
    load0 = os.getloadavg()[0]
    docs, cat_queries = catalogue(np.random.default_rng(SEED))
    cran_index, own = cranfield_index(conn)
    index_catalogue(conn, docs)
    names = {"cranfield": cran_index, "catalogue": CATALOGUE}
    texts = {"cranfield": list(cranfield.queries().values())[:QUERIES], "catalogue": cat_queries}
    crows, csignals = cranfield_rows()
    krows, ksignals = catalogue_rows(docs)
    shapes, signals = crows + krows, csignals + ksignals
    rows = shapes + tenfold(shapes)
    for r in rows:
        r.index_name = names[r.corpus]
    clean(conn)
    try:
        for r in rows:
            if r.features is not None:
                upload(conn, r, names[r.corpus])
                if r.error and not r.of:
                    print(f"refused: {r.key}: {r.error}", flush=True)
        live = [r for r in rows if not r.error]
        bodies = {r.key: [body(r, STAGES[r.corpus], texts[r.corpus][i]) for i in range(QUERIES)] for r in live}
        values = {}
        for corpus in ("cranfield", "catalogue"):
            sub = [r for r in live if r.corpus == corpus and r.features and not (r.copies or r.of or r.extra)]
            picks = texts[corpus][:: max(1, QUERIES // VALUE_QUERIES)][:VALUE_QUERIES]
            values.update(logged_values(conn, names[corpus], STAGES[corpus], sub, picks))
        print(f"{len(live)} rows to time ({len(rows) - len(live)} refused); set-up and values "
              f"{time.time() - t_start:.0f} s", flush=True)
        rng = random.Random(SEED)
        times = {r.key: [] for r in live}
        took = {r.key: [] for r in live}
        loads: list[float] = []
        t0 = time.perf_counter()
        run(conn, live, bodies, list(range(WARM_STEPS)), rng, times, took, loads)      # warm-up
        per_step = (time.perf_counter() - t0) / WARM_STEPS
        n_steps = MAX_STEPS             # the deadline below ends it sooner on a slow machine
        steps: list[int] = []
        while len(steps) < n_steps:     # every query once, in a new order, pass after pass
            block = list(range(QUERIES))
            rng.shuffle(block)
            steps += block
        steps = steps[:n_steps]
        print(f"warm-up: {per_step:.2f} s a step of {len(live)} requests; timing up to {n_steps} steps "
              f"for at most {BUDGET_S:.0f} s (~{min(n_steps, BUDGET_S / per_step):.0f} steps at that pace)",
              flush=True)
        times = {r.key: [] for r in live}
        took = {r.key: [] for r in live}
        loads.clear()
        t1 = time.perf_counter()
        n_steps = run(conn, live, bodies, steps, rng, times, took, loads, deadline=t1 + BUDGET_S)
        timed_s = time.perf_counter() - t1
    finally:
        clean(conn)
        c = conn.client()
        c.indices.delete(index=CATALOGUE, ignore_unavailable=True)
        if own:
            c.indices.delete(index=OWN_CRANFIELD, ignore_unavailable=True)
    run_info = {"load_start": load0, "load_end": os.getloadavg()[0], "loads": loads or [load0],
                "steps": n_steps, "timed_s": timed_s, "per_step": per_step, "requests": len(live),
                "total_s": time.time() - t_start, "cranfield": cran_index}
    report(rows, signals, times, took, values, run_info)


# ---------------------------------------------------------------------------- report
FIRST = {"cranfield": "c_first", "catalogue": "k_first"}
SLOPES = (("c_trivial", "cranfield", "trivial constant feature (match_all, no params)"),
          ("c_title", "cranfield", "match on title ({{keywords}})"),
          ("k_trivial", "catalogue", "trivial constant feature (match_all, no params)"))


def _ci(m, lo, hi, sign: str = "") -> str:
    return f"{m:{sign}.3f} [{lo:{sign}.3f}, {hi:{sign}.3f}]"


def report(rows, signals, times, took, values, info) -> None:
    brng = np.random.default_rng(SEED)
    by = {r.key: r for r in rows}
    stat: dict[str, dict] = {}
    for r in rows:
        if r.key not in times:
            continue
        w, k = np.asarray(times[r.key]), np.asarray(took[r.key], float)
        base = FIRST[r.corpus]
        stat[r.key] = {"p50": float(np.percentile(w, 50)), "p99": float(np.percentile(w, 99)),
                       "took50": float(np.percentile(k, 50)), "took99": float(np.percentile(k, 99)),
                       "took_mean": float(k.mean()), "n": len(r.features or []),
                       "added": paired(times[r.key], times[base], brng) if r.key != base else (0.0, 0.0, 0.0),
                       "added_took": float(np.mean(k - np.asarray(took[base], float)))}
    fits = {}
    for prefix, corpus, what in SLOPES:
        pts = sorted((by[k].copies, s["added"][0], s["added_took"]) for k, s in stat.items()
                     if by[k].copies and k.startswith(prefix + "_"))
        if len(pts) >= 2:
            ns, ys, ks = zip(*pts)
            fits[prefix] = {"corpus": corpus, "what": what, "points": pts, "wall": line(ns, ys),
                            "took": line(ns, ks)}
    fixed = {c: fits[p]["wall"][0] for p, c in (("c_trivial", "cranfield"), ("k_trivial", "catalogue"))
             if p in fits}
    x10 = {r.of: r.key for r in rows if r.of}
    x10.update({f"{p}_1": f"{p}_10" for p, _, _ in SLOPES})

    def per_feature(key):
        """ms a feature from the x10 row: (added - the rescore's fixed cost) / features."""
        k = x10.get(key)
        if k not in stat or by[key].corpus not in fixed:
            return None
        return (stat[k]["added"][0] - fixed[by[key].corpus]) / stat[k]["n"]

    tables, csv_rows, recs = [], [], {}
    for sig in signals:
        ref, tab = sig.reference, []
        for key in sig.rows:
            r, s = by[key], stat.get(key)
            if s is None:
                tab.append({"key": key, "row": r, "refused": r.error})
                continue
            one = paired(times[key], times[ref], brng) if key != ref else None
            k10, r10 = x10.get(key), x10.get(ref)
            ten = None
            if key != ref and k10 in times and r10 in times:
                m, lo, hi = paired(times[k10], times[r10], brng)
                ten = (m / TENFOLD, lo / TENFOLD, hi / TENFOLD)
            if key == ref:
                how, eq = "(reference)", True
            elif key in values and ref in values:
                how, eq = compare(values[ref], values[key])
            else:
                how, eq = "not logged (constant 1 for every document)", False
            tab.append({"key": key, "row": r, "s": s, "one": one, "ten": ten, "how": how, "eq": eq,
                        "pf": per_feature(key)})
        recs[sig.name] = recommend(sig, tab)
        tables.append((sig, tab))
        for t in tab:
            r, s = t["row"], t.get("s")
            if s is None:
                csv_rows.append([sig.name, r.corpus, r.label, len(r.features or []), *[""] * 15,
                                 f"refused: {t['refused']}", "", r.needs])
                continue
            one, ten = t["one"] or ("", "", ""), t["ten"] or ("", "", "")
            csv_rows.append([sig.name, r.corpus, r.label, s["n"], round(s["p50"], 3), round(s["p99"], 3),
                             s["took50"], s["took99"], round(s["took_mean"], 3),
                             *[round(v, 4) for v in s["added"]], *[v if v == "" else round(v, 4) for v in one],
                             "" if t["pf"] is None else round(t["pf"], 4),
                             *[v if v == "" else round(v, 4) for v in ten], t["how"], t["eq"], r.needs])
    for prefix, f in fits.items():
        for n, y, k in f["points"]:
            key = f"{prefix}_{n}"
            s = stat[key]
            csv_rows.append(["per-feature slope", f["corpus"], by[key].label, n, round(s["p50"], 3),
                             round(s["p99"], 3), s["took50"], s["took99"], round(s["took_mean"], 3),
                             *[round(v, 4) for v in s["added"]], "", "", "", "", "", "", "",
                             f"slope {f['wall'][1]:.4f} ms a feature, intercept {f['wall'][0]:.4f} ms", "", ""])
    for key in ("c_first", "k_first", "c_title_20d"):
        if key in stat:
            s = stat[key]
            csv_rows.append(["baseline" if key.endswith("first") else "per-feature slope", by[key].corpus,
                             by[key].label, s["n"], round(s["p50"], 3), round(s["p99"], 3), s["took50"],
                             s["took99"], round(s["took_mean"], 3), *[round(v, 4) for v in s["added"]],
                             *[""] * 7, "", "", ""])
    header = ["signal", "index", "shape", "features", "p50 ms", "p99 ms", "took p50 ms", "took p99 ms",
              "took mean ms", "ms added to the first stage (paired median)", "ci low", "ci high",
              "ms vs the generated shape, one copy (paired median)", "ci low", "ci high",
              "ms a feature (x10 row minus the rescore's fixed cost, over its features)",
              "ms a copy vs the generated shape (x10 rows, paired median / 10)", "ci low", "ci high",
              "values vs the generated shape", "equivalent", "needs"]
    write_table(NAME, header, csv_rows)
    _markdown(tables, recs, fits, stat, by, info)
    _figure(tables, fits, stat, fixed, x10)


def recommend(sig: Signal, tab: list[dict]) -> str:
    """The cheapest shape whose values are identical/proportional to the reference's (by its
    x10 rows' paired difference a copy, else the single copy's), when that difference's
    interval is below 0 and the saving is at least :data:`MIN_SAVING` of the reference's own
    cost; else keep the reference. Cheaper non-equivalent shapes are named."""
    timed = [t for t in tab if "s" in t and t["key"] != sig.reference]
    reft = next(t for t in tab if t["key"] == sig.reference)
    ref = plain(reft["row"].label)
    own = reft["pf"] * reft["s"]["n"] if reft.get("pf") is not None else None    # ms a copy

    def cost(t):
        return (t["ten"], "a copy (x10 rows)") if t["ten"] else (t["one"], "a request (one copy)")

    def share(t):
        m = cost(t)[0][0]
        return f", {-m / own:.0%} of its cost" if own and t["ten"] else ""

    def counts(t):
        (m, lo, hi), _ = cost(t)
        return hi < 0 and (own is None or not t["ten"] or -m >= MIN_SAVING * own)

    def saving(t):
        (m, lo, hi), unit = cost(t)
        return f"{-m:.3f} ms [{-hi:.3f}, {-lo:.3f}] {unit}{share(t)}"
    equal = [t for t in timed if t["eq"]]
    cheaper = sorted([t for t in equal if counts(t)], key=lambda t: cost(t)[0][0])
    head = f"The generated shape costs {own:.3f} ms a copy (x10 rows, over the rescore's fixed cost)" \
        if own is not None else ""
    if cheaper:
        t = cheaper[0]
        out = (f"use **{plain(t['row'].label)}**: {t['how']}, and cheaper than the generated {ref} by "
               f"{saving(t)}" + (f"; it needs {t['row'].needs}" if t["row"].needs else ""))
        summary = [sig.name, ref, round(own, 4) if own else "", plain(t["row"].label), saving(t), t["row"].needs]
        if t["row"].needs:
            bare = [c for c in cheaper if not c["row"].needs]
            alt = (f"without that change, use {plain(bare[0]['row'].label)} ({saving(bare[0])})" if bare
                   else "without that change, keep the generated shape")
            out += f"; {alt}"
            summary[5] += f"; {alt}"
    elif equal:
        t = min(equal, key=lambda t: cost(t)[0][0])
        (m, lo, hi), unit = cost(t)
        out = (f"keep the generated **{ref}**: no equivalent shape is cheaper by {MIN_SAVING:.0%} of its "
               f"cost or more (the cheapest equivalent, {plain(t['row'].label)}: {m:+.3f} ms "
               f"[{lo:+.3f}, {hi:+.3f}] {unit})")
        summary = [sig.name, ref, round(own, 4) if own else "", "the generated shape", "", ""]
    else:
        out = f"keep the generated **{ref}**: no other shape returns its values"
        summary = [sig.name, ref, round(own, 4) if own else "", "the generated shape", "", ""]
    if head:
        out += f". {head}"
    other = sorted([t for t in timed if not t["eq"] and counts(t)], key=lambda t: cost(t)[0][0])
    summary.append(f"{plain(other[0]['row'].label)}: {saving(other[0])}" if other else "")
    if other:
        t = other[0]
        out += (f". Cheaper but not equivalent: {plain(t['row'].label)}, by {saving(t)} ({t['how']}"
                + (f"; needs {t['row'].needs}" if t["row"].needs else "") + ")")
    dear = [t for t in timed if cost(t)[0][1] > 0]
    if dear:
        t = max(dear, key=lambda t: cost(t)[0][0])
        (m, lo, hi), unit = cost(t)
        out += f". Dearest: {plain(t['row'].label)}, {m:+.3f} ms [{lo:+.3f}, {hi:+.3f}] {unit}"
    refused = [t for t in tab if "refused" in t]
    if refused:
        out += ". Refused by the node: " + "; ".join(f"{plain(t['row'].label)} ({t['refused'][-110:]})"
                                                    for t in refused)
    return out, summary


def plain(label: str) -> str:
    return label.replace(" (generated)", "")


def _table(header, rows) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    return lines + ["| " + " | ".join(_fmt(v) for v in r) + " |" for r in rows]


def _markdown(tables, recs, fits, stat, by, info) -> None:
    loads = info["loads"]
    lines = [f"# {NAME}", "",
             f"Run {time.strftime('%Y-%m-%d %H:%M:%S')} on {machine()}: {info['total_s']:.0f} s in all, "
             f"{info['timed_s']:.0f} s timed ({info['steps']} interleaved steps of {info['requests']} "
             f"requests each, after {WARM_STEPS} warm-up steps). Load average (1 min) "
             f"{info['load_start']:.2f} at the start, {np.mean(loads):.2f} on average while timing "
             f"({min(loads):.2f}-{max(loads):.2f}), {info['load_end']:.2f} at the end: other jobs shared "
             "the 2 cores, alike for every row (each step sends every row, in a random order).", "",
             "## Summary", ""]
    lines += _table(["signal", "generated shape", "its ms a copy (x10)", "cheapest equivalent that pays",
                     "saving (paired, 95% CI)", "needs", "cheapest that pays, not equivalent (values below)"],
                    [r[1] for r in recs.values()])
    slope = {p: f for p, f in fits.items()}
    if "c_trivial" in slope and "c_title" in slope:
        lines += ["", f"Per feature (Cranfield, lines through N = 1, 5, 10, 20 copies): a trivial constant "
                  f"feature adds {slope['c_trivial']['wall'][1]:.4f} ms (the plugin's render, parse and build "
                  f"floor), a `match` on title {slope['c_title']['wall'][1]:.4f} ms; the rescore's fixed cost "
                  f"is {slope['c_trivial']['wall'][0]:.3f} ms; the first stage alone "
                  f"{stat['c_first']['p50']:.2f} ms p50."]
    lines += ["", "## Baselines and the per-feature slope", ""]
    base = []
    for key in ("c_first", "k_first"):
        s = stat[key]
        base.append([by[key].corpus, by[key].label, round(s["p50"], 2), round(s["p99"], 2), s["took50"],
                     s["took99"], round(s["took_mean"], 2), ""])
    for prefix, f in fits.items():
        for n, y, _ in f["points"]:
            s = stat[f"{prefix}_{n}"]
            base.append([f["corpus"], by[f"{prefix}_{n}"].label, round(s["p50"], 2), round(s["p99"], 2),
                         s["took50"], s["took99"], round(s["took_mean"], 2), _ci(*s["added"])])
    if "c_title_20d" in stat:
        s = stat["c_title_20d"]
        base.append(["cranfield", by["c_title_20d"].label, round(s["p50"], 2), round(s["p99"], 2),
                     s["took50"], s["took99"], round(s["took_mean"], 2), _ci(*s["added"])])
    lines += _table(["index", "row", "p50 ms", "p99 ms", "took p50", "took p99", "took mean",
                     "ms added to the first stage (paired median, 95% CI)"], base)
    lines += ["", "Lines through the copies (least squares over the paired medians; the node's `took`: "
              "over the mean paired differences, whole ms):", ""]
    lines += _table(["index", "feature", "ms a feature (slope)", "rescore's fixed ms (intercept)",
                     "took: ms a feature", "took: fixed ms"],
                    [[f["corpus"], f["what"], round(f["wall"][1], 4), round(f["wall"][0], 3),
                      round(f["took"][1], 4), round(f["took"][0], 3)] for f in fits.values()])
    lines += ["", "Per signal below: each shape served alone (one copy: p50/p99 of the client's wall "
              "time and of the node's `took`, ms added to the first stage and against the generated "
              "shape, paired medians with bootstrap 95% intervals), and ten copies of it in one set "
              f"(x{TENFOLD}): its cost a feature, the x10 row's added ms minus the rescore's fixed "
              "cost (the trivial feature's intercept above) over its features, and its difference "
              "from the generated shape a copy, ten times above the timing noise.", ""]
    for sig, tab in tables:
        lines += [f"## {sig.name}", ""] + ([sig.what, ""] if sig.what else [])
        out = []
        for t in tab:
            r = t["row"]
            if "refused" in t:
                out.append([r.label, len(r.features or []), "refused", "", "", "", "", "", "", "", "",
                            t["refused"][-160:], r.needs])
                continue
            s = t["s"]
            out.append([r.label, s["n"], round(s["p50"], 2), round(s["p99"], 2), s["took50"], s["took99"],
                        round(s["took_mean"], 2), _ci(*s["added"]),
                        _ci(*t["one"], sign="+") if t["one"] else "",
                        "" if t["pf"] is None else round(t["pf"], 3),
                        _ci(*t["ten"], sign="+") if t["ten"] else "", t["how"], r.needs])
        lines += _table(["shape", "features", "p50 ms", "p99 ms", "took p50", "took p99", "took mean",
                         "ms added (one copy)", "ms vs generated (one copy)", "ms a feature (x10)",
                         "ms a copy vs generated (x10)", "values vs generated", "needs"], out)
        lines += ["", f"**Recommendation**: {recs[sig.name][0]}.", ""]
    lines += ["## Notes", "",
              f"- Indices: Cranfield `{info['cranfield']}` (1,400 documents, one segment); the catalogue "
              f"`{CATALOGUE}` ({N_DOCS} products generated with seed {SEED}, force-merged to one "
              "segment, deleted after the run; popularity missing in 5%, the release date in 10%). "
              "Queries: Cranfield's 225; 225 generated catalogue queries (adjective + noun 35%, brand "
              "+ noun 20%, brand alone 15%, noun 10%, a SKU alone 10% (60% as typed, 40% lower case), "
              "brand + adjective + noun 5%, a category and a SKU as typed 5%; brands are stored "
              "capitalised, typed lower case).",
              "- Every row: the first stage (`multi_match` best_fields tie 0.3 over title and "
              "abstract/description, `dfs_query_then_fetch`), size 10, rescored over its top 100 by "
              "`sltr` with a `model/linear` weighing each feature 1 (`query_weight` 0). One client "
              "(opensearch-py); wall time around the client call; `took` is the node's, in whole ms.",
              f"- Values: every shape's features logged (`ltr_log`, missing not filled) on the first "
              f"stage's top 100 of {VALUE_QUERIES} queries an index; a 2-feature row's value is the "
              "sum of its features. Equivalent = the same documents match and the values are identical "
              "or proportional (a linear model rescales; trees split anywhere). 'Monotone' keeps the "
              "order but not the values (trees only, a linear model differs).",
              f"- Recommendation rule: the cheapest equivalent shape whose saving a copy (x10 rows, "
              f"paired) has its 95% interval below 0 and is at least {MIN_SAVING:.0%} of the generated "
              "shape's own cost a copy (its x10 row's added ms minus the rescore's fixed cost, over 10); "
              "else the generated shape stays.",
              "- The reference of each signal is the template `features/templates.py` writes "
              f"({'imported at run time' if T is not None else 'not importable: the copies in this file'}); "
              "'be494b5' rows are the templates the issue reviewed.",
              "- A shape needing a mapping the generated index lacks (a rank_feature copy, a lowercase "
              "normalizer) says so under 'needs'; the catalogue here has them so they can be measured.",
              "- node: the local OpenSearch with the LTR plugin (512 MiB heap), 2 cores shared with "
              "the client and other jobs."]
    (RESULTS / f"{NAME}.md").write_text("\n".join(lines) + "\n")


def _figure(tables, fits, stat, fixed, x10) -> None:
    plt = pyplot()
    fig, (ax, bx) = plt.subplots(1, 2, figsize=(15, 11), gridspec_kw={"width_ratios": [3, 1]})
    palette = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    labels, vals, errs, colours = [], [], [], []
    for i, (sig, tab) in enumerate(tables):
        for t in tab:
            k = x10.get(t["key"])
            if "s" not in t or k not in stat or t["row"].corpus not in fixed:
                continue
            n = TENFOLD         # a copy of the shape (the text pair: its two features)
            m, lo, hi = (v - fixed[t["row"].corpus] for v in stat[k]["added"])
            labels.append(f"{sig.name.split(' (')[0]}: {t['row'].label}"[:95])
            vals.append(m / n)
            errs.append(((m - lo) / n, (hi - m) / n))
            colours.append(palette[i % len(palette)])
    y = np.arange(len(labels))
    ax.barh(y, vals, xerr=np.array(errs).T, color=colours, capsize=2)
    ax.set_yticks(y, labels, fontsize=7)
    ax.invert_yaxis()
    ax.set_xlabel(f"ms a copy of the shape (x{TENFOLD} row's paired median over the first stage, minus "
                  f"the rescore's fixed cost, over {TENFOLD}; 95% CI)")
    ax.set_title("served cost of each template shape (sltr rescore of the top 100, linear model)")
    for prefix, f in fits.items():
        ns = [p[0] for p in f["points"]]
        pts = bx.plot(ns, [p[1] for p in f["points"]], "o", label=f"{f['corpus']}: {f['what']}")
        a, b = f["wall"]
        xs = np.array([0, max(ns)])
        bx.plot(xs, a + b * xs, "--", color=pts[0].get_color())
    bx.set_xlabel("N copies of the feature")
    bx.set_ylabel("ms added to the first stage (paired median)")
    bx.set_title("per-feature slope")
    bx.legend(fontsize=7, loc="lower right")
    finish(fig, NAME)


if __name__ == "__main__":
    main()
