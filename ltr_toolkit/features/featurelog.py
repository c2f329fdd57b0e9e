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

Output: ``grade qid:N 1:v ... # docid`` rows in feature-set ordinal order, queries in
judgment order, documents in judgment order; a JSON sidecar ``OUT.json`` with the feature
set (name, feature names, content hash), the judgment source and hash, counts, the
missing-feature policy, and every judged document the index does not have.

Missing-feature policy: a feature whose query does not match a document has NO value in
the plugin (``ltr_log`` without ``missing_as_zero``), and the row leaves it out. The
sidecar records ``"missing_features": "absent"`` so that readers load such a feature as
missing (NaN), not as 0.0: the plugin scores a missing feature differently per model type
(trees: NaN, which always takes a split's right/"no" branch on 3.x; networks and linear
models: 0.0 before normalisation), and ``models`` reproduce exactly that.

Resumable (see ``checkpoint``): kill it at any moment and run it again with the same
arguments; the output is byte-identical to an uninterrupted run.

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
from ..data.svmlight import MISSING_ABSENT, read_sidecar, sidecar_path
from ..errors import (ClusterError, MissingResourceError, PluginMissingError,
                      StoreMissingError, UserError)
from ..io.atomic import atomic_write, check_writable, write_json
from ..data.querytext import distinct_words, fit_keywords
from ..query.clauses import term_budget
from ..query.prepare import QueryPlan
from ..transport.client import Connection, item_error, msearch_items
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
                ck.commit(text, state)
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
                feats = "".join(f" {i + 1}:{v:.9g}" for i, v in enumerate(self.values(hits[d]))
                                if v is not None)
                rows.append(f"{_grade_text(g)} qid:{q}{feats} # {d}\n")
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
            "missing_features": MISSING_ABSENT,
            "logged_via": self.via,
            "max_query_terms": self.max_terms,
            "first_stage_feature": self.first_feature,
            "encoder": semantic and semantic["encoder"],
            "vector_field": semantic and semantic["field"],
            "fitted_queries": sum(fit_keywords(jl.queries[q], self.max_terms) != jl.queries[q]
                                  for q in self.qids),
        }


def _grade_text(g) -> str:
    return str(int(g)) if float(g).is_integer() else repr(g)


def _row_key(line: str) -> tuple[str | None, tuple[str, str] | None]:
    """(grade token, (qid, docid)) of a logged row ``grade qid:N ... # docid``; (None, None)
    for any other line."""
    body, _, comment = line.partition("#")
    parts = body.split(maxsplit=2)
    if len(parts) < 2 or not parts[1].startswith("qid:") or not comment.strip():
        return None, None
    return parts[0], (parts[1][4:], comment.split()[0])


def _regraded_line(line: str, grades: dict):
    """(the row with the current judgments' grade or None when its pair is no longer
    judged, whether its grade changed); other lines (comments) are kept as they are."""
    grade, key = _row_key(line)
    if key is None:
        return line, False
    if key not in grades:
        return None, False
    g = _grade_text(grades[key])
    return (line, False) if g == grade else (line.replace(grade, g, 1), True)   # grade first


def _scan(path: Path, grades: dict) -> tuple[set, int, int]:
    """One streaming pass over OUT: (its logged pairs, rows regraded, rows dropped)."""
    done, regraded, dropped = set(), 0, 0
    with open(path, encoding="utf-8", newline="") as fh:
        for line in fh:
            key = _row_key(line)[1]
            if key is None:
                continue
            done.add(key)
            new, changed = _regraded_line(line, grades)
            dropped += new is None
            regraded += changed
    return done, regraded, dropped


def _copy_regraded(path: Path, grades: dict, out) -> int:
    """OUT's rows, regraded and without the pairs no longer judged, streamed into the
    open file ``out``; returns the rows written."""
    rows = 0
    with open(path, encoding="utf-8", newline="") as fh:
        for line in fh:
            new, _ = _regraded_line(line, grades)
            if new is not None:
                out.write(new)
                rows += _row_key(new)[1] is not None
    return rows


def _brief(stage: FirstStage) -> str:
    return json.dumps(stage.template, separators=(",", ":"))[:120]


def _same_logging(out: Path, old: dict, fsinfo: dict, stage: FirstStage, featureset: str,
                  candidates: dict | None) -> None:
    """Refuse an increment whose rows would not be logged as OUT's were (the sidecar,
    hence the model and serving, would name what OUT's older rows came from)."""
    if old.get("featureset_sha256") not in (None, fsinfo["sha256"]):
        raise UserError(f"{out} was logged with another version of feature set {featureset}",
                        "log to a new file, or re-log everything")
    was = FirstStage.from_dict(old["first_stage"]) if old.get("first_stage") else None
    if (was.statistics if was else "shard") != stage.statistics:
        raise UserError(f"{out} was logged with {was.statistics if was else 'shard'} term "
                        f"statistics, this run uses {stage.statistics}: its rows would not be "
                        "comparable", f"log with --statistics {was.statistics if was else 'shard'}, "
                        "or to a new file")
    if was is not None and was.to_dict() != stage.to_dict():
        raise UserError(f"{out} was logged with another first stage ({_brief(was)}; this run: "
                        f"{_brief(stage)}): new rows would come from another first stage "
                        "than the file's sidecar names", "log with the same --fields or "
                        "--first-stage, or to a new file")
    k_was = (old.get("candidates") or {}).get("k")
    k_now = (candidates or {}).get("k")
    if k_was is not None and k_now is not None and k_was != k_now:
        raise UserError(f"{out} holds the first stage's top {k_was}, this run asks for the top "
                        f"{k_now}", f"log with --window {k_was}, or to a new file")


