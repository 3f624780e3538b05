"""PBS Pro / OpenPBS as `hpcdet doctor` asks it: ``qmgr -c 'list server'`` (pbs_version,
job_history_enable, max_array_size, max_queued), ``qmgr -c 'list queue'`` (each queue's
enabled/started, resources_max.walltime, kill_delay), ``pbsnodes -a -F json`` (node sizes),
and tiny probe jobs through qsub.

Facts: qmgr.8B, pbs_server_attributes.7B, pbs_queue_attributes.7B (kill_delay: seconds
between SIGTERM and SIGKILL when a job is deleted or preempted), qsub.1B, pbsdsh.1B.
"""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar

from hpcdet.schedulers import pbs_status
from hpcdet.schedulers.site_probe import Pool, SiteFacts, SiteProbe, key_values


def parse_queues(stdout: str) -> dict[str, dict[str, str]]:
    """``qmgr -c 'list queue'``: ``Queue <name>`` then indented ``key = value`` lines."""
    found: dict[str, dict[str, str]] = {}
    current: dict[str, str] | None = None
    for line in stdout.splitlines():
        if line.startswith("Queue "):
            current = found.setdefault(line[len("Queue "):].strip(), {})
        elif current is not None and line[:1].isspace():
            current.update(key_values(line))
    return found


def _number(value: str | None) -> int | None:
    return int(value) if value and value.isdigit() else None


class PbsSite(SiteProbe):
    backend: ClassVar[str] = "pbs"

    def commands(self) -> dict[str, list[str]]:
        return {
            "server": ["qmgr", "-c", "list server"],
            "queues": ["qmgr", "-c", "list queue"],
            "nodes": ["pbsnodes", "-a", "-F", "json"],
        }

    def parse(self, outputs: dict[str, str]) -> SiteFacts:
        server = pbs_status.parse_qmgr_server(outputs.get("server", ""))
        try:
            nodes = pbs_status.parse_pbsnodes(outputs["nodes"]) if "nodes" in outputs else None
        except ValueError:
            nodes = None
        default = server.get("default_queue", "")
        pools = []
        for name, attrs in parse_queues(outputs.get("queues", "")).items():
            enabled = attrs.get("enabled", "").lower() == "true"
            started = attrs.get("started", "").lower() == "true"
            pools.append(Pool(
                name, enabled and started,
                f"{'enabled' if enabled else 'disabled'}, {'started' if started else 'stopped'}",
                nodes.nodes if nodes else 0, nodes.cpus_per_node if nodes else 0,
                nodes.gpus_per_node if nodes else 0,
                attrs.get("resources_max.walltime", "infinite"),
                _number(attrs.get("kill_delay")), "", name == default,
            ))
        history_attr = server.get("job_history_enable")
        history = None if "name" not in server else (history_attr or "").lower() == "true"
        how = ("qstat -x (job_history_enable = True)" if history else
               "job_history_enable is not True: no qstat -x" if history is not None else "")
        return SiteFacts(
            "pbs", server.get("pbs_version"), history, how, tuple(pools),
            _number(server.get("max_array_size")), _number(server.get("max_queued")),
            "", "",
            # templates/pbs.j2: PBS signals nothing before the walltime.
            "none before the walltime: hpcdet's trials checkpoint by HPCDET_DEADLINE "
            "(walltime minus grace); SIGTERM on qdel or preemption, SIGKILL kill_delay later",
            {"server": server["name"]} if "name" in server else {},
        )

    def submit_command(self, script: Path, *, name: str, nodes: int, pool: str | None,
                       output: Path, minutes: int) -> list[str]:
        # place=scatter: each chunk on a host of its own (the default, free, may pack them).
        return ["qsub", "-N", name, "-l", f"select={nodes}:ncpus=1:mpiprocs=1",
                "-l", "place=scatter",
                "-l", f"walltime={minutes // 60:02d}:{minutes % 60:02d}:00",
                "-j", "oe", "-o", str(output),
                *(["-q", pool] if pool else []), str(script)]

    def on_each_node(self) -> str:
        # pbsdsh.1B: once on each vnode of the job's node list (one per chunk here).
        return "pbsdsh --"

    def preemption_command(self, job_id: str, facts: SiteFacts, pool: str | None) -> list[str]:
        # PBS warns of nothing before the walltime; a preemption or qdel sends SIGTERM to the
        # job's session, SIGKILL kill_delay later. qsig.1B: -s takes a name or a number.
        return ["qsig", "-s", "TERM", job_id]


__all__ = ["PbsSite", "parse_queues"]
