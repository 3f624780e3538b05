"""The webhooks: their types, the triggers a user writes, and the registry the daemon keeps.

The registry is one JSON file (``<state>/notify/webhooks.json``), 0600 in a 0700 directory
whatever the umask: it holds the URLs, which are secrets. The daemon alone writes it (an atomic
replace); `hpcdet webhook list` reads it.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from hpcdet.errors import NotFoundError, StateError, UsageError
from hpcdet.private import private_dir
from hpcdet.rundir.atomic import write_atomic
from hpcdet.states import ExperimentState

STATE_CHANGE = "EXPERIMENT_STATE_CHANGE"
CUSTOM = "CUSTOM"
TASK_LOG = "TASK_LOG"
TYPES = ("DEFAULT", "SLACK")
MODES = ("WORKSPACE", "SPECIFIC")
# What a user writes before the colon of --trigger, and the trigger type it means.
_TRIGGER_WORDS = {"experiment-state": STATE_CHANGE, STATE_CHANGE.lower(): STATE_CHANGE,
                  "custom": CUSTOM, "task-log": TASK_LOG, TASK_LOG.lower(): TASK_LOG}
_STATES = tuple(s.value for s in ExperimentState)
MAX_NAME = 128
WEBHOOKS_FILE = "webhooks.json"


@dataclass(frozen=True)
class Trigger:
    """One trigger: its type and, for a state change, the state that fires it."""

    type: str
    state: str = ""

    def show(self) -> str:
        return f"experiment-state:{self.state}" if self.type == STATE_CHANGE else "custom"


@dataclass(frozen=True)
class Webhook:
    id: int
    name: str
    url: str
    type: str  # DEFAULT or SLACK
    mode: str  # WORKSPACE or SPECIFIC
    triggers: tuple[Trigger, ...]
    created: float = 0.0

    @property
    def host(self) -> str:
        return redact(self.url)

    def to_dict(self, secret: bool = False) -> dict[str, Any]:
        """As `webhook list --json` shows it (the URL only as scheme://host unless ``secret``)."""
        out = asdict(self)
        out["triggers"] = [t.show() for t in self.triggers]
        if not secret:
            out["url"] = self.host
        return out


def redact(url: str) -> str:
    """``scheme://host[:port]``: what may be shown of a URL (its path and query can be the
    credential, as in a Slack incoming-webhook URL)."""
    parts = urlsplit(url)
    host = parts.hostname or "?"
    if parts.port:
        host = f"{host}:{parts.port}"
    return f"{parts.scheme or '?'}://{host}"


def check_url(url: str) -> str:
    if any(ord(c) < 0x20 or ord(c) == 0x7F for c in url) or " " in url:
        raise UsageError("the webhook URL has spaces or control characters; quote it whole, "
                         "e.g. 'https://hooks.slack.com/services/...'")
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise UsageError(f"the webhook URL must be http:// or https:// with a host, got "
                         f"{redact(url)!r}")
    return url


def parse_triggers(specs: Sequence[str]) -> tuple[Trigger, ...]:
    """``experiment-state:COMPLETED,ERROR`` (one trigger per state) and ``custom``."""
    if not specs:
        raise UsageError("give at least one --trigger, e.g. --trigger "
                         "experiment-state:COMPLETED,ERROR or --trigger custom")
    out: list[Trigger] = []
    for spec in specs:
        word, _, rest = spec.partition(":")
        kind = _TRIGGER_WORDS.get(word.strip().lower())
        if kind is None:
            raise UsageError(f"--trigger {spec!r}: unknown trigger {word!r}; use "
                             "experiment-state:STATE[,STATE...] or custom")
        if kind == TASK_LOG:
            raise UsageError(f"--trigger {spec!r}: hpcdet does not scan task logs for "
                             "webhooks; use experiment-state:... or custom (core_context.alert)")
        if kind == CUSTOM:
            if rest:
                raise UsageError(f"--trigger {spec!r}: custom takes no condition; "
                                 "write --trigger custom")
            out.append(Trigger(CUSTOM))
            continue
        states = [s.strip().upper() for s in rest.split(",") if s.strip()]
        if not states:
            raise UsageError(f"--trigger {spec!r}: name the states, e.g. "
                             "experiment-state:COMPLETED,ERROR")
        for state in states:
            if state not in _STATES:
                raise UsageError(f"--trigger {spec!r}: {state!r} is not an experiment state; "
                                 f"one of {', '.join(_STATES)}")
            out.append(Trigger(STATE_CHANGE, state))
    return tuple(dict.fromkeys(out))


def _choice(value: str, choices: tuple[str, ...], flag: str) -> str:
    got = value.strip().upper()
    if got not in choices:
        raise UsageError(f"{flag} {value!r}: one of {', '.join(c.lower() for c in choices)}")
    return got


class WebhookRegistry:
    """The daemon's webhooks, kept in memory and in their private file."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.broken = ""  # why the file cannot be read: the daemon runs on, without webhooks
        try:
            self.hooks, self.next_id = read_webhooks(path)
        except StateError as e:
            self.hooks, self.next_id, self.broken = [], 1, str(e)

    def create(self, url: str, triggers: Sequence[str], kind: str = "default",
               name: str = "", mode: str = "workspace", now: float = 0.0) -> Webhook:
        if self.broken:
            raise StateError(self.broken)
        hook_id = self.next_id
        name = name.strip() or f"webhook-{hook_id}"
        if len(name) > MAX_NAME or any(ord(c) < 0x20 for c in name):
            raise UsageError(f"--name: at most {MAX_NAME} printable characters")
        if any(h.name == name for h in self.hooks):
            raise StateError(f"a webhook named {name!r} exists; choose another --name or "
                             f"delete it first (`hpcdet webhook delete {name}`)")
        hook = Webhook(hook_id, name, check_url(url), _choice(kind, TYPES, "--type"),
                       _choice(mode, MODES, "--mode"), parse_triggers(triggers), now)
        self._save([*self.hooks, hook], hook_id + 1)
        return hook

    def delete(self, ref: str) -> Webhook:
        """By id or by name."""
        if self.broken:
            raise StateError(self.broken)
        hook = self.find(ref)
        self._save([h for h in self.hooks if h.id != hook.id], self.next_id)
        return hook

    def find(self, ref: str) -> Webhook:
        for h in self.hooks:
            if str(h.id) == ref.strip() or h.name == ref:
                return h
        raise NotFoundError(f"no webhook {ref!r}; `hpcdet webhook list` shows them")

    def _save(self, hooks: list[Webhook], next_id: int) -> None:
        private_dir(self.path.parent)
        write_atomic(self.path, {"next_id": next_id,
                                 "webhooks": [h.to_dict(secret=True) for h in hooks]},
                     mode=0o600)
        self.hooks, self.next_id = hooks, next_id


def read_webhooks(path: Path) -> tuple[list[Webhook], int]:
    """The webhooks in the registry file, and the next id; none if there is no file."""
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        return [], 1
    except (OSError, ValueError) as e:
        raise StateError(f"{path} cannot be read ({e}); fix or remove it, then create the "
                         "webhooks again") from None
    hooks = [Webhook(int(h["id"]), str(h["name"]), str(h["url"]), str(h["type"]),
                     str(h["mode"]), parse_triggers(h["triggers"]), float(h.get("created", 0)))
             for h in data.get("webhooks", [])]
    return hooks, int(data.get("next_id", 1))
