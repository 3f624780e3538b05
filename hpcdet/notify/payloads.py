"""What a webhook is sent, as pure functions of the event: Determined's DEFAULT JSON and its
Slack message (the package docstring has the shapes)."""

from __future__ import annotations

import json
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from hpcdet.notify.hooks import CUSTOM
from hpcdet.records import ExperimentRecord
from hpcdet.states import ExperimentState

# Slack attachment colours Determined uses: green for success, red for an error.
_GREEN, _RED = "#13B670", "#DD5040"


# An alert's level as the Core API takes it, and as Determined's master stores and posts it
# (model.TaskLogLevel); the Python client sends any other level as INFO.
# (Log levels, not states: spelled as the lower-case names' upper case.)
LOG_LEVELS = {name: "WARNING" if name == "warn" else name.upper()
              for name in ("debug", "info", "warn", "error", "critical")}


@dataclass(frozen=True)
class Subject:
    """The experiment an event is about, as a payload shows it."""

    id: int
    name: str
    state: str
    duration: int  # seconds from creation to its end (or to now)
    resource_pool: str
    slots: int
    workspace: str = ""
    project: str = ""
    trial_id: int | None = None


@dataclass(frozen=True)
class CustomData:
    """What ``core_context.alert(title, description, level)`` sends."""

    title: str
    description: str
    level: str


@dataclass(frozen=True)
class Integrations:
    """The experiment config's ``integrations.webhooks``."""

    ids: frozenset[int] = frozenset()
    names: frozenset[str] = frozenset()
    exclude: bool = False


def subject_of(exp: ExperimentRecord, now: float, trial_id: int | None = None) -> Subject:
    cfg = exp.config
    end = exp.ended if exp.ended is not None else now
    return Subject(exp.id, exp.name, exp.state.value, max(0, int(end - exp.created)),
                   exp.resource_pool or cfg.resources.resource_pool or "default",
                   cfg.resources.slots_per_trial, cfg.workspace, cfg.project, trial_id)


def integrations_of(raw: Mapping[str, Any]) -> Integrations:
    """From a validated config (``hpcdet.config.sections.check_integrations``)."""
    section = (raw.get("integrations") or {}).get("webhooks") or {}
    return Integrations(frozenset(int(i) for i in section.get("webhook_id") or ()),
                        frozenset(str(n) for n in section.get("webhook_name") or ()),
                        bool(section.get("exclude")))


def default_payload(event_type: str, subject: Subject, state: str, now: float,
                    custom: CustomData | None = None, event_id: str | None = None) -> str:
    experiment: dict[str, Any] = {
        "id": subject.id, "state": subject.state, "name": subject.name,
        "duration": subject.duration, "resource_pool": subject.resource_pool,
        "slots_per_trial": subject.slots, "workspace": subject.workspace,
        "project": subject.project}
    if subject.trial_id:
        experiment["trial_id"] = subject.trial_id
    data: dict[str, Any] = {"experiment": experiment}
    if custom is not None:
        data["custom_data"] = {"title": custom.title, "description": custom.description,
                               "level": LOG_LEVELS.get(custom.level, "INFO")}
    return json.dumps({"event_id": event_id or str(uuid.uuid4()), "event_type": event_type,
                       "timestamp": int(now), "condition": {"state": state},
                       "event_data": data}, separators=(",", ":"))


def _duration(seconds: int) -> str:
    return f"{seconds // 3600}h {seconds % 3600 // 60}min"


def slack_payload(subject: Subject, custom: CustomData | None = None) -> str:
    """A Slack message: a section that says what happened (or the alert's fields), and an
    attachment, green or red, with the experiment's name, status, duration and trial."""
    label = f"{subject.name} (#{subject.id})"
    if subject.state == ExperimentState.COMPLETED.value:
        status, heading, colour, shown = ("Your experiment completed successfully 🎉",
                                          f"✅ {label}", _GREEN, "Completed")
    elif subject.state == ExperimentState.ERROR.value:
        status, heading, colour, shown = ("Your experiment has stopped with errors",
                                          f"❌ {label}", _RED, "Errored")
    else:
        status, heading, colour, shown = (f"The status of your experiment is {subject.state}",
                                          label, _GREEN, subject.state)
    fields = [_field(f"*Status*: {shown}"), _field(f"*Duration*: {_duration(subject.duration)}")]
    fields += [_field(f"*{k}*: {v}") for k, v in (("Workspace", subject.workspace),
                                                    ("Project", subject.project)) if v]
    if subject.trial_id:
        fields.append(_field(f"*Trial ID*: {subject.trial_id}"))
    message: dict[str, Any] = {"type": "section", "text": {"type": "plain_text", "text": status}}
    if custom is not None:
        message = {"type": "section", "text": {"type": "plain_text", "text": "Event Data"},
                   "fields": [_field(f"*Level*: {LOG_LEVELS.get(custom.level, 'INFO')}"),
                              _field(f"*Title*: {custom.title}"),
                              _field(f"*Description*: {custom.description}")]}
    return json.dumps({
        "blocks": [message],
        "attachments": [{"color": colour, "blocks": [
            {"type": "section", "text": {"type": "mrkdwn", "text": heading},
             "fields": fields}]}],
    }, separators=(",", ":"), ensure_ascii=False)


def _field(text: str) -> dict[str, str]:
    return {"type": "mrkdwn", "text": text}


def payload(webhook_type: str, event_type: str, subject: Subject, now: float,
            custom: CustomData | None = None) -> str:
    """The body for a webhook of ``webhook_type`` (DEFAULT or SLACK)."""
    if webhook_type == "SLACK":
        return slack_payload(subject, custom if event_type == CUSTOM else None)
    return default_payload(event_type, subject, subject.state, now, custom)
