"""robotactl's approval prompt offers "always" for WebFetch (PROTOCOL.md §10.7): the answer
adds ``WebFetch(domain:HOST)`` to the session, which admits later fetches from that host
without asking and, naming the host exactly, lets the address guard reach it. The host here
is ``localhost``, served by a listener on 127.0.0.1 that the test opens."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from robotactl.exit_codes import ExitCode

from .conftest import Ctl, RunningDaemon
from .ctl_helpers import Terminal, new_session, sock


class _Pages(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        self.server.paths.append(self.path)  # type: ignore[attr-defined]
        body = f"page {self.path}".encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def pages() -> Iterator[ThreadingHTTPServer]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Pages)
    server.paths = []  # type: ignore[attr-defined]
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()


def test_always_adds_the_domain_rule_for_the_session(
    ctl: Ctl, robotad: RunningDaemon, tmp_path: Path, pages: ThreadingHTTPServer
) -> None:
    base = f"http://localhost:{pages.server_address[1]}"
    script = [
        {"toolCalls": [{"name": "WebFetch", "arguments": {"url": f"{base}/one"}}]},
        {"toolCalls": [{"name": "WebFetch", "arguments": {"url": f"{base}/two"}}]},
        {"text": "Fetched both."},
    ]
    session_id = new_session(ctl, robotad, tmp_path, script)
    terminal = Terminal(
        [*sock(robotad), "run", "-s", session_id, "fetch"], cwd=tmp_path, NO_COLOR="1"
    )
    try:
        terminal.expect("Allow WebFetch? [y/N/a/p]")
        assert "allow WebFetch(domain:localhost) for this session" in terminal.output
        terminal.send("a\n")
        status = terminal.finish()
    finally:
        terminal.kill()
    assert status == ExitCode.COMPLETED, terminal.output
    assert "Fetched both." in terminal.output
    assert terminal.output.count("approval needed") == 1  # the second fetch did not ask
    assert pages.paths == ["/one", "/two"]  # type: ignore[attr-defined]
    added = ctl(*sock(robotad), "--json", "rule", "-s", session_id, "allow", "Read(x)")
    assert '"WebFetch(domain:localhost)"' in added.stdout


@pytest.mark.parametrize(
    ("typed", "approved", "rules"),
    [
        ("y", True, []),
        ("", False, []),
        ("a", True, [("WebFetch(domain:docs.example.com)", "session")]),
        ("P", True, [("WebFetch(domain:docs.example.com)", "project")]),
    ],
)
def test_the_webfetch_prompt_answers(
    monkeypatch: pytest.MonkeyPatch, typed: str, approved: bool, rules: list[tuple[str, str]]
) -> None:
    """y approves once, the default denies, a/p approve and carry the domain rule with the
    session or project scope; a prompt for another tool stays y/N."""
    import io

    from protocol.shapes import ApprovalRequest
    from robotactl.approvals import ask_person, domain_rule
    from robotactl.render import Output

    request = ApprovalRequest("r1", "e1", "WebFetch", {"url": "https://Docs.Example.com./a"}, "")
    monkeypatch.setattr("sys.stdin", io.StringIO(typed + "\n"))
    answers = ask_person([request], Output(color=False), "s1")
    assert [r["approved"] for r in answers.responses] == [approved]
    assert answers.rules == rules
    write = ApprovalRequest("r2", "e1", "Write", {"file_path": "/x", "content": ""}, "")
    assert domain_rule(write) is None
    v6 = ApprovalRequest("r3", "e1", "WebFetch", {"url": "http://[::1]:8/"}, "")
    assert domain_rule(v6) == "WebFetch(domain:[::1])"
