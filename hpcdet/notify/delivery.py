"""The sender: webhook posts leave the daemon's loop at once (``enqueue``) and go out from
threads of their own.

A dispatcher thread hands each due delivery to a small pool of senders, at most one in flight
per webhook: an endpoint that hangs holds one sender for ``timeout`` seconds and its own
deliveries, never the loop or another webhook's. A post fails on a connection error, a timeout
or a status other than 2xx; it is tried again after 1, 2, 4, ... seconds (at most
``max_delay``) until ``max_attempts``, then dropped. The last failure of each webhook is kept
for `daemon status` until one of its posts goes through.

What waits is kept in ``outbox.json`` beside the registry (0600: it holds the URLs), rewritten
whenever it changes, so a daemon restarted meanwhile sends it; at most ``max_pending`` wait,
the oldest dropped first with a warning.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

import httpx

from hpcdet.notify.hooks import redact
from hpcdet.notify.signing import signed_headers
from hpcdet.private import private_dir
from hpcdet.rundir.atomic import write_atomic

log = logging.getLogger(__name__)
# httpx logs each request's whole URL at INFO: a webhook's URL is a secret, never logged.
logging.getLogger("httpx").setLevel(logging.WARNING)

TIMEOUT = 10.0
MAX_ATTEMPTS = 6  # over ~30 s of backoff: 1 + 2 + 4 + 8 + 16
BASE_DELAY = 1.0
MAX_DELAY = 300.0
# The outbox is rewritten whole at each change, from the loop too: ~3 ms at 200 posts.
MAX_PENDING = 200
SENDERS = 4
OUTBOX_FILE = "outbox.json"


@dataclass(frozen=True)
class Delivery:
    """One post of ``body`` to one webhook."""

    id: str
    webhook_id: int
    webhook_name: str
    url: str
    body: str
    attempts: int = 0
    due: float = 0.0


# (url, body, timeout, headers) -> HTTP status; raises on a connection error or a timeout.
Post = Callable[[str, str, float, Mapping[str, str]], int]


def http_post(url: str, body: str, timeout: float, headers: Mapping[str, str]) -> int:
    response = httpx.post(url, content=body.encode(), timeout=timeout,
                          headers={"Content-Type": "application/json; charset=UTF-8",
                                   **headers})
    return response.status_code


class Deliverer:
    def __init__(self, outbox: Path | None, *, timeout: float = TIMEOUT,
                 max_attempts: int = MAX_ATTEMPTS, base_delay: float = BASE_DELAY,
                 max_delay: float = MAX_DELAY, max_pending: int = MAX_PENDING,
                 senders: int = SENDERS, post: Post = http_post, key: str = "") -> None:
        """``key``: signs each post as Determined's master does (hpcdet.notify.signing)."""
        self.outbox = outbox
        self.key = key
        self.timeout, self.max_attempts = timeout, max_attempts
        self.base_delay, self.max_delay, self.max_pending = base_delay, max_delay, max_pending
        self._post = post
        self._cond = threading.Condition()
        self._pending: dict[str, Delivery] = {}
        self._busy: set[int] = set()  # webhooks with a post in flight
        self._failures: dict[int, dict[str, Any]] = {}
        self._stopping = False
        self._pool = ThreadPoolExecutor(senders, thread_name_prefix="webhook")
        self._thread = threading.Thread(target=self._dispatch, name="webhooks", daemon=True)
        self.delivered = 0
        for d in self._load():
            self._pending[d.id] = replace(d, due=0.0)

    def start(self) -> Deliverer:
        self._thread.start()
        return self

    def stop(self, wait: float = 1.0) -> None:
        """Stop dispatching; what waits stays in the outbox for the next daemon."""
        with self._cond:
            self._stopping = True
            self._cond.notify_all()
        self._thread.join(wait)
        self._pool.shutdown(wait=False, cancel_futures=True)

    def enqueue(self, deliveries: list[Delivery]) -> None:
        if not deliveries:
            return
        with self._cond:
            for d in deliveries:
                self._pending[d.id] = d
            while len(self._pending) > self.max_pending:
                oldest = self._pending.pop(next(iter(self._pending)))  # in enqueue order
                log.warning("webhook %s (%s): dropped a post, more than %d wait",
                            oldest.webhook_name, redact(oldest.url), self.max_pending)
            self._save()
            self._cond.notify_all()

    def pending(self) -> int:
        with self._cond:
            return len(self._pending)

    def wait_idle(self, timeout: float) -> bool:
        """Whether everything enqueued was sent or dropped within ``timeout`` seconds."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while self._pending:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._cond.wait(left)
        return True

    def failures(self) -> list[dict[str, Any]]:
        """The last failed post of each webhook whose posts fail now: id, name, host, error,
        when, attempts, and whether it was given up."""
        with self._cond:
            return [dict(f) for f in self._failures.values()]

    def forget(self, webhook_id: int) -> None:
        """A deleted webhook: its posts and its failure go."""
        with self._cond:
            for d in [d for d in self._pending.values() if d.webhook_id == webhook_id]:
                del self._pending[d.id]
            self._failures.pop(webhook_id, None)
            self._save()

    # ------------------------------------------------------------------------ the threads

    def _dispatch(self) -> None:
        with self._cond:
            while not self._stopping:
                now = time.time()
                wait = 1.0
                for d in sorted(self._pending.values(), key=lambda d: d.due):
                    if d.webhook_id in self._busy:
                        continue
                    if d.due > now:
                        wait = min(wait, d.due - now)
                        continue
                    self._busy.add(d.webhook_id)
                    self._pool.submit(self._send, d)
                self._cond.wait(wait)

    def _send(self, d: Delivery) -> None:
        error = ""
        try:
            headers = signed_headers(self.key, d.body, int(time.time())) if self.key else {}
            status = self._post(d.url, d.body, self.timeout, headers)
            if not 200 <= status < 300:
                error = f"HTTP {status}"
        except httpx.TimeoutException:
            error = f"no answer within {self.timeout:g} s"
        except Exception as e:  # any failure of one post is that post's
            error = f"{type(e).__name__}: {e}".replace(d.url, redact(d.url))
        with self._cond:
            self._busy.discard(d.webhook_id)
            self._settle(d, error)
            self._save()
            self._cond.notify_all()

    def _settle(self, d: Delivery, error: str) -> None:
        if d.id not in self._pending:  # forgotten meanwhile
            return
        if not error:
            del self._pending[d.id]
            self._failures.pop(d.webhook_id, None)
            self.delivered += 1
            return
        attempts = d.attempts + 1
        gave_up = attempts >= self.max_attempts
        self._failures[d.webhook_id] = {
            "webhook_id": d.webhook_id, "name": d.webhook_name, "host": redact(d.url),
            "error": error, "when": time.time(), "attempts": attempts, "gave_up": gave_up}
        if gave_up:
            del self._pending[d.id]
            log.warning("webhook %s (%s): %s; gave up after %d attempts", d.webhook_name,
                        redact(d.url), error, attempts)
            return
        delay = min(self.max_delay, self.base_delay * 2 ** (attempts - 1))
        self._pending[d.id] = replace(d, attempts=attempts, due=time.time() + delay)
        log.warning("webhook %s (%s): %s; trying again in %g s (attempt %d of %d)",
                    d.webhook_name, redact(d.url), error, delay, attempts + 1,
                    self.max_attempts)

    # ---------------------------------------------------------------------- the outbox

    def _save(self) -> None:
        if self.outbox is None:
            return
        try:
            private_dir(self.outbox.parent)
            write_atomic(self.outbox, [asdict(d) for d in self._pending.values()],
                         durable=False, mode=0o600)
        except OSError as e:  # a full disk costs the restart's resend, not the daemon
            log.warning("the webhook outbox %s cannot be written: %s", self.outbox, e)

    def _load(self) -> list[Delivery]:
        if self.outbox is None:
            return []
        try:
            return [Delivery(**d) for d in json.loads(self.outbox.read_text())]
        except FileNotFoundError:
            return []
        except (OSError, ValueError, TypeError) as e:
            log.warning("the webhook outbox %s cannot be read (%s); its posts are lost",
                        self.outbox, e)
            return []
