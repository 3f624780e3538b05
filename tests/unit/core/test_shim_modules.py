"""The rest of Determined's trial-side modules under the `determined` shim: the samplers'
index arithmetic, what `determined.pytorch.experimental`, `determined.tensorboard` and
`determined.experimental` offer, and the ImportError (saying what to use instead) of what
hpcdet does not offer."""

from __future__ import annotations

import itertools
import os
import subprocess
import sys
import textwrap
from typing import Any

import pytest

from tests.support import require_modules
from tests.unit.core.core_fakes import SHIM_DIR


def _python(code: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "HPCDET_CLUSTER_INFO"}
    env["PYTHONPATH"] = str(SHIM_DIR)
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code).strip()], env=env,
                          capture_output=True, text=True, timeout=120)


def _ok(code: str) -> None:
    proc = _python(textwrap.dedent(code) + "\nprint('ok')\n")
    assert (proc.returncode, proc.stdout, proc.stderr) == (0, "ok\n", ""), proc.stderr


@pytest.mark.parametrize(("module", "name", "words"), [
    ("determined.pytorch.deepspeed", "DeepSpeedTrial",
     ["no determined.pytorch.deepspeed", "python3 -m determined.launch.deepspeed",
      "from_deepspeed()"]),
    ("determined.keras", "TFKerasTrial", ["no TensorFlow Keras trial API", "Core API"]),
    ("determined.launch.horovod", "main",
     ["Horovod", "determined.launch.torch_distributed"]),
])
def test_what_hpcdet_lacks_is_an_import_error_naming_the_alternative(
        module: str, name: str, words: list[str]) -> None:
    for code in (f"import {module}", f"from {module} import {name}",
                 f"from {module} import *"):
        proc = _python(code)
        assert proc.returncode == 1, code
        last = proc.stderr.strip().splitlines()[-1]
        assert last.startswith("ImportError: "), (code, last)
        for word in words:
            assert word in last, (word, last)


