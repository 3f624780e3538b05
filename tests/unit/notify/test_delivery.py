"""The sender against a real HTTP server on 127.0.0.1: posts arrive with their payload, a 500
is retried until a 200, a hanging endpoint times out and is reported without holding up the
others, and what waits survives a restart."""

from __future__ import annotations

import json
import stat
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from hpcdet.notify.delivery import Deliverer, Delivery
from hpcdet.notify.payloads import Subject, default_payload
from tests.unit.notify.receiver import Receiver, receiving

BODY = default_payload("EXPERIMENT_STATE_CHANGE", Subject(1, "e", "COMPLETED", 3, "p", 1),
                       "COMPLETED", 0)


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    with receiving() as r:
        yield r


def _post(hook_id: int, url: str, n: int = 0) -> Delivery:
    return Delivery(f"d{hook_id}-{n}", hook_id, f"hook{hook_id}", url, BODY)


def test_a_post_arrives_with_its_payload_signed(receiver: Receiver, tmp_path: Path) -> None:
    d = Deliverer(tmp_path / "outbox.json", key="k3y").start()
    try:
        d.enqueue([_post(1, receiver.to("/ok"))])
        [post] = receiver.wait_for("/ok")
        assert post.headers["Content-Type"] == "application/json; charset=UTF-8"
        assert post.signed_with("k3y") and not post.signed_with("other")
        assert abs(int(post.headers["X-Determined-AI-Signature-Timestamp"]) - time.time()) < 5
        assert post.body["event_type"] == "EXPERIMENT_STATE_CHANGE"
        assert post.body["event_data"]["experiment"]["state"] == "COMPLETED"
        assert d.wait_idle(5) and d.failures() == [] and d.delivered == 1
    finally:
        d.stop()


def test_a_500_is_retried_with_backoff_until_a_200(receiver: Receiver) -> None:
    d = Deliverer(None, base_delay=0.1).start()
    try:
        d.enqueue([_post(1, receiver.to("/flaky", [500, 500, 200]))])
        posts = receiver.wait_for("/flaky", 3)
        assert d.wait_idle(5)
        gaps = [b.at - a.at for a, b in zip(posts, posts[1:])]
        assert gaps[0] >= 0.1 and gaps[1] >= 0.2  # 0.1 s, then 0.2 s
        assert d.failures() == []  # the 200 clears the failure
    finally:
        d.stop()


def test_a_hanging_endpoint_times_out_and_holds_up_no_other(receiver: Receiver) -> None:
    d = Deliverer(None, timeout=1.0, max_attempts=1).start()
    try:
        began = time.time()
        d.enqueue([_post(1, receiver.to("/hang", "hang")), _post(2, receiver.to("/ok"))])
        [ok] = receiver.wait_for("/ok")
        assert ok.at - began < 0.9  # sent beside the hanging one, not after its timeout
        assert d.wait_idle(5)
        assert time.time() - began >= 1.0
        [failure] = d.failures()
        assert failure["name"] == "hook1" and failure["gave_up"]
        assert failure["error"] == "no answer within 1 s"
        assert failure["host"] == receiver.url  # scheme://host:port, never the path
    finally:
        d.stop()


def test_an_endpoint_that_keeps_failing_is_reported_and_given_up(receiver: Receiver) -> None:
    d = Deliverer(None, base_delay=0.01, max_attempts=3).start()
    try:
        d.enqueue([_post(1, receiver.to("/down?token=SECRET", [503]))])
        assert d.wait_idle(5)
        assert len(receiver.received("/down?token=SECRET")) == 3
        [failure] = d.failures()
        assert (failure["error"], failure["attempts"], failure["gave_up"]) == (
            "HTTP 503", 3, True)
        assert "SECRET" not in json.dumps(failure)
    finally:
        d.stop()


def test_what_waits_is_kept_privately_for_the_next_daemon(receiver: Receiver,
                                                          tmp_path: Path) -> None:
    outbox = tmp_path / "notify" / "outbox.json"
    first = Deliverer(outbox)  # never started: a daemon that stopped before sending
    first.enqueue([_post(1, receiver.to("/later"))])
    assert stat.S_IMODE(outbox.stat().st_mode) == 0o600
    second = Deliverer(outbox).start()
    try:
        receiver.wait_for("/later")
        assert second.wait_idle(5)
        assert json.loads(outbox.read_text()) == []
    finally:
        second.stop()


def test_the_outbox_is_bounded_oldest_first() -> None:
    d = Deliverer(None, max_pending=2)
    d.enqueue([Delivery(f"d{i}", 1, "h", "http://127.0.0.1:9/", BODY) for i in range(3)])
    assert [p.id for p in d._pending.values()] == ["d1", "d2"]
    assert d.pending() == 2
    d.forget(1)
    assert d.pending() == 0
