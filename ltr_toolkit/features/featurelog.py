"""Feature logging with ``sltr`` + ``ltr_log``: judged (query, document) pairs -> SVMlight.

Per query: a ``bool`` query with ``terms`` on the judged ``_id``s as a filter and a named
``sltr`` clause with ``"cache": true`` scored in the query phase, plus the ``ltr_log``
search extension; ``batch`` queries per ``_msearch`` round trip. Retries with exponential
backoff on 429, 5xx and timeouts.

Statistics: the plugin's logger runs in the fetch phase, which never sees the statistics
a ``dfs_query_then_fetch`` search gathered; with ``"cache": true`` it reports the feature
values the query phase computed instead. So the logged values are computed exactly as the
served ``sltr`` rescore computes them, with the first stage's ``search_type``
(``FirstStage.statistics``): the whole index's statistics by default, whatever the number
of shards (``tests/test_shards.py`` checks both against a one-shard copy).

Output: a header line ``# ltr-toolkit logged: missing=absent features=N`` (``data.logged``),
then ``grade qid:N 1:v ... # docid`` rows in feature-set ordinal order, queries in
judgment order, documents in judgment order; a JSON sidecar ``OUT.json`` with the feature
set (name, feature names, content hash), the judgment source and hash, counts, the
missing-feature policy, and every judged document the index does not have.

Missing-feature policy: a feature whose query does not match a document has NO value in
the plugin (``ltr_log`` without ``missing_as_zero``), and the row leaves it out. The file's
header (and the sidecar) record ``missing=absent`` so that readers load such a feature as
missing (NaN), not as 0.0: the plugin scores a missing feature differently per model type
(trees: NaN, which always takes a split's right/"no" branch on 3.x; networks and linear
models: 0.0 before normalisation), and ``models`` reproduce exactly that.

Resumable (see ``checkpoint``): kill it at any moment and run it again with the same
arguments; the output is byte-identical to an uninterrupted run. Logging only what a file
does not hold yet: :mod:`.incremental`. The rows and the sidecar's format (with the
missing-feature rule): ``data.logged``.

Two ways to log (``via``): ``"plugin"`` (the above) and ``"named-queries"``: each
feature's template rendered here and sent as a named query, its value read from the hit's
``matched_queries`` scores (:mod:`ltr_toolkit.query.named`): what Elasticsearch's native
learning to rank computes, on any cluster, the plugin not needed (the feature set then
comes from the store or from a file). Both give the same rows, missing features
included (``tests/test_named_logging.py``).
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from ..io.checkpoint import CheckpointedOutput
from ..data.judgments import JudgmentList
from ..data.logged import header_line, row_text
from ..errors import (ClusterError, MissingResourceError, PluginMissingError,
                      StoreMissingError, UserError)
from ..io.atomic import check_writable, write_json
from ..data.querytext import distinct_words, fit_keywords
from ..query.clauses import term_budget
from ..query.prepare import QueryPlan
from ..transport.client import Connection, item_error, msearch_items
from ..transport.engine import detect
from ..query.firststage import FirstStage
from ..stores.params import check_params, derived_depth, featureset_info, file_featureset_info
from ..query.named import named_body, named_values, search_each
from ..stores.store import sltr
from ..indexing.vectors import uses_vector, vector_source
from concurrent.futures import ThreadPoolExecutor

LOG_NAME = "ltr_toolkit"
QUERY_NAME = "ltr_toolkit_logged"
#: how features are logged: the plugin's ``sltr`` + ``ltr_log``, or named queries
VIAS = ("plugin", "named-queries")


def featureset_source(conn: Connection, featureset: str, store: str | None,
                      via: str = "plugin") -> dict:
    """The feature set's info (``stores.params.featureset_info``, templates included) for
    logging ``via``: the plugin logs a stored set; named queries take a stored one or a
    feature set file (a path ending in ``.json``)."""
    if via not in VIAS:
        raise UserError(f"logging via {via!r}: expected one of {', '.join(VIAS)}")
    if featureset.endswith(".json") or Path(featureset).is_file():
        if via == "plugin":
            raise UserError(f"the plugin logs a stored feature set, not the file {featureset}",
                            "upload it (ltr featureset upload) and pass its name, or log "
                            "--via named-queries")
        return file_featureset_info(featureset)
    return featureset_info(conn, featureset, store)


def log_body(params: dict, docids: list[str], featureset: str, store: str | None) -> dict:
    """The logging request of one query: its judged ``docids`` with the feature set's
    values (``sltr`` scored in the query phase, its values cached for the ``ltr_log``
    extension: see the module docstring)."""
    logged = sltr(params, featureset=featureset, store=store, name=QUERY_NAME)
    logged["sltr"]["cache"] = True
    return {
        "size": len(docids), "_source": False,
        "query": {"bool": {"must": [logged], "filter": [{"terms": {"_id": docids}}]}},
        "ext": {"ltr_log": {"log_specs": [{"name": LOG_NAME, "named_query": QUERY_NAME,
                                           "missing_as_zero": False}]}},
    }


def _query_failure(item: dict, conn: Connection, store) -> str:
    """The reason a query failed, or raise when the failure concerns the whole run (no
    plugin, store or feature set): such errors would fail every query."""
    exc = item_error(item, conn, store)
    if isinstance(exc, (PluginMissingError, StoreMissingError, MissingResourceError)):
        raise exc
    return str(exc)


def logged_values(hit: dict, n_features: int, name: str = LOG_NAME) -> list[float | None]:
    """A hit's logged feature values (None: the feature did not match)."""
    logs = hit.get("fields", {}).get("_ltrlog", [{}])[0].get(name)
    if logs is None:
        raise ClusterError("a logging response carried no _ltrlog entry",
                           "is the ltr_log extension supported by this node?")
    if len(logs) != n_features:
        raise ClusterError(f"logged {len(logs)} features, the feature set has {n_features}")
    return [float(f["value"]) if "value" in f else None for f in logs]


