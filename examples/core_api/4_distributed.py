"""Stage 4: one worker process per slot, kept in step by the DistributedContext.

The entrypoint runs this script once per node as ``4_distributed.py launcher``; the launcher
starts one worker per slot of its node, each as ``4_distributed.py worker RANK LOCAL_RANK``
under wrap_rank, so the trial log can be filtered by rank. Every worker adds up all workers'
``increment_by`` (an allgather); only the chief (rank 0) reports and checkpoints; every worker
asks should_preempt() at the same steps, and they all stop together when it says so.
"""

import logging
import pathlib
import subprocess
import sys
import time

import determined as det


def save_state(x, steps_completed, trial_id, checkpoint_directory):
    with checkpoint_directory.joinpath("state").open("w") as f:
        f.write(f"{x},{steps_completed},{trial_id}")


def load_state(trial_id, checkpoint_directory):
    checkpoint_directory = pathlib.Path(checkpoint_directory)
    with checkpoint_directory.joinpath("state").open("r") as f:
        x, steps_completed, ckpt_trial_id = [int(field) for field in f.read().split(",")]
    if ckpt_trial_id == trial_id:
        return x, steps_completed
    return x, 0


def checkpoint(core_context, x, steps_completed, trial_id):
    with core_context.checkpoint.store_path({"steps_completed": steps_completed}) as (path, _):
        save_state(x, steps_completed, trial_id, path)


def main(core_context, latest_checkpoint, trial_id, increment_by):
    is_chief = core_context.distributed.rank == 0
    x = 0
    batch = 0
    if latest_checkpoint is not None:
        # Every worker restores, so all of them start from the same x.
        with core_context.checkpoint.restore_path(latest_checkpoint) as path:
            x, batch = load_state(trial_id, path)

    steps_completed = batch
    last_checkpoint_batch = None
    # Every worker iterates the operations; the chief's are broadcast to the others.
    for op in core_context.searcher.operations():
        while batch < op.length:
            # A "distributed" step: each worker contributes its own increment.
            x += sum(core_context.distributed.allgather(increment_by))
            steps_completed = batch + 1
            time.sleep(0.1)
            if is_chief:
                logging.info(f"x is now {x}")
            if steps_completed % 10 == 0:
                if is_chief:
                    core_context.train.report_training_metrics(
                        steps_completed=steps_completed, metrics={"x": x}
                    )
                    op.report_progress(steps_completed)
                    checkpoint(core_context, x, steps_completed, trial_id)
                last_checkpoint_batch = steps_completed
                # Collective: all workers must ask, and they all get the chief's answer.
                if core_context.preempt.should_preempt():
                    return
            batch += 1
        if is_chief:
            core_context.train.report_validation_metrics(
                steps_completed=steps_completed, metrics={"x": x}
            )
            op.report_completed(x)

    if is_chief and last_checkpoint_batch != steps_completed:
        checkpoint(core_context, x, steps_completed, trial_id)


def launcher_main(slots_per_node, cross_rank):
    """Start one worker per slot of this node; the first failure stops the others."""
    workers = []
    for local_rank in range(slots_per_node):
        rank = cross_rank * slots_per_node + local_rank
        cmd = [
            "python3", "-m", "determined.launch.wrap_rank", str(rank), "--",
            "python3", __file__, "worker", str(rank), str(local_rank),
        ]
        workers.append(subprocess.Popen(cmd))

    # Polling keeps this loop free of threads; 0.1 s is quick enough to notice a crash.
    exit_code = 0
    running = list(workers)
    while running:
        for proc in list(running):
            code = proc.poll()
            if code is None:
                continue
            running.remove(proc)
            if code != 0 and exit_code == 0:
                # The others would block forever in their next collective: stop them now.
                # SIGTERM, not SIGKILL: wrap_rank passes it on to the worker under it.
                exit_code = 128 - code if code < 0 else code
                for other in running:
                    other.terminate()
        time.sleep(0.1)
    return exit_code


def worker_main(slots_per_node, num_nodes, cross_rank, chief_ip, rank, local_rank, info):
    # Without a framework that assigns ranks, the layout comes from the ClusterInfo.
    distributed = det.core.DistributedContext(
        rank=rank,
        size=num_nodes * slots_per_node,
        local_rank=local_rank,
        local_size=slots_per_node,
        cross_rank=cross_rank,
        cross_size=num_nodes,
        chief_ip=chief_ip,
    )
    with det.core.init(distributed=distributed) as core_context:
        main(
            core_context=core_context,
            latest_checkpoint=info.latest_checkpoint,
            trial_id=info.trial.trial_id,
            increment_by=info.trial.hparams["increment_by"],
        )


if __name__ == "__main__":
    logging.basicConfig(level=logging.DEBUG, format=det.LOG_FORMAT)

    info = det.get_cluster_info()
    assert info is not None, "this example only runs on-cluster"
    slots_per_node = len(info.slot_ids)
    num_nodes = len(info.container_addrs)
    cross_rank = info.container_rank
    chief_ip = info.container_addrs[0]

    # The same script is the per-node launcher and each of the workers.
    mode = sys.argv[1] if len(sys.argv) > 1 else ""
    if mode == "launcher":
        sys.exit(launcher_main(slots_per_node, cross_rank))
    if mode == "worker":
        logging.info("worker starting")
        rank, local_rank = int(sys.argv[2]), int(sys.argv[3])
        worker_main(slots_per_node, num_nodes, cross_rank, chief_ip, rank, local_rank, info)
        sys.exit(0)
    raise ValueError(f"usage: {sys.argv[0]} launcher | worker RANK LOCAL_RANK (got {mode!r})")
