#!/usr/bin/env bash
# Installs what the build needs (Debian packages) when missing, then
# configures and builds into build/. Sourced by quickstart.sh and test.sh.
set -euo pipefail
cd "$(dirname "$0")/.."

packages=(meson ninja-build cmake g++ pkg-config libflatbuffers-dev flatbuffers-compiler doctest-dev libzstd-dev
          libonnx-dev libprotobuf-dev protobuf-compiler libonnx-testdata
          python3-numpy)
# The sanitizer and fuzz legs of scripts/test.sh build with clang and link
# libFuzzer and the sanitizer runtimes (HEXIR_SANITIZER_PACKAGES=1, set by it).
if [ "${HEXIR_SANITIZER_PACKAGES:-0}" = 1 ]; then
  packages+=(clang libclang-rt-14-dev)
fi
missing=()
for p in "${packages[@]}"; do
  dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "== installing ${missing[*]}"
  sudo=""
  [ "$(id -u)" -ne 0 ] && sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}" >/dev/null
fi

if [ ! -f build/build.ninja ]; then
  meson setup build "$@"
fi
ninja -C build
