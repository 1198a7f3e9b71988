#!/bin/sh
# The device check of issue 27: ONE prepared command for a lent GPU machine (see the `device` tool's README; its
# image has nvcc, PyTorch, Triton and pybind11 under python3, nothing can be installed): unpacks the bundle
# (scripts/bundle.sh), builds kernelfoundry._measure for that python3 (kf setup-python), evaluates each GPU task
# kind with an identical candidate, a faster one and two cheats, and writes every verdict JSON, the logs and
# summary.{txt,json} to $OUT (default ./device-check-out). Exit 0 when every case met its expectation.
#
#   scripts/device-check.sh [--dry-run] [--bundle TARBALL]
#
# Here: scripts/bundle.sh (dist/ is git-ignored), then the device tool's run with carry ["dist"] and the command
# `scripts/device-check.sh` ($OUT is the tool's output folder), timeout 540 s.
#
# GPU cases (each `kf run … --json`; expectation in brackets):
#   cuda_softmax (native CUDA SDK)       identical.cu [correct|noisy], fast.cu [speedup > 1], side_stream.cu
#                                        [correct|noisy; timed with the work: whole-device sync], output_cache.cu
#                                        [output_changed_under_timing: TimedData's rotating inputs]
#   cuda_bias_relu_torch (CUDA torch     identical.cu [interval covers 1 or noisy], fast.cu [speedup > 1],
#     extension, the KernelBench kind)   side_stream.cu [no faster than fast.cu × 1.25], output_cache.cu
#                                        [output_changed_under_timing]
#   triton_bias_relu (Triton)            the task's own @triton.jit block [speedup > 1]
#   identical repeats                    cuda_bias_relu_torch identical.cu twice more (the identical spread)
#   ncu                                  cuda_softmax fast.cu with --profile (trace_results: ncu; 3 launches,
#                                        --clock-control none)
#   l2_flush                             cuda_bias_relu_torch fast.cu with eval_config.timing.l2_flush: true
# --dry-run: the same flow on this machine with CPU tasks (no GPU needed): bundle unpacked, setup-python for
#   /usr/bin/python3, omp_reduction (native) identical/fast, bias_relu (the README example, a torch extension)
#   identical/fast, and `kf validate` of the three GPU tasks (their tests skip without a device).
# Time: sized for 8 minutes on the lent machine: every candidate's build runs first, all at once (batch runs whose
# verdicts are discarded), then each case runs alone with its build cached (KF_TIMING_BUDGET_S=6, two timed
# processes); every step runs under `timeout`.
set -u
root=$(cd "$(dirname "$0")/.." && pwd)
dry=no
bundle=
while [ $# -gt 0 ]; do
  case "$1" in
    --dry-run) dry=yes;;
    --bundle) bundle=$2; shift;;
    *) echo "usage: $0 [--dry-run] [--bundle TARBALL]" >&2; exit 2;;
  esac
  shift
done
out=${OUT:-$PWD/device-check-out}
mkdir -p "$out"
out=$(cd "$out" && pwd)
[ -n "$bundle" ] || bundle=$(ls -t "$root"/dist/kf-*-linux-x86_64.tar.gz 2>/dev/null | head -1)
[ -f "$bundle" ] || { echo "device-check: no bundle (run scripts/bundle.sh first, or --bundle)" >&2; exit 2; }
started=$(date +%s)
work=$(mktemp -d "${TMPDIR:-/tmp}/kf-device-check.XXXXXX")
chmod 755 "$work"  # the sandbox user reads the unpacked bundle (mktemp: 0700)
log() { echo "[$(( $(date +%s) - started ))s] $*" | tee -a "$out/progress.log"; }

# 1. The bundle, unpacked outside the repository.
tar -C "$work" -xzf "$bundle"
b=$(echo "$work"/kf-*-linux-x86_64)
kf=$b/bin/kf
share=$b/share/kernelfoundry
log "bundle $(basename "$bundle") unpacked in $work"
ldd "$kf" >"$out/ldd.txt" 2>&1

# 2. The task interpreter and its compiled module.
if [ "$dry" = yes ]; then py=/usr/bin/python3; else py=$(command -v python3); fi
if ! "$kf" setup-python --python "$py" >"$out/setup-python.log" 2>&1; then
  log "kf setup-python FAILED (see setup-python.log)"; cat "$out/setup-python.log"; exit 1
fi
log "kf setup-python: $(tail -1 "$out/setup-python.log")"
export KF_PYTHON="$py" LD_LIBRARY_PATH="${LD_LIBRARY_PATH:-}"
export KF_CACHE_DIR="$work/cache" KF_WARM_START=off  # the host side's modules are built for the bundle's Python
export KF_TIMING_BUDGET_S=${KF_TIMING_BUDGET_S:-6} KF_TIMING_PROCESSES=${KF_TIMING_PROCESSES:-2}
[ -d /usr/local/cuda/bin ] && export PATH="/usr/local/cuda/bin:$PATH"
{ nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv 2>&1 || true
  "$py" -c 'import sys, torch; print("python", sys.version.split()[0], "torch", torch.__version__, "cuda", torch.version.cuda, torch.cuda.is_available())' 2>&1 || true
  "$py" -c 'import triton; print("triton", triton.__version__)' 2>&1 || true
  nvcc --version 2>&1 | tail -1 || true; } >"$out/machine.txt"

