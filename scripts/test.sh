#!/usr/bin/env bash
# Builds and runs the whole test suite, then the sanitizer and fuzz legs. The
# last line is "N passed, N failed[, N skipped]", summed over every leg:
#
#  suite   build/ (the default compiler): doctest test cases summed over every
#          test executable (read from meson's testlog.json), and each ONNX node
#          test of the conformance runner. An executable that dies before
#          doctest prints its summary counts as one failed case.
#  asan    build-asan/ (clang, -Db_sanitize=address,undefined, CUDA off): the
#          same suite, counted the same way. A sanitizer report aborts the
#          executable, so it counts as a failed case.
#  tsan    build-tsan/ (clang, -Db_sanitize=thread): what runs several threads
#          at once: all of test_hal (every cpu kernel on the queue's thread
#          pool; threads_test; two queues on two threads) and the cases of
#          test_vm and test_e2e that run contexts on two threads (by name;
#          the cases left out are not counted as skipped).
#  aarch64 build-aarch64/ (cross/aarch64-linux-gnu.ini: Debian's cross g++,
#          CUDA and ONNX off; only what it runs is built): test_hal (every cpu
#          kernel, the thread pool's stress tests), test_hal_conformance,
#          test_vm and test_e2e, run under qemu-aarch64 (meson's exe_wrapper)
#          and counted as the suite is; test_hal and test_hal_conformance
#          again under HEXIR_MAX_CPU_ISA=portable (the NEON kernels' twins;
#          tests/hal/meson.build leaves out the cases whose code is the same
#          at both levels: doctest counts them as skipped). Skipped, as 1 skipped with the reason,
#          when the cross compiler, qemu or the arm64 libraries cannot be had
#          (docs/aarch64.md).
#  fuzz    the libFuzzer targets of fuzz/ (built in build-asan, ASan+UBSan),
#          each run for HEXIR_FUZZ_SECONDS from its seed corpus: one test each,
#          failed on any finding. What it finds is copied into
#          tests/fuzz/regressions/<target>/ (which the suite replays): commit
#          it with its fix.
#
# Environment:
#  HEXIR_SKIP_SANITIZERS=1  skip the asan, tsan and fuzz legs (a developer's
#                           quick run; ignored when CI=true)
#  HEXIR_FUZZ_SECONDS=N     seconds per fuzz target (default 60)
#  HEXIR_SKIP_AARCH64=1     skip the aarch64 leg (ignored when CI=true)
#
# The time of each leg is printed before the last line.
set -uo pipefail
cd "$(dirname "$0")/.."

sanitizers=1
if [ "${HEXIR_SKIP_SANITIZERS:-0}" = 1 ]; then
  if [ "${CI:-}" = true ]; then
    echo "== HEXIR_SKIP_SANITIZERS=1 ignored: CI=true runs every leg"
  else
    sanitizers=0
  fi
fi
fuzz_seconds=${HEXIR_FUZZ_SECONDS:-60}
aarch64=1
if [ "${HEXIR_SKIP_AARCH64:-0}" = 1 ]; then
  if [ "${CI:-}" = true ]; then
    echo "== HEXIR_SKIP_AARCH64=1 ignored: CI=true runs every leg"
  else
    aarch64=0
  fi
fi

passed=0; failed=0; skipped=0
times=()
now() { date +%s; }
leg_time() { times+=("$1 $(( $(now) - $2 )) s"); }

t=$(now)
HEXIR_SANITIZER_PACKAGES=$sanitizers HEXIR_AARCH64_PACKAGES=$aarch64 scripts/setup.sh ||
  { echo "0 passed, 1 failed"; exit 1; }
leg_time "build" "$t"

