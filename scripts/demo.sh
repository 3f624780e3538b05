#!/usr/bin/env bash
# The main job: installs hpcdet and runs the Core API tutorial's checkpointing stage as a real
# experiment, on the local two-node Slurm cluster when run as root, else on the local backend.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

HPCDET_EXTRAS= bash scripts/setup-python.sh
export PATH="$PWD/.venv/bin:$PATH"
if [[ $(id -u) -eq 0 ]]; then
    bash scripts/slurm-test-cluster.sh start
fi
hpcdet experiment create examples/core_api/2_checkpoints.yaml examples/core_api --follow
id=$(hpcdet experiment list --csv | tail -n 1 | cut -d, -f1)
hpcdet experiment describe "$id"
hpcdet checkpoint list "$id"
