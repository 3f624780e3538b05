#!/usr/bin/env bash
# The test command: installs what the tests need (Python packages, and as root the two-node
# Slurm cluster), runs the linters and the whole suite, Slurm tests included.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

bash scripts/setup-python.sh
if [[ $(id -u) -eq 0 ]]; then
    bash scripts/slurm-test-cluster.sh start
fi
export PATH="$PWD/.venv/bin:$PATH"
ruff check .
mypy hpcdet cli launchers
python -m pytest -q "$@"
