#!/usr/bin/env bash
# Builds and runs the whole test suite. The last line is
# "N passed, N failed[, N skipped]", counting doctest test cases summed over
# every test executable (read from meson's testlog.json), and each ONNX node
# test of the conformance runner. An executable that dies before doctest
# prints its summary counts as one failed case.
set -uo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh || { echo "0 passed, 1 failed"; exit 1; }

meson test -C build --print-errorlogs --num-processes 2
meson_rc=$?

log=build/meson-logs/testlog.json
passed=0; failed=0; skipped=0
while IFS= read -r line; do
  name=$(printf '%s' "$line" | grep -o '"name": *"[^"]*"' | head -1 | sed 's/.*: *"//; s/"$//')
  summary=$(printf '%s' "$line" | grep -o '\[doctest\] test cases: *[0-9]* | *[0-9]* passed | *[0-9]* failed | *[0-9]* skipped' | tail -1)
  if [ -z "$summary" ]; then
    echo "test executable '$name' printed no doctest summary: counted as 1 failed"
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
  passed=$((passed + p - runtime_skips)); failed=$((failed + f)); skipped=$((skipped + s + runtime_skips))
done < "$log"

if [ "$meson_rc" -ne 0 ] && [ "$failed" -eq 0 ]; then failed=1; fi
if [ "$skipped" -gt 0 ]; then
  echo "$passed passed, $failed failed, $skipped skipped"
else
  echo "$passed passed, $failed failed"
fi
[ "$failed" -eq 0 ]
