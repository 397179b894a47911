#!/usr/bin/env bash
# `pip install .` as a user would, checked: builds the wheel with Debian's
# meson-python (in build-pip/, kept so that a second run is incremental),
# installs it into a scratch venv (--system-site-packages: Debian's numpy and
# onnx; --no-build-isolation --no-index: nothing fetched from PyPI), then,
# outside the checkout and with no HEXIR_* variable, compiles the mlp sample
# and the ONNX sample with hexir.compile, runs both with hexir.load and
# compares them with their numpy references. Last line "pip-check: ok";
# exits non-zero on any failure. Not part of scripts/test.sh: a wheel build
# is a second full build of the libraries (ninja -j2 here; docs/embedding.md).
set -euo pipefail
cd "$(dirname "$0")/.."
src=$PWD
missing=()
for p in python3-mesonpy python3-venv patchelf python3-numpy python3-onnx; do
  dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  sudo=""
  [ "$(id -u)" -ne 0 ] && sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}" >/dev/null
fi

scratch=$(mktemp -d "${TMPDIR:-/tmp}/hexir-pip.XXXXXX")
trap 'rm -rf "$scratch"' EXIT
/usr/bin/python3 -m venv --system-site-packages "$scratch/venv"
"$scratch/venv/bin/pip" install --no-build-isolation --no-index --config-settings=builddir="$src/build-pip" \
  --config-settings=compile-args=-j2 . \
  >"$scratch/pip.log" 2>&1 || { tail -40 "$scratch/pip.log"; echo "pip-check: pip install failed"; exit 1; }
/usr/bin/python3 samples/onnx/make_model.py "$scratch/onnx" >/dev/null
cd "$scratch"
env -u HEXIR_LIBRARY -u HEXIR_COMPILE_LIBRARY -u PYTHONPATH venv/bin/python - "$src/samples" "$scratch/onnx" <<'PY'
import os, sys
import numpy as np
import hexir
samples, onnx_dir = sys.argv[1:3]
venv = os.path.join(os.getcwd(), "venv")
assert hexir.__file__.startswith(venv), "hexir imported from %s, not the venv" % hexir.__file__
program = hexir.compile(os.path.join(samples, "mlp.hxir"), output="mlp.hxe", load=True)
y = program.context()(x=np.load(os.path.join(samples, "mlp", "input_x.npy")))["p"]
assert np.allclose(y, np.load(os.path.join(samples, "mlp", "expected_0.npy")), rtol=1e-4, atol=1e-5)
print("pip-check: mlp.hxir compiled and run from the wheel matches expected_0.npy")
hexir.compile(os.path.join(onnx_dir, "model.onnx"), input_shapes={"input": (1, 3, 16, 16)}, output="model.hxe")
probs = hexir.load("model.hxe").context()(input=np.load(os.path.join(onnx_dir, "input.npy")))["probs"]
assert np.allclose(probs, np.load(os.path.join(onnx_dir, "expected.npy")), rtol=1e-4, atol=1e-6)
print("pip-check: model.onnx compiled and run from the wheel matches numpy's reference")
PY
echo "pip-check: ok ($(venv/bin/pip show hexir | grep -E '^(Name|Version)' | tr '\n' ' '))"
