#!/bin/sh
# The device check of issue 27: ONE prepared command for a lent GPU machine (see the `device` tool's README; its
# image has nvcc, ncu, PyTorch, Triton and pybind11 under python3, nothing can be installed): unpacks the bundle
# (scripts/bundle.sh), builds kernelfoundry._measure for that python3 (kf setup-python), imports a KernelBench
# problem as a CUDA task (kf import-kernelbench --gpu), evaluates each GPU task kind with an identical candidate, a
# faster one and two cheats, and writes the summary to $OUT (default ./device-check-out). Exit 0 when every case
# met its expectation.
#
#   scripts/device-check.sh [--dry-run] [--bundle TARBALL]
#   scripts/device-check.sh --stage      copies the KernelBench problem the check imports into dist/kernelbench/
#                                        (../shared does not travel to the device machine; dist/ is git-ignored)
#
# Here: scripts/bundle.sh && scripts/device-check.sh --stage, then the device tool's run with carry ["dist"], the
# command `scripts/device-check.sh` ($OUT is the tool's output folder) and timeout_s 570.
#
# What comes back: the device tool returns at most 8 files from $OUT, so $OUT holds only summary.txt,
# summary.json, progress.log and device-check.tgz (every verdict JSON and log, machine.txt, ldd.txt). The summary and
# the archive are rewritten after every case, so a run cut short still returns what it did.
# Time: KF_CHECK_BUDGET_S (default 500 s; 900 s with --dry-run) for the whole check, from its start: a case gets
# at most the time left, and a case with less than 20 s left is not run (exit -1 in the table). The cases run in
# order of importance.
#
# GPU cases (each `kf run … --json`; expectation in brackets), in order:
#   cuda_bias_relu_torch (CUDA torch     identical.cu [correct|noisy] (first: when it is `skipped`, CUDA is not
#     extension, pytest)                 usable in the sandbox and the check stops), fast.cu [speedup > 1],
#                                        side_stream.cu [no faster than fast.cu × 1.25: whole-device sync],
#                                        output_cache.cu [output_changed_under_timing]
#   cuda_softmax (native CUDA SDK)       identical.cu, fast.cu, side_stream.cu, output_cache.cu (the same)
#   kb_l1_88_gelu_gpu (kf import-        the import's own starting point (calls the PyTorch Model) [identical],
#     kernelbench --gpu of KernelBench   kernelbench_gpu/gelu_fused.cu [faster], gelu_side_stream.cu [honest],
#     level1/88_MinGPTNewGelu)           gelu_output_cache.cu [no_gain: caught, or no faster than fused × 1.25]
#   triton_bias_relu (Triton)            the task's own @triton.jit block [speedup > 1]
#   ncu                                  cuda_softmax fast.cu with --profile (trace_results: ncu; 3 launches,
#                                        --clock-control none)
#   l2_flush                             cuda_bias_relu_torch fast.cu with eval_config.timing.l2_flush: true
#   identical repeats                    cuda_bias_relu_torch identical.cu twice more (the identical spread)
# --dry-run: the same flow on this machine with CPU tasks (no GPU needed): bundle unpacked, setup-python for
#   /usr/bin/python3, omp_reduction (native) starting point/fast, bias_relu (the README example, a torch extension)
#   identical/fast, the --gpu import, and `kf validate` of the four GPU tasks (their tests skip without a device).
# Every candidate's build runs first, all at once (batch runs whose verdicts are discarded); then each case runs
# alone with its build cached (KF_TIMING_BUDGET_S=4, two timed processes).
set -u
root=$(cd "$(dirname "$0")/.." && pwd)
dry=no
bundle=
stage=no
while [ $# -gt 0 ]; do
  case "$1" in
    --dry-run) dry=yes;;
    --bundle) [ $# -ge 2 ] || { echo "usage: $0 [--dry-run] [--bundle TARBALL] | --stage" >&2; exit 2; }
              bundle=$2; shift;;
    --stage) stage=yes;;
    *) echo "usage: $0 [--dry-run] [--bundle TARBALL] | --stage" >&2; exit 2;;
  esac
  shift
done

