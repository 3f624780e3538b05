#!/usr/bin/env bash
# Creates .venv with hpcdet installed (editable) and its test tools. Sourced by test.sh and
# demo.sh; prints the venv's python on the last line.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

apt_install() {
    if [[ $(id -u) -eq 0 ]] && command -v apt-get >/dev/null; then
        apt-get update -qq
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" >/dev/null
    else
        echo "need: $* (install them, or run as root)" >&2
        exit 1
    fi
}

PY=${PYTHON:-python3}
command -v "$PY" >/dev/null || apt_install python3 python3-venv python3-pip
if [[ ! -x .venv/bin/python ]]; then
    "$PY" -m venv .venv 2>/dev/null || { apt_install python3-venv; rm -rf .venv; "$PY" -m venv .venv; }
fi
.venv/bin/python -m pip install -q --upgrade pip >/dev/null
extras=${HPCDET_EXTRAS-test}
.venv/bin/python -m pip install -q -e ".${extras:+[$extras]}"
