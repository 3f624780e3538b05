"""What `hpcdet cluster list` tells of each cluster."""

from __future__ import annotations

import json
from dataclasses import dataclass

from hpcdet.errors import HpcdetError
from hpcdet.remote.profiles import Cluster


@dataclass(frozen=True)
class Seen:
    reachable: str
    version: str = ""
    daemon: str = ""
    live_jobs: str = ""


def probe(cluster: Cluster) -> Seen:
    """Reach the cluster (through the keeper, asking a second factor if its transport needs
    one) and ask its hpcdet; an unreachable one says why in ``reachable``."""
    from hpcdet.remote.session import RemoteSession

    try:
        code, out, err = RemoteSession(cluster).capture(["cluster", "probe"])
    except HpcdetError as e:
        return Seen(f"no: {e}")
    try:
        said = json.loads(out)
        return Seen("yes", str(said["version"]), "up" if said["daemon"] else "down",
                    str(said["live_jobs"]))
    except (ValueError, KeyError, TypeError):
        last = (err.strip() or out.strip() or f"exit code {code}").splitlines()[-1]
        return Seen("yes", "?", f"? ({last})")
