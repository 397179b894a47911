"""The Python package's Context (python/hexir) used from several threads and
bounded: one context on two threads is refused, never a wrong answer;
cancel() from another thread, a deadline and the loop limit stop a loop of
2^62 iterations. Run by tests/embed/install_test.cc:

    python3 python_context_test.py HEXIR_COMPILE SAMPLES_DIR SCRATCH_DIR

with HEXIR_LIBRARY naming the libhexir_vm.so under test. Prints one line per
check and "python context: N passed, M failed"; exits 1 on any failure, 77
(skipped) when numpy is missing. Every loop is bounded by a count, never by
time."""

import os
import subprocess
import sys
import threading

from checks import check, error_of, finish, hexir, np  # noqa: E402

compile_tool, samples, scratch = sys.argv[1:4]
os.makedirs(scratch, exist_ok=True)


def compile_hxir(source, name):
    out = os.path.join(scratch, name + ".hxe")
    subprocess.run([compile_tool, source, "-o", out], check=True, stdout=subprocess.DEVNULL)
    return out


# a <- a + x, 2^62 times (endless) or twice (quick): x * 3.
LOOP = """module @loop
func @endless(%x: f32[4]) -> f32[4] {
  %r = for %i = 0 to 4611686018427387904 step 1 iter(%a = %x) {
    %a2 = call @add(%a, %x) : f32[4]
    yield %a2
  }
  return %r
}
func @quick(%x: f32[4]) -> f32[4] {
  %r = for %i = 0 to 2 step 1 iter(%a = %x) {
    %a2 = call @add(%a, %x) : f32[4]
    yield %a2
  }
  return %r
}
"""
loop_source = os.path.join(scratch, "loop.hxir")
with open(loop_source, "w") as f:
    f.write(LOOP)
loop = hexir.load(compile_hxir(loop_source, "loop"), threads=1)
x = np.array([1, 2, 3, 4], dtype=np.float32)


def quick(ctx):
    """The quick function's one result."""
    (result,) = ctx("quick", x=x).values()
    return result


def cancel_until_it_lands(ctx):
    while not ctx.cancel():
        pass


# cancel(): nothing running does nothing; from another thread it stops the endless call.
ctx = loop.context()
check(ctx.cancel() is False, "cancel with no call running returns False")
canceller = threading.Thread(target=cancel_until_it_lands, args=(ctx,))
canceller.start()
e = error_of(lambda: ctx("endless", x=x))
canceller.join()
check(e is not None and e.code == "CANCELLED" and "cancelled" in str(e),
      "cancel from another thread: %s" % (e and e.code))
check(np.array_equal(quick(ctx), 3 * x), "the next call runs normally after a cancel")

# A deadline: 1 ms stops the endless call; None takes it away.
check(ctx.deadline is None and ctx.max_loop_iterations == 2**32, "no deadline and 2**32 loop iterations by default")
ctx.deadline = 0.001
check(ctx.deadline == 0.001, "deadline reads back")
e = error_of(lambda: ctx("endless", x=x))
check(e is not None and e.code == "DEADLINE_EXCEEDED" and "deadline" in str(e),
      "a deadline of 1 ms stops a loop of 2^62 iterations: %s" % (e and e.code))
ctx.set_deadline(3600)
check(np.array_equal(quick(ctx), 3 * x), "a generous deadline lets a short loop finish")
ctx.deadline = None
check(ctx.deadline is None, "deadline None: no limit")
for bad in (-1, float("nan"), "soon"):
    e = error_of(lambda: setattr(ctx, "deadline", bad))
    check(e is not None and e.code == "INVALID_ARGUMENT", "deadline %r refused: %s" % (bad, e))

# The loop limit.
ctx.max_loop_iterations = 100
e = error_of(lambda: ctx("endless", x=x))
check(e is not None and e.code == "RESOURCE_EXHAUSTED" and "limit" in str(e),
      "max_loop_iterations 100 stops a loop of 2^62 iterations: %s" % (e and e.code))
check(np.array_equal(quick(ctx), 3 * x), "a loop within the limit runs")
ctx.max_loop_iterations = np.int64(10)
check(ctx.max_loop_iterations == 10, "a numpy integer is a limit")
ctx.max_loop_iterations = None
check(ctx.max_loop_iterations is None, "max_loop_iterations None: no limit")
for bad in (-1, 2**64, 1.5, True):
    e = error_of(lambda: setattr(ctx, "max_loop_iterations", bad))
    check(e is not None and e.code == "INVALID_ARGUMENT", "max_loop_iterations %r refused: %s" % (bad, e))

# One context, two threads: while the endless call runs, another thread's call
# is refused; it never runs alongside. Then cancel ends the endless one.
ctx = loop.context()
outcome = {}


def run_endless():
    while True:  # refused itself while a quick call runs: tried again
        e = error_of(lambda: ctx("endless", x=x))
        if e is None or e.code != "FAILED_PRECONDITION":
            outcome["endless"] = e
            return


runner = threading.Thread(target=run_endless)
runner.start()
wrong = 0
while True:
    try:
        if not np.array_equal(quick(ctx), 3 * x):
            wrong += 1
    except hexir.Error as e:
        refusal = e
        break
check(wrong == 0, "quick calls before the refusal were right")
check(refusal.code == "FAILED_PRECONDITION" and "use one context per thread" in str(refusal),
      "a second thread is refused: %s %s" % (refusal.code, refusal))
cancel_until_it_lands(ctx)
runner.join()
e = outcome.get("endless")
check(e is not None and e.code == "CANCELLED", "the endless call was cancelled: %s" % (e and e.code))

# Two threads hammering one context with different inputs: each call is
# right or refused, never wrong.
mlp = hexir.load(compile_hxir(os.path.join(samples, "mlp.hxir"), "mlp"), threads=1)
ctx = mlp.context()
inputs = [np.load(os.path.join(samples, "mlp", "input_x.npy"))]
inputs.append((0.5 - inputs[0]).astype(np.float32))
expected = [ctx(x=a)["p"] for a in inputs]
tallies = [{"ok": 0, "refused": 0, "wrong": 0, "other": []} for _ in inputs]


def hammer(i):
    t = tallies[i]
    for _ in range(1500):
        try:
            y = ctx(x=inputs[i])["p"]
        except hexir.Error as e:
            if e.code == "FAILED_PRECONDITION" and "use one context per thread" in str(e):
                t["refused"] += 1
            else:
                t["other"].append(str(e))
            continue
        t["ok"] += 1
        if not np.allclose(y, expected[i], rtol=1e-4, atol=1e-5):
            t["wrong"] += 1


threads = [threading.Thread(target=hammer, args=(i,)) for i in range(2)]
for t in threads:
    t.start()
for t in threads:
    t.join()
print("two threads: ok %d + %d, refused %d + %d" % (tallies[0]["ok"], tallies[1]["ok"], tallies[0]["refused"],
                                                    tallies[1]["refused"]))
check(all(t["wrong"] == 0 for t in tallies), "two threads on one context: no wrong answer")
check(all(not t["other"] for t in tallies), "two threads on one context: no other error %s" %
      [t["other"][:1] for t in tallies])

finish("python context")
