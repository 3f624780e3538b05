"""`hpcdet relay ...`: hidden commands a laptop runs on the login node over SSH
(``hpcdet.remote``), never typed by a user."""

import os
import sys
from typing import TYPE_CHECKING, Any

import typer

from hpcdet.cli.common import paths, visible
from hpcdet.errors import HpcdetError

if TYPE_CHECKING:
    from pathlib import Path

    from hpcdet.paths import StatePaths
    from hpcdet.uploads import Manifest

app = typer.Typer(hidden=True, no_args_is_help=True)


def _pipe(which: str) -> None:
    """Pipe stdin and stdout to the private socket of this user's `hpcdet ui` (or
    `tensorboard`): one browser connection forwarded from a laptop over SSH."""
    import select
    import socket

    sock_path = paths().root / f"{which}.sock"
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        conn.connect(str(sock_path))
    except OSError as e:
        print(f"Error: no `hpcdet {which}` serves {sock_path}: {e.strerror}", file=sys.stderr)
        raise typer.Exit(1) from None
    sources = [0, conn.fileno()]
    while sources:
        for fd in select.select(sources, [], [])[0]:
            data = os.read(fd, 1 << 16)
            if fd == 0:
                if data:
                    conn.sendall(data)
                else:
                    sources.remove(0)
                    conn.shutdown(socket.SHUT_WR)
            elif data:
                view = memoryview(data)
                while view:  # a pipe may take part of it
                    view = view[os.write(1, view):]
            else:
                return


@app.command()
def ui() -> None:
    """One browser connection to `hpcdet ui`'s private socket."""
    _pipe("ui")


@app.command()
def tensorboard() -> None:
    """One browser connection to `hpcdet tensorboard`'s private socket."""
    _pipe("tensorboard")


def _manifest() -> "Manifest":
    from hpcdet.uploads import Manifest

    return Manifest.from_json(sys.stdin.buffer.read())


@app.command()
def plan() -> None:
    """Read an upload manifest on stdin; print, as JSON, where the blobs go and which are
    missing (with the bytes of each already here)."""
    import json

    from hpcdet.uploads import blob_dir, plan

    p = paths()
    missing = plan(p.uploads, _manifest())
    print(json.dumps({"blobs": str(blob_dir(p.uploads)), "missing": missing}))


@app.command()
def create() -> None:
    """Read an upload manifest on stdin and run its create (`experiment create` or `submit`)
    on the uploaded files, with the laptop's request id: sent again, it is made once."""
    import shutil

    from hpcdet.cli.main import app as hpcdet
    from hpcdet.private import private_dir
    from hpcdet.uploads import assemble, one_at_a_time

    manifest = _manifest()
    uploads = paths().uploads
    work = private_dir(uploads / "work") / f"{manifest.request_id}-{os.getpid()}"
    with one_at_a_time(uploads, manifest.request_id):
        try:
            config, context = assemble(uploads, manifest, work)
            hpcdet(args=[*manifest.command, str(config), str(context), *manifest.options,
                         f"--request-id={manifest.request_id}"], prog_name="hpcdet")
        finally:
            shutil.rmtree(work, ignore_errors=True)


@app.command(context_settings={"allow_extra_args": True, "ignore_unknown_options": True})
def download(ctx: typer.Context) -> None:
    """Run a download command (the words and options after `download`, as the laptop gave
    them) without copying: print, as JSON, its exit code, its output and each checkpoint's
    files for the laptop to fetch over SFTP."""
    import contextlib
    import io
    import json

    from hpcdet.cli import checkpoint
    from hpcdet.cli.main import app as hpcdet
    from hpcdet.views.checkpoints import checkpoint_files, default_destination, stored_checkpoint

    listed: list[dict[str, object]] = []

    def fetch(store: Any, p: "StatePaths", uuid: str, dest: "Path | None") -> "Path":
        source = stored_checkpoint(store, p, uuid).source
        given = default_destination(uuid, dest)
        listed.append({"uuid": uuid, "source": str(source), "dest": str(given),
                       "files": checkpoint_files(source)})
        return given

    out = io.StringIO()
    token = checkpoint.FETCH.set(fetch)
    error = ""
    try:
        with contextlib.redirect_stdout(out):
            hpcdet(args=list(ctx.args), prog_name="hpcdet")
        code = 0
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else 1
    except HpcdetError as e:  # what was listed before it is still fetched, as it is copied
        code, error = 1, visible(e, keep_lines=True)
    finally:
        checkpoint.FETCH.reset(token)
    print(json.dumps({"code": code, "output": out.getvalue(), "error": error,
                      "checkpoints": listed}))
