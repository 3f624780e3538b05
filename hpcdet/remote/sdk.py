"""The SDK on a laptop, after ``client.login(cluster="NAME")``: each call of
``hpcdet.sdk_source.Source`` goes, as a line of JSON, to one `hpcdet relay sdk` on the cluster's
login node (one channel of the keeper's transport, opened at the first call), which answers
with what ``hpcdet.sdk_source.Local`` gives there. A create uploads its context as `hpcdet -c
NAME experiment create` does (``hpcdet.remote.upload``); a download comes over SFTP as the
CLI's does (``hpcdet.remote.download``).
"""

from __future__ import annotations

import json
import socket
import tempfile
import uuid as uuids
from pathlib import Path
from typing import Any

from hpcdet import errors
from hpcdet.remote import wire
from hpcdet.remote.forward import remote_command
from hpcdet.remote.profiles import Cluster
from hpcdet.remote.session import RemoteSession, again_when_cut


class RemoteSource:
    """``hpcdet.sdk_source.Source`` on a cluster's login node."""

    def __init__(self, cluster: Cluster) -> None:
        self.session = RemoteSession(cluster)
        self._sock: socket.socket | None = None
        self._pending = b""

    # ------------------------------------------------------------------ the channel

    def _open(self) -> socket.socket:
        if self._sock is None:
            command = remote_command(self.session.cluster.hpcdet, ["relay", "sdk"])
            self._sock = self.session.open(exec=command, raw=True)
            self._pending = b""
        return self._sock

    def close(self) -> None:
        if self._sock is not None:
            self._sock.close()
            self._sock = None

    def _line(self, sock: socket.socket) -> bytes:
        while b"\n" not in self._pending:
            data = sock.recv(1 << 16)
            if not data:
                raise wire.ConnectionLost(
                    f"the SDK's connection to {self.session.cluster.name} ended")
            self._pending += data
        line, self._pending = self._pending.split(b"\n", 1)
        return line

    def _once(self, name: str, args: list[Any]) -> Any:
        sock = self._open()
        try:
            sock.sendall(json.dumps({"call": name, "args": args}).encode() + b"\n")
            answer = json.loads(self._line(sock))
        except BaseException:
            self.close()  # the next call opens a new channel
            raise
        if "error" in answer:
            kind = getattr(errors, str(answer.get("kind")), errors.HpcdetError)
            if not (isinstance(kind, type) and issubclass(kind, errors.HpcdetError)):
                kind = errors.HpcdetError
            raise kind(answer["error"])
        return answer["ok"]

    def _call(self, name: str, *args: Any) -> Any:
        """A call that asks without changing anything, asked again when the connection
        breaks."""
        result: list[Any] = []

        def once() -> int:
            result[:] = [self._once(name, list(args))]
            return 0

        again_when_cut(self.session, once)
        return result[0]

    # ------------------------------------------------------------------ Source

    def experiment(self, exp_id: int) -> dict[str, Any]:
        return dict(self._call("experiment", exp_id))

    def experiments(self) -> list[dict[str, Any]]:
        return list(self._call("experiments"))

    def trial(self, trial_id: int) -> dict[str, Any]:
        return dict(self._call("trial", trial_id))

    def trials(self, exp_id: int) -> list[int]:
        return [int(t) for t in self._call("trials", exp_id)]

    def checkpoint(self, uuid: str) -> dict[str, Any]:
        return dict(self._call("checkpoint", uuid))

    def metrics(self, trial_id: int, group: str | None) -> list[dict[str, Any]]:
        return list(self._call("metrics", trial_id, group))

    def ranked(self, exp_id: int, limit: int | None, trial_id: int | None,
               sort_by: str | None, smaller_is_better: bool | None,
               ordered: bool) -> list[str]:
        return [str(u) for u in self._call("ranked", exp_id, limit, trial_id, sort_by,
                                           smaller_is_better, ordered)]

    def models(self) -> list[dict[str, Any]]:
        return list(self._call("models"))

    def model(self, name: str) -> dict[str, Any]:
        return dict(self._call("model", name))

    def send(self, op: str, args: dict[str, Any]) -> object:
        # Once: an action sent again after a broken connection could act twice.
        return self._once("send", [op, args])

    def create(self, config: dict[str, Any], model_dir: Path, includes: list[Path]) -> int:
        import yaml

        from hpcdet.remote.upload import CreateArgs, make_manifest, upload
        from hpcdet.snapshot import Snapshot

        with tempfile.TemporaryDirectory(prefix="hpcdet-upload-") as tmp:
            config_file = Path(tmp) / "config.yaml"
            config_file.write_text(yaml.safe_dump(config))
            taken = Snapshot(Path(tmp) / "context")
            taken.context(model_dir)
            for extra in includes:
                taken.include(extra)
            args = CreateArgs(("experiment", "create"), config_file, model_dir,
                              tuple(includes), (), ())
            manifest, sources = make_manifest(args, Path(tmp) / "context", uuids.uuid4().hex)
            upload(self.session, manifest, sources)
        # Sent again when the connection breaks: the request id makes it once.
        return int(self._call("create", manifest.to_json().decode()))

    def download(self, uuid: str, dest: Path | None) -> str:
        from hpcdet.remote.download import fetch

        listing = self._call("listing", uuid, None if dest is None else str(dest))
        fetch(self.session, listing)
        return str(listing["dest"])