def query_budget(conn: Connection, index: str, jl: JudgmentList, featureset: str,
                 first_stage: FirstStage, store: str | None = None, via: str = "plugin") -> int | None:
    """The distinct query terms the cluster accepts for this feature set and first stage
    (:func:`ltr_toolkit.query.clauses.term_budget`; None without queries): what candidates, logging and
    the models trained on them fit long queries to. ``via`` named queries: probed with the
    named queries, not ``sltr``."""
    qids = jl.judged_qids()
    if not qids:
        return None
    longest = max(qids, key=lambda q: len(distinct_words(jl.queries[q])))
    features = featureset_source(conn, featureset, store, via)["features"] \
        if via != "plugin" else None
    return term_budget(conn, index, first_stage, jl.query_params(longest),
                       featureset=featureset, store=store, features=features)


def log_features(conn: Connection, jl: JudgmentList, featureset: str, index: str, out,
                 store: str | None = None, batch: int = 25, progress=None,
                 first_stage: FirstStage | None = None, candidates: dict | None = None,
                 parallel: int = 1, max_terms: int | None = None, encoder=None,
                 via: str = "plugin") -> dict:
    """Log every (query, document) pair of ``jl`` (judged pairs, or first-stage candidates
    from ``candidates.candidate_judgments``, whose info goes in as ``candidates``).

    A query the cluster rejects (e.g. too many clauses) is recorded with its reason in
    ``failed_queries`` and the run goes on; errors that would fail every query (no
    plugin, store or feature set) stop it. Every pair ends as a row, a missing document,
    or a pair of a failed query. ``parallel`` rounds of ``batch`` queries are in flight at
    once; items the node rejects for load (429) are retried with backoff (counted in the
    sidecar's ``retried_items``). Long queries are fitted to the cluster's clause budget
    (``max_terms``; None: measured, :mod:`ltr_toolkit.query.clauses`), recorded in the
    sidecar. A feature set using ``query_vector`` gets each query's vector by the index's
    encoder (``encoder``: the user's spec; a different model is refused), recorded in the
    sidecar. ``via``: :data:`VIAS` (see the module docstring)."""
    out = Path(out)
    check_writable(out)         # a directory or a read-only place: before any search
    run = _Rounds(conn, jl, featureset, index, store, first_stage or FirstStage.from_fields(),
                  encoder, via)
    if max_terms is None:
        max_terms = query_budget(conn, index, jl, featureset, run.first_stage, store, via)
    run.max_terms = max_terms
    ck = CheckpointedOutput(out, run.key(batch))
    state = _log_rounds(run, ck, batch, parallel, progress)
    sidecar = run.sidecar(state, candidates)
    judged = len(jl)
    if state["rows"] + len(state["missing"]) + state["failed_pairs"] != judged:
        raise ClusterError(f"logged {state['rows']} rows + {len(state['missing'])} missing + "
                           f"{state['failed_pairs']} of failed queries != {judged} pairs")
    write_json(out.with_suffix(out.suffix + ".json"), sidecar)
    ck.finish()
    return sidecar


