"""A real HTTP server on 127.0.0.1 that webhook tests post to: it records every post and
answers each path as scripted (a list of statuses, the last repeated; "hang": no answer until
the server stops)."""

from __future__ import annotations

import hashlib
import hmac
import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Post:
    path: str
    headers: dict[str, str]
    body: dict[str, Any]
    at: float
    raw: bytes = b""

    def signed_with(self, key: str) -> bool:
        """Whether X-Determined-AI-Signature is the HMAC-SHA256 of "TIMESTAMP,BODY" with
        ``key`` (master/internal/webhooks/shipper.go), computed here on its own."""
        stamp = self.headers.get("X-Determined-AI-Signature-Timestamp", "")
        want = hmac.new(key.encode(), stamp.encode() + b"," + self.raw, hashlib.sha256)
        return hmac.compare_digest(self.headers.get("X-Determined-AI-Signature", ""),
                                   want.hexdigest())


@dataclass
class Receiver:
    url: str
    script: dict[str, list[int] | str] = field(default_factory=dict)
    posts: list[Post] = field(default_factory=list)
    released: threading.Event = field(default_factory=threading.Event)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def to(self, path: str, answers: list[int] | str = "ok") -> str:
        """The URL of ``path``, answered as given (default: 200 always)."""
        self.script[path] = [200] if answers == "ok" else answers
        return self.url + path

    def answer(self, path: str) -> int | None:
        with self.lock:
            answers = self.script.get(path, [200])
            if answers == "hang":
                return None
            assert isinstance(answers, list)
            return answers.pop(0) if len(answers) > 1 else answers[0]

    def received(self, path: str) -> list[Post]:
        with self.lock:
            return [p for p in self.posts if p.path == path]

    def wait_for(self, path: str, count: int = 1, timeout: float = 10.0) -> list[Post]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            got = self.received(path)
            if len(got) >= count:
                return got
            time.sleep(0.02)
        raise AssertionError(f"{path}: {len(self.received(path))} posts, wanted {count}")


@contextmanager
def receiving() -> Iterator[Receiver]:
    receiver: Receiver

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 (http.server's name)
            body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
            with receiver.lock:
                receiver.posts.append(Post(self.path, dict(self.headers), json.loads(body),
                                           time.time(), body))
            status = receiver.answer(self.path)
            if status is None:
                receiver.released.wait(30)
                return
            self.send_response(status)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    receiver = Receiver(f"http://127.0.0.1:{server.server_address[1]}")
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        yield receiver
    finally:
        receiver.released.set()
        server.shutdown()
        server.server_close()
