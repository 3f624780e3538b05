#!/usr/bin/env bash
# What CI cannot check (its machines have no GPU): on a machine with an NVIDIA GPU and torch
# built with CUDA, run on hpcdet's local backend
#   digits      the PyTorch digits example (examples/pytorch_digits) on the GPU
#   ddp-nccl    a 1-GPU DDP run through determined.launch.torch_distributed, backend NCCL
#   amp         the digits trial with context.experimental.use_amp(): float16 on the GPU
#   container   the digits trial in an image through Apptainer or Podman, GPU passed in
# and print one verdict line per check on stdout: PASS, FAIL or SKIP, with the reason (what
# it is doing goes to stderr).
#
# Exit codes: 0 every check passed or was skipped, 1 a check failed, 2 no NVIDIA GPU here,
# 3 no Python with torch (CUDA) and scikit-learn to run the trials with.
#
# Settings (environment):
#   GPU_CHECK_PYTHON   the trials' interpreter (default: python3 on PATH)
#   GPU_CHECK_HPCDET   the hpcdet command (default: hpcdet on PATH, else this checkout's .venv)
#   GPU_CHECK_TIMEOUT  seconds each check may take (default 900)
#   GPU_CHECK_IMAGE    the container check's image, with torch (CUDA) and scikit-learn;
#                      "none" skips it (default: docker://pytorch/pytorch:2.5.1-cuda12.4-cudnn9-runtime,
#                      which gets scikit-learn from PyPI in its startup hook)
#   GPU_CHECK_KEEP=1   keep the temporary state directory (its path is printed)
set -uo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
python=${GPU_CHECK_PYTHON:-python3}
check_timeout=${GPU_CHECK_TIMEOUT:-900}
image=${GPU_CHECK_IMAGE:-docker://pytorch/pytorch:2.5.1-cuda12.4-cudnn9-runtime}
checks=(digits ddp-nccl amp container)
failed=0 passed=0 skipped=0

verdict() {  # verdict PASS|FAIL|SKIP CHECK REASON
    printf '%-4s %-10s %s\n' "$1" "$2" "$3"
    case $1 in
        PASS) passed=$((passed + 1)) ;;
        FAIL) failed=$((failed + 1)) ;;
        *) skipped=$((skipped + 1)) ;;
    esac
}

skip_all() {  # skip_all EXIT_CODE REASON
    local check
    for check in "${checks[@]}"; do
        verdict SKIP "$check" "$2"
    done
    echo "gpu-check: nothing checked: $2" >&2
    exit "$1"
}

# The GPU first: without one, say so before anything else can fail for that reason.
if ! command -v nvidia-smi >/dev/null 2>&1; then
    skip_all 2 "no NVIDIA GPU: nvidia-smi is not installed (no NVIDIA driver here)"
fi
if ! gpus=$(nvidia-smi -L 2>&1); then
    skip_all 2 "no NVIDIA GPU: nvidia-smi -L failed: $(head -n 1 <<<"$gpus")"
fi
if ! grep -q '^GPU ' <<<"$gpus"; then
    skip_all 2 "no NVIDIA GPU: nvidia-smi -L lists none"
fi
echo "gpu-check: $(grep -c '^GPU ' <<<"$gpus") GPU(s): $(grep -m 1 '^GPU ' <<<"$gpus")" >&2