# count_testlog DIR MESON_RC [filtered]: adds the doctest counts of DIR's
# testlog.json. "filtered": the run selected test cases by name, so doctest's
# skipped count (the cases left out) is not added.
count_testlog() {
  local log=$1/meson-logs/testlog.json meson_rc=$2 filtered=${3:-} failed_before=$failed line name summary runner runtime_skips p f s
  if [ ! -f "$log" ]; then
    echo "no $log: counted as 1 failed"
    failed=$((failed + 1))
    return
  fi
  while IFS= read -r line; do
    name=$(printf '%s' "$line" | grep -o '"name": *"[^"]*"' | head -1 | sed 's/.*: *"//; s/"$//')
    summary=$(printf '%s' "$line" | grep -o '\[doctest\] test cases: *[0-9]* | *[0-9]* passed | *[0-9]* failed | *[0-9]* skipped' | tail -1)
    if [ -z "$summary" ]; then
      echo "test executable '$name' ($1) printed no doctest summary: counted as 1 failed"
      failed=$((failed + 1))
      continue
    fi
    read -r p f s < <(printf '%s' "$summary" | sed -E 's/.*test cases: *[0-9]+ \| *([0-9]+) passed \| *([0-9]+) failed \| *([0-9]+) skipped.*/\1 \2 \3/')
    # A runner over external test data (the ONNX node tests) counts each of its
    # tests: its own summary line replaces its one doctest case.
    runner=$(printf '%s' "$line" | grep -o '\[onnx-node\] tests: *[0-9]* | *[0-9]* passed | *[0-9]* failed | *[0-9]* skipped' | tail -1)
    if [ -n "$runner" ]; then
      read -r p f s < <(printf '%s' "$runner" | sed -E 's/.*tests: *[0-9]+ \| *([0-9]+) passed \| *([0-9]+) failed \| *([0-9]+) skipped.*/\1 \2 \3/')
    fi
    # Cases that skip at run time (no GPU) print "HEXIR_SKIP:" and count as skipped, not passed.
    runtime_skips=$(printf '%s' "$line" | grep -o 'HEXIR_SKIP:' | wc -l)
    [ "$filtered" = filtered ] && s=0
    passed=$((passed + p - runtime_skips)); failed=$((failed + f)); skipped=$((skipped + s + runtime_skips))
  done < "$log"
  if [ "$meson_rc" -ne 0 ] && [ "$failed" -eq "$failed_before" ]; then failed=$((failed + 1)); fi
}

t=$(now)
meson test -C build --print-errorlogs --num-processes 2
count_testlog build $?
leg_time "suite" "$t"

# The executables meson's tests run (and the tools they depend on) in DIR,
# as ninja targets: the sanitizer builds build nothing else.
test_targets() {
  python3 - "$1" <<'EOF'
import json, os, sys
b = os.path.abspath(sys.argv[1])
tests = json.load(open(os.path.join(b, 'meson-info/intro-tests.json')))
targets = {t['id']: t for t in json.load(open(os.path.join(b, 'meson-info/intro-targets.json')))}
out = set()
for t in tests:
    out.add(os.path.relpath(t['cmd'][0], b))
    for d in t.get('depends', []):
        for f in targets.get(d, {}).get('filename', []):
            out.add(os.path.relpath(f, b))
print('\n'.join(sorted(out)))
EOF
}

# Sanitizer builds: clang, CUDA off, asserts on, -O1 with line tables (fast
# to compile, readable reports). -O1 as meson's optimization option, not a
# compiler flag: the test executables' own override (tests/meson.build, -O0)
# then applies here too.
sanitizer_flags="'-gline-tables-only','-fno-omit-frame-pointer'"
sanitizer_build="-Doptimization=1 -Ddebug=false"

# sanitizer_setup DIR MESON_OPTIONS...: DIR configured with clang++ and the
# options: set up when missing (or made with another compiler), otherwise
# brought up to date with meson configure (nothing rebuilds when they match).
sanitizer_setup() {
  local dir=$1
  shift
  if [ -f "$dir/build.ninja" ] && ! grep -q '^ command = clang++ ' "$dir/build.ninja"; then
    echo "== $dir was configured with another compiler: set up again with clang++"
    rm -rf "$dir"
  fi
  if [ -f "$dir/build.ninja" ]; then
    meson configure "$dir" "$@" >/dev/null
  else
    CXX=clang++ meson setup "$dir" "$@" >/dev/null
  fi
}
fuzz_targets=(executable hxir npy plan_diff)

