"""Basic-auth credentials reach the cluster as the user meant them, checked against a
real HTTP server on loopback that records the Authorization header: the URL's user and
password are percent-encoded (RFC 3986: ``p%40ss`` is ``p@ss``) and are sent decoded;
LTR_USER / LTR_PASSWORD are literal and win."""

from __future__ import annotations

import base64
import http.server
import threading

import pytest

from ltr_toolkit.transport import client as cl


class _Recorder(http.server.BaseHTTPRequestHandler):
    seen: list = []

    def do_GET(self):
        type(self).seen.append(self.headers.get("authorization"))
        body = b"{}"
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


@pytest.fixture
def port():
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Recorder)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    _Recorder.seen = []
    yield srv.server_address[1]
    srv.shutdown()
    srv.server_close()


def _sent(url: str) -> tuple[str, str]:
    """(user, password) of the Basic header the client sent for one request to ``url``."""
    cl.Connection(url=url, timeout=5).client().transport.perform_request("GET", "/")
    scheme, token = _Recorder.seen[-1].split(" ", 1)
    assert scheme == "Basic"
    user, _, password = base64.b64decode(token).decode("utf-8").partition(":")
    return user, password


def test_percent_encoded_url_credentials_are_sent_decoded(port, monkeypatch):
    monkeypatch.delenv("LTR_USER", raising=False)
    monkeypatch.delenv("LTR_PASSWORD", raising=False)
    assert _sent(f"http://us%40er:p%40ss%2F%25w%3Ad+@127.0.0.1:{port}") == ("us@er", "p@ss/%w:d+")
    assert _sent(f"http://plain:secret@127.0.0.1:{port}") == ("plain", "secret")
    assert _sent(f"http://caf%C3%A9:%E2%82%AC@127.0.0.1:{port}") == ("café", "€")   # UTF-8
    cl.Connection(url=f"http://127.0.0.1:{port}", timeout=5).client().transport.perform_request("GET", "/")
    assert _Recorder.seen[-1] is None                           # no credentials, no header


def test_environment_credentials_are_literal_and_win(port, monkeypatch):
    monkeypatch.setenv("LTR_USER", "env%40user")
    monkeypatch.setenv("LTR_PASSWORD", "p%40ss")
    assert _sent(f"http://us%40er:other@127.0.0.1:{port}") == ("env%40user", "p%40ss")
