"""Training throughput at 4 slots over 2 nodes: a PyTorchTrial run by hpcdet on Slurm against
the same model in a plain torch DistributedDataParallel loop started by ``srun`` (one task a
rank), and the same loop started by torchrun on each node, as hpcdet's launcher starts ranks.

Usage: ``python -m bench.pytorch_ddp [EPOCHS]`` (default 20), on a host whose ``sbatch``
reaches a two-node Slurm cluster with torch and scikit-learn in this Python.

hpcdet: ``hpcdet experiment create`` of ``examples/pytorch_digits/distributed.yaml`` (4 slots,
2 a node; hpcdet's torch_distributed launcher, gloo) for EPOCHS epochs, validating only at the
end. Baseline: one job of 2 nodes × 2 tasks whose ranks build the same MLP, wrap it in DDP over
gloo, shard the same data with a DistributedSampler (8 records a rank of each batch of 32) and
run Adam with the same learning-rate steps. Both time rank 0 from the end of its first batch to
the end of its last (start-up, validation and checkpoints excluded), and both take
``torch.set_num_threads(1)``: 4 ranks share this machine's 2 cores.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from bench.figures import Figure, table
from bench.sandbox import REPO, Sandbox

# Rank 0's time from its first batch's end to its last's, written where the bench reads it.
TIMED_TRIAL = """\
import atexit, json, os, time

import torch
import model_def

torch.set_num_threads(1)
timed = {"first": None, "last": None, "batches": 0}


@atexit.register
def _write():
    if timed["first"] is not None:
        with open(os.environ["BENCH_OUT"], "w") as f:
            json.dump({"seconds": timed["last"] - timed["first"], "batches": timed["batches"]}, f)


class TimedDigits(model_def.DigitsTrial):
    def train_batch(self, batch, epoch_idx, batch_idx):
        out = super().train_batch(batch, epoch_idx, batch_idx)
        if self.context.distributed.rank == 0:
            timed["last"] = time.perf_counter()
            if timed["first"] is None:
                timed["first"] = timed["last"]
            else:
                timed["batches"] += 1
        return out
"""

PLAIN = """\
import json, os, sys, time

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler

from sklearn.datasets import load_digits
from torch.utils.data import TensorDataset

torch.set_num_threads(1)
epochs, out = int(sys.argv[1]), sys.argv[2]
if "RANK" in os.environ:  # started by torchrun, which also gives the rendezvous
    rank, size = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    dist.init_process_group("gloo")
else:  # one srun task a rank
    rank, size = int(os.environ["SLURM_PROCID"]), int(os.environ["SLURM_NTASKS"])
    dist.init_process_group("gloo", init_method=f"tcp://{os.environ['MASTER']}:29517",
                            rank=rank, world_size=size)
torch.manual_seed(0)
model = DDP(torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.ReLU(), torch.nn.Dropout(0.1),
                                torch.nn.Linear(64, 10)))