asan_leg() {
  local t rc
  t=$(now)
  # -fsanitize=fuzzer-no-link: the libraries carry libFuzzer's coverage, so
  # this one build serves both the suite and the fuzz targets.
  sanitizer_setup build-asan -Dcuda=disabled -Dfuzz=enabled -Db_sanitize=address,undefined \
    -Db_lundef=false -Db_ndebug=false $sanitizer_build \
    "-Dcpp_args=[$sanitizer_flags,'-fno-sanitize-recover=all','-fsanitize=fuzzer-no-link']" || return 1
  # The onnx target exists when the build found ONNX (fuzz/meson.build). grep
  # reads the whole list: with -q it stopped at the match, ninja died of
  # SIGPIPE and pipefail made the test false (the onnx fuzzer was skipped
  # on some runs).
  if ninja -C build-asan -t targets all 2>/dev/null | grep '^fuzz/onnx_fuzzer:' >/dev/null; then
    fuzz_targets+=(onnx)
  else
    echo "== fuzz onnx: skipped (build-asan has no ONNX front end: apt-get install libonnx-dev libprotobuf-dev)"
  fi
  local fuzzers=()
  for f in "${fuzz_targets[@]}"; do fuzzers+=("fuzz/${f}_fuzzer"); done
  # shellcheck disable=SC2046
  ninja -C build-asan -j2 $(test_targets build-asan) "${fuzzers[@]}" || return 1
  leg_time "asan build" "$t"
  t=$(now)
  ASAN_OPTIONS=halt_on_error=1:abort_on_error=1:detect_leaks=1:detect_stack_use_after_return=1:check_initialization_order=1:strict_init_order=1 \
  UBSAN_OPTIONS=halt_on_error=1:abort_on_error=1:print_stacktrace=1 \
    meson test -C build-asan --no-rebuild --print-errorlogs --num-processes 2 --timeout-multiplier 4
  rc=$?
  count_testlog build-asan $rc
  leg_time "asan suite" "$t"
}

# Under TSan: all of test_hal (every cpu kernel runs on the queue's thread
# pool, one thread per core; threads_test at 1, 2 and 3 threads; two queues of
# one device on two threads), and the test cases of the vm, e2e and C API
# tests that run contexts on two threads or cancel an invoke from another
# thread. ('?' for a space: meson splits --test-args.)
tsan_cases='*two?contexts*,*two?threads*,*concurrent*,*cancel*'
tsan_leg() {
  local t rc
  t=$(now)
  sanitizer_setup build-tsan -Dcuda=disabled -Donnx=disabled -Db_sanitize=thread -Db_lundef=false \
    -Db_ndebug=false $sanitizer_build "-Dcpp_args=[$sanitizer_flags]" || return 1
  ninja -C build-tsan -j2 tests/hal/test_hal tests/vm/test_vm tests/vm/test_vm_control tests/e2e/test_e2e \
    tests/embed/test_embed_c_api || return 1
  leg_time "tsan build" "$t"
  t=$(now)
  export TSAN_OPTIONS=halt_on_error=1:abort_on_error=1:second_deadlock_stack=1
  # The timeouts as the asan leg's: unoptimized and instrumented, test_hal took 33-40 s of
  # meson's 30 on a 2-core EPYC host (12 s on the host before it).
  meson test -C build-tsan --no-rebuild --print-errorlogs --num-processes 1 --timeout-multiplier 4 hal
  rc=$?
  count_testlog build-tsan $rc
  meson test -C build-tsan --no-rebuild --print-errorlogs --num-processes 2 --timeout-multiplier 4 vm vm_control e2e embed_c_api \
    "--test-args=--test-case=$tsan_cases"
  rc=$?
  count_testlog build-tsan $rc filtered
  unset TSAN_OPTIONS
  leg_time "tsan tests" "$t"
}

# The aarch64 leg: what it builds (the tools are what test_e2e starts) and
# the meson tests it runs: the kernel tests at both ISA levels, NEON and
# portable (tests/meson.build), in one run so the two long ones overlap;
# e2e at NEON only, to keep the leg short.
aarch64_targets=(tests/hal/test_hal tests/hal_conformance/test_hal_conformance tests/vm/test_vm
                 tests/e2e/test_e2e tools/hexir-compile tools/hexir-run)
aarch64_tests=(hal 'hal (portable kernels)' hal_conformance 'hal_conformance (portable kernels)' vm e2e)

