"""Feature logging with ``sltr`` + ``ltr_log``: judged (query, document) pairs -> SVMlight.

Per query: a ``bool`` filter with ``terms`` on the judged ``_id``s and a named ``sltr``
clause, plus the ``ltr_log`` search extension; ``batch`` queries per ``_msearch`` round
trip (falling back to one search per query if the node refuses ``ext`` there). Retries
with exponential backoff on 429, 5xx and timeouts.

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

NOTE: this module is exercised only against a node WITH the LTR plugin (tests marked
``ltr``); see the issue notes for where that could not run.
"""

from __future__ import annotations

import hashlib
import json
import time
from pathlib import Path

from ..checkpoint import CheckpointedOutput
from ..data.judgments import JudgmentList
from ..data.svmlight import MISSING_ABSENT
from ..errors import ClusterError, UserError
from ..fsutil import write_json
from .client import Connection, translate
from .store import get_featureset, sltr

LOG_NAME = "ltr_toolkit"
QUERY_NAME = "ltr_toolkit_logged"


def log_body(text: str, docids: list[str], featureset: str, store: str | None,
             params_key: str = "keywords") -> dict:
    return {
        "size": len(docids), "_source": False,
        "query": {"bool": {"filter": [
            {"terms": {"_id": docids}},
            sltr({params_key: text}, featureset=featureset, store=store, name=QUERY_NAME),
        ]}},
        "ext": {"ltr_log": {"log_specs": [{"name": LOG_NAME, "named_query": QUERY_NAME,
                                           "missing_as_zero": False}]}},
    }


def _with_retries(conn: Connection, fn, retries: int = 5, base: float = 0.5):
    from opensearchpy import exceptions as E
    for attempt in range(retries + 1):
        try:
            return fn()
        except (E.ConnectionTimeout, E.TransportError) as exc:
            status = getattr(exc, "status_code", None)
            transient = isinstance(exc, E.ConnectionTimeout) or status == 429 or \
                (isinstance(status, int) and status >= 500)
            if not transient or attempt == retries:
                raise translate(exc, conn) from None
            time.sleep(base * 2 ** attempt)


def _values(hit: dict, n_features: int) -> list[float | None]:
    logs = hit.get("fields", {}).get("_ltrlog", [{}])[0].get(LOG_NAME)
    if logs is None:
        raise ClusterError("a logging response carried no _ltrlog entry",
                           "is the ltr_log extension supported by this node?")
    if len(logs) != n_features:
        raise ClusterError(f"logged {len(logs)} features, the feature set has {n_features}")
    return [float(f["value"]) if "value" in f else None for f in logs]


def featureset_info(conn: Connection, name: str, store: str | None) -> dict:
    fs = get_featureset(conn, name, store)
    if fs is None:
        raise UserError(f"feature set {name} not found in store {store or '(default)'}",
                        "upload it with `ltr featureset upload FILE`")
    body = fs.get("featureset", fs)
    names = [f["name"] for f in body["features"]]
    digest = hashlib.sha256(json.dumps(fs, sort_keys=True).encode()).hexdigest()
    return {"name": name, "store": store, "feature_names": names, "sha256": digest}


