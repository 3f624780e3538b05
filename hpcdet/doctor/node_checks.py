"""Findings from the compute nodes' side: the shared filesystem (the state directory and the
checkpoint storage, written by a node and read here), the runtime on the node's PATH, and TCP
between two nodes."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from hpcdet.doctor.findings import Finding, Status
from hpcdet.doctor.node_jobs import Outcome
from hpcdet.paths import is_network_fs
from hpcdet.schedulers import JobStatus
from hpcdet.states import JobState


def not_run(check: str, outcome: Outcome, seconds: float, pool: str | None,
            advice: str = "") -> Finding | None:
    """The failure of a probe job that was refused (``advice``: the backend's words on the
    refusal), never started or ended without its results; None when it did its work."""
    where = f"partition/queue {pool!r}" if pool else "the default partition/queue"
    if outcome.refused:
        return Finding(check, Status.FAIL, f"the probe job was refused: {outcome.refused}",
                       advice or f"make a tiny job run in {where} (--partition, or "
                       "default_pool: in cluster.yaml)")
    if outcome.done:
        return None
    status = outcome.status
    if outcome.ended:
        said = f"; its output: {outcome.tail()}" if outcome.tail() else ""
        state = status.native if status else "gone from the queue"
        return Finding(check, Status.FAIL,
                       f"job {outcome.job_id} ended ({state}) without its results{said}",
                       "see the job's output above; " + _UNSHARED)
    reason = f" ({status.native}: {status.reason})" if status and status.reason else (
        f" ({status.native})" if status else "")
    if status is not None and _only_busy(status):
        return Finding(check, Status.WARN,
                       f"job {outcome.job_id} waited {seconds:.0f} s for its turn{reason}; "
                       "canceled", "the cluster is busy: run the doctor again when nodes are "
                       "free, or give --timeout more seconds")
    return Finding(check, Status.FAIL,
                   f"job {outcome.job_id} did not finish within {seconds:.0f} s{reason}; "
                   "canceled", f"check that {where} is up and has free nodes, or give "
                   "--timeout more seconds")


def _only_busy(status: JobStatus) -> bool:
    """Whether a pending job only waits for its turn (other jobs hold the nodes), rather than
    for a partition or nodes that are down, or for what it can never get."""
    words = status.reason.lower()
    return (status.state is JobState.PENDING and not status.never_runs
            and not words.startswith("can never")
            and not any(w in words for w in ("down", "drain", "inactive", "never")))


_UNSHARED = ("the directory must be on a filesystem the compute nodes and this node share "
             "(HPCDET_HOME for the state, checkpoint_storage.host_path for checkpoints)")


def filesystem(check: str, directory: Path, result: Path, outcome: Outcome,
               login_fstype: str, database: Path) -> Finding:
    """What the node wrote into ``directory`` (``result``), as read here."""
    try:
        host, fstype, _ = (result.read_text().splitlines() + ["", "", ""])[:3]
    except OSError:
        said = f"; its output: {outcome.tail()}" if outcome.tail() else ""
        return Finding(check, Status.FAIL, f"job {outcome.job_id} ran but {result} is not "
                       f"visible here{said}", _UNSHARED)
    seen = (f"{directory}: written on {host}, read here; {fstype} as the node sees it "
            f"({login_fstype} here)")
    if not (is_network_fs(fstype) or fstype in ("lustre", "gpfs")):
        seen += ", not a network filesystem type but shared all the same"
    if check == "state directory":
        seen += f"; the database stays on local disk at {database}"
    return Finding(check, Status.OK, seen)


def node_runtime(result: Path, name: str, here: str) -> Finding:
    try:
        lines = (result.read_text().splitlines() + ["", "", ""])[:3]
    except OSError:
        return Finding("runtime on nodes", Status.SKIPPED, "the probe job's result is missing")
    host, found = lines[0], lines[2].strip()
    if found:
        return Finding("runtime on nodes", Status.OK, f"{name} at {found} on {host}")
    return Finding("runtime on nodes", Status.FAIL if here else Status.WARN,
                   f"{name} is not on the PATH of batch jobs on {host}",
                   f"install {name} on the compute nodes, or load its module in the job "
                   "(the cluster file's python/template_dir)")


def network(work: Path, outcome: Outcome) -> Finding:
    ends: dict[str, dict[str, Any]] = {}
    for role in ("server", "client"):
        try:
            ends[role] = json.loads((work / f"net-{role}.json").read_text())
        except (OSError, ValueError):
            ends[role] = {"error": "wrote no result"}
    errors = [f"{r} on {e.get('host', '?')}: {e['error']}" for r, e in ends.items()
              if "error" in e]
    if errors:
        return Finding("network", Status.FAIL, "; ".join(errors),
                       "distributed trials need TCP between the nodes on any port: ask the "
                       "administrators which interface jobs may use")
    server, client = ends["server"], ends["client"]
    seen = (f"{client['host']} -> {server['host']} over TCP: {client['address']} -> "
            f"{client['peer']} (interface {client['interface'] or '?'} / "
            f"{server['interface'] or '?'})")
    if not client.get("echo_ok"):
        return Finding("network", Status.FAIL, seen + "; the bytes came back wrong",
                       "something between the nodes alters TCP traffic; ask the administrators")
    if server["host"] == client["host"]:
        return Finding("network", Status.WARN, seen + "; both ends ran on one host",
                       "the batch system put both nodes' tasks on one host: run the doctor "
                       "where two nodes are free")
    return Finding("network", Status.OK, seen)


def registry(result: Path, registry: tuple[str, int]) -> Finding:
    """Whether the probe job's node opened a TCP connection to the image registry."""
    where = f"{registry[0]}:{registry[1]}"
    try:
        lines = (result.read_text().splitlines() + ["", "", "", ""])[:4]
    except OSError:
        return Finding("registry from nodes", Status.SKIPPED,
                       "the probe job's result is missing")
    host, reach = lines[0], lines[3].strip()
    if reach == "reachable":
        return Finding("registry from nodes", Status.OK,
                       f"{host} opened a connection to {where}: jobs can pull images")
    return Finding("registry from nodes", Status.WARN,
                   f"{host} could not connect to {where} within 5 s",
                   "compute nodes cannot pull: hpcdet converts an image on the login node at "
                   "`experiment create`, so keep image_cache (cluster.yaml) on a filesystem "
                   "the nodes see; an image it has not converted fails its trials")


__all__ = ["filesystem", "network", "node_runtime", "not_run", "registry"]
