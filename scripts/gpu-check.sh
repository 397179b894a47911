#!/usr/bin/env bash
# scripts/gpu-check.sh OUTDIR [--build-only | --no-build]
#
# The CUDA backends' checks on a machine with an NVIDIA GPU (docs/cuda.md):
#   1. builds with CUDA into build-gpu/ (release; its own build dir),
#   2. runs the HAL conformance suite; every cuda / cuda-managed case must run
#      (a "HEXIR_SKIP: cuda..." line there is a failure),
#   3. runs every sample on cpu, cuda and cuda-managed with hexir-run and
#      compares each output with the cpu's (bench/cuda_compare),
#   4. measures host<->device bandwidth (pageable vs pinned vs the HAL's staged
#      copies), invoke latency with and without CUDA graph replay
#      (HEXIR_CUDA_GRAPHS=1/0, --iterations 200), and device allocations and
#      uploads per invoke.
# Writes OUTDIR/gpu-check.log, OUTDIR/figures.md and the raw outputs.
#
# --build-only: configure and build build-gpu/ and stop (works without a GPU;
#   the folder can then be carried to a GPU machine).
# --no-build: use build-gpu/ as it is (e.g. carried from another machine
#   without meson/ninja on this one).
#
# Exit status: 0 all passed; 1 a check failed; 2 no NVIDIA GPU on this
# machine; 3 the build or its prerequisites failed.
set -uo pipefail

usage() {
  echo "usage: scripts/gpu-check.sh OUTDIR [--build-only | --no-build]" >&2
  exit 3
}
[ $# -ge 1 ] || usage
OUT=$1
shift
MODE=full
case "${1:-}" in
  "") ;;
  --build-only) MODE=build-only ;;
  --no-build) MODE=no-build ;;
  *) usage ;;
esac

ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD="$ROOT/build-gpu"
mkdir -p "$OUT" || { echo "gpu-check: cannot create $OUT" >&2; exit 3; }
OUT=$(cd "$OUT" && pwd)
LOG="$OUT/gpu-check.log"
: >"$LOG"
log() { echo "$@" | tee -a "$LOG"; }
START=$(date +%s)

log "== gpu-check $(date -u +%Y-%m-%dT%H:%M:%SZ) on $(hostname), commit $(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo unknown)"

# ---------------------------------------------------------------- GPU present?
gpu_present() {
  # GPU_CHECK_ASSUME_GPU=1 skips the probe (to exercise this script's flow without a GPU).
  [ "${GPU_CHECK_ASSUME_GPU:-0}" = 1 ] && return 0
  if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then return 0; fi
  [ -e /dev/nvidia0 ] && [ -e /dev/nvidiactl ]
}
if [ "$MODE" != build-only ]; then
  if ! gpu_present; then
    log "gpu-check: NO NVIDIA GPU PRESENT on this machine (nvidia-smi lists none, no /dev/nvidia0):"
    log "gpu-check: nothing was measured. Run this script on a machine with an NVIDIA GPU (sm_80 or newer)."
    {
      echo "# GPU check"
      echo
      echo "No NVIDIA GPU was present on $(hostname) at $(date -u +%Y-%m-%dT%H:%M:%SZ); no figures were measured."
    } >"$OUT/figures.md"
    exit 2
  fi
  { command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi; } >>"$LOG" 2>&1
fi

# ---------------------------------------------------------------- build
TARGETS=(tests/hal_conformance/test_hal_conformance tools/hexir-compile tools/hexir-run
         bench/cuda_compare bench/cuda_bandwidth)
if [ "$MODE" != no-build ]; then
  NVCC=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
  if [ ! -x "$NVCC" ]; then log "gpu-check: nvcc not found (PATH or /usr/local/cuda/bin); cannot build"; exit 3; fi
  for tool in meson ninja; do
    command -v $tool >/dev/null 2>&1 || { log "gpu-check: $tool not installed (see scripts/setup.sh); or carry a built build-gpu/ and pass --no-build"; exit 3; }
  done
  if [ ! -f "$BUILD/build.ninja" ]; then
    log "== meson setup build-gpu (release, -Dcuda=enabled)"
    meson setup "$BUILD" "$ROOT" -Dcuda=enabled --buildtype=release >>"$LOG" 2>&1 ||
      { log "gpu-check: meson setup failed (see $LOG)"; exit 3; }
  fi
  log "== building ${TARGETS[*]}"
  build_start=$(date +%s)
  ninja -C "$BUILD" "${TARGETS[@]}" >>"$LOG" 2>&1 || { log "gpu-check: build failed (see $LOG)"; exit 3; }
  log "   built in $(( $(date +%s) - build_start )) s"
  if [ "$MODE" = build-only ]; then log "== --build-only: done"; exit 0; fi
