"""Click models chosen by evidence: every model scored on held-out later searches
(log-likelihood, perplexity), ``--model auto`` taking the least perplexing (offline)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from ltr_toolkit.clicks import simulate as S
from ltr_toolkit.clicks.judging.heldout import choose_model, split
from ltr_toolkit.clicks.judging.judge import ClickSettings, judge
from ltr_toolkit.clicks.judging.clickmodels import MODELS


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
    r = cli("judgments", "clicks", str(path), "--click-model", "auto", "-o", str(tmp_path / "j.txt"))
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
            "problems": log.problems.counts, "first_seen": log.problems.first_seen,
            "unknown": log.problems.unknown_actions, "lines": log.lines,
            "interleaving": {log.query_ids.names[q]: v for q, v in log.record_interleaving.items()}}


def _same(fast, slow):
    """The same reading, codes included (strings interned in the order of the lines)."""
    assert _named(fast) == _named(slow)
    for k in ("query_ids", "docs", "texts"):
        assert getattr(fast, k).names == getattr(slow, k).names, k
    for k in ("search", "doc", "pos", "text", "action"):
        assert np.array_equal(getattr(fast, k), getattr(slow, k)), k
    assert (fast.record_text, fast.record_hits) == (slow.record_text, slow.record_hits)


def _line_by_line(path):
    """The file read a line at a time (the path of a block pyarrow cannot read), the
    reference the block reader is checked against."""
    from ltr_toolkit.clicks.events import files
    from ltr_toolkit.clicks.events.eventlog import EventReader
    reader = EventReader()
    with open(path, encoding="utf-8") as fh:
        files.read_lines(reader, fh, str(path))
    return reader.finish()


@pytest.mark.parametrize("bulk", [False, True], ids=["ndjson", "bulk"])
def test_the_block_reader_reads_what_the_line_reader_reads(tmp_path, monkeypatch, bulk):
    """pyarrow's blocks (small here, so that some hold a bad line and are read again line
    by line) give the same events, records, problem counts and lines as the line reader."""
    from ltr_toolkit.clicks.events import files
    path = _mixed_file(tmp_path, bulk)
    monkeypatch.setattr(files, "BLOCK_BYTES", 64 << 10)
    by_lines = []
    read_lines = files.read_lines
    monkeypatch.setattr(files, "read_lines", lambda reader, lines, *a: (
        by_lines.append(1), read_lines(reader, lines, *a))[1])
    fast = files.read_file(path)
    assert 0 < len(by_lines) < 8           # only the blocks with a bad line
    monkeypatch.undo()
    slow = _line_by_line(path)
    _same(fast, slow)
    a = _named(fast)
    assert len(fast) > 30_000 and a["problems"], a["problems"]


def _edge_lines(bulk: bool) -> list[str]:
    """UBI lines with what a reader can trip on: in bulk, ``create`` actions, actions
    written another way, naming no index or the other index, two actions in a row, a
    blank line between an action and its document, a bad line in the middle (and in the
    place of a document), a document holding ``index`` that is no action line, a document
    without action line, an action line at the end; in both, unknown actions, events
    without query id or object, bad positions, an interleaved search's record."""
    from ltr_toolkit.clicks import interleaving

    def event(action, q, d, pos, text=None):
        doc = {"action_name": action, "query_id": q, "event_attributes": {"object": {"object_id": d}}}
        if pos is not None:
            doc["event_attributes"]["position"] = {"ordinal": pos}
        if text is not None:
            doc["user_query"] = text
        return json.dumps(doc)

    def act(op="index", index="ubi_events"):
        return json.dumps({op: {"_index": index}})

    pairs = []                            # (action line or None, document line)
    for i in range(30):
        q = f"q{i}"
        hits = [f"d{i}", f"d{i + 1}", f"d{(i * 7) % 11}"]
        pairs.append((act(index="ubi_queries"), json.dumps(
            {"query_id": q, "user_query": f" text {i % 4} ", "query_response_hit_ids": hits})))
        for j, d in enumerate(hits):
            pairs.append((act("create" if j % 2 else "index"), event("impression", q, d, j + 1, f"text {i % 4}")))
        pairs.append((act(), event("click", q, hits[i % 3], i % 3 + 1)))
        if i % 6 == 2:
            pairs += [(act(), event("hover", q, "d1", 1)), (act(), event("click", None, "d1", 1)),
                      (act(), event("click", q, "", 2)), (act(), event("impression", q, "d9", -1)),
                      (act(), event("impression", q, "d8", None, "  "))]
    inter = interleaving.record("text 9", ["d1", "d2"], "ab", "m1", "m2", query_id="q-int")
    pairs.insert(17, (act(index="ubi_queries"), json.dumps(inter)))
    pairs.insert(23, (act(index="ubi_queries"), json.dumps({"query_id": "", "user_query": "x"})))
    if not bulk:
        lines = [doc for _, doc in pairs]
        lines[40:40] = ["", "not json {", json.dumps([1, 2]), json.dumps({"application": "x"})]
        return lines
    lines = []
    for k, (a, doc) in enumerate(pairs):
        if k == 10:
            lines += ['{"index":{"_index":"ubi_events"}}', doc]            # written another way
        elif k == 20:
            lines += [a, "", doc]                                          # a blank line between
        elif k == 30:
            lines += [a, "not json {", doc]                                # a bad line for a document
        elif k == 40:
            lines += [json.dumps({"index": {}}), doc]                      # no index named
        elif k == 50:
            lines += [act(index="ubi_queries"), a, doc]                    # two actions in a row
        elif k == 60:
            lines += [act(index="ubi_queries"), doc]                       # the other index
        elif k == 70:
            lines += [doc]                                                 # no action line
        elif k == 80:
            lines += [a, json.dumps({"index": {"_index": "ubi_events"}, "action_name": "click",
                                     "query_id": "q1", "event_attributes": {"object": {"object_id": "d1"}}})]
        elif k == 90:
            lines += [act(index="logs"), json.dumps({"application": "x"}), a, doc]   # neither
        else:
            lines += [a, doc]
    return lines + [act()]                                                 # an action at the end


