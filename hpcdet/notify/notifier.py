"""Which webhooks an event goes to (Determined's rules, in the package docstring), and the
posts it makes of it; the daemon calls these from its loop and they only enqueue."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from typing import Any

from hpcdet.notify.delivery import OUTBOX_FILE, Deliverer, Delivery
from hpcdet.notify.hooks import CUSTOM, STATE_CHANGE, WEBHOOKS_FILE, Webhook, WebhookRegistry
from hpcdet.notify.payloads import (
    CustomData,
    Integrations,
    Subject,
    integrations_of,
    payload,
    subject_of,
)
from hpcdet.notify.signing import KEY_FILE, signing_key
from hpcdet.paths import StatePaths
from hpcdet.records import ExperimentRecord

# An alert older than this when the daemon stores it is not sent: a database rebuilt from the
# run tree ingests every event log again, and a week-old alert is no news.
ALERT_MAX_AGE = 600.0


class Notifier:
    def __init__(self, registry: WebhookRegistry, deliverer: Deliverer) -> None:
        self.registry = registry
        self.deliverer = deliverer

    @classmethod
    def of(cls, paths: StatePaths) -> Notifier:
        """The state directory's webhooks and outbox; the sender is not started."""
        return cls(WebhookRegistry(paths.notify / WEBHOOKS_FILE),
                   Deliverer(paths.notify / OUTBOX_FILE,
                             key=signing_key(paths.notify / KEY_FILE)))

    def create(self, url: str, triggers: list[str], kind: str, name: str, mode: str) -> str:
        hook = self.registry.create(url, triggers, kind, name, mode, time.time())
        return (f"Created webhook {hook.id} ({hook.name}): {hook.type.lower()} posts to "
                f"{hook.host} on {', '.join(t.show() for t in hook.triggers)}")

    def delete(self, ref: str) -> str:
        hook = self.registry.delete(ref)
        self.deliverer.forget(hook.id)
        return f"Deleted webhook {hook.id} ({hook.name})"

    def experiment_states(self, exp: ExperimentRecord, states: Sequence[str]) -> int:
        """The experiment went through ``states`` (its journal's entries, in order)."""
        if not self.registry.hooks:
            return 0
        subject, integrations = subject_of(exp, time.time()), integrations_of(exp.config.raw)
        return sum(self.experiment_state(replace(subject, state=str(state)), integrations)
                   for state in states)

    def trial_alerts(self, exp: ExperimentRecord, trial_id: int,
                     bodies: Sequence[Mapping[str, Any]]) -> int:
        """The alerts a trial's event log held (their bodies: title, description, level,
        time)."""
        if not self.registry.hooks:
            return 0
        subject = subject_of(exp, time.time(), trial_id)
        integrations = integrations_of(exp.config.raw)
        return sum(self.alert(subject, integrations, CustomData(
            str(b.get("title", "")), str(b.get("description", "")), str(b.get("level", ""))),
            float(b.get("time") or time.time())) for b in bodies)

    def experiment_state(self, subject: Subject, integrations: Integrations) -> int:
        """The experiment has reached ``subject.state``; returns the posts enqueued."""
        if integrations.exclude:
            return 0
        hooks = [h for h in self.registry.hooks
                 if (h.mode == "WORKSPACE" or _named(h, integrations))
                 and any(t.type == STATE_CHANGE and t.state == subject.state
                         for t in h.triggers)]
        return self._enqueue(hooks, STATE_CHANGE, subject, None)

    def alert(self, subject: Subject, integrations: Integrations, custom: CustomData,
              sent: float, now: float | None = None) -> int:
        """A trial's ``core_context.alert`` (made at ``sent``); returns the posts enqueued."""
        now = time.time() if now is None else now
        if integrations.exclude or now - sent > ALERT_MAX_AGE:
            return 0
        hooks = [h for h in self.registry.hooks if _named(h, integrations)
                 for t in h.triggers if t.type == CUSTOM]
        return self._enqueue(hooks, CUSTOM, subject, custom)

    def _enqueue(self, hooks: Iterable[Webhook], event_type: str, subject: Subject,
                 custom: CustomData | None) -> int:
        now = time.time()
        posts = [Delivery(str(uuid.uuid4()), h.id, h.name, h.url,
                          payload(h.type, event_type, subject, now, custom), due=now)
                 for h in hooks]
        self.deliverer.enqueue(posts)
        return len(posts)


def _named(hook: Webhook, integrations: Integrations) -> bool:
    return hook.id in integrations.ids or hook.name in integrations.names