fi
for t in "${TARGETS[@]}"; do
  [ -x "$BUILD/$t" ] || { log "gpu-check: $BUILD/$t missing (build failed or not carried)"; exit 3; }
done
RUN="$BUILD/tools/hexir-run"
COMPILE="$BUILD/tools/hexir-compile"
COMPARE="$BUILD/bench/cuda_compare"

FAILED=0
fail() { log "FAIL: $*"; FAILED=1; }

log "== devices"
"$RUN" --list-devices 2>&1 | tee -a "$LOG" "$OUT/devices.txt"
grep -q '^cuda:0 ' "$OUT/devices.txt" || fail "hexir-run --list-devices shows no usable cuda:0"

# ---------------------------------------------------------------- conformance
log "== HAL conformance suite (cpu, cuda, cuda-managed, cuda?graphs=off&cublas=off)"
HEXIR_SAMPLES_DIR="$ROOT/samples" timeout 240 "$BUILD/tests/hal_conformance/test_hal_conformance" \
  >"$OUT/conformance.log" 2>&1
rc=$?
tail -3 "$OUT/conformance.log" | tee -a "$LOG"
[ $rc -eq 0 ] || fail "conformance suite exited $rc (see conformance.log)"
if grep -q '^HEXIR_SKIP: cuda' "$OUT/conformance.log"; then
  fail "cuda conformance cases were skipped on a GPU machine:"
  grep '^HEXIR_SKIP: cuda' "$OUT/conformance.log" | sort -u | head -5 | tee -a "$LOG"
fi

# ---------------------------------------------------------------- samples
log "== samples on cpu, cuda, cuda-managed"
mkdir -p "$OUT/samples" "$OUT/stats"
SAMPLES=()
for hxir in "$ROOT"/samples/*.hxir; do
  name=$(basename "$hxir" .hxir)
  if ! "$COMPILE" "$hxir" -o "$OUT/samples/$name.hxe" >>"$LOG" 2>&1; then
    fail "hexir-compile $name"
    continue
  fi
  SAMPLES+=("$name")
  inputs=()
  for npy in "$ROOT/samples/$name"/input_*.npy; do
    [ -e "$npy" ] || continue
    arg=$(basename "$npy" .npy)
    inputs+=(--input "${arg#input_}=$npy")
  done
  for dev in cpu cuda cuda-managed; do
    if ! timeout 60 "$RUN" "$OUT/samples/$name.hxe" --device "$dev" "${inputs[@]}" \
        --output-dir "$OUT/samples/$name/$dev" >>"$LOG" 2>&1; then
      fail "hexir-run $name on $dev"
      continue
    fi
    [ "$dev" = cpu ] && continue
    for want in "$OUT/samples/$name/cpu"/*.npy; do
      got="$OUT/samples/$name/$dev/$(basename "$want")"
      "$COMPARE" "$got" "$want" --rtol 1e-4 --atol 1e-5 2>&1 | tee -a "$LOG" || fail "$name on $dev differs from cpu"
    done
  done
done

# ---------------------------------------------------------------- memory budget
# The host memory space on the copy stream (docs/memory-budget.md): the mlp
# with its two 128 KiB weights streamed from a Host RODATA section (pinned),
# and the offload program with a value evicted to the host arena and
# prefetched back; each on cuda and cuda-managed against the cpu.
log "== memory budget: streamed weights and host offload on cuda"
mkdir -p "$OUT/budget"
budget_run() {  # NAME HXIR BUDGET INPUT-ARGS...
  local name=$1 hxir=$2 budget=$3
  shift 3
  if ! "$COMPILE" "$hxir" -o "$OUT/budget/$name.hxe" --memory-budget "device=$budget" >>"$LOG" 2>&1; then
    fail "hexir-compile $name under device=$budget"
    return
  fi
  for dev in cpu cuda cuda-managed; do
    if ! timeout 60 "$RUN" "$OUT/budget/$name.hxe" --device "$dev" --seed 1 "$@" --iterations 20 \
        --output-dir "$OUT/budget/$name/$dev" --stats-json "$OUT/stats/budget-$name-$dev.json" >>"$LOG" 2>&1; then
      fail "hexir-run $name (budget) on $dev"
      continue
    fi
    [ "$dev" = cpu ] && continue
    for want in "$OUT/budget/$name/cpu"/*.npy; do
      "$COMPARE" "$OUT/budget/$name/$dev/$(basename "$want")" "$want" --rtol 1e-4 --atol 1e-5 2>&1 | tee -a "$LOG" ||
        fail "$name (budget) on $dev differs from cpu"
    done
  done
}
budget_run mlp-streamed "$ROOT/samples/mlp.hxir" 200KiB --input "x=$ROOT/samples/mlp/input_x.npy"
budget_run offload "$ROOT/tests/fuzz/seeds/programs/offload.hxir" 32KiB

# ---------------------------------------------------------------- figures
log "== bandwidth (256 MiB, median of 5)"
timeout 120 "$BUILD/bench/cuda_bandwidth" 256 5 >"$OUT/bandwidth.txt" 2>&1 || fail "cuda_bandwidth"
tee -a "$LOG" <"$OUT/bandwidth.txt"

json_field() {  # json_field FILE SECTION KEY -> the number after "SECTION":{..."KEY":
  sed -E "s/.*\"$2\":\{[^}]*\"$3\":([-0-9.eE]+).*/\1/" "$1" 2>/dev/null
}