def _log_rounds(run: "_Rounds", ck: CheckpointedOutput, batch: int, parallel: int,
                progress) -> dict:
    """Every round of ``batch`` queries logged, up to ``parallel`` in flight, committed
    strictly in order (so the output, and a resumed run's, is the same whatever the
    parallelism); returns the counts."""
    qids = run.qids
    rounds = [qids[i:i + batch] for i in range(0, len(qids), batch)]
    done = ck.resume()
    state = ck.state or {"rows": 0, "missing": [], "failed": [], "failed_pairs": 0}
    retried_before = state.get("retried", 0)   # from the runs this one resumes
    step = max(1, parallel)
    with ThreadPoolExecutor(max_workers=step) as pool:
        for start in range(done, len(rounds), step):
            chunk = range(start, min(start + step, len(rounds)))
            for r, (text, missing, failures, failed_pairs) in zip(
                    chunk, pool.map(lambda r: run.log_round(rounds[r]), chunk)):
                state["rows"] += text.count("\n")
                state["missing"] += missing
                state["failed"] += failures
                state["failed_pairs"] += failed_pairs
                state["retried"] = retried_before + run.stats["retried"]
                # the file's first line: what an absent feature means (data.logged)
                head = header_line(len(run.fsinfo["feature_names"]), run.missing) if r == 0 else ""
                ck.commit(head + text, state)
                if progress:
                    progress(r + 1, len(rounds))
    return state


