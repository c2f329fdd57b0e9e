"""The client's retry policy against a real HTTP server on loopback that answers every
request with one fixed status: a 500 (the same answer next time) is reported at once; an
overloaded or unavailable answer (429, 503) is asked again with backoff, within an overall
time budget. (Retrying every 5xx with no deadline cost about 60 s per query.)"""

from __future__ import annotations

import http.server
import json
import threading
import time

import pytest

from ltr_toolkit.transport import client as cl
from ltr_toolkit.errors import UserError


class _Fixed(http.server.BaseHTTPRequestHandler):
    status = 500
    calls = 0

    def _answer(self):
        type(self).calls += 1
        length = int(self.headers.get("content-length") or 0)
        self.rfile.read(length)
        body = json.dumps({"error": {"type": "boom", "reason": "fixed answer"},
                           "status": self.status}).encode()
        self.send_response(self.status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_GET = do_POST = _answer

    def log_message(self, *args):
        pass


@pytest.fixture
def server():
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Fixed)
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    yield srv
    srv.shutdown()
    srv.server_close()


def _msearch(server, status, budget):
    _Fixed.status, _Fixed.calls = status, 0
    conn = cl.Connection(url=f"http://127.0.0.1:{server.server_address[1]}", timeout=5)
    t0 = time.monotonic()
    with pytest.raises(UserError) as exc:
        cl.msearch_items(conn, "idx", [{"query": {"match_all": {}}}], base=0.05, budget=budget)
    return _Fixed.calls, time.monotonic() - t0, str(exc.value)


def test_a_500_is_reported_at_once(server):
    calls, seconds, message = _msearch(server, 500, budget=30.0)
    assert calls == 1 and seconds < 2.0, (calls, seconds)
    assert "500" in message


@pytest.mark.parametrize("status", [429, 503])
def test_overload_is_retried_within_the_budget(server, status):
    calls, seconds, message = _msearch(server, status, budget=1.0)
    assert calls > 1, calls
    assert seconds < 1.0 + 2.0, seconds        # the budget, plus the requests themselves
    assert str(status) in message


class _Alternating(_Fixed):
    """Requests in turn: the whole _msearch answered 503, then 200 with the item 429."""

    def _answer(self):
        if type(self).calls % 2 == 0:
            return super()._answer()          # counts the call
        type(self).calls += 1
        self.rfile.read(int(self.headers.get("content-length") or 0))
        body = json.dumps({"responses": [{"status": 429, "error": {
            "type": "es_rejected_execution_exception", "reason": "queue full"}}]}).encode()
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_GET = do_POST = _answer


def test_the_budget_covers_the_request_retries_and_the_item_retries_together(monkeypatch):
    """Rejected requests and rejected items in turn: the pauses of both kinds share one
    budget (the request retries' pauses used to be charged nowhere: each round of item
    retries started with the whole budget again). Pauses are recorded, not slept."""
    pauses = []
    monkeypatch.setattr(cl.time, "sleep", pauses.append)
    monkeypatch.setattr(cl.random, "random", lambda: 0.5)     # no jitter: base x 2^attempt
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Alternating)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    try:
        _Alternating.status, _Alternating.calls = 503, 0
        conn = cl.Connection(url=f"http://127.0.0.1:{srv.server_address[1]}", timeout=5)
        try:
            items = cl.msearch_items(conn, "idx", [{"query": {"match_all": {}}}], base=0.2,
                                     budget=3.0, retries=30)
            assert items[0]["status"] == 429
        except UserError as exc:              # the budget ran out on a rejected request
            assert "503" in str(exc)
    finally:
        srv.shutdown()
        srv.server_close()
    assert _Alternating.calls >= 4 and len(pauses) >= 3
    assert sum(pauses) <= 3.0, (sum(pauses), pauses)


def test_an_item_lost_with_its_node_is_retried_like_a_busy_one():
    """A msearch item that failed because its node left (HTTP 500 "Node not connected",
    seen when a data node is SIGKILLed mid-job) is transient: 503, retried; other errors
    are kept as they are."""
    from ltr_toolkit.transport.client import _partial_as_error
    lost = {"status": 500, "error": {"type": "search_phase_execution_exception",
                                     "reason": "[ltr-node-3][127.0.0.1:46741] Node not connected"}}
    assert _partial_as_error(lost)["status"] == 503
    bad = {"status": 400, "error": {"type": "parsing_exception", "reason": "unknown query"}}
    assert _partial_as_error(bad) is bad