log "== invoke latency, 200 iterations"
{
  echo "# GPU check figures"
  echo
  echo "Measured by scripts/gpu-check.sh on $(hostname), $(date -u +%Y-%m-%dT%H:%M:%SZ), commit $(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo unknown)."
  echo
  echo "## Devices"
  echo
  echo '```'
  cat "$OUT/devices.txt"
  echo '```'
  echo
  echo "## Host <-> device bandwidth (256 MiB, median of 5)"
  echo
  echo "| copy | GB/s |"
  echo "|---|---|"
  awk '/GB\/s/ { printf "| %s | %s |\n", $1, $2 }' "$OUT/bandwidth.txt"
  echo
  echo "## Invoke latency (hexir-run --iterations 200, median) and per-invoke device work"
  echo
  echo "| sample | device | graphs | median invoke ms | prepare allocations | prepare uploads | invoke allocations (all 200) | invoke uploads (all 200) |"
  echo "|---|---|---|---|---|---|---|---|"
} >"$OUT/figures.md"
for name in "${SAMPLES[@]}"; do
  for config in "cpu -" "cuda 1" "cuda 0" "cuda-managed 1" "cuda-managed 0"; do
    set -- $config
    dev=$1 graphs=$2
    stats="$OUT/stats/$name-$dev-graphs$graphs.json"
    if ! HEXIR_CUDA_GRAPHS=${graphs/-/1} timeout 120 "$RUN" "$OUT/samples/$name.hxe" --device "$dev" \
        --iterations 200 --stats-json "$stats" >>"$LOG" 2>&1; then
      fail "latency run $name on $dev (graphs $graphs)"
      continue
    fi
    ms=$(json_field "$stats" invoke ms_median)
    pa=$(json_field "$stats" prepare device_allocations)
    pu=$(json_field "$stats" prepare uploads)
    ia=$(json_field "$stats" invoke device_allocations)
    iu=$(json_field "$stats" invoke uploads)
    label=$([ "$graphs" = 1 ] && echo on || { [ "$graphs" = 0 ] && echo off || echo -; })
    echo "| $name | $dev | $label | $ms | $pa | $pu | $ia | $iu |" >>"$OUT/figures.md"
    log "   $name $dev graphs=$label: median $ms ms, invoke allocations $ia, uploads $iu"
    [ "$ia" = 0 ] && [ "$iu" = 0 ] || fail "$name on $dev: invokes allocated ($ia) or uploaded ($iu)"
  done
done
{
  echo
  echo "Conformance: $(grep '^\[doctest\] test cases' "$OUT/conformance.log" | tail -1)"
  echo
  echo "Total time $(( $(date +%s) - START )) s. Result: $([ $FAILED -eq 0 ] && echo PASS || echo FAIL)."
} >>"$OUT/figures.md"

log "== $([ $FAILED -eq 0 ] && echo PASS || echo FAIL) in $(( $(date +%s) - START )) s; figures in $OUT/figures.md"
exit $FAILED
