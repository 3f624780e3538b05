from __future__ import annotations

from hpcdet.launch.harness import trial_ports


def test_runs_get_distinct_ports_in_range() -> None:
    ports = [trial_ports(f"{t}.{r}") for t in range(1, 40) for r in (1, 2)]
    bases = {p["INTER_TRAIN_PROCESS_COMM_PORT_1"] for p in ports}
    assert len(bases) == len(ports)
    for p in ports:
        assert 20000 <= p["INTER_TRAIN_PROCESS_COMM_PORT_1"] < 30000
        assert p["INTER_TRAIN_PROCESS_COMM_PORT_2"] == p["INTER_TRAIN_PROCESS_COMM_PORT_1"] + 1
        assert 30000 <= p["C10D_PORT"] < 35000
    assert trial_ports("7.1") == trial_ports("7.1")