# The KernelBench problem of the --gpu import: staged into dist/ here, read from ../shared when it is beside us.
kb_file=88_MinGPTNewGelu.py
# kb_problem [staged]: the first that exists of $KF_KERNELBENCH_PROBLEM (it must be that file), the staged copy
# (unless the argument is "no": staging reads the originals), $KF_SHARED_DIR's and ../shared's.
kb_problem() {
  if [ -n "${KF_KERNELBENCH_PROBLEM:-}" ]; then
    [ "$(basename "$KF_KERNELBENCH_PROBLEM")" = "$kb_file" ] && [ -f "$KF_KERNELBENCH_PROBLEM" ] ||
      { echo "device-check: KF_KERNELBENCH_PROBLEM must name an existing $kb_file" >&2; return 1; }
    echo "$KF_KERNELBENCH_PROBLEM"; return 0
  fi
  staged=$root/dist/kernelbench/$kb_file
  [ "${1:-yes}" = no ] && staged=
  for p in "$staged" "${KF_SHARED_DIR:-/nonexistent}/kernelbench/level1/$kb_file" \
           "$root/../shared/kernelbench/level1/$kb_file"; do
    if [ -n "$p" ] && [ -f "$p" ]; then echo "$p"; return 0; fi
  done
  return 1
}
if [ "$stage" = yes ]; then
  src=$(kb_problem no) ||
    { echo "device-check: $kb_file not found (set KF_SHARED_DIR or KF_KERNELBENCH_PROBLEM)" >&2; exit 2; }
  dest=$root/dist/kernelbench
  { mkdir -p "$dest" && rm -f "$dest/$kb_file" "$dest/LICENSE" && cp "$src" "$dest/$kb_file" &&
    { [ ! -f "$(dirname "$src")/../LICENSE" ] || cp "$(dirname "$src")/../LICENSE" "$dest/LICENSE"; }; } ||
    { echo "device-check: could not stage $src into $dest" >&2; exit 1; }
  echo "$dest/$kb_file"
  exit 0
fi

out=${OUT:-$PWD/device-check-out}
mkdir -p "$out"
out=$(cd "$out" && pwd)
[ -n "$bundle" ] || bundle=$(ls -t "$root"/dist/kf-*-linux-x86_64.tar.gz 2>/dev/null | head -1)
[ -f "$bundle" ] || { echo "device-check: no bundle (run scripts/bundle.sh first, or --bundle)" >&2; exit 2; }
started=$(date +%s)
budget=500  # a lent machine: the device tool's timeout (570 s) less the unpacking and the report
[ "$dry" = yes ] && budget=900  # here, where the CPU tasks' builds and timing share 2 cores with whatever runs
deadline=$((started + ${KF_CHECK_BUDGET_S:-$budget}))
work=$(mktemp -d "${TMPDIR:-/tmp}/kf-device-check.XXXXXX")
trap 'rm -rf "$work"' EXIT
chmod 755 "$work"  # the sandbox user reads the unpacked bundle (mktemp: 0700)
detail=$work/detail  # every log and verdict JSON: packed into $out/device-check.tgz
mkdir -p "$detail"
log() { echo "[$(( $(date +%s) - started ))s] $*" | tee -a "$out/progress.log"; }

# 1. The bundle, unpacked outside the repository.
tar -C "$work" -xzf "$bundle"
b=$(echo "$work"/kf-*-linux-x86_64)
kf=$b/bin/kf
share=$b/share/kernelfoundry
log "bundle $(basename "$bundle") unpacked in $work"
ldd "$kf" >"$detail/ldd.txt" 2>&1

# 2. The task interpreter and its compiled module.
if [ "$dry" = yes ]; then py=/usr/bin/python3; else py=$(command -v python3); fi
if ! "$kf" setup-python --python "$py" >"$detail/setup-python.log" 2>&1; then
  log "kf setup-python FAILED"; cat "$detail/setup-python.log" | tee -a "$out/progress.log"; exit 1
fi
log "kf setup-python: $(tail -1 "$detail/setup-python.log")"
export KF_PYTHON="$py" LD_LIBRARY_PATH="${LD_LIBRARY_PATH:-}"
export KF_CACHE_DIR="$work/cache" KF_WARM_START=off  # the host side's modules are built for the bundle's Python
export KF_TIMING_BUDGET_S=${KF_TIMING_BUDGET_S:-4} KF_TIMING_PROCESSES=${KF_TIMING_PROCESSES:-2}
[ -d /usr/local/cuda/bin ] && export PATH="/usr/local/cuda/bin:$PATH"
# As root, before any sandboxed process: this also makes the driver create its device nodes (/dev/nvidia-uvm),
# which the sandbox (no privileges) could not.
{ nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,clocks.max.sm --format=csv 2>&1 || true
  "$py" -c 'import sys, torch; print("python", sys.version.split()[0], "torch", torch.__version__, "cuda", torch.version.cuda, torch.cuda.is_available())' 2>&1 || true
  "$py" -c 'import triton; print("triton", triton.__version__)' 2>&1 || true
  nvcc --version 2>&1 | tail -1 || true; command -v ncu || echo "no ncu on PATH"
  # The same question inside kf's sandbox (Landlock, the unprivileged user, seccomp), as candidates ask it.
  "$kf" exec --sandbox --timeout 120 --summary -- "$py" -c \
    'import torch; print("in kf sandbox: cuda", torch.cuda.is_available(), torch.cuda.device_count())' 2>&1 || true
} >"$detail/machine.txt"
cat "$detail/machine.txt" >>"$out/progress.log"

