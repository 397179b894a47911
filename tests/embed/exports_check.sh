#!/usr/bin/env bash
# Checks the dynamic symbol table of libhexir_vm.so (nm -D --defined-only):
#  - every symbol is of the public API: a C function hexir_*, or a C++ symbol
#    that one of vm/libhexir_vm.map's extern "C++" patterns names (so the
#    version script is in effect), each of version HEXIR_0;
#  - none is of the internals, whatever the map says (the backends and their
#    kernels, the verifier, the operator table, the flatbuffers schema, zstd,
#    std:: instantiations, the *Impl classes);
#  - every function hexir/hexir.h declares is exported.
# Prints "ok: ..." per check; exits 77 with "HEXIR_SKIP: reason" when nm or
# c++filt is missing.
#
# usage: exports_check.sh LIBHEXIR_VM_SO SOURCE_DIR
set -euo pipefail
so=$1 src=$2
skip() { echo "HEXIR_SKIP: $*"; exit 77; }
die() { echo "FAILED: $*"; exit 1; }
command -v nm >/dev/null || skip "nm is not installed (apt-get install -y binutils)"
command -v c++filt >/dev/null || skip "c++filt is not installed (apt-get install -y binutils)"

# "NAME@@VERSION" per line; the version definition itself is "HEXIR_0".
versioned=$(nm -D --defined-only "$so" | awk '{print $NF}')
[ -n "$versioned" ] || die "nm -D lists nothing for $so"
unversioned=$(printf '%s\n' "$versioned" | grep -v -e '@@HEXIR_0$' -e '^HEXIR_0$' || true)
[ -z "$unversioned" ] || die "symbols without version HEXIR_0: $(echo $unversioned | head -c 400)"
names=$(printf '%s\n' "$versioned" | grep -v '^HEXIR_0$' | sed 's/@@HEXIR_0$//')

c_names=$(printf '%s\n' "$names" | grep -v '^_Z' || true)
stray=$(printf '%s\n' "$c_names" | grep -v '^hexir_' || true)
[ -z "$stray" ] || die "C symbols outside the C API: $(echo $stray | head -c 400)"

# The map's C++ patterns, as shell globs over demangled names.
mapfile -t patterns < <(sed -n '/extern "C++"/,/};/p' "$src/vm/libhexir_vm.map" | grep -o '[^[:space:]]*;$' | tr -d ';')
[ "${#patterns[@]}" -gt 0 ] || die "no extern \"C++\" patterns in vm/libhexir_vm.map"
cxx_names=$(printf '%s\n' "$names" | grep '^_Z' | c++filt || true)
unlisted=()
while IFS= read -r name; do
  [ -n "$name" ] || continue
  listed=0
  for p in "${patterns[@]}"; do
    # shellcheck disable=SC2053
    if [[ $name == $p ]]; then listed=1; break; fi
  done
  [ $listed = 1 ] || unlisted+=("$name")
done <<<"$cxx_names"
[ ${#unlisted[@]} = 0 ] || die "C++ symbols the map does not name (${#unlisted[@]}): $(printf '%s; ' "${unlisted[@]}" | head -c 600)"

internals=$(printf '%s\n' "$cxx_names" |
  grep -E '^(hexir::(hal::(cpu|cuda)|format|ops|fb|planner|compiler|serializer)::|.*Impl::|.*flatbuffers::|.*ZSTD|std::|[^(]* std::)' || true)
[ -z "$internals" ] || die "internals exported: $(echo "$internals" | head -5)"

missing=()
for f in $(grep -oE '\bhexir_[a-z0-9_]+\(' "$src/vm/include/hexir/hexir.h" | tr -d '(' | sort -u); do
  # A here-string, not a pipe: grep -q stops at the match and, under pipefail, the
  # writer's SIGPIPE would count a found name as missing.
  grep -qx "$f" <<<"$c_names" || missing+=("$f")
done
[ ${#missing[@]} = 0 ] || die "hexir/hexir.h functions not exported: ${missing[*]}"

echo "ok: libhexir_vm.so exports $(printf '%s\n' "$names" | wc -l) symbols of version HEXIR_0:" \
  "$(printf '%s\n' "$c_names" | grep -c .) of the C API (every function of hexir/hexir.h)," \
  "$(printf '%s\n' "$cxx_names" | grep -c .) of the C++ API; none of the internals"
