#!/usr/bin/env bash
# Installs what the build needs (Debian packages) when missing, then
# configures and builds into build/. Sourced by quickstart.sh and test.sh.
set -euo pipefail
cd "$(dirname "$0")/.."

packages=(meson ninja-build cmake g++ pkg-config libflatbuffers-dev flatbuffers-compiler doctest-dev libzstd-dev
          libonnx-dev libprotobuf-dev protobuf-compiler libonnx-testdata
          python3-numpy python3-onnx)
# The sanitizer and fuzz legs of scripts/test.sh build with clang and link
# libFuzzer and the sanitizer runtimes (HEXIR_SANITIZER_PACKAGES=1, set by it).
if [ "${HEXIR_SANITIZER_PACKAGES:-0}" = 1 ]; then
  packages+=(clang libclang-rt-14-dev)
fi
missing=()
for p in "${packages[@]}"; do
  dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
sudo=""
[ "$(id -u)" -ne 0 ] && sudo="sudo"
if [ ${#missing[@]} -gt 0 ]; then
  echo "== installing ${missing[*]}"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}" >/dev/null
fi

# The aarch64 leg of scripts/test.sh (HEXIR_AARCH64_PACKAGES=1, set by it):
# Debian's cross compiler, qemu-user and the arm64 builds of the libraries
# (multiarch, docs/aarch64.md). Not fatal: without them that leg is skipped
# with the reason, the rest of the suite runs.
if [ "${HEXIR_AARCH64_PACKAGES:-0}" = 1 ]; then
  cross=(g++-aarch64-linux-gnu qemu-user libzstd-dev:arm64 libflatbuffers-dev:arm64)
  missing=()
  for p in "${cross[@]}"; do
    dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
  done
  if [ ${#missing[@]} -gt 0 ]; then
    echo "== installing ${missing[*]} (the aarch64 leg)"
    { dpkg --print-foreign-architectures | grep -qx arm64 || $sudo dpkg --add-architecture arm64; } &&
      $sudo apt-get update -qq &&
      DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}" >/dev/null ||
      echo "== could not install ${missing[*]}: the aarch64 leg will be skipped"
  fi
fi

if [ ! -f build/build.ninja ]; then
  meson setup build "$@"
fi
ninja -C build
