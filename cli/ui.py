"""`hpcdet ui`: the web UI, behind a door only its user can open."""

from __future__ import annotations

import sys
from typing import Annotated, Optional

import typer

from hpcdet.cli.common import console, paths
from hpcdet.ui.door import check_bind


def ui(
    port: Annotated[Optional[int], typer.Option(
        "--port", min=0, max=65535,
        help="Serve on this loopback port (0: any free one) instead of a private socket.")]
    = None,
    host: Annotated[str, typer.Option(
        "--host", help="The address to bind with --port; non-loopback needs --allow-remote.")]
    = "127.0.0.1",
    allow_remote: Annotated[bool, typer.Option(
        "--allow-remote", help="Allow a --host other machines can reach.")] = False,
) -> None:
    """Serve the web UI until Ctrl-C, and say how to open it from a laptop."""
    from hpcdet.ui.serve import serve

    warning = check_bind(host, allow_remote)
    if warning:
        print(f"Warning: {warning}", file=sys.stderr)
    serve(paths(), host if port is not None else None, port,
          lambda line: console.print(line))
