"""What the local backend reports for `hpcdet cluster show` and the UI's cluster page."""

from hpcdet.schedulers import make_scheduler


def test_local_info_is_the_hosts_cpus_and_load() -> None:
    local = make_scheduler("local", {"jobs_dir": "/nonexistent"})
    assert local.info_commands() == [["nproc"], ["cat", "/proc/loadavg"]]
    assert local.parse_info(["8\n", "0.52 0.58 0.61 2/1104 31337\n"]) == [
        ("host CPUs", "8"), ("load average (1, 5, 15 min)", "0.52, 0.58, 0.61"),
        ("processes running / total", "2/1104")]
