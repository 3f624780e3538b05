from __future__ import annotations

from hpcdet.launch.harness import trial_ports


def _all(ports: dict[str, int]) -> list[int]:
    return sorted(ports.values())


def test_jobs_running_at_once_get_distinct_ports_below_the_ephemeral_range() -> None:
    jobs = [trial_ports(str(job_id)) for job_id in range(123456, 123456 + 4000)]
    used = [port for ports in jobs for port in _all(ports)]
    assert len(set(used)) == len(used)  # no two of 4000 consecutive jobs share any port
    assert all(20000 <= port < 32768 for port in used)
    for ports in jobs:
        first = ports["INTER_TRAIN_PROCESS_COMM_PORT_1"]
        assert ports["INTER_TRAIN_PROCESS_COMM_PORT_2"] == first + 1


def test_runs_without_a_job_id_are_spread_by_their_directory() -> None:
    ports = trial_ports("/home/a/.hpcdet/runs/exp-1/trials/1/run-1")
    assert ports == trial_ports("/home/a/.hpcdet/runs/exp-1/trials/1/run-1")
    assert ports != trial_ports("/home/b/.hpcdet/runs/exp-1/trials/1/run-1")
    assert all(20000 <= port < 32768 for port in ports.values())
