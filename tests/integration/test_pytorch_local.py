"""The PyTorch API end to end on the local backend: the digits trial class, the Trainer, and
a pause that resumes bitwise."""

from __future__ import annotations

import json
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


def test_a_warm_start_begins_with_the_source_trials_weights(
    local_hpcdet: Hpcdet, tmp_path: Path
) -> None:
    """searcher.source_trial_id alone: the trial starts from that trial's latest checkpoint,
    with its weights exactly (its validation before training equals the source's last, to the
    bit) and its own batch count from 0; a source that cannot be used is refused at create."""
    require_modules("torch", "sklearn")
    h = local_hpcdet
    pytorch_scenarios.trained(h, tmp_path, "const.yaml")
    source = h.describe(1)["trials"][0]
    ctx = tmp_path / "ctx"
    base = (ctx / "const.yaml").read_text().replace("epochs: 5", "epochs: 1")

    def config(name: str, searcher_keys: str) -> Path:
        cfg = ctx / f"{name}.yaml"
        cfg.write_text(base.replace("  smaller_is_better: false\n",
                                    f"  smaller_is_better: false\n{searcher_keys}")
                       + "perform_initial_validation: true\n")
        return cfg

    warm = h.create(config("warm", f"  source_trial_id: {source['id']}\n"), ctx)
    d = h.wait_state(warm, {"COMPLETED", "ERROR"}, timeout=300)
    assert d["experiment"]["state"] == "COMPLETED", d
    # The resolved checkpoint is stored with the config, as Determined's continued trials have.
    config_text = h.run("experiment", "config", str(warm)).stdout
    assert f"source_checkpoint_uuid: {source['latest_checkpoint']}" in config_text, config_text
    first, *rest = pytorch_scenarios.validations(h, d["trials"][0]["id"])
    assert first["steps_completed"] == 0 and [v["steps_completed"] for v in rest] == [45]
    last = pytorch_scenarios.validations(h, source["id"])[-1]["metrics"]
    assert first["metrics"]["validation_loss"] == last["validation_loss"], (first, last)
    assert first["metrics"]["validation_accuracy"] == last["validation_accuracy"]

    for keys, said in [
        ("  source_trial_id: 99\n", "searcher.source_trial_id: there is no trial 99"),
        ("  source_checkpoint_uuid: 0b4f2f0e-0000-4000-8000-000000000000\n",
         "searcher.source_checkpoint_uuid: checkpoint 0b4f2f0e-0000-4000-8000-000000000000 "
         "not found"),
    ]:
        p = h.run("experiment", "create", str(config("bad", keys)), str(ctx), check=False)
        assert p.returncode != 0 and said in p.stderr, p.stderr
    listed = h.run("experiment", "list", "--json").stdout
    assert len(json.loads(listed)) == 2, listed  # nothing was created for them
