"""What the backends report for `hpcdet cluster show` and the UI's cluster page."""

from hpcdet.schedulers import make_scheduler


def test_local_info_is_the_hosts_cpus_and_load() -> None:
    local = make_scheduler("local", {"jobs_dir": "/nonexistent"})
    assert local.info_commands() == [["nproc"], ["cat", "/proc/loadavg"]]
    assert local.parse_info(["8\n", "0.52 0.58 0.61 2/1104 31337\n"]) == [
        ("host CPUs", "8"), ("load average (1, 5, 15 min)", "0.52, 0.58, 0.61"),
        ("processes running / total", "2/1104")]


def test_slurm_info_names_each_partitions_nodes_and_cpu_use() -> None:
    slurm = make_scheduler("slurm", {"jobs_dir": "/nonexistent"})
    sinfo = ("PARTITION|AVAIL|TIMELIMIT|NODES|CPUS|GRES|STATE|CPUS(A/I/O/T)\n"
             "debug*|up|infinite|1|2|(null)|mixed|1/1/0/2\n"
             "debug*|up|infinite|1|2|gpu:2|idle|0/2/0/2\n")
    config = "MaxArraySize            = 1001\nClusterName             = hpcdet-test\n"
    assert slurm.parse_info([sinfo, config]) == [
        ("partition debug*", "up, 1 nodes mixed, 2 CPUs per node, time limit infinite; "
                             "CPUs allocated/idle/other/total 1/1/0/2"),
        ("partition debug*", "up, 1 nodes idle, 2 CPUs per node, gres gpu:2, time limit "
                             "infinite; CPUs allocated/idle/other/total 0/2/0/2"),
        ("ClusterName", "hpcdet-test"), ("MaxArraySize", "1001")]