def log_features(conn: Connection, jl: JudgmentList, featureset: str, index: str, out,
                 store: str | None = None, batch: int = 25, progress=None) -> dict:
    out = Path(out)
    fsinfo = featureset_info(conn, featureset, store)
    nf = len(fsinfo["feature_names"])
    qids = jl.judged_qids()
    by_q = jl.by_query()
    run_key = hashlib.sha256(json.dumps([jl.content_hash(), fsinfo["sha256"], index, batch],
                                        sort_keys=True).encode()).hexdigest()
    ck = CheckpointedOutput(out, run_key)
    done = ck.resume()
    state = ck.state or {"rows": 0, "missing": []}
    rounds = [qids[i:i + batch] for i in range(0, len(qids), batch)]
    use_msearch = True
    c = conn.client()
    for r in range(done, len(rounds)):
        group = rounds[r]
        bodies = [log_body(jl.queries[q], [d for d, _ in by_q[q]], featureset, store) for q in group]
        responses = None
        if use_msearch:
            lines = []
            for b in bodies:
                lines += [{"index": index}, b]
            resp = _with_retries(conn, lambda: c.msearch(body=lines))
            responses = resp["responses"]
            if any("ext" in json.dumps(x.get("error", "")) for x in responses if "error" in x):
                use_msearch, responses = False, None
        if responses is None:
            responses = [_with_retries(conn, lambda b=b: c.search(index=index, body=b)) for b in bodies]
        rows = []
        for q, resp in zip(group, responses):
            if "error" in resp:
                raise ClusterError(f"logging query {q} failed: {json.dumps(resp['error'])[:300]}")
            hits = {h["_id"]: h for h in resp["hits"]["hits"]}
            for d, g in by_q[q]:
                if d not in hits:
                    state["missing"].append([q, d])
                    continue
                vals = _values(hits[d], nf)
                gs = str(int(g)) if float(g).is_integer() else repr(g)
                feats = "".join(f" {i + 1}:{v:.9g}" for i, v in enumerate(vals) if v is not None)
                rows.append(f"{gs} qid:{q}{feats} # {d}\n")
                state["rows"] += 1
        ck.commit("".join(rows), state)
        if progress:
            progress(r + 1, len(rounds))
    judged = len(jl)
    sidecar = {
        "featureset": fsinfo["name"], "featureset_sha256": fsinfo["sha256"], "store": store,
        "feature_names": fsinfo["feature_names"], "index": index,
        "judgments": {"source": jl.source, "sha256": jl.content_hash(), "queries": len(qids),
                      "pairs": judged},
        "rows": state["rows"], "missing_docs": state["missing"],
        "missing_features": MISSING_ABSENT,
    }
    if state["rows"] + len(state["missing"]) != judged:  # every judged pair accounted for
        raise ClusterError(f"logged {state['rows']} rows + {len(state['missing'])} missing "
                           f"!= {judged} judged pairs")
    write_json(out.with_suffix(out.suffix + ".json"), sidecar)
    ck.finish()
    return sidecar


def _logged_pairs(path: Path) -> set[tuple[str, str]]:
    pairs = set()
    for line in path.read_text().splitlines():
        body, _, comment = line.partition("#")
        parts = body.split()
        if len(parts) >= 2 and parts[1].startswith("qid:") and comment.strip():
            pairs.add((parts[1][4:], comment.split()[0]))
    return pairs


def log_incremental(conn: Connection, jl: JudgmentList, featureset: str, index: str, out,
                    store: str | None = None, batch: int = 25, progress=None) -> dict:
    """Log only the judged pairs OUT does not hold yet (judged documents that were missing
    before are tried again), and append them to OUT atomically. Without OUT, a full run."""
    out = Path(out)
    side_path = out.with_suffix(out.suffix + ".json")
    if not out.exists():
        return log_features(conn, jl, featureset, index, out, store, batch, progress)
    old = json.loads(side_path.read_text()) if side_path.exists() else {}
    fsinfo = featureset_info(conn, featureset, store)
    if old.get("featureset_sha256") not in (None, fsinfo["sha256"]):
        raise UserError(f"{out} was logged with another version of feature set {featureset}",
                        "log to a new file, or re-log everything")
    done = _logged_pairs(out)
    new = JudgmentList(source=jl.source)
    for (q, d), g in jl.grades.items():
        if (q, d) not in done:
            new.queries.setdefault(q, jl.queries[q])
            new.grades[(q, d)] = g
    inc = out.with_name(out.name + ".increment")
    if new.grades:
        log_features(conn, new, featureset, index, inc, store, batch, progress)
        inc_side = json.loads(inc.with_suffix(inc.suffix + ".json").read_text())
        merged = out.read_bytes() + inc.read_bytes()
        from ..fsutil import atomic_write
        with atomic_write(out, "wb") as fh:
            fh.write(merged)
        missing = inc_side["missing_docs"]
    else:
        missing = []
    rows = len(_logged_pairs(out))
    sidecar = dict(old or {}, featureset=featureset, featureset_sha256=fsinfo["sha256"],
                   store=store, feature_names=fsinfo["feature_names"], index=index,
                   judgments={"source": jl.source, "sha256": jl.content_hash(),
                              "queries": len(jl.judged_qids()),
                              "pairs": len(jl)},
                   rows=rows, missing_docs=missing, added=len(new) - len(missing))
    write_json(side_path, sidecar)
    for p in (inc, inc.with_suffix(inc.suffix + ".json")):
        p.unlink(missing_ok=True)
    return sidecar