if ! torch_says=$("$python" -c 'import sklearn, torch
assert torch.cuda.is_available(), f"torch {torch.__version__} sees no GPU (built for CUDA {torch.version.cuda})"
print(f"torch {torch.__version__}, CUDA {torch.version.cuda}")' 2>&1); then
    skip_all 3 "$python cannot run the trials: $(tail -n 1 <<<"$torch_says")"
fi
python=$(command -v "$python")
echo "gpu-check: trials run with $python ($torch_says)" >&2

if [[ -n ${GPU_CHECK_HPCDET:-} ]]; then
    read -ra hpcdet <<<"$GPU_CHECK_HPCDET"
elif command -v hpcdet >/dev/null 2>&1; then
    hpcdet=(hpcdet)
elif [[ -x $repo/.venv/bin/hpcdet ]]; then
    hpcdet=("$repo/.venv/bin/hpcdet")
else
    skip_all 3 "no hpcdet command: put it on PATH or set GPU_CHECK_HPCDET"
fi

# A state directory of the check's own, as the tests isolate theirs (tests/support.py), on
# this machine whatever cluster `hpcdet cluster use` chose.
work=$(mktemp -d "${TMPDIR:-/tmp}/hpcdet-gpu-check.XXXXXX")
export HPCDET_HOME=$work/state HPCDET_CLUSTER=local
export HPCDET_CLUSTER_CONFIG=$work/cluster.yaml HPCDET_SITE_CONFIG=$work/site.yaml
unset HPCDET_CLUSTER_INFO
printf 'backend: local\n' >"$HPCDET_CLUSTER_CONFIG"
printf '{}\n' >"$HPCDET_SITE_CONFIG"

cleanup() {
    timeout 60 "${hpcdet[@]}" daemon stop >/dev/null 2>&1
    if [[ ${GPU_CHECK_KEEP:-} == 1 ]]; then
        echo "gpu-check: state kept in $work" >&2
    else
        rm -rf "$work"
    fi
}
trap cleanup EXIT

ctx=$work/digits
cp -r "$repo/examples/pytorch_digits" "$ctx"
rm -rf "$ctx/__pycache__"

cat >"$ctx/gpu_check_trials.py" <<'EOF'
"""The digits trial, held to the GPU (and to float16 under use_amp) by scripts/gpu-check.sh."""

import torch

import model_def


class GpuDigits(model_def.DigitsTrial):
    def __init__(self, context):
        super().__init__(context)
        device = next(self.model.parameters()).device
        if device.type != "cuda":
            raise RuntimeError(f"gpu-check: the model is on {device}, not on a GPU")
        print(f"gpu-check: training on {device} ({torch.cuda.get_device_name(device)})",
              flush=True)

    def train_batch(self, batch, epoch_idx, batch_idx):
        if not batch[0].is_cuda:
            raise RuntimeError(f"gpu-check: a batch is on {batch[0].device}, not on the GPU")
        return super().train_batch(batch, epoch_idx, batch_idx)


class AmpDigits(GpuDigits):
    def __init__(self, context):
        context.experimental.use_amp()
        super().__init__(context)
        self.dtypes = set()
        first = next(m for m in self.model.modules() if isinstance(m, torch.nn.Linear))
        first.register_forward_hook(lambda _m, _i, out: self.dtypes.add(out.dtype))

    def train_batch(self, batch, epoch_idx, batch_idx):
        self.dtypes.clear()
        metrics = super().train_batch(batch, epoch_idx, batch_idx)
        if self.dtypes != {torch.float16}:
            raise RuntimeError(f"gpu-check: the training forward pass ran in {self.dtypes}, "
                               "not float16")
        if batch_idx == 0:
            print("gpu-check: training forward pass in float16 under use_amp()", flush=True)
        return metrics
EOF

cat >"$ctx/ddp_nccl.py" <<'EOF'
"""One worker per GPU under torch_distributed: NCCL, an all_reduce, a report."""

import logging
import os

import torch
import torch.distributed as dist

import determined as det

logging.basicConfig(level=logging.INFO, format=det.LOG_FORMAT)
torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
dist.init_process_group("nccl")
backend = dist.get_backend()
if backend != "nccl":
    raise RuntimeError(f"gpu-check: torch.distributed's backend is {backend}, not nccl")
total = torch.ones(1, device="cuda")
dist.all_reduce(total)
distributed = det.core.DistributedContext.from_torch_distributed()
with det.core.init(distributed=distributed) as core_context:
    if core_context.distributed.rank == 0:
        core_context.train.report_validation_metrics(
            steps_completed=1, metrics={"world_size": dist.get_world_size(),
                                        "all_reduced": total.item()})
print(f"gpu-check: backend {backend}, world size {dist.get_world_size()}, all_reduce gave "
      f"{total.item():g} on {torch.cuda.get_device_name()}", flush=True)
dist.destroy_process_group()
EOF

# config NAME ENTRYPOINT METRIC [ENVIRONMENT]: an experiment of one 1-GPU trial, run with
# the checked Python unless ENVIRONMENT (a YAML mapping) says otherwise.
config() {
    local environment=${4:-"{python: \"$python\"}"}
    cat >"$ctx/$1.yaml" <<EOF
name: gpu-check-$1
entrypoint: $2
hyperparameters: {global_batch_size: 32, lr: 0.01, hidden: 64, dropout: 0.1}
resources: {slots_per_trial: 1}
searcher: {name: single, metric: $3, smaller_is_better: false, max_length: {epochs: 5}}
min_validation_period: {epochs: 1}
max_restarts: 0
environment: $environment
EOF
}

# run_check CHECK CONFIG MARKER [MIN_VALIDATION]: create, wait (with the timeout), then look
# for the trial's own proof in its log and, if given, the searcher metric's floor.
run_check() {
    local check=$1 cfg=$2 marker=$3 floor=${4:-} out id rc logs why best
    # The timeout covers the create too: it converts a registry image first.
    if ! out=$(timeout "$check_timeout" "${hpcdet[@]}" experiment create "$ctx/$cfg.yaml" "$ctx" 2>&1); then
        verdict FAIL "$check" "experiment create failed: $(tail -n 3 <<<"$out" | tr '\n' ' ')"
        return
    fi
    id=$(sed -n 's/^Created experiment \([0-9][0-9]*\).*/\1/p' <<<"$out" | head -n 1)
    if [[ -z $id ]]; then
        verdict FAIL "$check" "no experiment id in: $(tail -n 1 <<<"$out")"
        return
    fi
    timeout "$check_timeout" "${hpcdet[@]}" experiment wait "$id" --polling-interval 1 \
        >/dev/null 2>&1
    rc=$?
    logs=$(timeout 120 "${hpcdet[@]}" experiment logs "$id" 2>&1)
    if [[ $rc -eq 124 ]]; then
        timeout 60 "${hpcdet[@]}" experiment kill "$id" >/dev/null 2>&1
        verdict FAIL "$check" "not done after ${check_timeout}s (GPU_CHECK_TIMEOUT); experiment $id killed"
        return
    fi
    if [[ $rc -ne 0 ]]; then
        # The trial's own exception, not torchrun's ChildFailedError report that follows it.
        why=$(grep -E '[A-Za-z](Error|Exception)(: |$)' <<<"$logs" | grep -v ChildFailedError |
            head -n 1 | sed -E 's/^(\[[^]]*\] )+(\|\| )?(\[rank=[0-9]+\] )?//')
        [[ -n $why ]] || why=$(grep -v '^\s*$' <<<"$logs" | tail -n 2 | tr '\n' ' ')
        verdict FAIL "$check" "experiment $id did not complete: $why"
        return
    fi
    if ! grep -q "$marker" <<<"$logs"; then
        verdict FAIL "$check" "experiment $id completed, but its log lacks '$marker'"
        return
    fi
    best=$(timeout 120 "${hpcdet[@]}" experiment describe "$id" --json 2>/dev/null |
        "$python" -c 'import json, sys; print(json.load(sys.stdin)["trials"][0]["best_validation"])' 2>/dev/null)
    if [[ -n $floor ]] && ! "$python" -c 'import sys; sys.exit(not float(sys.argv[1]) >= float(sys.argv[2]))' "$best" "$floor" 2>/dev/null; then
        verdict FAIL "$check" "experiment $id: validation ${best:-missing}, below $floor"
        return
    fi
    verdict PASS "$check" "experiment $id: $(grep -m 1 -o "$marker.*" <<<"$logs" | head -c 120); validation $best"
}

config digits gpu_check_trials:GpuDigits validation_accuracy
run_check digits digits "gpu-check: training on cuda" 0.9

config ddp-nccl "python3 -m determined.launch.torch_distributed python3 ddp_nccl.py" world_size
run_check ddp-nccl ddp-nccl "gpu-check: backend nccl, world size 1"

config amp gpu_check_trials:AmpDigits validation_accuracy
run_check amp amp "gpu-check: training forward pass in float16" 0.85

runtime=
for candidate in apptainer podman; do
    if command -v "$candidate" >/dev/null 2>&1; then
        runtime=$candidate
        break
    fi
done
if [[ $image == none ]]; then
    verdict SKIP container "GPU_CHECK_IMAGE=none"
elif [[ -z $runtime ]]; then
    verdict SKIP container "neither apptainer nor podman is installed"
else
    printf 'backend: local\ncontainer_runtime: %s\n' "$runtime" >"$HPCDET_CLUSTER_CONFIG"
    # The image's own python3 runs the trial; scikit-learn comes from PyPI if it lacks it.
    printf '%s\n' 'python3 -c "import sklearn" 2>/dev/null || python3 -m pip install -q --user scikit-learn' \
        >"$ctx/startup-hook.sh"
    config container gpu_check_trials:GpuDigits validation_accuracy "{image: \"$image\"}"
    echo "gpu-check: container check runs $image in $runtime" >&2
    run_check container container "gpu-check: training on cuda" 0.9
fi

echo "gpu-check: $passed passed, $failed failed, $skipped skipped"
[[ $failed -eq 0 ]]
