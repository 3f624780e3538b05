"""`hpcdet webhook ...`: Determined's webhooks (experiment state changes and
core_context.alert), posted by the daemon."""

from typing import Annotated

import typer

from hpcdet.cli.common import paths, print_json, table, when
from hpcdet.link import connect
from hpcdet.protocol.messages import CreateWebhook, DeleteWebhook, Ping

app = typer.Typer(no_args_is_help=True)


@app.command("create")
def create(
    url: Annotated[str, typer.Argument(help="Where to post (kept private; shown as its host).")],
    trigger: Annotated[list[str], typer.Option(
        "--trigger", "-t",
        help="experiment-state:STATE[,STATE...] (e.g. COMPLETED,ERROR) or custom "
             "(core_context.alert); repeatable.")],
    webhook_type: Annotated[str, typer.Option(
        "--type", "--webhook-type", help="default (Determined's JSON) or slack.")] = "default",
    name: Annotated[str, typer.Option(
        "--name", "-n", help="Its name, for integrations.webhooks.webhook_name.")] = "",
    mode: Annotated[str, typer.Option(
        "--mode", help="workspace: every experiment; specific: only those whose config names "
                       "it under integrations.webhooks.")] = "workspace",
) -> None:
    """Post to URL when an experiment reaches a state, or a trial calls core_context.alert()."""
    print(connect(paths()).send(CreateWebhook(url, list(trigger), webhook_type, name, mode)))


@app.command("list")
def list_(as_json: Annotated[bool, typer.Option("--json")] = False) -> None:
    """The webhooks (URLs shown as scheme://host)."""
    from hpcdet.views.webhooks import webhooks

    hooks = webhooks(paths())
    if as_json:
        print_json([h.to_dict() for h in hooks])
        return
    table(("ID", "Name", "Type", "Mode", "Host", "Triggers", "Creation Time"),
          [[h.id, h.name, h.type, h.mode, h.host, " ".join(t.show() for t in h.triggers),
            when(h.created)] for h in hooks])


@app.command("delete")
def delete(webhook: Annotated[str, typer.Argument(help="Its id or name.")]) -> None:
    """Delete a webhook; its posts not yet sent are dropped."""
    print(connect(paths()).send(DeleteWebhook(webhook)))


@app.command("signing-key")
def signing_key() -> None:
    """The key each post is signed with, as Determined's master signs them: the header
    X-Determined-AI-Signature is the hex HMAC-SHA256 of "TIMESTAMP,BODY" with it, TIMESTAMP
    being X-Determined-AI-Signature-Timestamp. Keep it as secret as the URLs."""
    from hpcdet.views.webhooks import signing_key as key_of

    p = paths()
    connect(p).send(Ping())  # the daemon makes the key when it starts
    print(key_of(p))