@pytest.mark.parametrize("bulk", [False, True], ids=["ndjson", "bulk"])
def test_block_boundaries_anywhere_read_as_the_line_reader(tmp_path, monkeypatch, bulk):
    """Blocks of many sizes, so that a boundary falls between every two lines (between
    an action line and its document too): the result is the line reader's, codes and
    first ``file:line`` of each problem included."""
    from ltr_toolkit.clicks.events import files
    path = tmp_path / "edge.ndjson"
    path.write_text("\n".join(_edge_lines(bulk)))                    # no newline at the end
    slow = _line_by_line(path)
    assert {"invalid_json", "not_an_event", "unknown_action", "no_query_id", "no_object_id",
            "bad_position"} <= set(slow.problems.counts)
    assert slow.record_interleaving
    for size in [1 << 20, *range(300, 4000, 97)]:
        monkeypatch.setattr(files, "BLOCK_BYTES", size)
        _same(files.read_file(path), slow)


def test_a_null_hit_id_is_read_as_the_line_reader_reads_it(tmp_path):
    from ltr_toolkit.clicks.events import files
    path = tmp_path / "e.ndjson"
    path.write_text(json.dumps({"query_id": "q", "user_query": "t", "query_response_hit_ids": ["d1", None]})
                    + "\n" + json.dumps({"action_name": "click", "query_id": "q",
                                         "event_attributes": {"object": {"object_id": "d1"}}}) + "\n")
    log = files.read_file(path)
    assert [log.docs.names[d] for d in log.record_hits[0]] == ["d1", "None"]


@pytest.mark.parametrize("seekable", [True, False], ids=["file", "pipe"])
def test_blocks_are_whole_lines_and_keep_an_action_line_with_its_document(monkeypatch, seekable):
    import io
    from ltr_toolkit.clicks.events import files

    class Pipe(io.RawIOBase):
        def __init__(self, data):
            self.data = io.BytesIO(data)

        def readable(self):
            return True

        def readinto(self, b):
            return self.data.readinto(b)

    lines = _edge_lines(True)
    data = "\n".join(lines).encode()
    for size in (50, 333, 1000, 4096):
        monkeypatch.setattr(files, "BLOCK_BYTES", size)
        fh = io.BufferedReader(io.BytesIO(data) if seekable else Pipe(data))
        blocks = [bytes(b) for b in files._blocks(fh)]
        assert b"".join(blocks) == data + b"\n"
        for b in blocks[:-1]:
            last = [ln for ln in b.split(b"\n") if ln.strip()][-1]
            assert files._action_index(last) is None, (size, b[-200:])
