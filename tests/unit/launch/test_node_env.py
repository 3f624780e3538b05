"""NodeEnv: each batch system's variables read into one description of the node."""

from __future__ import annotations

from pathlib import Path

from hpcdet.node_env import SLURM_MPI_STEP, NodeEnv


def test_slurm() -> None:
    env = {"SLURM_JOB_ID": "598", "SLURM_NODEID": "0", "HPCDET_NODE_RANK": "3",
           "SLURMD_NODENAME": "node2", "SLURM_ARRAY_TASK_ID": "7",
           "SLURM_LAUNCH_NODE_IPADDR": "10.0.0.1"}
    node = NodeEnv.detect(env)
    assert node == NodeEnv(scheduler="slurm", resources_type="slurm-job", job_id="598",
                           node_rank=0, node_name="node2", array_index=7,
                           route_to="10.0.0.1", mpi_step=SLURM_MPI_STEP)


def test_pbs_reads_the_node_file_and_the_deadline(tmp_path: Path) -> None:
    nodefile = tmp_path / "nodes"
    nodefile.write_text("pbs-a\npbs-a\npbs-b\npbs-b\n")
    env = {"PBS_JOBID": "12[3].pbsdouble", "PBS_NODEFILE": str(nodefile),
           "PBS_ARRAY_INDEX": "3", "HPCDET_NODE_RANK": "1", "HPCDET_DEADLINE": "1700000000.5"}
    node = NodeEnv.detect(env)
    assert (node.scheduler, node.resources_type, node.job_id) == ("pbs", "pbs-job", "12")
    assert (node.node_rank, node.nodes, node.array_index) == (1, ("pbs-a", "pbs-b"), 3)
    assert node.deadline == 1700000000.5


def test_local_and_malformed_values() -> None:
    node = NodeEnv.detect({"HPCDET_NODE_RANK": "x", "HPCDET_DEADLINE": "soon"})
    assert (node.scheduler, node.node_rank, node.deadline, node.job_id) == ("local", 0, None, "")
    pbs = NodeEnv.detect({"PBS_JOBID": "5.server", "PBS_NODEFILE": "/nonexistent"})
    assert (pbs.job_id, pbs.nodes, pbs.node_rank) == ("5", (), 0)


def test_the_deadline_becomes_a_preemption_request(tmp_path: Path) -> None:
    import time

    from hpcdet.launch.harness import deadline_notice
    from hpcdet.rundir.layout import PREEMPT_FILE

    deadline_notice(tmp_path, time.time() + 0.3).join(timeout=5)
    assert (tmp_path / PREEMPT_FILE).exists()


def test_pbs_chief_and_host_come_from_the_command_line_where_the_task_has_no_node_file() -> None:
    # pbsdsh's task on the job's first node has no PBS_NODEFILE (OpenPBS 23.06.06): without the
    # script's HPCDET_CHIEF_HOST the chief advertised gethostbyname(gethostname()), 127.0.0.1 on
    # a host whose name maps to loopback, and the other nodes could not reach it.
    env = {"PBS_JOBID": "7.pbshead", "PBS_TASKNUM": "00000001", "HPCDET_NODE_RANK": "0",
           "HPCDET_CHIEF_HOST": "pbshead", "HPCDET_NODE_NAME": "pbshead"}
    node = NodeEnv.detect(env)
    assert (node.route_to, node.node_name, node.nodes) == ("pbshead", "pbshead", ())


def test_pbs_chief_is_the_node_file_s_first_host_without_the_variable(tmp_path: Path) -> None:
    nodefile = tmp_path / "nodes"
    nodefile.write_text("pbshead\npbsn2\n")
    node = NodeEnv.detect({"PBS_JOBID": "7.pbshead", "PBS_NODEFILE": str(nodefile)})
    assert node.route_to == "pbshead"


def test_own_address_routes_towards_the_chief_and_survives_a_name_it_cannot_resolve() -> None:
    import socket

    from hpcdet.launch.harness import own_address

    pbs = NodeEnv.detect({"PBS_JOBID": "7.x", "HPCDET_CHIEF_HOST": "127.0.0.9"})
    assert own_address(pbs, 2) == "127.0.0.1"  # the interface that routes to the chief
    lost = NodeEnv.detect({"PBS_JOBID": "7.x", "HPCDET_CHIEF_HOST": "no-such-host.invalid"})
    assert own_address(lost, 2) == socket.gethostbyname(socket.gethostname())
    assert own_address(lost, 1) == "127.0.0.1"
