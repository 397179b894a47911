#!/usr/bin/env bash
# The language-model decoding benchmark (issue 32, docs/llm.md): a GPT-2-small-class decoder written
# in plain PyTorch with random weights (samples/llm/export.py) exported to ONNX (a static-cache
# decode step in its scatter and where forms, prefills with the same cache signature, the
# growing-past step); Hexir compiles every step into one executable with the caches donated
# (lm.hxe; lm_where.hxe with the where form) and hexir-generate runs greedy generation; then
# scripts/llm/bench.py compares it with onnxruntime-node (static cache and growing past), run by run
# alternated at 1 and 2 threads: tokens/s, per-token ms, prefill, tokens and logits against torch
# and onnxruntime, bytes copied and allocated per token, file size, PSS of N processes.
#
#   scripts/llm.sh [--tiny] [--build DIR] [--dir SCRATCH] [--ort DIR] [--threads 1,2] [--tokens N]
#                  [--rounds N] [--pss 1,2,4] [--pss-tokens N] [--context N] [--prefill 32,128,512]
#                  [--force] [--skip-ort] [--skip-hexir]
#
#   --tiny         2 layers, d 64, 2 heads, vocab 512, context 128, prefill 8 and 16 (under a
#                  minute; no PSS: its processes end in milliseconds)
#   --build DIR    the meson build folder with tools/hexir-compile, hexir-generate, hexir-dump
#                  (default: $HEXIR_BUILD, else build)
#   --dir SCRATCH  where the models, the reference and the results go (default BUILD/llm, or
#                  BUILD/llm-tiny with --tiny; created; never committed)
#   --ort DIR      where onnxruntime-node is installed (default BUILD/llm-ort; installed there from
#                  npm when missing)
#   --threads, --tokens, --rounds, --pss, --pss-tokens  passed to scripts/llm/bench.py (defaults
#                  1,2 / 64 / 3 / 1,2,4 / 300)
#   --context N, --prefill LIST  passed to samples/llm/export.py: the static caches' length (1024)
#                  and the prefills' prompt lengths (the first is the reference's prompt); use
#                  another --dir (docs/llm.md: context 128)
#   --force        export again even if SCRATCH holds the same export
#   --skip-hexir   onnxruntime alone: scripts/llm/ort_generate.mjs (SCRATCH/ort_generate.{json,md})
#   --skip-ort     Hexir alone: compile, then one generation checked against torch's tokens
#
# Writes SCRATCH/hexir/lm.hxe, lm_where.hxe (with NAME.compile.log, NAME.compile.time) and
# SCRATCH/llm_bench.{json,md}, the tables docs/llm.md quotes; exits 1 when a token differs.
# Installs what it needs from Debian when missing (python3-torch, python3-onnx, python3-numpy,
# nodejs, npm: apt-get, as root or with sudo) and onnxruntime-node from npm
# (ONNXRUNTIME_NODE_INSTALL=skip).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD="${HEXIR_BUILD:-$ROOT/build}"
SCRATCH=""
ORT_DIR=""
TINY=0
FORCE=0
SKIP_ORT=0
SKIP_HEXIR=0
GEN=()    # ort_generate.mjs (--skip-hexir)
BENCH=()  # bench.py
EXPORT=() # export.py
while [[ $# -gt 0 ]]; do
  case "$1" in
    --tiny) TINY=1; shift ;;
    --build) BUILD="$2"; shift 2 ;;
    --build=*) BUILD="${1#*=}"; shift ;;
    --dir) SCRATCH="$2"; shift 2 ;;
    --dir=*) SCRATCH="${1#*=}"; shift ;;
    --ort) ORT_DIR="$2"; shift 2 ;;
    --ort=*) ORT_DIR="${1#*=}"; shift ;;
    --threads|--tokens) GEN+=("$1" "$2"); BENCH+=("$1" "$2"); shift 2 ;;
    --rounds|--pss|--pss-tokens) BENCH+=("$1" "$2"); shift 2 ;;
    --context|--prefill) EXPORT+=("$1" "$2"); shift 2 ;;
    --force) FORCE=1; shift ;;
    --skip-ort) SKIP_ORT=1; shift ;;
    --skip-hexir) SKIP_HEXIR=1; shift ;;
    -h|--help) sed -n '2,36p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "llm.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done
if [[ $SKIP_ORT == 1 && $SKIP_HEXIR == 1 ]]; then
  echo "llm.sh: --skip-ort and --skip-hexir leave nothing to run" >&2; exit 2
fi

