"""A command for a cluster chosen with ``-c``: run on its login node, or in part here when it
carries the laptop's files (a create's context up, a download's checkpoint back)."""

from collections.abc import Sequence
from typing import TYPE_CHECKING, Optional

if TYPE_CHECKING:
    from hpcdet.remote.profiles import Cluster
    from hpcdet.remote.upload import CreateArgs


def parse_create(argv: Sequence[str]) -> "Optional[CreateArgs]":
    """A create's ``argv`` parsed by the CLI's own command; None for a usage error (the login
    node's own command says it, as it would say it there)."""
    from hpcdet.cli.parse import parameters
    from hpcdet.remote.forward import uploads
    from hpcdet.remote.upload import create_args

    command = uploads(argv)
    assert command is not None
    params = parameters(len(command), argv)
    return None if params is None else create_args(command, params)


def run_on_cluster(cluster: "Cluster", argv: Sequence[str]) -> int:
    """``hpcdet <argv>`` run for the laptop on ``cluster``: a create with its context uploaded,
    a download fetched here, the UI by a forwarded port, the rest as they are on the login
    node; the login node's exit code."""
    from hpcdet.remote.forward import HELP, command_of, is_download, output_only_grows, uploads
    from hpcdet.remote.session import RemoteSession

    session = RemoteSession(cluster)
    if not set(argv) & HELP:
        if uploads(argv) is not None:
            from hpcdet.remote.upload import create_on_cluster

            parsed = parse_create(argv)
            return session.run(argv) if parsed is None else create_on_cluster(session, parsed)
        if is_download(argv):
            from hpcdet.remote.download import download_on_cluster

            return download_on_cluster(session, argv)
    words = command_of(argv)
    if words and words[0] in ("ui", "tensorboard"):
        from hpcdet.remote.ui_forward import forward_ui

        return int(forward_ui(session, list(argv)))
    return session.run_resumed(argv) if output_only_grows(argv) else session.run(argv)
