"""Determined's webhooks, sent by the daemon: experiment state changes and ``core_context.alert``.

What Determined does (docs/integrations/notification, master/internal/webhooks of
determined-ai/determined), which hpcdet follows:

- A webhook is a URL, a type (``DEFAULT``: JSON about the event; ``SLACK``: a Slack message
  of ``blocks`` and ``attachments``), a name, a mode and triggers. Each trigger has a type and a
  condition: ``EXPERIMENT_STATE_CHANGE`` with ``{"state": "COMPLETED"}`` (the web UI offers
  COMPLETED and ERROR; the condition is compared with the experiment's new state), ``CUSTOM``
  (what ``core_context.alert(title, description, level)`` sends), and ``TASK_LOG`` (a regex
  over task logs, which hpcdet does not scan: refused with a message).
- Mode ``WORKSPACE`` fires for every experiment (of its workspace; hpcdet has none, so every
  experiment); ``SPECIFIC`` only for experiments whose config names it under
  ``integrations.webhooks.webhook_id`` (ids) or ``webhook_name`` (names).
  ``integrations.webhooks.exclude: true`` keeps an experiment from every webhook.
- A CUSTOM event goes only to the webhooks the experiment's ``integrations.webhooks`` names,
  whatever their mode, once for each CUSTOM trigger they have.
- A DEFAULT payload is ``{"event_id": uuid, "event_type": trigger type, "timestamp": unix
  seconds, "condition": {"state": ...}, "event_data": {"experiment": {"id", "state", "name",
  "duration" (seconds), "resource_pool", "slots_per_trial", "workspace", "project",
  "trial_id" (an alert's trial)}}}``; an alert adds ``"custom_data": {"title",
  "description", "level"}`` under ``event_data``, the level as the master stores it (INFO,
  WARNING, ...). Read in webhook.go and postgres_webhook.go at determined-ai/determined
  c1e9c6d (2025-03-20).
- Events are queued and shipped by a background sender, so that reporting one never waits on
  an endpoint. Each request is signed (``X-Determined-AI-Signature``, an HMAC of
  ``timestamp,body``): Determined's key is the master's, hpcdet's the user's (``signing``).

hpcdet's parts: ``payloads`` (pure builders), ``hooks`` (the registry of webhooks, a private
file the daemon alone writes), ``signing`` (the key and the headers), ``delivery`` (the
sender: a thread with a persisted, bounded outbox, timeouts and retries with backoff) and
``notifier`` (which webhooks an event goes to). URLs are secrets (a Slack URL is its own
credential): they are kept 0600 and shown, in logs and in ``daemon status``, as
``scheme://host`` only.
"""

from __future__ import annotations

from hpcdet.notify.delivery import Deliverer, Delivery
from hpcdet.notify.hooks import Trigger, Webhook, WebhookRegistry, parse_triggers, redact
from hpcdet.notify.notifier import Notifier
from hpcdet.notify.payloads import CustomData, Subject, integrations_of, subject_of

__all__ = [
    "CustomData", "Deliverer", "Delivery", "Notifier", "Subject", "Trigger", "Webhook",
    "WebhookRegistry", "integrations_of", "parse_triggers", "redact", "subject_of",
]