# 3. The cases: NAME TIMEOUT_S EXPECT TASK [kf run arguments…]
tasks=$share/examples/tasks
cands=$share/examples/candidates
results=$detail/cases.tsv
: >"$results"
# report: the summary (in the detail folder, copied to $OUT) and the archive of everything, after every case.
report() {
  "$py" "$root/scripts/device_check_summary.py" "$detail" "$results" "$dry" >/dev/null 2>&1
  rc=$?
  cp "$detail/summary.txt" "$detail/summary.json" "$out/" 2>/dev/null
  tar -czf "$out/device-check.tgz.part" -C "$detail" . && mv "$out/device-check.tgz.part" "$out/device-check.tgz"
  return $rc
}
record() { printf '%s\t%s\t%s\t%s\t%s\n' "$1" "$2" "$3" "$4" "$5" >>"$results"; }
case_run() {
  name=$1; limit=$2; expect=$3; task=$4; shift 4
  left=$((deadline - $(date +%s)))
  if [ "$left" -lt 20 ]; then
    record "$name" "$expect" -1 0 "$task"; log "$name: not run (${left} s left of KF_CHECK_BUDGET_S)"; report; return
  fi
  [ "$limit" -gt "$left" ] && limit=$left
  t0=$(date +%s)
  timeout "$limit" "$kf" run "$tasks/$task" "$@" --no-store --no-verdict-cache --json "$detail/$name.json" \
    >"$detail/$name.log" 2>&1
  rc=$?
  record "$name" "$expect" "$rc" "$(( $(date +%s) - t0 ))" "$task"
  log "$name: exit $rc in $(( $(date +%s) - t0 )) s ($(grep '^status:' "$detail/$name.log" | head -1 | cut -c1-150))"
  report
}
validate() {
  if "$kf" validate "$tasks/$1" >"$detail/validate-$1.log" 2>&1; then r=0; else r=$?; fi
  record "validate-$1" valid "$r" 0 "$1"
  log "kf validate $1: exit $r"
}
# The KernelBench problem as a CUDA torch-extension task (into the bundle's examples, beside the others), and its
# own starting point as a candidate file (so that the warm-up builds it too).
kb=kb_l1_88_gelu_gpu
import_kernelbench() {
  t0=$(date +%s)
  if ! p=$(kb_problem); then
    echo "no $kb_file: run scripts/device-check.sh --stage before the device run" >"$detail/import-$kb.log"; r=4
  elif "$kf" import-kernelbench "$p" --gpu --name "$kb" -o "$tasks/$kb" >"$detail/import-$kb.log" 2>&1; then
    "$kf" blocks "$tasks/$kb" --key EVOLVE >"$work/kb_starting_point.cu" 2>>"$detail/import-$kb.log"; r=$?
  else
    r=$?
  fi
  record "import-$kb" input "$r" "$(( $(date +%s) - t0 ))" "$kb"
  log "kf import-kernelbench --gpu $kb_file: exit $r"
}
variant_tasks() {  # the bundle's copies of the GPU examples, changed for the check
  # cuda_softmax runs an ncu pass on every evaluation (profile_custom_model defaults to true): not here, where
  # every second counts; the ncu case below profiles with --profile.
  printf 'eval_config:\n  profile_custom_model: false\n  profile_original_model: false\n' \
    >>"$tasks/cuda_softmax/config.yaml"
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
  left=$((deadline - $(date +%s) - 120))
  [ "$left" -gt 300 ] && left=300
  [ "$left" -lt 30 ] && left=30
  KF_TIMING_BUDGET_S=0.5 KF_TIMING_PROCESSES=1 timeout "$left" "$kf" run "$tasks/$task" --candidates "$@" -j 4 \
    --no-store --no-verdict-cache >"$detail/warm-$task.log" 2>&1
  log "warm builds $task: exit $?"
}
import_kernelbench
if [ "$dry" = yes ]; then
  warm omp_reduction "$cands/omp_reduction/fast.cpp" &
  warm bias_relu "$cands/bias_relu/identical.cpp" "$cands/bias_relu/fast.cpp" &
  wait
