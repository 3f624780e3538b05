"""The payloads against Determined's documented shapes (docs/integrations/notification: the
DEFAULT event; master/internal/webhooks: the Slack message), and which webhooks an event
goes to."""

from __future__ import annotations

import json
from pathlib import Path

from hpcdet.notify.delivery import Deliverer
from hpcdet.notify.hooks import WebhookRegistry
from hpcdet.notify.notifier import ALERT_MAX_AGE, Notifier
from hpcdet.notify.payloads import (
    CustomData,
    Integrations,
    Subject,
    default_payload,
    integrations_of,
    slack_payload,
)

SUBJECT = Subject(41, "cifar10_pytorch_const", "COMPLETED", 3725, "default", 2, "lab", "cnn")
ALERT = CustomData("loss is NaN", "at step 300", "error")


def test_the_default_payload_has_determined_s_fields() -> None:
    body = json.loads(default_payload("EXPERIMENT_STATE_CHANGE", SUBJECT, "COMPLETED", 1665689991.7,
                                      event_id="4cd26e62-60c6-4a8b-8d03-7629091a4ef5"))
    assert body == {
        "event_id": "4cd26e62-60c6-4a8b-8d03-7629091a4ef5",
        "event_type": "EXPERIMENT_STATE_CHANGE",
        "timestamp": 1665689991,
        "condition": {"state": "COMPLETED"},
        "event_data": {"experiment": {
            "id": 41, "state": "COMPLETED", "name": "cifar10_pytorch_const", "duration": 3725,
            "resource_pool": "default", "slots_per_trial": 2, "workspace": "lab",
            "project": "cnn"}},
    }


def test_an_alert_carries_its_trial_and_its_title_description_and_level() -> None:
    subject = Subject(7, "x", "ACTIVE", 5, "gpu", 1, trial_id=12)
    body = json.loads(default_payload("CUSTOM", subject, "ACTIVE", 0, ALERT))
    assert body["event_type"] == "CUSTOM"
    assert body["event_data"]["experiment"]["trial_id"] == 12
    assert body["event_data"]["custom_data"] == {
        "title": "loss is NaN", "description": "at step 300", "level": "ERROR"}
    assert len(body["event_id"]) == 36


def test_the_slack_message_has_blocks_and_a_coloured_attachment() -> None:
    body = json.loads(slack_payload(SUBJECT))
    assert body["blocks"] == [{"type": "section", "text": {
        "type": "plain_text", "text": "Your experiment completed successfully 🎉"}}]
    [attachment] = body["attachments"]
    assert attachment["color"] == "#13B670"
    [block] = attachment["blocks"]
    assert block["text"] == {"type": "mrkdwn", "text": "✅ cifar10_pytorch_const (#41)"}
    assert [f["text"] for f in block["fields"]] == [
        "*Status*: Completed", "*Duration*: 1h 2min", "*Workspace*: lab", "*Project*: cnn"]
    errored = json.loads(slack_payload(Subject(3, "e", "ERROR", 0, "p", 1, trial_id=9),
                                       ALERT))
    assert errored["attachments"][0]["color"] == "#DD5040"
    assert errored["blocks"][0]["text"]["text"] == "Event Data"
    assert [f["text"] for f in errored["blocks"][0]["fields"]] == [
        "*Level*: ERROR", "*Title*: loss is NaN", "*Description*: at step 300"]
    assert errored["attachments"][0]["blocks"][0]["fields"][-1]["text"] == "*Trial ID*: 9"


def test_integrations_from_a_config() -> None:
    raw = {"integrations": {"webhooks": {"webhook_id": [2], "webhook_name": ["a"],
                                         "exclude": False}}}
    assert integrations_of(raw) == Integrations(frozenset({2}), frozenset({"a"}), False)
    assert integrations_of({"integrations": None}) == Integrations()


def _notifier(tmp_path: Path) -> tuple[Notifier, list[tuple[str, str]]]:
    registry = WebhookRegistry(tmp_path / "webhooks.json")
    registry.create("https://all.example/a", ["experiment-state:COMPLETED,ERROR"], name="all")
    registry.create("https://some.example/s", ["experiment-state:COMPLETED", "custom"],
                    "slack", "some", "specific")
    registry.create("https://alerts.example/c", ["custom"], name="alerts")
    posted: list[tuple[str, str]] = []

    class Recording(Deliverer):
        def enqueue(self, deliveries: list) -> None:  # type: ignore[type-arg]
            posted.extend((d.webhook_name, d.body) for d in deliveries)

    return Notifier(registry, Recording(None)), posted


def test_which_webhooks_a_state_change_goes_to(tmp_path: Path) -> None:
    notifier, posted = _notifier(tmp_path)
    assert notifier.experiment_state(SUBJECT, Integrations()) == 1  # workspace mode: all
    assert [name for name, _ in posted] == ["all"]
    posted.clear()
    assert notifier.experiment_state(SUBJECT, Integrations(names=frozenset({"some"}))) == 2
    assert "blocks" in json.loads(dict(posted)["some"])  # slack
    posted.clear()
    assert notifier.experiment_state(SUBJECT, Integrations(ids=frozenset({2}),
                                                           exclude=True)) == 0
    canceled = Subject(1, "x", "CANCELED", 0, "p", 1)
    assert notifier.experiment_state(canceled, Integrations()) == 0


def test_an_alert_goes_only_to_the_webhooks_the_config_names(tmp_path: Path) -> None:
    notifier, posted = _notifier(tmp_path)
    assert notifier.alert(SUBJECT, Integrations(), ALERT, sent=100, now=101) == 0
    named = Integrations(ids=frozenset({2, 3}))
    assert notifier.alert(SUBJECT, named, ALERT, sent=100, now=101) == 2
    assert sorted(name for name, _ in posted) == ["alerts", "some"]
    assert json.loads(dict(posted)["alerts"])["event_type"] == "CUSTOM"
    # an alert read again from an old event log (a rebuilt database) is not news
    assert notifier.alert(SUBJECT, named, ALERT, sent=100, now=101 + ALERT_MAX_AGE) == 0


def test_the_config_s_integrations_webhooks_are_checked_and_applied() -> None:
    from hpcdet.config import load_experiment_config
    from hpcdet.config.unapplied import not_applied
    from hpcdet.errors import ConfigError

    base = "entrypoint: python3 t.py\nsearcher: {name: single, metric: loss}\n"
    cfg = load_experiment_config(base + "integrations: {webhooks: {webhook_id: [2], "
                                 "webhook_name: [ci]}, pachyderm: {dataset: {repo: r}}}\n", ())
    assert integrations_of(cfg.raw) == Integrations(frozenset({2}), frozenset({"ci"}))
    assert [line.split(" ")[0] for line in not_applied(cfg.raw)
            if "integrations" in line] == ["integrations.pachyderm"]
    for bad, says in [("{webhooks: {webhook_id: [x]}}", "must be a list of webhook ids"),
                      ("{webhooks: {hook: [1]}}", "unknown key"),
                      ("{webhooks: {exclude: 1}}", "must be true or false")]:
        try:
            load_experiment_config(base + f"integrations: {bad}\n", ())
        except ConfigError as e:
            assert any(says in p and "integrations.webhooks" in p for p in e.problems), e
        else:
            raise AssertionError(f"{bad} was accepted")
