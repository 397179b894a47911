#!/usr/bin/env bash
# The main job: build; compile a small ONNX model, inspect it, run it on the
# CPU and check it against numpy; then the same with the .hxir samples.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh

# ONNX: a small classifier written with its numpy reference (samples/onnx/make_model.py).
onnx=build/samples/onnx
/usr/bin/python3 samples/onnx/make_model.py "$onnx"
build/tools/hexir-compile "$onnx/model.onnx" -o "$onnx/model.hxe" --input-shape input=1x3x16x16
build/tools/hexir-dump "$onnx/model.hxe"
build/tools/hexir-run "$onnx/model.hxe" --device cpu --input input="$onnx/input.npy" --output-dir "$onnx/out" \
  --iterations 20
/usr/bin/python3 - "$onnx/out/probs.npy" "$onnx/expected.npy" <<'PY'
import sys
import numpy as np
got, want = np.load(sys.argv[1]), np.load(sys.argv[2])
error = float(np.abs(got - want).max()) if got.shape == want.shape else float("inf")
print("onnx: %s against numpy's %s: largest difference %.2g" % (sys.argv[1], sys.argv[2], error))
sys.exit(0 if error <= 1e-5 else 1)
PY

# .hxir: every sample compiled, three run.
mkdir -p build/samples/out
for model in samples/*.hxir; do
  name=$(basename "$model" .hxir)
  build/tools/hexir-compile "$model" -o "build/samples/$name.hxe"
done
build/tools/hexir-run build/samples/mlp.hxe --device cpu \
  --input x=samples/mlp/input_x.npy --output-dir build/samples/out/mlp --iterations 20
build/tools/hexir-run build/samples/transformer.hxe --device cpu \
  --input x=samples/transformer/input_x.npy --output-dir build/samples/out/transformer --iterations 20
build/tools/hexir-run build/samples/convnet.hxe --device cpu \
  --input x=samples/convnet/input_x.npy --output-dir build/samples/out/convnet --iterations 20
