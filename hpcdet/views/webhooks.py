"""The webhooks as the faces read them: the registry the daemon keeps (``hpcdet.notify``), and
the failing ones a daemon's status file names."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from hpcdet.errors import NotFoundError
from hpcdet.notify.hooks import WEBHOOKS_FILE, Webhook, read_webhooks
from hpcdet.notify.signing import KEY_FILE
from hpcdet.paths import StatePaths


def signing_key(paths: StatePaths) -> str:
    """The key the daemon signs each post with (``hpcdet.notify.signing``); the daemon makes
    it when it starts."""
    path = paths.notify / KEY_FILE
    if not path.exists():
        raise NotFoundError(f"no signing key in {path}: it is made when the daemon starts; "
                            "run `hpcdet daemon status` and try again")
    return path.read_text().strip()


def webhooks(paths: StatePaths) -> list[Webhook]:
    """By id. Their URLs are secret: show ``Webhook.host`` (``to_dict()`` does)."""
    return sorted(read_webhooks(paths.notify / WEBHOOKS_FILE)[0], key=lambda h: h.id)


@dataclass(frozen=True)
class WebhookFailure:
    """A webhook whose last post failed: its name, its ``scheme://host``, why, when, after
    how many attempts, and whether the daemon gave that post up."""

    webhook_id: int
    name: str
    host: str
    error: str
    when: float
    attempts: int
    gave_up: bool


def failures_in(status: dict[str, Any]) -> list[WebhookFailure]:
    """The failing webhooks in a daemon's status file (an older daemon's names none)."""
    out = []
    for f in status.get("webhook_failures") or []:
        try:
            out.append(WebhookFailure(int(f["webhook_id"]), str(f["name"]), str(f["host"]),
                                      str(f["error"]), float(f["when"]), int(f["attempts"]),
                                      bool(f["gave_up"])))
        except (KeyError, TypeError, ValueError):
            continue
    return out