# 3. The cases: NAME TIMEOUT_S EXPECT TASK [kf run arguments…]
tasks=$share/examples/tasks
cands=$share/examples/candidates
results=$out/cases.tsv
: >"$results"
case_run() {
  name=$1; limit=$2; expect=$3; task=$4; shift 4
  t0=$(date +%s)
  timeout "$limit" "$kf" run "$tasks/$task" "$@" --no-store --no-verdict-cache --json "$out/$name.json" \
    >"$out/$name.log" 2>&1
  rc=$?
  printf '%s\t%s\t%s\t%s\t%s\n' "$name" "$expect" "$rc" "$(( $(date +%s) - t0 ))" "$task" >>"$results"
  log "$name: exit $rc in $(( $(date +%s) - t0 )) s ($(grep '^status:' "$out/$name.log" | head -1 | cut -c1-150))"
}
validate() {
  if "$kf" validate "$tasks/$1" >"$out/validate-$1.log" 2>&1; then r=0; else r=$?; fi
  printf '%s\t%s\t%s\t%s\t%s\n' "validate-$1" "valid" "$r" 0 "$1" >>"$results"
  log "kf validate $1: exit $r"
}
variant_tasks() {  # copies of two tasks with one config change each
  # cuda_bias_relu_torch with eval_config.timing.l2_flush: true (config.yaml ends inside eval_config)
  cp -r "$tasks/cuda_bias_relu_torch" "$tasks/cuda_bias_relu_torch_l2flush"
  printf '  timing:\n    l2_flush: true\n' >>"$tasks/cuda_bias_relu_torch_l2flush/config.yaml"
  # cuda_softmax with ncu limited to a few launches and the clocks left alone (the device README's advice)
  cp -r "$tasks/cuda_softmax" "$tasks/cuda_softmax_ncu"
  printf 'profiler_settings:\n  ncu:\n    launch_count: 3\n    extra_args: ["--clock-control", "none"]\n' \
    >>"$tasks/cuda_softmax_ncu/config.yaml"
}

# Builds first, all at once: one `kf run --candidates … -j N` per task (builds overlap, timing cut to the minimum
# and discarded), concurrently, so that the cases below find their builds in KF_CACHE_DIR and spend the machine's
# time on timing. Their verdicts are not used.
warm() {
  task=$1; shift
  KF_TIMING_BUDGET_S=0.5 KF_TIMING_PROCESSES=1 timeout 300 "$kf" run "$tasks/$task" --candidates "$@" -j 4 \
    --no-store --no-verdict-cache >"$out/warm-$task.log" 2>&1
  log "warm builds $task: exit $?"
}
if [ "$dry" = yes ]; then
  warm omp_reduction "$cands/omp_reduction/fast.cpp" &
  warm bias_relu "$cands/bias_relu/identical.cpp" "$cands/bias_relu/fast.cpp" &
  wait
else
  variant_tasks
  warm cuda_softmax "$cands"/cuda_softmax/identical.cu "$cands"/cuda_softmax/fast.cu \
    "$cands"/cuda_softmax/side_stream.cu "$cands"/cuda_softmax/output_cache.cu &
  warm cuda_bias_relu_torch "$cands"/cuda_bias_relu_torch/identical.cu "$cands"/cuda_bias_relu_torch/fast.cu \
    "$cands"/cuda_bias_relu_torch/side_stream.cu "$cands"/cuda_bias_relu_torch/output_cache.cu &
  warm cuda_softmax_ncu "$cands/cuda_softmax/fast.cu" &
  warm cuda_bias_relu_torch_l2flush "$cands/cuda_bias_relu_torch/fast.cu" &
  wait
fi

if [ "$dry" = yes ]; then
  case_run omp_identical 300 identical omp_reduction
  case_run omp_fast 300 faster omp_reduction --candidate "$cands/omp_reduction/fast.cpp"
  case_run bias_relu_identical 600 identical bias_relu --candidate "$cands/bias_relu/identical.cpp"
  case_run bias_relu_fast 600 faster bias_relu --candidate "$cands/bias_relu/fast.cpp"  # the README example
  for t in cuda_softmax cuda_bias_relu_torch triton_bias_relu; do validate "$t"; done
else
  case_run softmax_identical 150 identical cuda_softmax --candidate "$cands/cuda_softmax/identical.cu"
  case_run softmax_fast 150 faster cuda_softmax --candidate "$cands/cuda_softmax/fast.cu"
  case_run softmax_side_stream 150 honest cuda_softmax --candidate "$cands/cuda_softmax/side_stream.cu"
  case_run softmax_output_cache 150 output_changed_under_timing cuda_softmax --candidate "$cands/cuda_softmax/output_cache.cu"
  case_run torch_identical 200 identical cuda_bias_relu_torch --candidate "$cands/cuda_bias_relu_torch/identical.cu"
  case_run torch_fast 150 faster cuda_bias_relu_torch --candidate "$cands/cuda_bias_relu_torch/fast.cu"
  case_run torch_side_stream 150 honest cuda_bias_relu_torch --candidate "$cands/cuda_bias_relu_torch/side_stream.cu"
  case_run torch_output_cache 150 output_changed_under_timing cuda_bias_relu_torch --candidate "$cands/cuda_bias_relu_torch/output_cache.cu"
  case_run triton_block 120 faster triton_bias_relu
  case_run torch_identical_2 60 identical cuda_bias_relu_torch --candidate "$cands/cuda_bias_relu_torch/identical.cu"
  case_run torch_identical_3 60 identical cuda_bias_relu_torch --candidate "$cands/cuda_bias_relu_torch/identical.cu"
  case_run softmax_fast_ncu 150 profiled cuda_softmax_ncu --candidate "$cands/cuda_softmax/fast.cu" --profile
  case_run torch_fast_l2flush 120 faster cuda_bias_relu_torch_l2flush --candidate "$cands/cuda_bias_relu_torch/fast.cu"
fi

# 4. The summary (the verdicts against the expectations).
"$py" "$root/scripts/device_check_summary.py" "$out" "$results" "$dry"
rc=$?
log "done: summary in $out/summary.txt (exit $rc)"
rm -rf "$work"
exit $rc