def recorded_budget(out) -> tuple[bool, int | None]:
    """(whether ``out``'s sidecar records a query-term budget, that budget): what an
    increment of ``out`` must fit its queries to, candidates and features alike."""
    if not sidecar_path(out).is_file():
        return False, None
    side = read_sidecar(out)
    return "max_query_terms" in side, side.get("max_query_terms")


def log_incremental(conn: Connection, jl: JudgmentList, featureset: str, index: str, out,
                    store: str | None = None, batch: int = 25, progress=None,
                    first_stage: FirstStage | None = None, candidates: dict | None = None,
                    parallel: int = 1, via: str = "plugin") -> dict:
    """Log only the pairs OUT does not hold yet (documents that were missing, and queries
    that failed, before are tried again), and append them to OUT atomically. Rows OUT
    already holds take the current judgments' grades, and rows of pairs the judgments no
    longer hold are dropped (counted in the sidecar: ``regraded``, ``dropped``), so OUT
    always matches the judgments its sidecar names. Without OUT, a full run."""
    out = Path(out)
    side_path = out.with_suffix(out.suffix + ".json")
    if not out.exists():
        return log_features(conn, jl, featureset, index, out, store, batch, progress,
                            first_stage, candidates, parallel=parallel, via=via)
    if not side_path.exists():
        raise UserError(f"{out} has no sidecar {side_path.name}: which feature set its rows "
                        "were logged with is unknown", "restore the sidecar, or log to a new file")
    old = read_sidecar(out)
    fsinfo = featureset_source(conn, featureset, store, via)
    stage = first_stage or FirstStage.from_fields()
    _same_logging(out, old, fsinfo, stage, featureset, candidates)
    done, regraded, dropped = _scan(out, jl.grades)
    new = _unlogged(jl, done)
    n_done = len(done)
    del done
    inc = out.with_name(out.name + ".increment")
    # the rows already there were fitted to the file's budget: the new ones too
    budget = old.get("max_query_terms") if "max_query_terms" in old else \
        query_budget(conn, index, jl, featureset, stage, store, via)
    missing, failed = [], []
    if new.grades:
        log_features(conn, new, featureset, index, inc, store, batch, progress, stage,
                     candidates, parallel=parallel, max_terms=budget, via=via)
        missing, failed = _increment_outcome(out, old, inc)
    rows = n_done - dropped
    if new.grades or regraded or dropped:
        rows = _rewrite_with_increment(out, jl.grades, inc)
    sidecar = _incremental_sidecar(old, jl, new, fsinfo, featureset=featureset, store=store,
                                   index=index, stage=stage, rows=rows, missing=missing,
                                   failed=failed, regraded=regraded, dropped=dropped,
                                   budget=budget)
    write_json(side_path, sidecar)
    for p in (inc, inc.with_suffix(inc.suffix + ".json")):
        p.unlink(missing_ok=True)
    return sidecar


def _unlogged(jl: JudgmentList, done: set) -> JudgmentList:
    """The judgments of ``jl`` whose pairs are not in ``done`` (with their queries)."""
    new = JudgmentList(source=jl.source, params=dict(jl.params))
    for (q, d), g in jl.grades.items():
        if (q, d) not in done:
            new.queries.setdefault(q, jl.queries[q])
            new.grades[(q, d)] = g
    return new


def _increment_outcome(out: Path, old: dict, inc: Path) -> tuple[list, list]:
    """(missing documents, failed queries) of the increment logged into ``inc``; refused
    when its vectors came from another encoder or field than OUT's."""
    inc_side = json.loads(inc.with_suffix(inc.suffix + ".json").read_text())
    for key in ("encoder", "vector_field"):
        if key in old and old.get(key) != inc_side.get(key):
            raise UserError(f"{out} was logged with {key} {old.get(key)}, the index now "
                            f"has {inc_side.get(key)}", "log to a new file")
    return inc_side["missing_docs"], inc_side["failed_queries"]


def _rewrite_with_increment(out: Path, grades: dict, inc: Path) -> int:
    """OUT replaced atomically by its rows regraded (those no longer judged dropped)
    followed by the increment's lines; returns the rows written."""
    with atomic_write(out, "w") as fh:
        rows = _copy_regraded(out, grades, fh)
        if inc.exists():
            with open(inc, encoding="utf-8", newline="") as src:
                for line in src:
                    fh.write(line)
                    rows += _row_key(line)[1] is not None
    return rows


def _incremental_sidecar(old: dict, jl: JudgmentList, new: JudgmentList, fsinfo: dict, *,
                         featureset, store, index, stage, rows, missing, failed, regraded,
                         dropped, budget) -> dict:
    """OUT's sidecar after an increment: the old one updated with this run's feature set,
    first stage, judgments and counts (``added``: the increment's pairs that became rows)."""
    return dict(old or {}, featureset=featureset, featureset_sha256=fsinfo["sha256"],
                store=store, feature_names=fsinfo["feature_names"], index=index,
                first_stage=stage.to_dict(),
                judgments={"source": jl.source, "sha256": jl.content_hash(),
                           "queries": len(jl.judged_qids()),
                           "pairs": len(jl)},
                rows=rows, missing_docs=missing, failed_queries=failed,
                regraded=regraded, dropped=dropped, max_query_terms=budget,
                fitted_queries=sum(fit_keywords(jl.queries[q], budget) != jl.queries[q]
                                   for q in jl.judged_qids()),
                added=len(new) - len(missing)
                - sum(len(new.docs_of(q)) for q, _ in failed))
