#!/usr/bin/env bash
# Quantized (QDQ) models against onnxruntime: float models of the zoo (scripts/zoo/export_zoo.py:
# by default resnet18, resnet50, mobilenet_v2, a BERT-style encoder and a bidirectional LSTM)
# calibrated on their own inputs and rewritten into the QDQ form onnxruntime's static quantizer
# writes (scripts/qdq/make_qdq.py: uint8 activations, int8 per-channel weights, int32 biases),
# then imported with hexir-compile and timed and compared with onnxruntime on the same QDQ files
# at 1 and 2 threads (scripts/zoo/bench.mjs).
#
#   scripts/qdq.sh [--build DIR] [--dir SCRATCH] [--only NAME[,NAME...]] [--quick]
#                  [--iterations N] [--repeats N] [--drift N]
#
# --drift N: then the classifiers' output drift against their float originals over N more images
#            (scripts/qdq/drift.py: the QDQ file and the float model with --weights int8).
#
# SCRATCH (default BUILD/qdq) holds float/ (the float exports), models/ (the QDQ files, zoo.jsonl)
# and ort/. Installs what it needs as scripts/zoo.sh does. Never committed.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD="${HEXIR_BUILD:-$ROOT/build}"
SCRATCH=""
ONLY="resnet18,resnet50,mobilenet_v2,encoder_t128_d256,lstm_2x_bidir"
TIMING=()
DRIFT=0
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
    --drift) DRIFT="$2"; shift 2 ;;
    -h|--help) sed -n '2,16p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "qdq.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done

BUILD="$(cd "$BUILD" && pwd)"
for t in hexir-compile hexir-run hexir-dump; do
  [[ -x "$BUILD/tools/$t" ]] || { echo "qdq.sh: $BUILD/tools/$t is missing (ninja -C $BUILD tools/$t)" >&2; exit 1; }
done
if ! /usr/bin/python3 -c 'import torch, torchvision, onnx, numpy' 2>/dev/null; then
  echo "qdq.sh: apt-get install -y python3-torch python3-torchvision python3-onnx python3-numpy" >&2
  apt-get install -y python3-torch python3-torchvision python3-onnx python3-numpy >&2
fi
for c in node npm; do
  command -v "$c" >/dev/null || { echo "qdq.sh: '$c' is needed" >&2; exit 1; }
done

[[ -n "$SCRATCH" ]] || SCRATCH="$BUILD/qdq"
mkdir -p "$SCRATCH/float" "$SCRATCH/models" "$SCRATCH/ort"
SCRATCH="$(cd "$SCRATCH" && pwd)"

/usr/bin/python3 "$ROOT/scripts/zoo/export_zoo.py" "$SCRATCH/float" --only "$ONLY" \
  2> >(grep -v -i 'warn' >&2) > "$SCRATCH/float/zoo.jsonl"
source "$ROOT/scripts/real-models/ort.sh"
install_ort "$SCRATCH/ort" 1.30.0 qdq
/usr/bin/python3 "$ROOT/scripts/qdq/make_qdq.py" --zoo "$SCRATCH/float/zoo.jsonl" --out "$SCRATCH/models" \
  --ort "$SCRATCH/ort" > "$SCRATCH/models/zoo.jsonl"
node "$ROOT/scripts/zoo/bench.mjs" --root "$ROOT" --build "$BUILD" --scratch "$SCRATCH" "${TIMING[@]}"
if [[ $DRIFT -gt 0 ]]; then
  /usr/bin/python3 "$ROOT/scripts/qdq/drift.py" --scratch "$SCRATCH" --build "$BUILD" --inputs "$DRIFT"
fi