class _Rounds:
    """One logging run's fixed inputs (checked before any search) and one round of
    queries logged: the first stage's top ids where the features use them, then the
    ``sltr`` + ``ltr_log`` searches, as rows of text."""

    def __init__(self, conn, jl, featureset, index, store, first_stage, encoder, via="plugin"):
        self.conn, self.jl, self.featureset, self.index, self.store = conn, jl, featureset, index, store
        self.first_stage, self.encoder, self.max_terms, self.via = first_stage, encoder, None, via
        self.fsinfo = featureset_source(conn, featureset, store, via)
        self.depth = derived_depth(self.fsinfo["params"])
        self.qids = jl.judged_qids()
        for q in self.qids:   # before any search
            check_params(self.fsinfo["params"], jl.query_params(q), q, f"feature set {featureset}")
        if self.depth:
            first_stage.check(conn, index)
        self.semantic = vector_source(conn, index, encoder)[0] \
            if uses_vector(self.fsinfo["params"]) else None
        col = first_stage.feature_column({"features": self.fsinfo["features"]})
        self.first_feature = None if col is None else self.fsinfo["feature_names"][col]
        self.by_q = jl.by_query()
        self.stats = {"retried": 0}
        # what an absent feature means is the cluster's (transport.engine.Engine.missing_rule)
        self.missing = detect(conn).missing_rule

    def key(self, batch: int) -> str:
        """What a checkpoint must match to be resumed."""
        return hashlib.sha256(json.dumps(
            [self.jl.content_hash(), self.fsinfo["sha256"], self.index, batch,
             self.first_stage.to_dict() if self.depth else self.first_stage.statistics,
             self.max_terms, self.semantic] + ([self.via] if self.via != "plugin" else []),
            sort_keys=True).encode()).hexdigest()

    @property
    def plan(self) -> QueryPlan:
        """How this run's queries are prepared: the one path serving uses too."""
        return QueryPlan(self.index, self.first_stage, tuple(self.fsinfo["params"]),
                         self.max_terms, 0, self.store, self.encoder)

    def log_round(self, group: list[str]) -> tuple[str, list, list, int]:
        """(rows text, missing docs, failed queries, pairs of failed queries) of a round:
        each query prepared as served (``query.prepare``: its vector from the full text,
        the keywords shortened, the first stage's top ids where the features use them,
        its logged documents as the scored ones), then logged the way ``via`` logs."""
        docids = {q: [d for d, _ in self.by_q[q]] for q in group}
        firsts: dict[int, str] = {}
        prepared = self.plan.params(self.conn, [self.jl.query_params(q) for q in group],
                                    scored=[docids[q] for q in group], failures=firsts,
                                    stats=self.stats)
        failed = {group[i]: "first stage: " + why for i, why in firsts.items()}
        todo = [(q, p) for q, p in zip(group, prepared) if q not in failed]
        items = self._search(todo, docids)
        return self._rows(group, dict(zip([q for q, _ in todo], items)), failed)

    def _search(self, todo: list[tuple[str, dict]], docs: dict) -> list[dict]:
        """The logging searches' items of the prepared queries ``todo``, the way ``via``
        logs."""
        if not todo:
            return []
        if self.via == "plugin":
            bodies = [log_body(p, docs[q], self.featureset, self.store) for q, p in todo]
            return msearch_items(self.conn, self.index, bodies, stats=self.stats,
                                 search_type=self.first_stage.search_type)
        features = self.fsinfo["features"]
        bodies = [named_body(features, p, docs[q]) for q, p in todo]
        return search_each(self.conn, self.index, bodies, self.first_stage.search_type, self.stats)

    def values(self, hit: dict) -> list[float | None]:
        names = self.fsinfo["feature_names"]
        return logged_values(hit, len(names)) if self.via == "plugin" else named_values(hit, names)

    def _rows(self, group, responses, failed) -> tuple[str, list, list, int]:
        rows, missing, failures, failed_pairs = [], [], [], 0
        for q in group:
            resp = responses.get(q)
            if resp is not None and "error" in resp:
                failed[q] = _query_failure(resp, self.conn, self.store)
            if q in failed:
                failures.append([q, failed[q]])
                failed_pairs += len(self.by_q[q])
                continue
            hits = {h["_id"]: h for h in resp["hits"]["hits"]}
            for d, g in self.by_q[q]:
                if d not in hits:
                    missing.append([q, d])
                    continue
                rows.append(row_text(g, q, self.values(hits[d]), d))
        return "".join(rows), missing, failures, failed_pairs

    def sidecar(self, state: dict, candidates: dict | None) -> dict:
        """What the rows were logged with and from, and what did not become a row."""
        fsinfo, jl, semantic = self.fsinfo, self.jl, self.semantic
        return {
            "featureset": fsinfo["name"], "featureset_sha256": fsinfo["sha256"], "store": self.store,
            "feature_names": fsinfo["feature_names"], "featureset_params": fsinfo["params"],
            "index": self.index, "first_stage": self.first_stage.to_dict(),
            "judgments": {"source": jl.source, "sha256": jl.content_hash(),
                          "queries": len(self.qids), "pairs": len(jl)},
            "candidates": candidates,
            "rows": state["rows"], "missing_docs": state["missing"],
            # queries whose first stage failed when the candidates were fetched, then these
            "failed_queries": (candidates or {}).get("failed_queries", []) + state["failed"],
            "retried_items": state.get("retried", 0),
            "missing_features": self.missing,
            "logged_via": self.via,
            "max_query_terms": self.max_terms,
            "first_stage_feature": self.first_feature,
            "encoder": semantic and semantic["encoder"],
            "vector_field": semantic and semantic["field"],
            "fitted_queries": sum(fit_keywords(jl.queries[q], self.max_terms) != jl.queries[q]
                                  for q in self.qids),
        }
