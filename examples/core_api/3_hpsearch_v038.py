"""Stage 3 in Determined 0.38's style: the script decides the length; ASHA stops trials early.

The searcher reads `x` and `batches` from each validation report; a trial it stops sees
should_preempt() turn True, checkpoints and exits.
"""

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
    return (x, steps_completed) if ckpt_trial_id == trial_id else (x, 0)


def main(core_context, latest_checkpoint, trial_id, increment_by, max_batches=100):
    x = 0
    starting_batch = 0
    if latest_checkpoint is not None:
        with core_context.checkpoint.restore_path(latest_checkpoint) as path:
            x, starting_batch = load_state(trial_id, path)

    for batch in range(starting_batch, max_batches):
        x += increment_by
        steps_completed = batch + 1
        time.sleep(0.1)
        logging.info(f"x is now {x}")
        if steps_completed % 10 == 0:
            core_context.train.report_training_metrics(
                steps_completed=steps_completed, metrics={"x": x}
            )
            core_context.train.report_validation_metrics(
                steps_completed=steps_completed, metrics={"x": x, "batches": steps_completed}
            )
            core_context.train.report_progress(steps_completed / max_batches)
            with core_context.checkpoint.store_path({"steps_completed": steps_completed}) as (
                path,
                _,
            ):
                save_state(x, steps_completed, trial_id, path)
            if core_context.preempt.should_preempt():
                return


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
