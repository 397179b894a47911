#!/usr/bin/env bash
# Installs BUILD_DIR into a temporary prefix (meson install --destdir) and
# builds the samples/embed applications against that prefix's hexir.pc only
# (PKG_CONFIG_LIBDIR: no other .pc; PKG_CONFIG_SYSROOT_DIR: the staged
# prefix), then runs each on the mlp sample compiled by the installed
# hexir-compile, checking its output against expected_0.npy:
#   C    main.c   against libhexir_vm.so   (pkg-config --cflags --libs hexir)
#   C++  main.cc  against libhexir_vm.so
#   C++  main.cc  against libhexir_vm.a    (pkg-config --static --libs hexir)
# and that the installed runtime links nothing of the compiler (compiler, serializer,
# planner, ONNX, protobuf), and libhexir_compile exports its C API only; then
# the installed hexir package (no HEXIR_LIBRARY: it finds the libraries it
# was installed with) compiles and runs the mlp when $PYTHON (default
# /usr/bin/python3) has numpy. Prints "ok: ..." per check; exits 77 with
# "HEXIR_SKIP: reason" when pkg-config or a compiler is missing.
#
# usage: install_check.sh BUILD_DIR SOURCE_DIR    (CC, CXX: the compilers)
set -euo pipefail
build=$1 src=$2
cc=${CC:-cc} cxx=${CXX:-c++}
skip() { echo "HEXIR_SKIP: $*"; exit 77; }
die() { echo "FAILED: $*"; exit 1; }
command -v pkg-config >/dev/null || skip "pkg-config is not installed (apt-get install -y pkg-config)"
command -v "$cc" >/dev/null || skip "no C compiler '$cc'"
command -v "$cxx" >/dev/null || skip "no C++ compiler '$cxx'"

