"""The harness's GPU watch, sampling the nvidia-smi double of tests/doubles/nvidia-smi (no GPU
here; it prints the CSV format NVIDIA documents for the query, see its header)."""

from __future__ import annotations

import json
import os
from pathlib import Path

from hpcdet.launch import gpu_watch
from hpcdet.launch.gpu_watch import GpuSample, IdleTracker, parse_nvidia_smi, parse_rocm_smi
from hpcdet.rundir import gpu_idle

DOUBLE = Path(__file__).resolve().parents[2] / "doubles" / "nvidia-smi" / "bin"


def test_nvidia_smi_lines_and_unavailable_values() -> None:
    text = ("0, GPU-6f1f8f5a-58d6-4b7c-9f2f-3d0c8e1a0b00, 0, 3\n"
            "1, GPU-6f1f8f5a-58d6-4b7c-9f2f-3d0c8e1a0b01, 87, 20480\n"
            "2, GPU-6f1f8f5a-58d6-4b7c-9f2f-3d0c8e1a0b02, [N/A], [N/A]\n\n")
    assert parse_nvidia_smi(text) == [
        GpuSample(0, "GPU-6f1f8f5a-58d6-4b7c-9f2f-3d0c8e1a0b00", 0.0, 3.0),
        GpuSample(1, "GPU-6f1f8f5a-58d6-4b7c-9f2f-3d0c8e1a0b01", 87.0, 20480.0),
        GpuSample(2, "GPU-6f1f8f5a-58d6-4b7c-9f2f-3d0c8e1a0b02", None, None)]


def test_rocm_smi_csv() -> None:
    assert parse_rocm_smi("device,GPU use (%)\ncard0,0\ncard1,42\n") == [
        GpuSample(0, "", 0.0), GpuSample(1, "", 42.0)]
    assert parse_rocm_smi("WARNING: no AMD GPU\n") == []


def test_only_the_trials_gpus_are_watched() -> None:
    gpus = [GpuSample(i, f"GPU-{i}", 0.0) for i in range(4)]
    assert [g.index for g in gpu_watch.visible(gpus, {"CUDA_VISIBLE_DEVICES": "1,3"})] == [1, 3]
    assert [g.index for g in gpu_watch.visible(gpus, {"CUDA_VISIBLE_DEVICES": "GPU-2"})] == [2]
    assert [g.index for g in gpu_watch.visible(gpus, {})] == [0, 1, 2, 3]


def test_a_gpu_is_reported_once_per_idle_stretch_past_the_threshold() -> None:
    t = IdleTracker(threshold=60)
    idle, busy = GpuSample(0, "", 0.0), GpuSample(0, "", 50.0)
    assert t.update([idle], 0) == [] and t.update([idle], 59) == []
    assert t.update([idle], 60) == [idle] and t.idle() == {0: 0}
    assert t.update([idle], 120) == []  # said once
    assert t.update([busy], 130) == [] and t.idle() == {}
    assert t.update([idle], 140) == [] and t.update([idle], 200) == [idle]


def test_the_watch_warns_in_the_log_and_the_run_tree(tmp_path: Path) -> None:
    level = tmp_path / "utilization"
    level.write_text("0,0")
    env = {"PATH": f"{DOUBLE}{os.pathsep}{os.environ['PATH']}",
           "FAKE_GPU_UTILIZATION_FILE": str(level), gpu_watch.IDLE_ENV: "30"}
    said: list[str] = []
    sampler = gpu_watch.query(env["PATH"])
    assert sampler is not None and sampler[0][0] == str(DOUBLE / "nvidia-smi")
    watch = gpu_watch.GpuWatch(tmp_path, 0, env, said.append, sampler,
                               host={"CUDA_VISIBLE_DEVICES": "1"})
    watch.sample(1000.0)
    watch.sample(1031.0)
    assert len(said) == 1 and "GPU 1 (GPU-6f1f8f5a-58d6-4b7c-9f2f-3d0c8e1a0b01) has been idle" \
        in said[0] and "2 hours" in said[0]
    [record] = gpu_idle.read_all(tmp_path)
    assert record["gpus"] == [{"index": 1, "uuid": "GPU-6f1f8f5a-58d6-4b7c-9f2f-3d0c8e1a0b01",
                               "idle_since": 1000.0}]
    level.write_text("0,35")
    watch.sample(1040.0)
    assert json.loads(gpu_idle.path(tmp_path, 0).read_text())["gpus"] == []
    assert len(said) == 1


def test_no_tool_no_watch(tmp_path: Path) -> None:
    empty = tmp_path / "bin"
    empty.mkdir()
    assert gpu_watch.start(tmp_path, 0, {"PATH": str(empty)}, print) is None
    on_path = {"PATH": str(DOUBLE), gpu_watch.IDLE_ENV: "0"}  # turned off
    assert gpu_watch.start(tmp_path, 0, on_path, print) is None


def test_a_failing_tool_is_said_once(tmp_path: Path) -> None:
    said: list[str] = []
    watch = gpu_watch.GpuWatch(tmp_path, 0, {"PATH": "/nonexistent"}, said.append,
                               ([str(tmp_path / "missing-smi")], parse_nvidia_smi), host={})
    watch.sample(1.0)
    watch.sample(2.0)
    assert len(said) == 1 and "missing-smi" in said[0]
