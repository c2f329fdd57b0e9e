"""Training data straight from clicks, and the inverse examination propensities that
debias it (unbiased learning to rank: Joachims et al., WSDM 2017; Hu et al., WWW 2019).

:func:`join` puts each search's impressed documents (the rows of :mod:`.events.sessions`) next
to their logged feature rows: one group per search, label 1 for a clicked document and 0
for a skipped one, and each row's 0-based position, the index of its propensity. Per
search rather than per query with aggregated clicks: a click says "this result over the
ones shown with it", in that list; pooling searches would pair documents never shown
together and mix the positions a propensity is about. A logged row is found by (query,
document id): the logged query id is ``qid_for(user_query)`` (what ``ltr judgments
clicks`` names a query, so features logged for click judgments match) or the
``user_query`` itself. An impressed document without a logged row is left out of its
search and counted (``impressed_without_features``), never matched to another row.

:func:`propensities` gives each row its examination probability: from the PBM or UBM
fitted by EM on the same rows (:mod:`.judging.clickmodels`; PBM: theta of the row's rank, UBM: of its
rank and distance to the previous click) or given per position. They are clipped from
below at ``clip`` (default :data:`DEFAULT_CLIP` = 0.1: a weight ``1 / p`` is at most 10),
bounding the variance a rarely examined rank adds, at the cost of under-weighting ranks
examined less often than that. :func:`ipw` then raises them to ``-power``: power 1 is
plain inverse propensity weighting, unbiased and of the highest variance; a lower power
trades some of the correction for less variance (power ``1 / (1 + p)`` is the L_p
regularisation of the propensities in Unbiased LambdaMART, Hu et al., WWW 2019, eqs.
30-31; xgboost's ``lambdarank_bias_norm``). :data:`POWERS` are ``ltr train``'s
defaults: 1 for linear models and networks, 0.5 (p = 1) for trees, which fit the few
heavily weighted clicks low in the list. On simulated traffic over Cranfield and CACM
(``benchmarks/results/clicks_debias*.md``, 5 seeds, with and without position bias)
LambdaMART scored higher with 0.5 than with 1 in all four settings; the linear model
scored as well or better with 1, clearly so on Cranfield with position bias.

Everything is NumPy over rows (sorts, ``searchsorted``): no loop over events or pairs.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..data.dataset import RankingDataset
from ..data.logged import sidecar_path
from ..data.svmlight import save_svmlight
from ..errors import UserError
from ..io.atomic import write_json
from . import DEFAULT_CLIP
from .events.eventlog import EventLog
from .events.groups import _search_ids, previous_click
from .judging.clickmodels import estimate
from .judging.output import qid_for
from .events.problems import Problems
from .events.sessions import DEFAULT_DEPTH, Table, build_table, lookup

#: the propensities' default exponent per model family (module docstring)
POWERS = {"networks": 1.0, "trees": 0.5}
ESTIMATED = ("pbm", "ubm")


@dataclass
class ClickData:
    """Click training data: ``data`` (one group per search, labels 0/1, doc ids),
    ``positions`` (0-based, per row) and ``queries`` (the logged query id per group)."""

    data: RankingDataset
    positions: np.ndarray
    queries: np.ndarray
    counts: dict = field(default_factory=dict)

    def sidecar(self, logged: dict) -> dict:
        """The logged data's sidecar with what ``ltr train --propensity`` reads."""
        return {**logged, "clicks": {"labels": "clicked (1) or skipped (0), one group per search",
                                     "positions": self.positions.tolist(),
                                     "queries": [str(q) for q in self.queries], **self.counts}}

    @classmethod
    def from_dataset(cls, ds: RankingDataset, where) -> "ClickData":
        """What :meth:`sidecar` wrote, back beside the rows ``ds`` (loaded with it)."""
        side = ds.meta.get("sidecar", {}).get("clicks")
        if not isinstance(side, dict) or "positions" not in side or "queries" not in side:
            raise UserError(f"{where}: no click positions in its sidecar",
                            "write the file with `ltr judgments click-features`")
        pos, queries = np.asarray(side["positions"], np.int64), np.asarray(side["queries"], object)
        if len(pos) != ds.n_docs or len(queries) != ds.n_queries or ds.doc_ids is None:
            raise UserError(f"{where}: its sidecar's click positions do not match its rows "
                            f"({len(pos)} positions, {ds.n_docs} rows)")
        return cls(ds, pos, queries)


