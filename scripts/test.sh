#!/usr/bin/env bash
# The test command: installs what the tests need (Python packages, and as root the two-node
# Slurm cluster and the container runtimes), runs the linters and the whole suite, Slurm and
# real-runtime tests included.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

phase() { echo "[test.sh] $(date -u +%H:%M:%S) (+${SECONDS}s) $*"; }
phase "installing Python packages"
bash scripts/setup-python.sh
# torch and scikit-learn (its digits are the PyTorch API's data) for the trials of the DDP and
# PyTorch API tests, which run in this venv. 2.13.0 is the CPU build these machines keep on
# disk; elsewhere pip would fetch a multi-GB CUDA build, so a failure there only skips those
# tests (under CI=true they fail).
if [[ ${HPCDET_TEST_TORCH:-1} == 1 ]] \
    && .venv/bin/python -c 'import sys; sys.exit(sys.version_info[:2] != (3, 11))'; then
    .venv/bin/python -m pip install -q torch==2.13.0 scikit-learn \
        || echo "torch 2.13.0 not installable here: the torch tests will be skipped"
fi
if [[ $(id -u) -eq 0 ]]; then
    phase "starting the Slurm test cluster"
    bash scripts/slurm-test-cluster.sh start
    # The job-queue tests run hpcdet as users they create, from a venv of Debian's python3
    # (the test venv's interpreter may sit in root's home, which other users cannot read).
    if ! /usr/bin/python3 -c 'import ensurepip, venv' 2>/dev/null; then
        apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
            python3 python3-venv >/dev/null
    fi
    # The web UI's tests drive Debian's Chromium through Playwright (whose own browser
    # download cannot reach its servers from these machines).
    if [[ ! -x /usr/bin/chromium ]]; then
        phase "installing Debian's chromium for the web UI's tests"
        apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
            chromium >/dev/null
    fi
    # The remote tests run Debian's OpenSSH server as the login node (and as a bastion), one
    # of them with a TOTP second factor by Debian's pam_oath.
    if [[ ! -x /usr/sbin/sshd ]] || ! command -v oathtool >/dev/null \
        || ! dpkg -s libpam-oath >/dev/null 2>&1; then
        phase "installing Debian's OpenSSH server and pam_oath for the remote tests"
        apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
            openssh-server libpam-oath oathtool >/dev/null
    fi
    # Podman, Docker and Apptainer and their base image (about 2 minutes on a fresh machine,
    # a second once made), while the linters run; the container tests wait for it.
    phase "starting the container runtimes (log: \$TMPDIR/hpcdet-container-runtimes.log)"
    runtimes_log=${TMPDIR:-/tmp}/hpcdet-container-runtimes.log
    bash scripts/container-runtimes.sh start >"$runtimes_log" 2>&1 &
    runtimes_pid=$!
fi
export PATH="$PWD/.venv/bin:$PATH"
phase "lint and types"
ruff check .
mypy hpcdet cli launchers
mypy --explicit-package-bases bench/*.py
python scripts/lint_imports.py  # the import contracts of pyproject.toml
# A test that hangs fails after --timeout s (the slowest take about 70 s and 160 s), so no hang
# can outlast CI's time; a Slurm run stops after a few failures, which a cluster that cannot run
# jobs would make of every test.
status=0
if [[ -n ${runtimes_pid:-} ]]; then
    # A runtime that failed to start fails its tests (under CI=true) with the status below.
    wait "$runtimes_pid" || phase "the container runtimes did not start:"
    cat "$runtimes_log"
fi
# Two phases of two tracks each, to keep the suite within 45 minutes on 2 cores. The unit and
# integration tests keep the CPU busy but never touch Slurm, so the Slurm tests that need the
# cluster alone (they fill, break or reconfigure it, and mostly wait) run beside them. Then the
# other Slurm tests share the cluster two at a time, and the benchmarks' smoke run (a few
# seconds' size each, so none can rot: they fail on errors, not figures) shares it with them.
export HPCDET_TEST_INCIDENTS=${TMPDIR:-/tmp}/hpcdet-slurm-incidents.$$
logs=$(mktemp -d)
declare -A pids
beside() {  # beside NAME COMMAND...: runs it in the background, its output kept for `joined`
    local name=$1
    shift
    phase "$name, beside (log: $logs/$name.log)"
    "$@" >"$logs/$name.log" 2>&1 &
    pids[$name]=$!
}
joined() {  # joined NAME: waits for it, prints its output, returns its status
    local rc=0
    wait "${pids[$1]}" || rc=$?
    phase "$1 ended with status $rc:"
    cat "$logs/$1.log"
    return "$rc"
}
slurm_status=0
beside slurm-exclusive python -m pytest -q --durations=5 --timeout 600 --maxfail 4 -m exclusive \
    tests/cluster "$@"
phase "unit and integration tests"
python -m pytest -q -n 2 --durations=5 --timeout 300 tests/unit tests/fuzz tests/integration "$@" || status=$?
joined slurm-exclusive || slurm_status=$?
beside bench-smoke bench/run --smoke
phase "Slurm tests, two at a time"
python -m pytest -q -n 2 --durations=10 --timeout 600 --maxfail 8 -m "not exclusive" tests/cluster "$@" || slurm_status=$?
joined bench-smoke || status=$?
rm -rf "$logs"
# Last, where a truncated log still shows it: what went wrong with the cluster itself.
if [[ -s $HPCDET_TEST_INCIDENTS ]]; then
    phase "the Slurm test cluster was found down and restarted during the run:"
    cat "$HPCDET_TEST_INCIDENTS"
fi
if ((slurm_status != 0)); then
    phase "Slurm tests failed; the cluster now:"
    sinfo -R 2>&1 || true
    bash scripts/slurm-test-cluster.sh status 2>&1 || true
    bash scripts/slurm-test-cluster.sh logs 2>&1 || true
    status=$slurm_status
fi
rm -f "$HPCDET_TEST_INCIDENTS"
if [[ -n ${runtimes_pid:-} ]]; then
    bash scripts/container-runtimes.sh stop || true  # dockerd, by its pid file
fi
phase "done"
exit "$status"
