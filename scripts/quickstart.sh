#!/usr/bin/env bash
# The main job: build, compile the samples, inspect one, run it on the CPU.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh

mkdir -p build/samples/out
for model in samples/*.hxir; do
  name=$(basename "$model" .hxir)
  build/tools/hexir-compile "$model" -o "build/samples/$name.hxe"
done
build/tools/hexir-dump build/samples/mlp.hxe
build/tools/hexir-run build/samples/mlp.hxe --device cpu \
  --input x=samples/mlp/input_x.npy --output-dir build/samples/out/mlp --iterations 20
build/tools/hexir-run build/samples/transformer.hxe --device cpu \
  --input x=samples/transformer/input_x.npy --output-dir build/samples/out/transformer --iterations 20
build/tools/hexir-run build/samples/convnet.hxe --device cpu \
  --input x=samples/convnet/input_x.npy --output-dir build/samples/out/convnet --iterations 20
