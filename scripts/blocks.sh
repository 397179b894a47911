#!/usr/bin/env bash
# Transformer and MLP blocks against onnxruntime: ONNX models with seeded random weights
# in PyTorch's export form (scripts/blocks/gen_blocks.py: an MLP T=256 D=768 hidden 3072, a
# post-LN encoder layer T=128 D=256 4 heads MLP 1024, and one at BERT-base size T=256 D=768 12
# heads MLP 3072), imported with hexir-compile and run with hexir-run and onnxruntime (CPU) at 1
# and 2 threads side by side: latency, output difference, peak RSS, arena bytes, hexir/ort ratios.
#
#   scripts/blocks.sh [--build DIR] [--dir SCRATCH] [--write-docs] [--only NAME[,NAME...]]
#
#   --build DIR    the meson build folder with tools/hexir-compile and tools/hexir-run
#                  (default: $HEXIR_BUILD, else the first of build-blocks, build that has both)
#   --dir SCRATCH  scratch folder for onnxruntime-node, models, inputs and outputs
#                  (default BUILD/blocks; created; never committed)
#   --write-docs   also replace the measured table in docs/benchmarks.md (between the
#                  blocks:begin / blocks:end markers)
#   --only NAMES   only these blocks (mlp-T256-D768, encoder-T128-D256, encoder-T256-D768)
#
# Needs bash, /usr/bin/python3 with onnx and numpy (Debian: apt-get install python3-onnx
# python3-numpy), node (>= 18) and npm with access to the npm registry, /usr/bin/time.
# The measuring is scripts/real-models/harness.mjs, shared with scripts/real-models.sh.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD="${HEXIR_BUILD:-}"
SCRATCH=""
WRITE_DOCS=0
ONLY=""
while [[ $# -gt 0 ]]; do
  case "$1" in
    --build) BUILD="$2"; shift 2 ;;
    --build=*) BUILD="${1#*=}"; shift ;;
    --dir) SCRATCH="$2"; shift 2 ;;
    --dir=*) SCRATCH="${1#*=}"; shift ;;
    --write-docs) WRITE_DOCS=1; shift ;;
    --only) ONLY="$2"; shift 2 ;;
    --only=*) ONLY="${1#*=}"; shift ;;
    -h|--help) sed -n '2,21p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "blocks.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done

if [[ -z "$BUILD" ]]; then
  for b in build-blocks build; do
    if [[ -x "$ROOT/$b/tools/hexir-compile" && -x "$ROOT/$b/tools/hexir-run" ]]; then BUILD="$ROOT/$b"; break; fi
  done
fi
[[ -n "$BUILD" ]] || { echo "blocks.sh: no build folder with tools/hexir-compile and tools/hexir-run (use --build DIR)" >&2; exit 1; }
BUILD="$(cd "$BUILD" && pwd)"
for t in hexir-compile hexir-run; do
  [[ -x "$BUILD/tools/$t" ]] || { echo "blocks.sh: $BUILD/tools/$t is missing (ninja -C $BUILD tools/$t)" >&2; exit 1; }
done
for c in node npm /usr/bin/python3 /usr/bin/time; do
  command -v "$c" >/dev/null || { echo "blocks.sh: '$c' is needed" >&2; exit 1; }
done
# libonnx-testdata alone leaves an onnx/ folder of test data that imports as an
# empty namespace package: ask for what gen_blocks.py uses.
/usr/bin/python3 -c 'from onnx import helper, numpy_helper; import numpy' 2>/dev/null ||
  { echo "blocks.sh: /usr/bin/python3 needs onnx and numpy (apt-get install python3-onnx python3-numpy)" >&2; exit 1; }

[[ -n "$SCRATCH" ]] || SCRATCH="$BUILD/blocks"
mkdir -p "$SCRATCH"
SCRATCH="$(cd "$SCRATCH" && pwd)"
MODELS="$SCRATCH/models"
ORT="$SCRATCH/ort"
mkdir -p "$MODELS" "$ORT"
ORT_VERSION=1.30.0

echo "blocks: generating the models into $MODELS" >&2
gen=(/usr/bin/python3 "$ROOT/scripts/blocks/gen_blocks.py" "$MODELS")
[[ -n "$ONLY" ]] && gen+=(--only "$ONLY")
"${gen[@]}" > "$MODELS/blocks.jsonl"

source "$ROOT/scripts/real-models/ort.sh"
install_ort "$ORT" "$ORT_VERSION" blocks

args=(--root "$ROOT" --build "$BUILD" --scratch "$SCRATCH")
[[ $WRITE_DOCS == 1 ]] && args+=(--write-docs "$ROOT/docs/benchmarks.md")
exec node "$ROOT/scripts/blocks/bench.mjs" "${args[@]}"
