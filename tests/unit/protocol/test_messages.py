"""The requests and replies of hpcdet.protocol.messages: each goes over the wire and comes back
as itself, and a request the daemon does not know is refused by name."""

from __future__ import annotations

import json
from typing import Any

import pytest

from hpcdet.errors import HpcdetError
from hpcdet.protocol import messages as m

# One request of each type (and of some, one with every field set), as a face makes them.
SAMPLES: list[m.Request[Any]] = [
    m.Ping(), m.Shutdown(), m.CopyDatabase(), m.Create({"name": "x"}, "/s/req.context", "r1"),
    m.Create({"name": "x"}, "/s/req.context", "r1", "/usr/bin/python3", True, True),
    m.Pause(1), m.Activate(2), m.Cancel(3), m.Kill(4), m.Continue(5),
    m.Continue(6, {"name": "y"}), m.ContinueTrial(7), m.DeleteCheckpoint("c1"),
    m.SetExperiment(8, "labels_add", "a"), m.DeleteExperiment(9), m.KillTrial(10),
    m.UpdateJobs.of([m.JobUpdate(1, "priority", 3)]), m.CreateModel("mnist"),
    m.CreateModel("mnist", "a cnn", {"task": "digits"}), m.RegisterVersion("mnist", "c1"),
    m.CreateWebhook("https://h.example/x", ["custom"]),
    m.CreateWebhook("https://h.example/x", ["experiment-state:COMPLETED"], "slack", "n",
                    "specific"),
    m.DeleteWebhook("n"),
]
# A reply of each kind, as a handler makes it.
REPLIES: dict[type[m.Request[Any]], object] = {
    m.Said: "Paused experiment 1", m.Creates: m.Created(5, [8, 9], "w", {"image": "x"}, "me"),
    m.Ping: m.Pong(42, "login1"), m.RegisterVersion: 3,
}


def test_the_samples_hold_every_request_type() -> None:
    """A request type added without a sample here fails this test, so each one round-trips."""
    assert {type(r) for r in SAMPLES} == set(m.REQUESTS.values())
    assert len(m.REQUESTS) == 19


@pytest.mark.parametrize("request_", SAMPLES, ids=lambda r: type(r).__name__)
def test_each_request_goes_over_the_wire_and_back_as_itself(request_: m.Request[Any]) -> None:
    op, args = m.encode(request_)
    assert op == request_.NAME
    assert m.decode(*json.loads(json.dumps([op, args]))) == request_


@pytest.mark.parametrize("request_", SAMPLES, ids=lambda r: type(r).__name__)
def test_each_reply_goes_over_the_wire_and_back_as_itself(request_: m.Request[Any]) -> None:
    kind = next(k for k in type(request_).__mro__ if k in REPLIES)
    reply = REPLIES[kind]
    assert request_.reply(json.loads(json.dumps(request_.wire(reply)))) == reply


def test_what_is_left_at_its_default_is_not_sent() -> None:
    """A daemon older than the field takes the request."""
    assert m.encode(m.Pause(1)) == ("pause", {"exp_id": 1})
    assert m.encode(m.Create({"name": "x"}, "/s", paused=True)) == (
        "create", {"config": {"name": "x"}, "staging": "/s", "paused": True})
    assert m.encode(m.UpdateJobs.of([m.JobUpdate(1, "priority", 3)])) == (
        "update_jobs", {"updates": [{"job": 1, "field": "priority", "value": 3}]})


def test_a_request_of_another_version_is_refused_by_name() -> None:
    with pytest.raises(HpcdetError, match="unknown request 'nope'"):
        m.decode("nope", {})
    with pytest.raises(HpcdetError, match="request 'pause' has no argument exp, trial"):
        m.decode("pause", {"exp": 1, "trial": 2})
    with pytest.raises(HpcdetError, match="request 'pause': .*missing 1 required"):
        m.decode("pause", {})
    with pytest.raises(HpcdetError, match=r"request 'pause': its arguments are \[1\]"):
        m.decode("pause", [1])
    with pytest.raises(HpcdetError, match="unknown request None"):
        m.decode(None, {})


def test_a_reply_that_is_no_experiment_says_so() -> None:
    with pytest.raises(HpcdetError, match="answered 'create' with 'stopping', not an experiment"):
        m.Create({}, "/s").reply("stopping")


def test_two_requests_of_one_name_cannot_be_defined() -> None:
    with pytest.raises(TypeError, match="two requests named 'pause'"):
        type("Again", (m.Said,), {"NAME": "pause"})
    assert m.REQUESTS["pause"] is m.Pause
