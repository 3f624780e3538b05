"""A tiny DistributedDataParallel trial: CPU, gloo, one worker per slot started by torchrun.

The model fits ``y = 3x + 2`` from noisy samples; each worker trains on its own shard of the
data and DDP averages the gradients. The chief (rank 0) reports the loss averaged over all
workers, and saves one checkpoint at the end (or when asked to stop early).
"""

import logging
import pathlib

import determined as det
import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP


def make_data(num_samples, seed):
    gen = torch.Generator().manual_seed(seed)
    x = torch.rand(num_samples, 1, generator=gen) * 2 - 1
    y = 3 * x + 2 + 0.05 * torch.randn(num_samples, 1, generator=gen)
    return x, y


def mean_over_workers(value):
    t = torch.tensor([value], dtype=torch.float64)
    dist.all_reduce(t)
    return t.item() / dist.get_world_size()


def save(core_context, model, steps_completed, trial_id):
    metadata = {"steps_completed": steps_completed}
    with core_context.checkpoint.store_path(metadata) as (path, _):
        torch.save(model.module.state_dict(), path / "model.pt")
        path.joinpath("state").write_text(f"{steps_completed},{trial_id}")


def load(model, checkpoint_dir, trial_id):
    checkpoint_dir = pathlib.Path(checkpoint_dir)
    model.module.load_state_dict(torch.load(checkpoint_dir / "model.pt"))
    steps, ckpt_trial = (int(v) for v in checkpoint_dir.joinpath("state").read_text().split(","))
    # Continuing another trial keeps its weights but starts counting again.
    return steps if ckpt_trial == trial_id else 0


def main(core_context, hparams, latest_checkpoint, trial_id):
    rank, size = core_context.distributed.rank, core_context.distributed.size
    x, y = make_data(hparams["num_samples"], seed=0)
    x_train, y_train = x[rank::size], y[rank::size]  # this worker's shard
    x_val, y_val = make_data(64, seed=1)
    logging.info(f"worker {rank} of {size} trains on {len(x_train)} samples")

    torch.manual_seed(0)  # the same initial weights everywhere (DDP also broadcasts them)
    model = DDP(torch.nn.Linear(1, 1))
    optimizer = torch.optim.SGD(model.parameters(), lr=hparams["lr"])
    loss_fn = torch.nn.MSELoss()

    steps_completed = 0
    if latest_checkpoint is not None:
        with core_context.checkpoint.restore_path(latest_checkpoint) as path:
            steps_completed = load(model, path, trial_id)

    while steps_completed < hparams["steps"]:
        optimizer.zero_grad()
        loss = loss_fn(model(x_train), y_train)
        loss.backward()
        optimizer.step()
        steps_completed += 1
        if steps_completed % 10 == 0:
            train_loss = mean_over_workers(loss.item())
            if rank == 0:
                core_context.train.report_training_metrics(
                    steps_completed=steps_completed, metrics={"loss": train_loss}
                )
            # Collective: every worker asks, all get the chief's answer.
            if core_context.preempt.should_preempt():
                break

    with torch.no_grad():
        val_loss = loss_fn(model.module(x_val), y_val).item()
    if rank == 0:
        weight, bias = model.module.weight.item(), model.module.bias.item()
        logging.info(f"learned y = {weight:.3f}x + {bias:.3f}")
        core_context.train.report_validation_metrics(
            steps_completed=steps_completed, metrics={"validation_loss": val_loss}
        )
        save(core_context, model, steps_completed, trial_id)


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO, format=det.LOG_FORMAT)
    torch.set_num_threads(1)  # several workers share each node's few CPUs

    info = det.get_cluster_info()
    assert info is not None, "this example only runs on-cluster"

    # torchrun sets MASTER_ADDR/MASTER_PORT, RANK and WORLD_SIZE, which both calls read.
    dist.init_process_group("gloo")
    distributed = det.core.DistributedContext.from_torch_distributed()
    try:
        with det.core.init(distributed=distributed) as core_context:
            main(core_context, info.trial.hparams, info.latest_checkpoint, info.trial.trial_id)
    finally:
        dist.destroy_process_group()
