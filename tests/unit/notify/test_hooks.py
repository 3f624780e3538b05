"""The registry of webhooks: private, refusing bad input with what to write instead."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest

from hpcdet.errors import HpcdetError, NotFoundError, StateError, UsageError
from hpcdet.notify.hooks import Trigger, WebhookRegistry, parse_triggers, redact

SLACK = "https://hooks.slack.com/services/T000/B000/XXXXSECRET"


def test_triggers_as_a_user_writes_them() -> None:
    assert parse_triggers(["experiment-state:COMPLETED,error", "custom"]) == (
        Trigger("EXPERIMENT_STATE_CHANGE", "COMPLETED"),
        Trigger("EXPERIMENT_STATE_CHANGE", "ERROR"), Trigger("CUSTOM"))
    assert parse_triggers(["EXPERIMENT_STATE_CHANGE:CANCELED"])[0].state == "CANCELED"


@pytest.mark.parametrize(("spec", "says"), [
    ("experiment-state:DONE", "'DONE' is not an experiment state; one of ACTIVE"),
    ("experiment-state", "name the states, e.g. experiment-state:COMPLETED,ERROR"),
    ("task-log:OOM", "does not scan task logs"),
    ("metric:loss", "unknown trigger 'metric'"),
    ("custom:x", "custom takes no condition"),
])
def test_a_bad_trigger_says_what_to_write(spec: str, says: str) -> None:
    with pytest.raises(UsageError, match=says):
        parse_triggers([spec])


def test_the_registry_is_private_and_survives_a_restart(tmp_path: Path) -> None:
    os.umask(0o022)
    path = tmp_path / "notify" / "webhooks.json"
    registry = WebhookRegistry(path)
    hook = registry.create(SLACK, ["experiment-state:COMPLETED"], "slack", "", "specific", 5.0)
    assert (hook.id, hook.name, hook.type, hook.mode) == (1, "webhook-1", "SLACK", "SPECIFIC")
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    assert hook.to_dict()["url"] == "https://hooks.slack.com"
    again = WebhookRegistry(path)
    assert again.hooks == [hook]
    assert again.create("http://127.0.0.1:8080/x", ["custom"], name="b").id == 2
    assert again.delete("webhook-1") == hook
    assert [h.name for h in WebhookRegistry(path).hooks] == ["b"]
    assert WebhookRegistry(path).create("http://h/y", ["custom"]).id == 3  # ids never reused


@pytest.mark.parametrize(("url", "kind", "mode", "error", "says"), [
    ("ftp://h/x", "default", "workspace", UsageError, "must be http:// or https://"),
    ("https:///x", "default", "workspace", UsageError, "with a host"),
    ("https://h/a b", "default", "workspace", UsageError, "spaces or control characters"),
    ("https://h/x", "teams", "workspace", UsageError, "--type 'teams': one of default, slack"),
    ("https://h/x", "default", "global", UsageError, "--mode 'global': one of workspace"),
])
def test_bad_input_is_refused_by_name(tmp_path: Path, url: str, kind: str, mode: str,
                                      error: type[HpcdetError], says: str) -> None:
    registry = WebhookRegistry(tmp_path / "webhooks.json")
    with pytest.raises(error, match=says):
        registry.create(url, ["custom"], kind, "n", mode)
    assert not (tmp_path / "webhooks.json").exists()


def test_names_are_unique_and_deleting_an_unknown_one_says_how_to_list(tmp_path: Path) -> None:
    registry = WebhookRegistry(tmp_path / "webhooks.json")
    registry.create("https://h/x", ["custom"], name="n")
    with pytest.raises(StateError, match="a webhook named 'n' exists"):
        registry.create("https://h/y", ["custom"], name="n")
    with pytest.raises(NotFoundError, match="`hpcdet webhook list` shows them"):
        registry.delete("7")


def test_a_damaged_file_stops_changes_not_the_daemon(tmp_path: Path) -> None:
    path = tmp_path / "webhooks.json"
    path.write_text("{not json")
    registry = WebhookRegistry(path)
    assert registry.hooks == []
    with pytest.raises(StateError, match="cannot be read"):
        registry.create("https://h/x", ["custom"])
    assert path.read_text() == "{not json"


def test_only_scheme_and_host_of_a_url_are_shown() -> None:
    assert redact(SLACK) == "https://hooks.slack.com"
    assert redact("http://user:pw@127.0.0.1:9000/p?token=1") == "http://127.0.0.1:9000"
    assert "SECRET" not in json.dumps(redact(SLACK))
