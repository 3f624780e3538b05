"""Findings from the probe jobs' outcomes and results, and the scripts the jobs run."""

from __future__ import annotations

import json
import socket
import subprocess
from pathlib import Path

from hpcdet.doctor import node_checks
from hpcdet.doctor.findings import Status
from hpcdet.doctor.node_jobs import Outcome, fs_script, net_script
from hpcdet.schedulers import JobStatus
from hpcdet.states import JobState


def test_refused_pending_and_ended_jobs_each_say_what_to_do(tmp_path: Path) -> None:
    refused = node_checks.not_run("network", Outcome(refused="exit 1: sbatch: error: Invalid "
                                  "partition name specified"), 5, "nope")
    assert refused is not None and refused.status is Status.FAIL
    assert "Invalid partition" in refused.seen and "'nope'" in refused.change
    advised = node_checks.not_run("network", Outcome(refused="Bad UID"), 5, None, "run as you")
    assert advised is not None and advised.change == "run as you"
    pending = node_checks.not_run("network", Outcome("12", status=JobStatus(
        JobState.PENDING, "waiting: the partition is down", "PENDING")), 5, "batch")
    assert pending is not None and pending.status is Status.FAIL
    assert pending.seen == ("job 12 did not finish within 5 s (PENDING: waiting: the partition "
                            "is down); canceled")
    busy = node_checks.not_run("network", Outcome("15", status=JobStatus(
        JobState.PENDING, "waiting for nodes or GPUs to become free", "PENDING")), 5, None)
    assert busy is not None and busy.status is Status.WARN
    assert busy.seen.startswith("job 15 waited 5 s for its turn") and "busy" in busy.change
    never = node_checks.not_run("network", Outcome("16", status=JobStatus(
        JobState.PENDING, "not enough nodes", "Q", never_runs=True)), 5, None)
    assert never is not None and never.status is Status.FAIL
    out = tmp_path / "fs.out"
    out.write_text("one\nstat: cannot read file system information for '/x': No such file\n")
    ended = node_checks.not_run("state directory", Outcome("13", ended=True, output=out), 5, None)
    assert ended is not None and "gone from the queue" in ended.seen
    assert "No such file" in ended.seen and "HPCDET_HOME" in ended.change
    assert node_checks.not_run("x", Outcome("14", done=True), 5, None) is None


def test_filesystem_seen_from_the_node(tmp_path: Path) -> None:
    result = tmp_path / "r"
    result.write_text("node1\nnfs\n/usr/bin/apptainer\n")
    found = node_checks.filesystem("state directory", tmp_path, result, Outcome("1"), "nfs4",
                                   Path("/var/tmp/db"))
    assert found.status is Status.OK
    assert found.seen == (f"{tmp_path}: written on node1, read here; nfs as the node sees it "
                          "(nfs4 here); the database stays on local disk at /var/tmp/db")
    missing = node_checks.filesystem("checkpoint storage", tmp_path, tmp_path / "absent",
                                     Outcome("1"), "ext4", Path("/db"))
    assert missing.status is Status.FAIL and "is not visible here" in missing.seen
    assert node_checks.node_runtime(result, "apptainer", "/usr/bin/apptainer").status is Status.OK
    result.write_text("node1\nnfs\n\n")
    lost = node_checks.node_runtime(result, "apptainer", "/usr/bin/apptainer")
    assert lost.status is Status.FAIL and "not on the PATH of batch jobs on node1" in lost.seen


def _ends(tmp_path: Path, server: dict[str, object], client: dict[str, object]) -> None:
    (tmp_path / "net-server.json").write_text(json.dumps(server))
    (tmp_path / "net-client.json").write_text(json.dumps(client))


def test_network_findings(tmp_path: Path) -> None:
    server = {"host": "node1", "peer": "10.0.0.2", "address": "10.0.0.1", "interface": "ib0"}
    client = {"host": "node2", "peer": "10.0.0.1", "address": "10.0.0.2", "interface": "ib0",
              "echo_ok": True}
    _ends(tmp_path, server, client)
    ok = node_checks.network(tmp_path, Outcome("1", done=True))
    assert ok.status is Status.OK
    assert ok.seen == "node2 -> node1 over TCP: 10.0.0.2 -> 10.0.0.1 (interface ib0 / ib0)"
    _ends(tmp_path, {**server, "host": "node2"}, client)
    assert node_checks.network(tmp_path, Outcome("1")).status is Status.WARN
    _ends(tmp_path, server, {"host": "node2", "error": "ConnectionError: refused"})
    bad = node_checks.network(tmp_path, Outcome("1"))
    assert bad.status is Status.FAIL and "client on node2: ConnectionError" in bad.seen


def _fs_probe(tmp_path: Path, registry: tuple[str, int]) -> Path:
    odd = tmp_path / "it's $HOME"
    odd.mkdir(exist_ok=True)
    script = tmp_path / "fs.sh"
    script.write_text(fs_script({odd: odd / "r"}, "sh", registry))
    subprocess.run(["bash", str(script)], check=True, timeout=10)
    return odd / "r"


def test_the_fs_script_quotes_paths_and_writes_host_type_runtime_registry(
        tmp_path: Path) -> None:
    with socket.create_server(("127.0.0.1", 0)) as server:  # a registry that listens
        result = _fs_probe(tmp_path, ("127.0.0.1", server.getsockname()[1]))
    host, fstype, runtime, reach = result.read_text().splitlines()
    assert host and fstype and runtime.endswith("/sh") and reach == "reachable"
    assert "'/x y' 2" in net_script("srun", "python3", Path("/p.py"), Path("/x y"), 2)


def test_a_registry_the_node_cannot_reach_is_a_warning_that_says_what_follows(
        tmp_path: Path) -> None:
    with socket.create_server(("127.0.0.1", 0)) as server:
        closed = ("127.0.0.1", server.getsockname()[1])  # nothing listens once it is closed
    result = _fs_probe(tmp_path, closed)
    assert result.read_text().splitlines()[3] == "unreachable"
    found = node_checks.registry(result, closed)
    assert found.status is Status.WARN and f"127.0.0.1:{closed[1]}" in found.seen
    assert "login node" in found.change
    result.write_text("node1\nnfs\n/usr/bin/apptainer\nreachable\n")
    assert node_checks.registry(result, closed).status is Status.OK
    result.unlink()
    assert node_checks.registry(result, closed).status is Status.SKIPPED


def test_an_ended_job_is_judged_by_each_file_it_wrote(tmp_path: Path) -> None:
    from hpcdet.config.cluster import ClusterConfig
    from hpcdet.doctor.diagnose import Options, _fs_findings
    from hpcdet.paths import StatePaths

    work, storage = tmp_path / "work", tmp_path / "storage"
    work.mkdir()
    (work / "fs-state").write_text("node1\nnfs\n/usr/bin/apptainer\nunreachable\n")
    out = tmp_path / "fs.out"
    out.write_text("bash: /storage/r.tmp: Permission denied\n")
    found = _fs_findings(Outcome("7", ended=True, output=out), Options(), None,
                         StatePaths(tmp_path), work, storage, work / "fs-state",
                         storage / "r", ClusterConfig(), "/usr/bin/apptainer", "")
    assert [f.status for f in found] == [Status.OK, Status.FAIL, Status.OK, Status.WARN]
    assert found[1].seen == (f"job 7 ran but {storage / 'r'} is not visible here; its output: "
                             "bash: /storage/r.tmp: Permission denied")
