"""Stage 3: the searcher decides how long to train; the hyperparameter sets the increment."""

import logging
import pathlib
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
    x = 0
    batch = 0
    if latest_checkpoint is not None:
        with core_context.checkpoint.restore_path(latest_checkpoint) as path:
            x, batch = load_state(trial_id, path)

    steps_completed = batch
    last_checkpoint_batch = None
    for op in core_context.searcher.operations():
        # op.length is absolute: train until the total reaches it.
        while batch < op.length:
            x += increment_by
            steps_completed = batch + 1
            time.sleep(0.1)
            logging.info(f"x is now {x}")
            if steps_completed % 10 == 0:
                core_context.train.report_training_metrics(
                    steps_completed=steps_completed, metrics={"x": x}
                )
                op.report_progress(steps_completed)
                checkpoint(core_context, x, steps_completed, trial_id)
                last_checkpoint_batch = steps_completed
                if core_context.preempt.should_preempt():
                    return
            batch += 1
        core_context.train.report_validation_metrics(
            steps_completed=steps_completed, metrics={"x": x}
        )
        op.report_completed(x)

    if last_checkpoint_batch != steps_completed:
        checkpoint(core_context, x, steps_completed, trial_id)


if __name__ == "__main__":
    logging.basicConfig(level=logging.DEBUG, format=det.LOG_FORMAT)

    info = det.get_cluster_info()
    assert info is not None, "this example only runs on-cluster"

    with det.core.init() as core_context:
        main(
            core_context=core_context,
            latest_checkpoint=info.latest_checkpoint,
            trial_id=info.trial.trial_id,
            increment_by=info.trial.hparams["increment_by"],
        )
