#!/usr/bin/env bash
# Compiles every sample, every test program and every ONNX test model Hexir imports, under several
# planning options, and prints one "sha256  input  options" line per compiled .hxe (and per
# --emit-hxir print). A refactor that must not change what the compiler writes keeps this output
# identical: run it before and after and diff.
#
#   scripts/compile-hashes.sh [BUILD_DIR] > hashes.txt      (BUILD_DIR defaults to build)
#
# ONNX models come from Debian's libonnx-testdata (skipped with a note when absent); a model that
# the compiler refuses is listed as "refused" so that a change in what is refused also shows.
set -uo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD="$(cd "${1:-$ROOT/build}" && pwd)"
COMPILE="$BUILD/tools/hexir-compile"
[[ -x "$COMPILE" ]] || { echo "compile-hashes.sh: no $COMPILE (build first)" >&2; exit 2; }
SCRATCH="$(mktemp -d)"
trap 'rm -rf "$SCRATCH"' EXIT

# One line per (input, options): the hash of the .hxe, or "refused".
hash_one() {
  local input="$1"; shift
  local out="$SCRATCH/out.hxe"
  rm -f "$out"
  if "$COMPILE" "$input" -o "$out" "$@" >/dev/null 2>&1; then
    echo "$(sha256sum < "$out" | cut -c1-64)  ${input#"$ROOT"/}  $*"
  else
    echo "refused  ${input#"$ROOT"/}  $*"
  fi
}

hxir_options=("" "--plan=naive" "--plan=free-at-last-use" "--no-fuse" "--no-views" "--no-in-place"
              "--channels-last" "--schedule=memory" "--compress=zstd" "--align 256 --data-checksum")
for input in "$ROOT"/samples/*.hxir "$ROOT"/samples/decoder/*.hxir "$ROOT"/tests/fuzz/seeds/programs/*.hxir \
             "$ROOT"/tests/fuzz/seeds/hxir/*.hxir; do
  for opts in "${hxir_options[@]}"; do
    # shellcheck disable=SC2086  # the options split on purpose
    hash_one "$input" $opts
  done
  hash_one "$input" --memory-budget device=64KiB
  if "$COMPILE" "$input" -o "$SCRATCH/p.hxe" --emit-hxir "$SCRATCH/p.hxir" >/dev/null 2>&1; then
    echo "$(sha256sum < "$SCRATCH/p.hxir" | cut -c1-64)  ${input#"$ROOT"/}  --emit-hxir"
  fi
done

TESTDATA=/usr/share/libonnx-testdata/data
if [[ -d "$TESTDATA" ]]; then
  while IFS= read -r model; do
    hash_one "$model"
    hash_one "$model" --plan=free-at-last-use --no-fuse
    if "$COMPILE" "$model" -o "$SCRATCH/p.hxe" --emit-hxir "$SCRATCH/p.hxir" >/dev/null 2>&1; then
      echo "$(sha256sum < "$SCRATCH/p.hxir" | cut -c1-64)  $model  --emit-hxir"
    fi
  done < <(find "$TESTDATA" -name model.onnx | sort)
else
  echo "# skipped ONNX test models: $TESTDATA absent (apt-get install -y libonnx-testdata)"
fi