opt = torch.optim.Adam(model.parameters(), lr=0.01)
sched = torch.optim.lr_scheduler.StepLR(opt, step_size=3, gamma=0.5)
loss_fn = torch.nn.CrossEntropyLoss()
# examples/pytorch_digits/model_def.py's training split, without importing Determined's API.
digits = load_digits()
x = torch.tensor(digits.data, dtype=torch.float32) / 16.0
y = torch.tensor(digits.target, dtype=torch.long)
order = torch.randperm(len(y), generator=torch.Generator().manual_seed(0))
data = TensorDataset(x[order[360:]], y[order[360:]])
sampler = DistributedSampler(data, num_replicas=size, rank=rank, shuffle=True, seed=0)
loader = DataLoader(data, batch_size=32 // size, sampler=sampler, drop_last=True)
first, batches = None, 0
for epoch in range(epochs):
    sampler.set_epoch(epoch)
    for x, y in loader:
        output = model(x)
        loss = loss_fn(output, y)
        loss.backward()
        opt.step()
        opt.zero_grad()
        accuracy = (output.argmax(1) == y).float().mean()
        loss.item(), accuracy.item()
        now = time.perf_counter()
        if first is None:
            first = now
        else:
            batches += 1
    sched.step()
if rank == 0:
    with open(out, "w") as f:
        json.dump({"seconds": now - first, "batches": batches}, f)
# Rank 0 holds the rendezvous store (tcp:// init): a rank still tearing down its process group
# when rank 0 has exited aborts ("terminate called without an active exception"). All wait
# here, and none runs the teardown.
dist.barrier()
sys.stdout.flush()
os._exit(0)
"""


def _hpcdet(root: Path, epochs: int) -> dict[str, float]:
    ctx = root / "ctx"
    shutil.copytree(REPO / "examples" / "pytorch_digits", ctx)
    (ctx / "timed.py").write_text(TIMED_TRIAL)
    out = root / "hpcdet.json"
    config = (ctx / "distributed.yaml").read_text().replace(
        "model_def:DigitsTrial", "timed:TimedDigits").replace(
        "epochs: 5", f"epochs: {epochs}").replace(
        "min_validation_period:\n  epochs: 1\n", f"min_validation_period:\n  epochs: {epochs}\n")
    config += f"environment:\n  environment_variables:\n    - BENCH_OUT={out}\n"
    box = Sandbox(root / "user", "slurm")
    with box.daemon():
        exp_id = box.create(config, ctx)
        box.wait(exp_id)
    timed: dict[str, float] = json.loads(out.read_text())
    return timed


def _plain(root: Path, epochs: int, torchrun: bool = False) -> dict[str, float]:
    """``torchrun``: the ranks are started as hpcdet's launcher starts them (one torchrun a
    node, 2 workers each, the chief's address), not as one srun task each."""
    (root / "plain.py").write_text(PLAIN)
    name = "torchrun" if torchrun else "srun"
    out = root / f"plain-{name}.json"
    job = root / f"plain-{name}.sh"
    script = f"{sys.executable} {root / 'plain.py'} {epochs} {out}"
    if torchrun:
        launch = ("srun --nodes=2 --ntasks=2 --ntasks-per-node=1 bash -c 'exec "
                  f"{sys.executable} -m torch.distributed.run --nnodes 2 --nproc_per_node 2 "
                  "--node_rank $SLURM_NODEID --max_restarts 0 "
                  "--master_addr '$MASTER' --master_port 29518 "
                  f"{root / 'plain.py'} {epochs} {out}'")
    else:
        launch = f"srun {script}"
    job.write_text(
        "#!/bin/bash\nset -e\n"
        'export MASTER=$(getent ahostsv4 "$(scontrol show hostnames "$SLURM_JOB_NODELIST" | '
        'head -1)" | head -1 | cut -d" " -f1)\n'
        f"{launch}\n")
    log = root / f"plain-{name}.out"
    done = subprocess.run(["sbatch", "--wait", "--nodes=2", "--ntasks-per-node=2", "--time=20",
                           f"--output={log}", "--job-name=hpcdet-bench-ddp", str(job)],
                          capture_output=True, text=True, timeout=1500,
                          env={**os.environ, "PYTHONPATH": ""})
    if done.returncode != 0:
        text = log.read_text() if log.exists() else ""
        raise RuntimeError(f"the plain DDP job failed ({done.stderr.strip()}):\n{text}")
    timed: dict[str, float] = json.loads(out.read_text())
    return timed


def measure(epochs: int) -> list[Figure]:
    with tempfile.TemporaryDirectory(prefix="hpcdet-bench-") as tmp:
        root = Path(tmp)
        ours = _hpcdet(root, epochs)
        base = _plain(root, epochs)
        under_torchrun = _plain(root, epochs, torchrun=True)
    rate = ours["batches"] / ours["seconds"]
    plain_rate = base["batches"] / base["seconds"]
    torchrun_rate = under_torchrun["batches"] / under_torchrun["seconds"]
    return [
        Figure("pytorch", f"PyTorchTrial throughput, 4 slots on 2 nodes (gloo), "
               f"{ours['batches']:.0f} batches", rate, "batches/s",
               "the same model in a plain DDP loop under srun", plain_rate,
               "≥ 97% of plain", rate >= 0.97 * plain_rate,
               note=FASTER if rate > 1.1 * plain_rate else SLOWER),
        Figure("pytorch", "the same PyTorchTrial run (hpcdet's own cost, the launch aside)",
               rate, "batches/s", "the plain DDP loop started by torchrun as hpcdet starts it",
               torchrun_rate),
        Figure("pytorch", "the plain DDP loop started by torchrun (the launch's cost)",
               torchrun_rate, "batches/s", "the same loop under srun, one task a rank",
               plain_rate),
    ]


# Not a target missed, but a gap not yet explained: both wrap the model in DDP over gloo,
# fetch through torch's DataLoader and take one thread a rank.
FASTER = ("hpcdet faster than the baseline (1.07-1.44x in five runs on the morning of "
          "2026-11-25, when the baseline ran at 93 batches/s on a loaded machine); see the "
          "slower case's note")
SLOWER = ("0.84-0.91x in eight runs on a quiet machine on 2026-11-25 (baseline 134-149 "
          "batches/s), and 0.87x with 60 epochs, so not start-up: ~1.2 ms more per batch. Not "
          "other processes (over 10 s of training everything else hpcdet ran took 0.13 s of "
          "CPU), and not hpcdet's loop: per thread over 10 s of training (/proc/PID/task), each "
          "rank's Python thread spends the same ~1.0 ms of CPU a batch in both (1.23 s for "
          "~1,200 batches against 1.39 s for ~1,380), while gloo's transport thread "
          "(gloo_tcp_loop) spends 1.67 ms a batch under hpcdet against 1.28 ms in the plain "
          "job: 2.0 s against 1.8 s. The launch is the cause, not hpcdet: the same plain loop "
          "started by torchrun on the same nodes (2 a node, --master_addr, env:// init) ran at "
          "128 batches/s, as hpcdet's (124-129), with the same 2.0 s in gloo's thread. hpcdet's "
          "torch_distributed launcher starts ranks through torchrun, as Determined's does. Since "
          "2026-11-26 the same run also times the plain loop under torchrun (the rows below): "
          "0.91x of srun in the full run at 90a1a4f, with hpcdet at 0.98x of it (0.82x and 1.12x "
          "in a 3-epoch run). torchrun's agent "
          "polling its workers every 0.1 s is not it (--monitor-interval 5: 116.7 against "
          "114.2 batches/s), nor the OMP_NUM_THREADS=1 torchrun sets: four alternated runs each "
          "on 2026-11-26, srun 112 batches/s median, srun with OMP_NUM_THREADS=1 108, with 2 "
          "111, torchrun 97, torchrun with OMP_NUM_THREADS=2 (kept by torchrun) 92 and 101. "
          "Next: a launch of one srun task per rank on Slurm, with RANK, "
          "LOCAL_RANK and the rest set from SLURM_PROCID and SLURM_LOCALID")


if __name__ == "__main__":
    print(table(measure(int(sys.argv[1]) if len(sys.argv) > 1 else 20)))