else
  variant_tasks
  warm cuda_bias_relu_torch "$cands"/cuda_bias_relu_torch/identical.cu "$cands"/cuda_bias_relu_torch/fast.cu \
    "$cands"/cuda_bias_relu_torch/side_stream.cu "$cands"/cuda_bias_relu_torch/output_cache.cu &
  warm cuda_softmax "$cands"/cuda_softmax/identical.cu "$cands"/cuda_softmax/fast.cu \
    "$cands"/cuda_softmax/side_stream.cu "$cands"/cuda_softmax/output_cache.cu &
  [ -s "$work/kb_starting_point.cu" ] && warm "$kb" "$work/kb_starting_point.cu" \
    "$cands"/kernelbench_gpu/gelu_fused.cu "$cands"/kernelbench_gpu/gelu_side_stream.cu \
    "$cands"/kernelbench_gpu/gelu_output_cache.cu &
  warm cuda_softmax_ncu "$cands/cuda_softmax/fast.cu" &
  warm cuda_bias_relu_torch_l2flush "$cands/cuda_bias_relu_torch/fast.cu" &
  wait
fi

if [ "$dry" = yes ]; then
  case_run omp_starting_point 300 identical omp_reduction  # the task's own EVOLVE block
  case_run omp_fast 300 faster omp_reduction --candidate "$cands/omp_reduction/fast.cpp"
  case_run bias_relu_identical 600 identical bias_relu --candidate "$cands/bias_relu/identical.cpp"
  case_run bias_relu_fast 600 faster bias_relu --candidate "$cands/bias_relu/fast.cpp"  # the README example
  for t in cuda_softmax cuda_bias_relu_torch triton_bias_relu "$kb"; do validate "$t"; done
else
  case_run torch_identical 150 identical cuda_bias_relu_torch --candidate "$cands/cuda_bias_relu_torch/identical.cu"
  if grep -q '"status": *"skipped"' "$detail/torch_identical.json" 2>/dev/null; then
    log "torch_identical was skipped: CUDA is not usable inside kf's sandbox here; stopping (its log follows)"
    tail -40 "$detail/torch_identical.log" | tee -a "$out/progress.log"
    report; exit 1
  fi
  case_run torch_fast 120 faster cuda_bias_relu_torch --candidate "$cands/cuda_bias_relu_torch/fast.cu"
  case_run softmax_identical 120 identical cuda_softmax --candidate "$cands/cuda_softmax/identical.cu"
  case_run softmax_fast 120 faster cuda_softmax --candidate "$cands/cuda_softmax/fast.cu"
  case_run kb_identical 150 identical "$kb" --candidate "$work/kb_starting_point.cu"
  case_run kb_fast 120 faster "$kb" --candidate "$cands/kernelbench_gpu/gelu_fused.cu"
  case_run torch_side_stream 120 honest cuda_bias_relu_torch --candidate "$cands/cuda_bias_relu_torch/side_stream.cu"
  case_run torch_output_cache 120 output_changed_under_timing cuda_bias_relu_torch --candidate "$cands/cuda_bias_relu_torch/output_cache.cu"
  case_run triton_block 120 faster triton_bias_relu
  case_run softmax_fast_ncu 150 profiled cuda_softmax_ncu --candidate "$cands/cuda_softmax/fast.cu" --profile
  case_run torch_fast_l2flush 120 faster cuda_bias_relu_torch_l2flush --candidate "$cands/cuda_bias_relu_torch/fast.cu"
  case_run softmax_side_stream 120 honest cuda_softmax --candidate "$cands/cuda_softmax/side_stream.cu"
  case_run softmax_output_cache 120 output_changed_under_timing cuda_softmax --candidate "$cands/cuda_softmax/output_cache.cu"
  case_run kb_side_stream 120 honest "$kb" --candidate "$cands/kernelbench_gpu/gelu_side_stream.cu"
  case_run kb_output_cache 120 no_gain "$kb" --candidate "$cands/kernelbench_gpu/gelu_output_cache.cu"
  case_run torch_identical_2 60 identical cuda_bias_relu_torch --candidate "$cands/cuda_bias_relu_torch/identical.cu"
  case_run torch_identical_3 60 identical cuda_bias_relu_torch --candidate "$cands/cuda_bias_relu_torch/identical.cu"
fi

# 4. The summary (the verdicts against the expectations).
report
rc=$?
cat "$out/summary.txt"
log "done: summary in $out/summary.txt, everything in $out/device-check.tgz (exit $rc)"
exit $rc
