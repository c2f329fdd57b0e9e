"""Click models chosen by evidence: every model scored on held-out later searches
(log-likelihood, perplexity), ``--model auto`` taking the least perplexing (offline)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from ltr_toolkit.clicks import simulate as S
from ltr_toolkit.clicks.heldout import choose_model, split
from ltr_toolkit.clicks.judge import ClickSettings, judge
from ltr_toolkit.clicks.models import MODELS


def _sim(user, sessions=12_000, seed=3):
    rng = np.random.default_rng(0)
    rankings = {f"q{i}": [f"d{i}-{j}" for j in range(10)] for i in range(150)}
    texts = {q: f"query {q}" for q in rankings}
    truth = {(q, d): float(rng.integers(0, 5)) for q, ds in rankings.items() for d in ds}
    return S.simulate(rankings, texts, truth, sessions, user, seed=seed)


def test_the_held_out_searches_are_the_later_ones():
    log = S.event_log(_sim(S.UserModel()))
    earlier, later = split(log, 0.25)
    assert earlier.search.max() < later.search.min()
    assert abs(len(np.unique(later.search)) / len(np.unique(log.search)) - 0.25) < 0.01
    assert not earlier.problems.counts and not later.problems.counts   # counted once, in the full log


@pytest.mark.parametrize("user,family", [
    (S.UserModel(eta=1.0, stop_min=0.0, stop_max=0.0), {"pbm", "ubm"}),   # position bias, no cascade
    (S.UserModel(eta=0.0, stop_min=0.0, stop_max=0.0), {"ctr", "pbm", "ubm"}),  # neither
    (S.UserModel(eta=0.0, stop_min=0.5, stop_max=0.9), {"sdbn", "ubm"}),  # cascade only
])
def test_the_model_that_generated_the_clicks_predicts_them_best(user, family):
    rep = choose_model(S.event_log(_sim(user)))
    assert set(rep["models"]) == set(MODELS)
    assert all(v["perplexity"] >= 1.0 and v["log_likelihood"] < 0 for v in rep["models"].values())
    assert rep["chosen"] in family, rep["models"]
    # (each document is always shown at the same rank here, so a pair's raw CTR absorbs its
    # rank's examination: CTR predicts about as well as PBM, only ranking with it suffers)


def test_auto_uses_the_chosen_model_and_reports_every_model(tmp_path, cli):
    sim = _sim(S.UserModel(eta=1.0, stop_min=0.0, stop_max=0.0), sessions=6000)
    path = tmp_path / "events.ndjson"
    with open(path, "w") as fh:
        for kind, doc in S.ubi_documents(sim, base=0):
            fh.write(json.dumps(doc) + "\n")
    r = cli("judgments", "clicks", str(path), "--model", "auto", "-o", str(tmp_path / "j.txt"))
    assert r.returncode == 0, r.stderr
    rep = json.loads((tmp_path / "j.txt.json").read_text())
    choice = rep["model_choice"]
    assert choice["auto"] == choice["chosen"] == rep["settings"]["model"] in {"pbm", "ubm"}
    assert set(choice["models"]) == set(MODELS)
    assert "held-out perplexity" in r.stdout and "(chosen)" in r.stdout
    jl, _, fixed = judge(S.event_log(sim), ClickSettings(model="ctr"), "sim")
    assert fixed["settings"]["model"] == "ctr" and "auto" not in fixed["model_choice"]


# --------------------------------------------------------------------------- reading

def _mixed_file(tmp_path, bulk: bool):
    """Simulated UBI traffic (query records and events), in NDJSON or the bulk format,
    with bad lines sprinkled in (not JSON, blank, a position of the wrong type, an
    unknown action, an event without a query id)."""
    sim = _sim(S.UserModel(), sessions=3000)
    bad = ["not json {", "", json.dumps({"action_name": "click", "query_id": "q-x",
                                         "event_attributes": {"object": {"object_id": "d"},
                                                              "position": {"ordinal": "two"}}}),
           json.dumps({"action_name": "hover", "query_id": "q-y"}),
           json.dumps({"action_name": "click", "event_attributes": {"object": {"object_id": "d"}}})]
    path = tmp_path / ("bulk.ndjson" if bulk else "events.ndjson")
    with open(path, "w") as fh:
        for i, (kind, doc) in enumerate(S.ubi_documents(sim, base=0)):
            if bulk:
                fh.write(json.dumps({"index": {"_index": kind}}) + "\n")
            fh.write(json.dumps(doc) + "\n")
            if i % 9_000 == 4_500:
                fh.write(bad[(i // 9_000) % len(bad)] + "\n")
    return path


def _named(log):
    import numpy as np
    return {"search": np.array(log.query_ids.names, object)[log.search].tolist(),
            "doc": np.array(log.docs.names, object)[log.doc].tolist(), "pos": log.pos.tolist(),
            "text": [log.texts.names[t] if t >= 0 else None for t in log.text],
            "action": log.action.tolist(),
            "records": {log.query_ids.names[q]: log.texts.names[t] for q, t in log.record_text.items()},
            "hits": {log.query_ids.names[q]: [log.docs.names[d] for d in h] for q, h in log.record_hits.items()},
            "problems": log.problems.counts, "unknown": log.problems.unknown_actions, "lines": log.lines}


@pytest.mark.parametrize("bulk", [False, True], ids=["ndjson", "bulk"])
def test_the_block_reader_reads_what_the_line_reader_reads(tmp_path, monkeypatch, bulk):
    """pyarrow's blocks (small here, so that some hold a bad line and are read again line
    by line) give the same events, records, problem counts and lines as the line reader."""
    from ltr_toolkit.clicks import files
    path = _mixed_file(tmp_path, bulk)
    monkeypatch.setattr(files, "BLOCK_BYTES", 64 << 10)
    fast = files.read_file(path)
    monkeypatch.setattr(files, "available", lambda: False)
    slow = files.read_file(path)
    a, b = _named(fast), _named(slow)
    assert a == b
    assert len(fast) > 30_000 and a["problems"], a["problems"]
