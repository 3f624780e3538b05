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
