"""How the CLI, the SDK and the web UI talk to the user's daemon: one client that sends the
typed requests of ``hpcdet.protocol.messages`` over a transport.

    connect(paths).send(Pause(exp_id))   # -> what the CLI prints

A transport carries a request to the daemon and its reply back (``Transport``). Today's is
request files in the shared state directory (``files``); another (SSH from a laptop) is one
more module beside it, chosen in ``connect``.
"""

from __future__ import annotations

import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Callable, Protocol, TypeVar

from hpcdet.paths import StatePaths
from hpcdet.protocol.messages import Create, Created, JobUpdate, Request

R = TypeVar("R")


class Transport(Protocol):
    """Carries requests to one daemon and its replies back."""

    def send(self, request: Request[Any]) -> object:
        """The daemon's reply to ``request`` as JSON; raises the error it answered as an
        HpcdetError."""
        ...

    def send_with_context(self, take: Callable[[Path], None],
                          request: Callable[[str, Path], Create],
                          request_id: str | None = None) -> object:
        """A create: ``take(staging)`` writes the context snapshot into ``staging``, where the
        daemon can take it, and ``request(request_id, staging)`` is the request that names it
        (``request_id``, or a new one). A create given up on (a timeout, Ctrl-C) is withdrawn
        or left to the daemon, never half done; the reply as ``send``'s."""
        ...


class Client:
    """The daemon client: typed requests, typed replies."""

    def __init__(self, transport: Transport) -> None:
        self.transport = transport

    def send(self, request: Request[R]) -> R:
        return request.reply(self.transport.send(request))

    def create(self, config: dict[str, Any], context: Path,
               on_snapshot: Callable[[int, int], None] | None = None,
               warn: Callable[[str], None] | None = None, paused: bool = False,
               includes: Sequence[Path] = (), convert_image: bool = False,
               request_id: str | None = None, task: str = "") -> Created:
        """Snapshot ``context`` and each of ``includes`` (a file or directory, put at the
        context's top under its own name; ``on_snapshot(files, bytes)`` once they are taken)
        and create the experiment of the validated ``config``, ``paused`` if asked.
        ``convert_image``: the caller converts the trials' image next (``Created.image``),
        so the jobs wait for it. ``request_id``: the caller's, when it may send the same
        create again (a laptop after a dropped connection); the daemon makes it once.
        ``task``: the kind of an interactive task (command, notebook, shell) the config runs."""
        from hpcdet.snapshot import Snapshot

        def take(staging: Path) -> None:
            taken = Snapshot(staging, warn)
            taken.context(context)
            for extra in includes:
                taken.include(extra)
            if on_snapshot is not None:
                on_snapshot(taken.files, taken.bytes)

        # Trials run with the python3 the user has at hand, unless the config says otherwise.
        python = shutil.which("python3") or ""

        def request(rid: str, staging: Path) -> Create:
            return Create(config, str(staging), rid, python, paused, convert_image, task)

        return request("", Path()).reply(
            self.transport.send_with_context(take, request, request_id))


def connect(paths: StatePaths) -> Client:
    """The client for the state directory ``paths`` (the daemon is started when needed)."""
    from hpcdet.link.files import FileTransport

    return Client(FileTransport(paths))


__all__ = ["Client", "Created", "JobUpdate", "Transport", "connect"]