def _logged_keys(logged: RankingDataset, t: Table):
    """Per logged row: a key (text code * n_docs + doc code) in the table's codes, -1
    where its query or document is not in the events."""
    if logged.doc_ids is None:
        raise UserError(f"{logged.source}: no document ids (`# docid` comments) to join clicks on")
    n = max(len(t.docs), 1)
    text_of = {}
    for code, text in enumerate(t.texts):             # distinct query texts, not events
        text_of.setdefault(qid_for(text), code)
        text_of.setdefault(text, code)
    qtext = np.array([text_of.get(str(q), -1) for q in logged.qids], np.int64)
    doc_code = {d: i for i, d in enumerate(t.docs)}
    doc = np.fromiter((doc_code.get(str(d), -1) for d in logged.doc_ids), np.int64, logged.n_docs)
    text = qtext[logged.row_query]
    return np.where((text >= 0) & (doc >= 0), text * n + doc, -1)


def join(log: EventLog, logged: RankingDataset, base="auto", depth: int = DEFAULT_DEPTH) -> ClickData:
    """Each search's impressed documents with their logged feature rows (module docstring)."""
    t = build_table(log, base, depth)
    keys = _logged_keys(logged, t)
    order = np.argsort(keys, kind="stable")
    at = lookup(t.query.astype(np.int64) * max(len(t.docs), 1) + t.doc, keys[order])
    found = at >= 0
    row = np.where(found, order[at] if len(order) else 0, -1)
    start, gid = _search_ids(t)
    counts = {"searches": int(start.sum()), "impressions": len(t), "clicks": int(t.click.sum()),
              "impressed_without_features": int((~found).sum()),
              "searches_missing_a_document": len(np.unique(gid[~found])),
              "clicks_without_features": int((t.click & ~found).sum())}
    if not found.any():
        raise UserError(f"no impressed document of the {counts['searches']} searches has a logged row",
                        "log features for the queries and documents the events show (logged qids: "
                        "qid_for(user_query), as `ltr judgments clicks` names them, or the text)")
    rows, g = row[found], gid[found]
    first = np.flatnonzero(np.r_[True, g[1:] != g[:-1]])
    ds = RankingDataset(X=logged.X[rows], y=t.click[found].astype(np.float64),
                        offsets=np.r_[0, np.cumsum(np.diff(np.r_[first, len(g)]))],
                        qids=np.arange(len(first)).astype(str), doc_ids=logged.doc_ids[rows],
                        feature_names=logged.feature_names, source=logged.source)
    return ClickData(ds, t.pos[found].astype(np.int64),
                     np.asarray(logged.qids, object)[logged.row_query[rows[first]]], counts)


# --------------------------------------------------------------------------- propensities

def parse_propensity(spec: str) -> str | np.ndarray:
    """``pbm``, ``ubm`` or examination probabilities per 0-based position (``1,0.5,0.33``:
    each in (0, 1])."""
    spec = str(spec).strip().lower()
    if spec in ESTIMATED:
        return spec
    try:
        values = np.array([float(v) for v in spec.split(",") if v.strip()])
    except ValueError:
        values = np.zeros(0)
    if not len(values) or not np.all((values > 0) & (values <= 1)):
        raise UserError(f"--propensity {spec!r}: expected pbm, ubm or examination probabilities "
                        "per position, each in (0, 1], such as 1,0.5,0.33")
    return values


def table_of(cd: ClickData) -> Table:
    """The rows as a :class:`.events.sessions.Table` (a search per group, rows by position), as
    the click models read them."""
    ds = cd.data
    texts, qcode = np.unique(cd.queries.astype(str), return_inverse=True)
    docs, dcode = np.unique(ds.doc_ids.astype(str), return_inverse=True)
    return Table(search=ds.row_query.astype(np.int64), query=qcode.reshape(-1)[ds.row_query].astype(np.int32),
                 doc=dcode.reshape(-1).astype(np.int32), pos=cd.positions.astype(np.int32),
                 click=ds.y > 0, texts=list(texts), docs=list(docs), base=0, problems=Problems())


def _estimated(t: Table, model: str) -> np.ndarray:
    """Each row's examination probability under the PBM or UBM fitted on the rows."""
    order = np.lexsort((t.pos, t.search))
    if not np.array_equal(order, np.arange(len(order))):
        raise UserError("click rows are not in order of position within each search")
    theta = np.asarray(estimate(t, model).exam)
    if model == "pbm":
        return theta[t.pos]
    depth = int(round(np.sqrt(len(theta)))) - 1
    start, gid = _search_ids(t)
    return theta[t.pos * (depth + 1) + (t.pos - previous_click(t, start, gid))]


