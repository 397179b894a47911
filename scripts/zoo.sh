#!/usr/bin/env bash
# The model zoo: ordinary models exported from PyTorch (torchvision classifiers, segmentation and
# the ssdlite detector with its post-processing, GRU / LSTM / RNN sequence models, a BERT-style
# encoder in f32 and f16, a GPT-style decoder step with a static KV cache written by index_copy_),
# imported with hexir-compile, run with hexir-run and with onnxruntime (CPU) at 1 and 2 threads,
# compared: imports, max error vs onnxruntime, bounded dims, time ratios, memory.
#
#   scripts/zoo.sh [--build DIR] [--dir SCRATCH] [--only NAME[,NAME...]] [--quick]
#                  [--iterations N] [--repeats N] [--write-docs]
#
#   --build DIR    the meson build folder with tools/hexir-compile, hexir-run and hexir-dump
#                  (default: $HEXIR_BUILD, else build)
#   --dir SCRATCH  scratch folder for the exported models, onnxruntime-node and outputs
#                  (default BUILD/zoo; created; never committed)
#   --only NAMES   only these models (scripts/zoo/export_zoo.py --list names them)
#   --quick        3 timed runs, best of 1 (imports and errors; the times are rough)
#   --iterations N, --repeats N  timed runs per process and processes alternated per side
#                  (default 50 and 5)
#   --write-docs   also replace the table in docs/zoo.md (between the zoo:begin / zoo:end markers;
#                  with HEXIR_MAX_CPU_ISA set, between zoo-ISA:begin / zoo-ISA:end)
#
# Installs what it needs from Debian (python3-torch, python3-torchvision, python3-onnx,
# python3-numpy: apt-get, as root) and onnxruntime-node from npm (ONNXRUNTIME_NODE_INSTALL=skip).
# A model that fails to export, import or run is a row that says why; the script exits 0 once it
# has printed the table.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD="${HEXIR_BUILD:-$ROOT/build}"
SCRATCH=""
ONLY=""
WRITE_DOCS=0
TIMING=()
while [[ $# -gt 0 ]]; do
  case "$1" in
    --build) BUILD="$2"; shift 2 ;;
    --build=*) BUILD="${1#*=}"; shift ;;
    --dir) SCRATCH="$2"; shift 2 ;;
    --dir=*) SCRATCH="${1#*=}"; shift ;;
    --only) ONLY="$2"; shift 2 ;;
    --only=*) ONLY="${1#*=}"; shift ;;
    --quick) TIMING=(--iterations 3 --repeats 1); shift ;;
    --iterations|--repeats) TIMING+=("$1" "$2"); shift 2 ;;
    --write-docs) WRITE_DOCS=1; shift ;;
    -h|--help) sed -n '2,24p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "zoo.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done

BUILD="$(cd "$BUILD" && pwd)"
for t in hexir-compile hexir-run hexir-dump; do
  [[ -x "$BUILD/tools/$t" ]] || { echo "zoo.sh: $BUILD/tools/$t is missing (ninja -C $BUILD tools/$t)" >&2; exit 1; }
done
if ! /usr/bin/python3 -c 'import torch, torchvision, onnx, numpy' 2>/dev/null; then
  echo "zoo.sh: apt-get install -y python3-torch python3-torchvision python3-onnx python3-numpy" >&2
  apt-get install -y python3-torch python3-torchvision python3-onnx python3-numpy >&2
fi
for c in node npm /usr/bin/time; do
  command -v "$c" >/dev/null || { echo "zoo.sh: '$c' is needed" >&2; exit 1; }
done

[[ -n "$SCRATCH" ]] || SCRATCH="$BUILD/zoo"
mkdir -p "$SCRATCH/models" "$SCRATCH/ort"
SCRATCH="$(cd "$SCRATCH" && pwd)"

export_args=(/usr/bin/python3 "$ROOT/scripts/zoo/export_zoo.py" "$SCRATCH/models")
[[ -n "$ONLY" ]] && export_args+=(--only "$ONLY")
"${export_args[@]}" 2> >(grep -v -i 'warn' >&2) > "$SCRATCH/models/zoo.jsonl"

source "$ROOT/scripts/real-models/ort.sh"
install_ort "$SCRATCH/ort" 1.30.0 zoo

args=(--root "$ROOT" --build "$BUILD" --scratch "$SCRATCH" "${TIMING[@]}")
[[ $WRITE_DOCS == 1 ]] && args+=(--write-docs "$ROOT/docs/zoo.md")
[[ -n "$ONLY" ]] && args+=(--only "$ONLY")
exec node "$ROOT/scripts/zoo/bench.mjs" "${args[@]}"