# ---- what it needs ----
install_debian() {
  local sudo=""
  [[ "$(id -u)" -ne 0 ]] && sudo="sudo"
  echo "== llm.sh: installing $*" >&2
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "$@" >/dev/null
}
missing=()
/usr/bin/python3 -c 'import torch, onnx, numpy' 2>/dev/null || missing+=(python3-torch python3-onnx python3-numpy)
command -v node >/dev/null || missing+=(nodejs)
command -v npm >/dev/null || missing+=(npm)
[[ -x /usr/bin/time ]] || missing+=(time)
[[ ${#missing[@]} -gt 0 ]] && install_debian "${missing[@]}"

mkdir -p "$BUILD"
BUILD="$(cd "$BUILD" && pwd)"
if [[ -z "$SCRATCH" ]]; then
  SCRATCH="$BUILD/llm"
  [[ $TINY == 1 ]] && SCRATCH="$BUILD/llm-tiny"
fi
mkdir -p "$SCRATCH"
SCRATCH="$(cd "$SCRATCH" && pwd)"
[[ -n "$ORT_DIR" ]] || ORT_DIR="$BUILD/llm-ort"
mkdir -p "$ORT_DIR"
ORT_DIR="$(cd "$ORT_DIR" && pwd)"
# The tiny model's processes end in milliseconds: nothing to sample for PSS. Its weights are so
# small (0.56 MB) that the prefills' own constants (position rows, masks, the scatter's index
# tensors: 50 KB) are 9% of them, against 1.4% for GPT-2-small.
[[ $TINY == 1 ]] && BENCH=(--pss "" --max-size-ratio 1.15 "${BENCH[@]}")

# ---- export: the .onnx files, the prompts, torch's greedy reference ----
export_args=(/usr/bin/python3 "$ROOT/samples/llm/export.py" "$SCRATCH")
[[ $TINY == 1 ]] && export_args+=(--tiny)
[[ $FORCE == 1 ]] && export_args+=(--force)
export_args+=("${EXPORT[@]}")
echo "== llm.sh: export into $SCRATCH" >&2
"${export_args[@]}" 2> >(grep -v -i 'warn' >&2)

ort_install() {
  source "$ROOT/scripts/real-models/ort.sh"
  install_ort "$ORT_DIR" 1.30.0 llm.sh
}

# ---- Hexir: one executable with every step, the caches donated ----
# decode (decode.onnx: the row written by ScatterElements; lm_where.hxe: decode_where.onnx, by Where)
# and every prefill_L.onnx of the export, which have the same cache signature: hexir-generate
# allocates the 24 caches once, the prefill of the prompt's length writes its rows and every decode
# step its one row, in place (--donate 'past.*=present.*'). Identical weights are stored once.
# decode_past.onnx (a dynamic past length) has no static form and is onnxruntime's alone.
hexir_compile() {
  local out="$SCRATCH/hexir" compile="$BUILD/tools/hexir-compile" name decode L fns
  for tool in hexir-compile hexir-generate hexir-dump; do
    if [[ ! -x "$BUILD/tools/$tool" ]]; then
      echo "llm.sh: $BUILD/tools/$tool is missing (ninja -C $BUILD)" >&2
      exit 1
    fi
  done
  mkdir -p "$out"
  fns=()
  for L in $(/usr/bin/python3 -c 'import json,sys; print(*json.load(open(sys.argv[1]))["config"]["prefill"])' \
               "$SCRATCH/reference.json"); do
    fns+=(--function "prefill_$L=$SCRATCH/prefill_$L.onnx")
  done
  for name in lm lm_where; do
    decode=decode
    [[ $name == lm_where ]] && decode=decode_where
    echo "== llm.sh: hexir-compile --function decode=$decode.onnx ${fns[*]//$SCRATCH\//} --donate 'past.*=present.*' -o hexir/$name.hxe" >&2
    if ! /usr/bin/time -f '%e %M' -o "$out/$name.compile.time" \
           "$compile" --function "decode=$SCRATCH/$decode.onnx" "${fns[@]}" --donate 'past.*=present.*' \
           -o "$out/$name.hxe" > "$out/$name.compile.log" 2>&1; then
      cat "$out/$name.compile.log" >&2
      echo "llm.sh: hexir-compile failed for $name.hxe" >&2
      exit 1
    fi
    tail -n 1 "$out/$name.compile.log" >&2
    echo "   $(awk '{printf "%.2f s, peak RSS %.0f MiB", $1, $2 / 1024}' "$out/$name.compile.time")" >&2
  done
}

# One greedy generation with hexir-generate against torch's tokens (--skip-ort).
hexir_check() {
  local out="$SCRATCH/hexir" tokens
  tokens="$(/usr/bin/python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); print(len(r["tokens"]))' "$SCRATCH/reference.json")"
  "$BUILD/tools/hexir-generate" "$out/lm.hxe" --prompt "$SCRATCH/prompt.npy" --max-new-tokens "$tokens" \
    --threads 1 --stats-json "$out/check.json" >&2
  /usr/bin/python3 - "$out/check.json" "$SCRATCH/reference_tokens.npy" <<'PY'
import json, sys
import numpy as np
got, ref = json.load(open(sys.argv[1]))["tokens"], np.load(sys.argv[2]).tolist()
same = sum(int(a == b) for a, b in zip(got, ref))
print(f"llm.sh: hexir-generate lm.hxe: {same}/{len(ref)} tokens as torch's", file=sys.stderr)
sys.exit(0 if same == len(ref) == len(got) else 1)
PY
}

if [[ $SKIP_HEXIR == 1 ]]; then
  ort_install
  echo "== llm.sh: onnxruntime-node greedy generation" >&2
  node "$ROOT/scripts/llm/ort_generate.mjs" --dir "$SCRATCH" --ort "$ORT_DIR" \
    --dump-logits "$SCRATCH/ort_logits" "${GEN[@]}"
  echo "== llm.sh: results in $SCRATCH (ort_generate.md, ort_generate.json)" >&2
  exit 0
fi
hexir_compile
if [[ $SKIP_ORT == 1 ]]; then
  hexir_check
  exit 0
fi
ort_install
echo "== llm.sh: scripts/llm/bench.py (onnxruntime and Hexir alternated)" >&2
/usr/bin/python3 "$ROOT/scripts/llm/bench.py" --dir "$SCRATCH" --ort "$ORT_DIR" --build "$BUILD" "${BENCH[@]}"
echo "== llm.sh: results in $SCRATCH (llm_bench.md, llm_bench.json)" >&2
