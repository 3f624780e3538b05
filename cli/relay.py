"""`hpcdet relay ...`: hidden commands a laptop runs on the login node over SSH
(``hpcdet.remote``), never typed by a user."""

import contextlib
import json
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from hpcdet.cli.common import paths, visible
from hpcdet.errors import HpcdetError, UsageError

if TYPE_CHECKING:
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
    from hpcdet.uploads import blob_dir, plan

    p = paths()
    missing = plan(p.uploads, _manifest())
    print(json.dumps({"blobs": str(blob_dir(p.uploads)), "missing": missing}))


@contextlib.contextmanager
def _uploaded(manifest: "Manifest") -> "Iterator[tuple[Path, Path]]":
    """The config file and context of an upload, copied out of its blobs for as long as the
    create takes; the same request sent again meanwhile waits for it."""
    import shutil

    from hpcdet.private import private_dir
    from hpcdet.uploads import assemble, one_at_a_time

    uploads = paths().uploads
    work = private_dir(uploads / "work") / f"{manifest.request_id}-{os.getpid()}"
    with one_at_a_time(uploads, manifest.request_id):
        try:
            yield assemble(uploads, manifest, work)
        finally:
            shutil.rmtree(work, ignore_errors=True)


@app.command()
def create() -> None:
    """Read an upload manifest on stdin and run its create (`experiment create` or `submit`)
    on the uploaded files, with the laptop's request id: sent again, it is made once."""
    from hpcdet.cli.main import app as hpcdet

    manifest = _manifest()
    with _uploaded(manifest) as (config, context):
        hpcdet(args=[*manifest.command, str(config), str(context), *manifest.options,
                     f"--request-id={manifest.request_id}"], prog_name="hpcdet")


@app.command(context_settings={"allow_extra_args": True, "ignore_unknown_options": True})
def download(ctx: typer.Context) -> None:
    """Run a download command (the words and options after `download`, as the laptop gave
    them) without copying: print, as JSON, its exit code, its output and each checkpoint's
    files for the laptop to fetch over SFTP."""
    import io

    from hpcdet.cli import checkpoint
    from hpcdet.cli.main import app as hpcdet
    from hpcdet.views.checkpoints import checkpoint_listing

    listed: list[dict[str, Any]] = []

    def fetch(store: Any, p: "StatePaths", uuid: str, dest: "Path | None") -> "Path":
        listed.append(checkpoint_listing(store, p, uuid, dest))
        return Path(listed[-1]["dest"])

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


# What a laptop's SDK may ask of hpcdet.sdk_source.Local here; the answers are plain data.
_SDK_CALLS = frozenset({"experiment", "experiments", "trial", "trials", "checkpoint",
                        "metrics", "ranked", "send", "listing", "models", "model"})


@app.command()
def sdk() -> None:
    """Serve a laptop's SDK (`client.login(cluster=...)`, ``hpcdet.remote.sdk``): one call
    a line on stdin, as JSON ``{"call", "args"}``; one answer a line on stdout, ``{"ok":
    value}`` or ``{"error", "kind"}``. A failing call is answered, never the end of it."""
    from hpcdet.config import load_experiment_config
    from hpcdet.sdk_source import Local
    from hpcdet.uploads import Manifest

    local = Local()
    for line in sys.stdin:
        answer: dict[str, Any]
        try:
            asked = json.loads(line)
            name, args = str(asked["call"]), list(asked["args"])
            if name in _SDK_CALLS:
                answer = {"ok": getattr(local, name)(*args)}
            elif name == "create":
                manifest = Manifest.from_json(str(args[0]).encode())
                with _uploaded(manifest) as (config, context):
                    raw = load_experiment_config(config).raw
                    answer = {"ok": local.create(raw, context, [], manifest.request_id)}
            else:
                raise UsageError(f"the SDK here has no call {name!r}: is this login node's "
                                 "hpcdet the laptop's version?")
        except HpcdetError as e:
            answer = {"error": str(e), "kind": type(e).__name__}
        except Exception as e:  # a bug here must not end the laptop's session
            answer = {"error": f"{type(e).__name__}: {e}", "kind": "HpcdetError"}
        print(json.dumps(answer), flush=True)