tmp=$(mktemp -d "${TMPDIR:-/tmp}/hexir-install.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
root=$tmp/root
meson install -C "$build" --no-rebuild --destdir "$root" >"$tmp/install.log" 2>&1 ||
  { cat "$tmp/install.log"; die "meson install --destdir failed"; }
pc=$(find "$root" -name hexir.pc -print -quit)
[ -n "$pc" ] || die "no hexir.pc installed under the prefix"
# Ours alone: hexir.pc must resolve without any other .pc (libzstd's included).
export PKG_CONFIG_LIBDIR=${pc%/*} PKG_CONFIG_PATH= PKG_CONFIG_SYSROOT_DIR=$root
cflags=$(pkg-config --cflags hexir)
libs=$(pkg-config --libs hexir)
# A variable inside the staged prefix (pkgconf puts the sysroot in front of some).
var() {
  local v
  v=$(pkg-config --variable="$1" hexir)
  case "$v" in "$root"/*) echo "$v" ;; *) echo "$root$v" ;; esac
}
libdir=$(var libdir)
bindir=$(var prefix)/bin
includedir=$(var includedir)
case "$cflags $libs" in *"$root"*) ;; *) die "pkg-config does not point into the prefix: $cflags $libs" ;; esac
echo "ok: pkg-config --cflags --libs hexir: ${cflags//$root/<prefix>} ${libs//$root/<prefix>}"
for h in hexir/hexir.h hexir/vm.h hexir/generator.h hexir/compile.h hexir/base/npy.h hexir/hal/device.h; do
  [ -f "$includedir/$h" ] || die "header $h not installed"
done
for t in hexir-compile hexir-run hexir-generate hexir-dump hexir-plan; do [ -x "$bindir/$t" ] || die "tool $t not installed"; done
echo "ok: headers and tools installed"

# The runtime pulls in only what running needs.
so=$libdir/libhexir_vm.so.0
[ -f "$so" ] && [ -f "$libdir/libhexir_vm.a" ] || die "libhexir_vm.so.0 and libhexir_vm.a not both installed"
if ldd "$so" | grep -Ei 'protobuf|onnx|flatbuffers'; then die "libhexir_vm.so links the above"; fi
if nm -DC --defined-only "$so" | grep -E 'hexir::(compiler|serializer|planner)::' | head -3 | grep .; then
  die "libhexir_vm.so holds compiler code (above)"
fi
echo "ok: libhexir_vm.so needs $(ldd "$so" | awk '{print $1}' | grep -v -e vdso -e ld-linux | tr '\n' ' ')"
compile_so=$libdir/libhexir_compile.so.0
[ -f "$compile_so" ] || die "libhexir_compile.so.0 not installed"
exports=$(nm -D --defined-only "$compile_so" | awk '$2 == "T" {print $3}' | sort | tr '\n' ' ')
[ "$exports" = "hexir_compile hexir_compile_abi_version " ] || die "libhexir_compile.so exports $exports"
echo "ok: libhexir_compile.so exports $exports"

"$bindir/hexir-compile" "$src/samples/mlp.hxir" -o "$tmp/mlp.hxe" >/dev/null || die "the installed hexir-compile failed"
input=$src/samples/mlp/input_x.npy expected=$src/samples/mlp/expected_0.npy

run() {  # NAME BINARY
  local out
  out=$("$2" "$tmp/mlp.hxe" "$input" "$expected" 2>&1) || { echo "$out"; die "$1: the sample failed"; }
  case "$out" in *"matches $expected"*) echo "ok: $1: ${out##*$'\n'}" ;; *) echo "$out"; die "$1: no match line" ;; esac
}
# shellcheck disable=SC2086
"$cc" -std=c99 -Wall -Wextra -Werror "$src/samples/embed/main.c" -o "$tmp/embed-c" $cflags $libs -lm \
  -Wl,-rpath,"$libdir" || die "C sample does not build against hexir.pc"
run "C sample, shared" "$tmp/embed-c"
# shellcheck disable=SC2086
"$cxx" -std=c++20 -Wall -Wextra -Werror "$src/samples/embed/main.cc" -o "$tmp/embed-cc" $cflags $libs \
  -Wl,-rpath,"$libdir" || die "C++ sample does not build against hexir.pc"
run "C++ sample, shared" "$tmp/embed-cc"
static_libs=$(pkg-config --static --libs hexir)
static_libs=${static_libs/-lhexir_vm/$libdir/libhexir_vm.a}
# shellcheck disable=SC2086
"$cxx" -std=c++20 "$src/samples/embed/main.cc" -o "$tmp/embed-static" $cflags $static_libs ||
  die "C++ sample does not link the static library with pkg-config --static"
if ldd "$tmp/embed-static" | grep -q hexir_vm; then die "the static sample loads libhexir_vm.so"; fi
run "C++ sample, static" "$tmp/embed-static"
# The installed Python package, found on PYTHONPATH alone: it loads the
# libraries installed beside it (_libdir.py), compiles and runs the mlp.
py=${PYTHON:-/usr/bin/python3}
package=$(find "$root" -path '*/hexir/__init__.py' -print -quit)
[ -n "$package" ] && [ -f "${package%/*}/_libdir.py" ] || die "the hexir package (with _libdir.py) is not installed"
if [ -x "$py" ] && "$py" -c 'import numpy' 2>/dev/null; then
  out=$(cd "$tmp" && env -u HEXIR_LIBRARY -u HEXIR_COMPILE_LIBRARY PYTHONDONTWRITEBYTECODE=1 \
    PYTHONPATH="${package%/hexir/__init__.py}" "$py" -c '
import sys, numpy as np, hexir
assert hexir.__file__.startswith(sys.argv[4]), hexir.__file__
ctx = hexir.compile(sys.argv[1], output="mlp-py.hxe", load=True).context()
y = ctx(x=np.load(sys.argv[2]))["p"]
want = np.load(sys.argv[3])
print("matches" if np.allclose(y, want, rtol=1e-4, atol=1e-5) else "differs", np.abs(y - want).max())
' "$src/samples/mlp.hxir" "$input" "$expected" "$root" 2>&1) || { echo "$out"; die "python over the installed package failed"; }
  case "$out" in matches*) echo "ok: Python over the installed library: $out" ;; *) echo "$out"; die "python: wrong result" ;; esac
else
  echo "python over the installed library: skipped ($py has no numpy)"
fi
echo "install: all checks passed"
