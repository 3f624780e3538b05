"""The digits trial driven by the Trainer (Determined 0.38's way), on the cluster or off it.

    python3 trainer.py            # off the cluster: trains locally, checkpoints in ~/.local
    hpcdet e create trainer.yaml . -f
"""

import logging

import determined as det
from determined import pytorch
from model_def import DigitsTrial

HPARAMS = {"global_batch_size": 32, "lr": 0.01, "hidden": 64, "dropout": 0.1}


def main() -> None:
    info = det.get_cluster_info()
    hparams = info.trial.hparams if info else HPARAMS
    with pytorch.init(hparams=hparams) as train_context:
        trial = DigitsTrial(train_context)
        trainer = pytorch.Trainer(trial, train_context)
        trainer.fit(
            max_length=pytorch.Epoch(5),
            validation_period=pytorch.Epoch(1),
            latest_checkpoint=info.latest_checkpoint if info else None,
        )


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO, format=det.LOG_FORMAT)
    main()
