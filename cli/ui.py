"""`hpcdet ui` and `hpcdet tensorboard`: served behind a door only their user can open."""

import sys
from typing import Annotated, Optional

import typer

from hpcdet.cli.common import console, paths, read_store

Port = Annotated[Optional[int], typer.Option(
    "--port", min=0, max=65535,
    help="Serve on this loopback port (0: any free one) instead of a private socket.")]
Host = Annotated[str, typer.Option(
    "--host", help="The address to bind with --port; non-loopback needs --allow-remote.")]
AllowRemote = Annotated[bool, typer.Option(
    "--allow-remote", help="Allow a --host other machines can reach.")]
# For `hpcdet ui -c NAME` on a laptop: the server lives as long as the laptop's channel.
ExitOnEof = Annotated[bool, typer.Option("--exit-on-eof", hidden=True)]
NewToken = Annotated[bool, typer.Option(
    "--new-token", help="Replace the UI token first: links printed before stop working, and "
                        "pages open on running servers must be opened again.")]


def _bind(host: str, allow_remote: bool) -> None:
    from hpcdet.ui.door import check_bind

    warning = check_bind(host, allow_remote)
    if warning:
        print(f"Warning: {warning}", file=sys.stderr)


def _exit_on_eof(wanted: bool) -> None:
    """Stop (as on Ctrl-C) when stdin ends: the laptop that forwards the UI went away."""
    if not wanted:
        return
    import os
    import signal
    import threading

    def watch() -> None:
        while True:
            try:
                if not os.read(0, 4096):
                    break
            except OSError:
                break
        os.kill(os.getpid(), signal.SIGINT)

    threading.Thread(target=watch, daemon=True).start()


def ui(port: Port = None, host: Host = "127.0.0.1", allow_remote: AllowRemote = False,
       new_token: NewToken = False, exit_on_eof: ExitOnEof = False) -> None:
    """Serve the web UI until Ctrl-C, and say how to open it from a laptop (or run
    `hpcdet ui -c CLUSTER` there)."""
    from hpcdet.ui.app import make_app
    from hpcdet.ui.serve import serve
    from hpcdet.views.tasks import notebook_locator

    _bind(host, allow_remote)
    _exit_on_eof(exit_on_eof)
    p = paths()
    serve(p, lambda door: make_app(p, door, locate=notebook_locator(p)), "ui.sock", 8765,
          host if port is not None else None, port, lambda line: console.print(line),
          rotate=new_token)


def tensorboard(
    experiment_ids: Annotated[list[int], typer.Argument(help="The experiments to show.")],
    port: Port = None, host: Host = "127.0.0.1", allow_remote: AllowRemote = False,
    new_token: NewToken = False,
    idle_timeout: Annotated[float, typer.Option(
        "--idle-timeout", min=10,
        help="Stop after this many seconds without a request (an open page asks every 30 s).")]
    = 300,
    exit_on_eof: ExitOnEof = False,
) -> None:
    """TensorBoard on the experiments' TensorBoard files, behind the UI's token; stops when
    no page has been open for --idle-timeout seconds."""
    from hpcdet.ui.serve import serve
    from hpcdet.ui.tensorboard import make_tensorboard_app
    from hpcdet.views.tensorboard import tensorboard_logdirs

    _bind(host, allow_remote)
    _exit_on_eof(exit_on_eof)
    p = paths()
    logdirs = tensorboard_logdirs(read_store(p), p, experiment_ids)
    serve(p, lambda door: make_tensorboard_app(logdirs, door), "tensorboard.sock", 8766,
          host if port is not None else None, port, lambda line: console.print(line),
          idle_timeout, rotate=new_token)