def test_python_m_determined_launch_horovod_fails_with_the_message() -> None:
    env = {**os.environ, "PYTHONPATH": str(SHIM_DIR)}
    proc = subprocess.run([sys.executable, "-m", "determined.launch.horovod", "train.py"],
                          env=env, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 1 and "determined.launch.torch_distributed" in proc.stderr


def test_samplers_and_pytorch_experimental_import() -> None:
    require_modules("torch", "numpy")
    _ok("""
        import determined.pytorch
        from determined.pytorch import samplers
        from determined.pytorch.samplers import (
            DistributedBatchSampler, DistributedSampler, RepeatBatchSampler, RepeatSampler,
            ReproducibleShuffleBatchSampler, ReproducibleShuffleSampler, SkipBatchSampler,
            SkipSampler)
        import torch
        assert issubclass(SkipBatchSampler, torch.utils.data.BatchSampler)
        from determined.pytorch.experimental import (
            TorchBatchProcessor, TorchBatchProcessorContext, get_default_device,
            torch_batch_process)
        import types
        core = types.SimpleNamespace(distributed=types.SimpleNamespace(local_rank=0))
        assert get_default_device(core) == torch.device("cpu")

        class Mine(TorchBatchProcessor):
            def process_batch(self, batch, batch_idx):
                pass

        try:
            torch_batch_process(Mine, dataset=[])
        except NotImplementedError as e:
            assert "Core API" in str(e), e
        else:
            raise AssertionError("torch_batch_process ran")
    """)


def test_determined_tensorboard_offers_paths_and_writers() -> None:
    _ok("""
        from pathlib import Path
        import determined.tensorboard as tb
        from determined.tensorboard import metric_writers
        from determined.tensorboard.metric_writers import BatchMetricWriter, MetricWriter
        assert metric_writers.BatchMetricWriter is tb.BatchMetricWriter
        assert tb.get_sync_path("c", "3", "7") == Path("c/tensorboard/experiment/3/trial/7")
        assert tb.get_experiment_sync_path("c", "3") == Path("c/tensorboard/experiment/3")
        try:
            tb.get_base_path({})
        except RuntimeError as e:
            assert "get_tensorboard_path" in str(e)
        try:
            tb.build
        except AttributeError as e:
            assert "hpcdet tensorboard" in str(e)

        class Writer(MetricWriter):
            def __init__(self):
                self.scalars, self.flushes = [], 0
            def add_scalar(self, name, value, step):
                self.scalars.append((name, value, step))
            def reset(self):
                pass
            def flush(self):
                self.flushes += 1

        w = Writer()
        writer = BatchMetricWriter(w)
        writer.on_train_step_end(10, {"loss": 0.5, "extra": 2, "text": "x"},
                                 [{"loss": 1.0}, {"loss": 0.0}])
        writer.on_validation_step_end(10, {"validation_loss": 0.25, "acc": 0.9, "ok": True})
        assert w.scalars == [
            ("Determined/loss", 1.0, 8), ("Determined/loss", 0.0, 9),
            ("Determined/extra", 2, 10),
            ("Determined/validation_loss", 0.25, 10), ("Determined/val_acc", 0.9, 10)], w.scalars
        assert w.flushes == 2
    """)


def test_determined_experimental_is_hpcdets_sdk() -> None:
    _ok("""
        from determined.experimental import client
        import determined.experimental.client as by_path
        import determined.experimental as exp
        import hpcdet.client
        assert client is hpcdet.client and by_path is hpcdet.client
        assert exp.Checkpoint is hpcdet.client.Checkpoint
        assert exp.TrialReference is hpcdet.client.Trial
        assert callable(client.get_experiment) and callable(client.get_checkpoint)
        try:
            exp.Model
        except AttributeError as e:
            assert "not in hpcdet's SDK" in str(e)
    """)


def test_in_a_trial_without_the_sdk_determined_experimental_says_what_to_use() -> None:
    # The trial's read-only tree (hpcdet.trialside) has no hpcdet.client.
    for statement in ("from determined.experimental import client",
                      "import determined.experimental.client",
                      "import determined.experimental as e; e.Checkpoint"):
        proc = _python(f"""
            import sys
            sys.modules["hpcdet.client"] = None
            import determined.experimental
            {statement}
        """)
        last = proc.stderr.strip().splitlines()[-1]
        assert proc.returncode == 1 and last.startswith("ImportError: "), (statement, last)
        assert "not available inside a trial" in last
        assert "core_context.checkpoint.restore_path(uuid)" in last


# --- the samplers' index arithmetic, against lists worked out by hand ------------------

def _samplers() -> Any:
    require_modules("torch", "numpy")
    from hpcdet.shim.determined.pytorch import samplers

    return samplers


def _batches(n: int, size: int) -> Any:
    import torch.utils.data as data

    return data.BatchSampler(data.SequentialSampler(range(n)), size, drop_last=False)


def test_distributed_sampler_deals_round_robin_without_padding() -> None:
    s = _samplers()
    shards = [s.DistributedSampler(range(10), num_workers=3, rank=r) for r in range(3)]
    assert [list(x) for x in shards] == [[0, 3, 6, 9], [1, 4, 7], [2, 5, 8]]
    assert [len(x) for x in shards] == [4, 3, 3]
    assert list(s.DistributedSampler(range(4), num_workers=1, rank=0)) == [0, 1, 2, 3]


def test_distributed_batch_sampler_deals_batches() -> None:
    s = _samplers()
    # Batches of 3 of 10 records: [0,1,2] [3,4,5] [6,7,8] [9].
    two = [s.DistributedBatchSampler(_batches(10, 3), 2, r) for r in range(2)]
    assert [list(x) for x in two] == [[[0, 1, 2], [6, 7, 8]], [[3, 4, 5], [9]]]
    assert [len(x) for x in two] == [2, 2]
    three = [s.DistributedBatchSampler(_batches(10, 3), 3, r) for r in range(3)]
    assert [list(x) for x in three] == [[[0, 1, 2], [9]], [[3, 4, 5]], [[6, 7, 8]]]
    assert [len(x) for x in three] == [2, 1, 1]
    for workers, rank, message in ((2, -1, "non-negative"), (0, 0, "greater than zero"),
                                   (2, 2, "less than num_workers")):
        with pytest.raises(ValueError, match=message):
            s.DistributedBatchSampler(_batches(10, 3), workers, rank)


def test_skip_samplers_skip_once_and_keep_the_length() -> None:
    s = _samplers()
    assert list(s.SkipBatchSampler(_batches(10, 3), 1)) == [[3, 4, 5], [6, 7, 8], [9]]
    assert len(s.SkipBatchSampler(_batches(10, 3), 1)) == 4
    assert list(s.SkipBatchSampler(_batches(10, 3), 9)) == []
    assert list(s.SkipSampler(range(5), 2)) == [2, 3, 4] and len(s.SkipSampler(range(5), 2)) == 5


def test_repeat_samplers_go_on_without_end() -> None:
    s = _samplers()
    assert list(itertools.islice(s.RepeatSampler(range(3)), 7)) == [0, 1, 2, 0, 1, 2, 0]
    assert len(s.RepeatSampler(range(3))) == 3
    repeated = s.RepeatBatchSampler(_batches(5, 2))
    assert list(itertools.islice(repeated, 4)) == [[0, 1], [2, 3], [4], [0, 1]]
    assert len(repeated) == 3


def test_determineds_training_chain_resumes_each_worker_where_it_stopped() -> None:
    """Repeat, shard, skip (Determined's DataLoader): worker 1 of 2 after 1 step trained."""
    s = _samplers()
    chain = s.SkipBatchSampler(
        s.DistributedBatchSampler(s.RepeatBatchSampler(_batches(10, 3)), 2, 1), 1)
    # Repeated: [0,1,2] [3,4,5] [6,7,8] [9] [0,1,2] [3,4,5] [6,7,8] [9] ...; worker 1 takes
    # the 2nd, 4th, 6th...: [3,4,5] [9] [3,4,5] [9]; the first was trained.
    assert list(itertools.islice(chain, 3)) == [[9], [3, 4, 5], [9]]
    assert len(chain) == 2


def test_reproducible_shuffles_follow_numpys_random_state() -> None:
    s = _samplers()
    # numpy.random.RandomState(1) shuffling [0..5] twice (its stream is frozen by numpy).
    first, second = [2, 1, 4, 0, 3, 5], [4, 2, 0, 5, 3, 1]
    sampler = s.ReproducibleShuffleSampler(range(6), seed=1)
    assert (list(sampler), list(sampler), len(sampler)) == (first, second, 6)
    again = s.ReproducibleShuffleSampler(range(6), seed=1)
    assert list(again) == first
    batches = s.ReproducibleShuffleBatchSampler(_batches(12, 2), seed=1)
    pairs = [[0, 1], [2, 3], [4, 5], [6, 7], [8, 9], [10, 11]]
    assert list(batches) == [pairs[i] for i in first] and len(batches) == 6
