"""The web UI's door (issue 15, first part): a real `hpcdet ui` process over a real daemon on
the local backend. Without the token every route answers 401; actions need the page's own
origin; the default socket is its user's alone; a non-loopback bind needs a flag."""

from __future__ import annotations

import os
import re
import socket
import stat
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.support import Hpcdet, ensure_user

# Every page, a script, the plotting library and every JSON route.
ROUTES = ["/", "/experiments/1", "/trials/1", "/queue", "/cluster", "/static/ui.js",
          "/static/vendor/echarts-6.1.0.min.js", "/api/experiments", "/api/experiments/1",
          "/api/experiments/1/curves?group=training&metric=x", "/api/experiments/1/rungs",
          "/api/trials/1", "/api/trials/1/metrics", "/api/trials/1/curves?metric=x",
          "/api/trials/1/checkpoints",
          "/api/trials/1/logs", "/api/queue", "/api/cluster"]


def _start(h: Hpcdet, *args: str) -> tuple[subprocess.Popen[str], str]:
    proc = subprocess.Popen([h.python, "-m", "hpcdet.cli.main", "ui", *args], env=h.env(),
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    assert proc.stdout is not None
    said = ""
    deadline = time.monotonic() + 60
    while "then open:" not in said and time.monotonic() < deadline:
        said += proc.stdout.readline()
    return proc, said


@pytest.fixture
def served(local_hpcdet: Hpcdet, tmp_path: Path) -> Iterator[tuple[Hpcdet, str, str]]:
    h = local_hpcdet
    cfg = tmp_path / "cfg.yaml"
    ctx = tmp_path / "ctx"
    ctx.mkdir()
    (ctx / "sleep.py").write_text("import time\ntime.sleep(600)\n")
    cfg.write_text("name: ui-door\nentrypoint: python3 sleep.py\n"
                   "searcher: {name: single, metric: x, max_length: 1}\n")
    h.create(cfg, ctx)
    proc, said = _start(h, "--port", "0")
    try:
        port = re.search(r"127\.0\.0\.1:(\d+)", said)
        secret = re.search(r"token=(\S+)", said)
        assert port and secret, said
        yield h, f"http://127.0.0.1:{port.group(1)}", secret.group(1)
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def test_nothing_without_the_token_and_everything_with_it(
    served: tuple[Hpcdet, str, str]
) -> None:
    h, base, secret = served
    for route in ROUTES:
        assert httpx.get(base + route).status_code == 401, route
        assert httpx.get(base + route, params={"token": "wrong"}).status_code == 401, route
        assert httpx.post(base + "/api/experiments/1/kill").status_code == 401
        assert httpx.post(base + "/api/experiments/1/priority?value=1").status_code == 401
    listed = httpx.get(base + "/api/experiments",
                       headers={"Authorization": f"Bearer {secret}"}).json()
    assert [(e["id"], e["name"]) for e in listed] == [(1, "ui-door")]
    # The first visit's ?token= becomes an HttpOnly cookie and leaves the address.
    with httpx.Client(base_url=base, follow_redirects=True) as browser:
        first = browser.get("/", params={"token": secret})
        assert first.status_code == 200 and 'data-page="experiments"' in first.text
        assert first.history[0].status_code == 303 and "token" not in str(first.url)
        assert "HttpOnly" in first.history[0].headers["set-cookie"]
        assert "frame-ancestors 'none'" in first.headers["content-security-policy"]
        assert browser.get("/api/experiments").json()[0]["name"] == "ui-door"
        assert browser.get("/api/trials/1").json()["state"] in ("QUEUED", "ACTIVE")


def test_an_action_needs_the_pages_origin(served: tuple[Hpcdet, str, str]) -> None:
    h, base, secret = served
    auth = {"Authorization": f"Bearer {secret}"}
    forged = httpx.post(base + "/api/experiments/1/pause",
                        headers={**auth, "Origin": "https://evil.example"})
    assert forged.status_code == 403
    assert httpx.post(base + "/api/experiments/1/pause", headers=auth).status_code == 403
    done = httpx.post(base + "/api/experiments/1/pause",
                      headers={**auth, "Origin": base}, timeout=60)
    assert done.status_code == 200 and done.json()["said"] == "Paused experiment 1"
    assert h.describe(1)["experiment"]["state"] == "PAUSED"
    h.run("experiment", "kill", "1")


def test_the_socket_is_private_and_a_remote_bind_needs_a_flag(local_hpcdet: Hpcdet) -> None:
    h = local_hpcdet
    refused = h.run("ui", "--port", "0", "--host", "0.0.0.0", check=False)
    assert refused.returncode == 1 and "--allow-remote" in refused.stderr
    proc, said = _start(h)
    try:
        sock = h.state / "ui.sock"
        assert f"-L 8765:{sock} " in said
        assert stat.S_IMODE(sock.stat().st_mode) == 0o600
        secret = (h.state / "ui-token").read_text().strip()
        assert stat.S_IMODE((h.state / "ui-token").stat().st_mode) == 0o600
        # Another user of the login node can neither connect nor read the token, even
        # where the directories above let them through.
        if os.geteuid() == 0:
            ensure_user("hpcdet-u2")
            for d in (sock.parent, *sock.parents):
                if d == Path("/"):
                    break
                d.chmod(d.stat().st_mode | 0o011)
            tried = subprocess.run(
                ["runuser", "-u", "hpcdet-u2", "--", "/usr/bin/python3", "-c",
                 "import socket, sys; s = socket.socket(socket.AF_UNIX); "
                 f"s.connect({str(sock)!r})"], capture_output=True, text=True, timeout=60)
            assert tried.returncode != 0 and "Permission denied" in tried.stderr, tried.stderr
            read = subprocess.run(["runuser", "-u", "hpcdet-u2", "--", "cat",
                                   str(h.state / "ui-token")], capture_output=True, text=True)
            assert read.returncode != 0 and secret not in read.stdout
        elif os.environ.get("CI", "").lower() == "true":
            pytest.fail("the second-user check needs root (CI runs as root)")
        transport = httpx.HTTPTransport(uds=str(sock))
        with httpx.Client(transport=transport, base_url="http://localhost:8765") as client:
            assert client.get("/api/experiments").status_code == 401
            assert client.get("/api/experiments",
                              headers={"Authorization": f"Bearer {secret}"}).json() == []
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _stop(proc: subprocess.Popen[str]) -> None:
    proc.terminate()
    proc.wait(timeout=30)


def _visit(base: str, secret: str) -> httpx.Cookies:
    """The cookies a browser keeps after the printed URL's first visit."""
    with httpx.Client(base_url=base, follow_redirects=True) as browser:
        assert browser.get("/", params={"token": secret}).status_code == 200
        assert browser.get("/api/experiments").status_code == 200
        return browser.cookies


def test_a_cookie_opens_only_its_own_server_instance(local_hpcdet: Hpcdet) -> None:
    """Issue 37: a tab left on a stopped server's port sends its cookie to whoever binds the
    port next. That cookie opens neither the next server on the port (same token file) nor
    a server on another port; a bad Host header (DNS rebinding) is refused."""
    h = local_hpcdet
    port = _free_port()
    base = f"http://127.0.0.1:{port}"
    first, said = _start(h, "--port", str(port))
    try:
        secret = re.search(r"token=(\S+)", said)
        assert secret, said
        kept = _visit(base, secret.group(1))
        assert secret.group(1) not in str(dict(kept)) and f"hpcdet_{port}" in kept
    finally:
        _stop(first)
    second, said = _start(h, "--port", str(port))
    other, said_other = _start(h, "--port", "0")
    try:
        assert f"token={secret.group(1)}" in said  # the same token file
        assert httpx.get(base + "/api/experiments", cookies=kept).status_code == 401
        other_port = re.search(r"127\.0\.0\.1:(\d+)", said_other)
        assert other_port, said_other
        other_base = f"http://127.0.0.1:{other_port.group(1)}"
        fresh = _visit(base, secret.group(1))
        value = fresh[f"hpcdet_{port}"]
        for name in (f"hpcdet_{port}", f"hpcdet_{other_port.group(1)}", "hpcdet_token"):
            got = httpx.get(other_base + "/api/experiments", cookies={name: value})
            assert got.status_code == 401, name
        assert httpx.get(base + "/api/experiments", cookies=fresh).status_code == 200
        auth = {"Authorization": f"Bearer {secret.group(1)}"}
        for host in ("evil.example", f"evil.example:{port}", "127.0.0.1.nip.io"):
            refused = httpx.get(base + "/api/experiments", headers={**auth, "Host": host})
            assert refused.status_code == 421 and "Host" in refused.json()["error"], host
        assert httpx.get(base + "/api/experiments",
                         headers={**auth, "Host": f"localhost:{port}"}).status_code == 200
    finally:
        _stop(second)
        _stop(other)


def test_a_new_token_closes_old_links_and_sessions(local_hpcdet: Hpcdet) -> None:
    h = local_hpcdet
    running, said = _start(h, "--port", "0")
    try:
        port, old = re.search(r"127\.0\.0\.1:(\d+)", said), re.search(r"token=(\S+)", said)
        assert port and old, said
        base = f"http://127.0.0.1:{port.group(1)}"
        kept = _visit(base, old.group(1))
        rotated, said_new = _start(h, "--port", "0", "--new-token")
        try:
            new = re.search(r"token=(\S+)", said_new)
            assert new and new.group(1) != old.group(1), said_new
            assert (h.state / "ui-token").read_text().strip() == new.group(1)
            assert stat.S_IMODE((h.state / "ui-token").stat().st_mode) == 0o600
            # The server that was running takes the new token and forgets its sessions.
            for headers in ({"Authorization": f"Bearer {old.group(1)}"}, {}):
                got = httpx.get(base + "/api/experiments", headers=headers, cookies=kept)
                assert got.status_code == 401, headers
            assert httpx.get(base + "/api/experiments", headers={
                "Authorization": f"Bearer {new.group(1)}"}).status_code == 200
        finally:
            _stop(rotated)
    finally:
        _stop(running)
