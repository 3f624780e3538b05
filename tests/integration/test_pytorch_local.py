"""The PyTorch API end to end on the local backend: the digits trial class, the Trainer, and
a pause that resumes bitwise."""

from __future__ import annotations

from pathlib import Path

from tests import pytorch_scenarios
from tests.support import Hpcdet, require_modules


def test_digits_trial_class_trains(local_hpcdet: Hpcdet, tmp_path: Path) -> None:
    require_modules("torch", "sklearn")
    pytorch_scenarios.trained(local_hpcdet, tmp_path, "const.yaml")


def test_pausing_mid_run_resumes_at_the_same_batch_bitwise(
    local_hpcdet: Hpcdet, tmp_path: Path
) -> None:
    require_modules("torch", "sklearn")
    pytorch_scenarios.pause_resumes_bitwise(local_hpcdet, tmp_path)