# Why the aarch64 leg cannot run here; empty when it can.
aarch64_missing() {
  local what=()
  command -v aarch64-linux-gnu-g++ >/dev/null 2>&1 || what+=("aarch64-linux-gnu-g++ (g++-aarch64-linux-gnu)")
  command -v qemu-aarch64 >/dev/null 2>&1 || what+=("qemu-aarch64 (qemu-user)")
  [ -e /lib/ld-linux-aarch64.so.1 ] || what+=("the arm64 loader (libc6:arm64)")
  local lib
  for lib in libzstd flatbuffers; do
    PKG_CONFIG_LIBDIR=/usr/lib/aarch64-linux-gnu/pkgconfig pkg-config --exists "$lib" 2>/dev/null ||
      what+=("$lib for arm64 ($lib-dev:arm64)")
  done
  [ ${#what[@]} -eq 0 ] || echo "no ${what[*]}; apt-get install g++-aarch64-linux-gnu qemu-user, and after dpkg --add-architecture arm64, libzstd-dev:arm64 libflatbuffers-dev:arm64"
}

aarch64_leg() {
  local t rc missing
  t=$(now)
  missing=$(aarch64_missing)
  if [ -n "$missing" ]; then
    echo "== aarch64: skipped: $missing"
    skipped=$((skipped + 1))
    return 0
  fi
  if [ ! -f build-aarch64/build.ninja ]; then
    meson setup build-aarch64 --cross-file cross/aarch64-linux-gnu.ini -Dcuda=disabled -Donnx=disabled \
      >/dev/null || return 1
  fi
  ninja -C build-aarch64 -j2 "${aarch64_targets[@]}" || return 1
  leg_time "aarch64 build" "$t"
  t=$(now)
  # Emulated code runs several times slower than native: the tests' timeouts x 10.
  meson test -C build-aarch64 --no-rebuild --print-errorlogs --num-processes 2 --timeout-multiplier 10 \
    "${aarch64_tests[@]}"
  rc=$?
  count_testlog build-aarch64 $rc
  leg_time "aarch64 tests (qemu-aarch64)" "$t"
}

# Seed corpora, one folder per target, under build-asan/fuzz-run/seeds.
make_seeds() {
  local seeds=$1 compile=build-asan/tools/hexir-compile src opts i name
  mkdir -p "$seeds"/{executable,hxir,npy,plan_diff,onnx}
  # executable: small programs and the convnet sample, compiled under several plans.
  i=0
  for src in tests/fuzz/seeds/programs/*.hxir tests/fuzz/seeds/hxir/ops.hxir samples/convnet.hxir; do
    for opts in "--plan=naive" "--plan=arena" "--plan=free-at-last-use" "--schedule=memory --no-in-place" \
      "--compress=zstd --data-checksum"; do
      name=$(basename "$src" .hxir)
      # shellcheck disable=SC2086
      "$compile" "$src" -o "$seeds/executable/$name-$i.hxe" --plan-budget-ms 2 $opts >/dev/null 2>&1 ||
        echo "seed: $compile $src $opts failed"
      i=$((i + 1))
    done
  done
  # Host-space slots (Evict, Prefetch): the offload program under a device budget.
  "$compile" tests/fuzz/seeds/programs/offload.hxir -o "$seeds/executable/offload-budget.hxe" --plan-budget-ms 2 \
    --memory-budget device=32KiB >/dev/null 2>&1 || echo "seed: offload.hxir under a device budget failed"
  # Streamed weights (a Host RODATA section, Prefetch from constants): the mlp under a device budget.
  "$compile" samples/mlp.hxir -o "$seeds/executable/mlp-streamed.hxe" --plan-budget-ms 2 \
    --memory-budget device=200KiB >/dev/null 2>&1 || echo "seed: mlp.hxir with streamed weights failed"
  cp samples/*.hxir tests/fuzz/seeds/hxir/*.hxir tests/fuzz/seeds/programs/*.hxir "$seeds/hxir/"
  cp tests/fuzz/seeds/npy/*.npy "$seeds/npy/"
  find samples -name '*.npy' -size -16k -exec cp {} "$seeds/npy/" \;
  cp tests/fuzz/seeds/plan_diff/* "$seeds/plan_diff/"
  # onnx: the hand-made models, and every ONNX node test's model (as the onnx_nodes test finds them).
  cp tests/fuzz/seeds/onnx/*.onnx "$seeds/onnx/"
  local node_tests=${HEXIR_ONNX_NODE_TESTS:-/usr/share/libonnx-testdata/data/node} d
  if [ -d "$node_tests" ]; then
    for d in "$node_tests"/*/; do
      [ -f "$d/model.onnx" ] && cp "$d/model.onnx" "$seeds/onnx/$(basename "$d").onnx"
    done
  else
    echo "seed: ONNX node tests not found at $node_tests (apt-get install libonnx-testdata): onnx seeds are tests/fuzz/seeds/onnx only"
  fi
}

# run_fuzzer TARGET: one libFuzzer run; prints its verdict and throughput.
run_fuzzer() {
  local target=$1 root=build-asan/fuzz-run rc
  local dir=$root/$target
  mkdir -p "$dir/corpus" "$dir/artifacts" tests/fuzz/regressions/"$target"
  ASAN_OPTIONS=detect_leaks=1:detect_stack_use_after_return=1 \
  UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
  HEXIR_FUZZ_SCRATCH=$PWD/$root/scratch \
    build-asan/fuzz/"${target}"_fuzzer -max_total_time="$fuzz_seconds" -timeout=30 -rss_limit_mb=3072 \
      -print_final_stats=1 -artifact_prefix="$dir/artifacts/" \
      "$dir/corpus" "$root/seeds/$target" tests/fuzz/regressions/"$target" > "$dir/log" 2>&1
  rc=$?
  echo "$rc" > "$dir/rc"
}

fuzz_leg() {
  local t target rc runs speed cov corpus found a
  t=$(now)
  rm -rf build-asan/fuzz-run
  mkdir -p build-asan/fuzz-run
  make_seeds build-asan/fuzz-run/seeds
  # Two at a time (libFuzzer runs one thread; the machine has two cores).
  run_fuzzer executable & run_fuzzer plan_diff & wait
  run_fuzzer hxir & run_fuzzer npy & wait
  case " ${fuzz_targets[*]} " in *" onnx "*) run_fuzzer onnx ;; esac
  for target in "${fuzz_targets[@]}"; do
    local dir=build-asan/fuzz-run/$target
    rc=$(cat "$dir/rc" 2>/dev/null || echo 1)
    runs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$dir/log" | grep -o '[0-9]*$')
    speed=$(grep -o 'stat::average_exec_per_sec: *[0-9]*' "$dir/log" | grep -o '[0-9]*$')
    cov=$(grep -o 'cov: [0-9]*' "$dir/log" | tail -1 | grep -o '[0-9]*$')
    corpus=$(find "$dir/corpus" -type f | wc -l)
    # Findings: crash-, leak-, timeout-, oom- (slow-unit- files are only reported).
    found=$(find "$dir/artifacts" -type f ! -name 'slow-unit-*' | wc -l)
    if [ "$rc" -eq 0 ] && [ "$found" -eq 0 ]; then
      passed=$((passed + 1))
      echo "fuzz $target: ok, ${runs:-?} runs in ${fuzz_seconds} s (${speed:-?} exec/s), coverage ${cov:-?}, ${corpus} new corpus inputs"
    else
      failed=$((failed + 1))
      echo "fuzz $target: FAILED (libFuzzer exit $rc, ${runs:-?} runs, ${speed:-?} exec/s); log $dir/log:"
      grep -E 'ERROR|SUMMARY|==[0-9]+==|runtime error|plan_diff:|verifier refuses|Test unit written|#[0-9]+ +in ' "$dir/log" | head -40
      for a in "$dir"/artifacts/*; do
        [ -f "$a" ] || continue
        case $(basename "$a") in slow-unit-*) continue ;; esac
        cp "$a" tests/fuzz/regressions/"$target"/
        echo "  kept as tests/fuzz/regressions/$target/$(basename "$a") (commit it with its fix)"
      done
    fi
  done
  leg_time "fuzz (${#fuzz_targets[@]} targets x ${fuzz_seconds} s, 2 at a time)" "$t"
}

if [ "$aarch64" -eq 1 ]; then
  aarch64_leg || { echo "== the aarch64 build failed: counted as 1 failed"; failed=$((failed + 1)); }
else
  echo "== HEXIR_SKIP_AARCH64=1: aarch64 leg skipped"
fi

if [ "$sanitizers" -eq 1 ]; then
  asan_leg || { echo "== the asan build failed: counted as 1 failed"; failed=$((failed + 1)); }
  if [ -x build-asan/fuzz/plan_diff_fuzzer ]; then
    fuzz_leg
  else
    echo "== no fuzz targets (asan build failed): ${#fuzz_targets[@]} failed"
    failed=$((failed + ${#fuzz_targets[@]}))
  fi
  tsan_leg || { echo "== the tsan build failed: counted as 1 failed"; failed=$((failed + 1)); }
else
  echo "== HEXIR_SKIP_SANITIZERS=1: asan, tsan and fuzz legs skipped"
fi

echo "== times: ${times[*]/%/;}"
if [ "$skipped" -gt 0 ]; then
  echo "$passed passed, $failed failed, $skipped skipped"
else
  echo "$passed passed, $failed failed"
fi
[ "$failed" -eq 0 ]