def _propensities(pos: np.ndarray, spec, clip: float, table) -> np.ndarray:
    spec = parse_propensity(spec) if isinstance(spec, str) else np.asarray(spec, np.float64)
    check_clip(clip)
    if isinstance(spec, str):
        return np.maximum(_estimated(table(), spec), clip)
    deepest = int(pos.max(initial=0))
    if deepest >= len(spec):
        raise UserError(f"--propensity gives {len(spec)} positions but the data has "
                        f"documents at position {deepest} (0-based)")
    return np.maximum(spec[pos], clip)


def row_propensities(t: Table, spec, clip: float = DEFAULT_CLIP) -> np.ndarray:
    """Each row of ``t`` (searches' shown documents in order of position, with their
    clicks) its examination probability (``spec``: :func:`parse_propensity`'s forms),
    clipped from below at ``clip``."""
    return _propensities(t.pos, spec, clip, lambda: t)


def propensities(cd: ClickData, spec, clip: float = DEFAULT_CLIP) -> np.ndarray:
    """Each click row's examination probability (as :func:`row_propensities`)."""
    return _propensities(cd.positions, spec, clip, lambda: table_of(cd))


def _in_unit_interval(what: str, value: float, fix: str | None = None) -> float:
    """``value`` as a float if in (0, 1], else a one-line UserError naming ``what``."""
    if not 0 < value <= 1:
        raise UserError(f"{what} {value:g}: expected a number in (0, 1]", fix)
    return float(value)


def check_clip(clip: float) -> float:
    """The propensities' lower bound, in (0, 1] (a UserError otherwise)."""
    return _in_unit_interval("propensity clip", clip)


def check_power(power: float) -> float:
    """The propensities' exponent, in (0, 1] (a UserError otherwise)."""
    return _in_unit_interval("propensity power", power,
                             "1 is plain inverse propensity weighting, 0.5 damps it")


def ipw(cd: ClickData, spec, clip: float = DEFAULT_CLIP, power: float = 1.0) -> np.ndarray:
    """Inverse propensity weights per row: ``max(p, clip) ** -power`` (module docstring)."""
    return propensities(cd, spec, clip) ** -check_power(power)


def merge_identical(cd: ClickData, weights: np.ndarray) -> tuple[ClickData, np.ndarray]:
    """Searches alike in everything (query, documents, positions, clicks, weights) as one
    group whose weights are multiplied by how many they are: the pair lambdas are linear
    in the preferred document's weight, so the trees' gradients are the same (in float
    arithmetic), with fewer groups. Networks take a step per group, so theirs differ."""
    ds = cd.data
    sizes = ds.group_sizes
    col = np.arange(ds.n_docs) - np.repeat(ds.offsets[:-1], sizes)
    width = int(sizes.max(initial=0))
    sig = np.full((ds.n_queries, 1 + 4 * width), -1.0)
    sig[:, 0] = np.unique(cd.queries.astype(str), return_inverse=True)[1].reshape(-1)
    dcode = np.unique(ds.doc_ids.astype(str), return_inverse=True)[1].reshape(-1)
    for i, v in enumerate((dcode, cd.positions, ds.y, weights)):
        sig[ds.row_query, 1 + 4 * col + i] = v
    _, first, count = np.unique(sig, axis=0, return_index=True, return_counts=True)
    rows = np.repeat(ds.offsets[first], sizes[first]) + (
        np.arange(int(sizes[first].sum())) - np.repeat(np.cumsum(sizes[first]) - sizes[first], sizes[first]))
    merged = RankingDataset(X=ds.X[rows], y=ds.y[rows], offsets=np.r_[0, np.cumsum(sizes[first])],
                            qids=ds.qids[first], doc_ids=ds.doc_ids[rows],
                            feature_names=ds.feature_names, source=ds.source, meta=dict(ds.meta))
    return (ClickData(merged, cd.positions[rows], cd.queries[first], dict(cd.counts)),
            weights[rows] * np.repeat(count, sizes[first]))


def write(cd: ClickData, logged_sidecar: dict, path) -> None:
    """The rows as SVMlight (``label qid:search ... # docid``) and the sidecar beside it
    (the logged data's, with the positions and queries ``ltr train --propensity`` reads)."""
    save_svmlight(cd.data, path)
    write_json(sidecar_path(path), cd.sidecar(logged_sidecar))
