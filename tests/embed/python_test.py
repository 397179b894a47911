"""The Python package (python/hexir) over the C API, run by c_api_test.cc's
wrapper with Debian's python3 and python3-numpy:

    python3 python_test.py HEXIR_COMPILE SAMPLES_DIR SCRATCH_DIR

with HEXIR_LIBRARY naming the libhexir_vm.so under test. Compiles the
samples, runs each through hexir.load / program.context() / ctx(**inputs)
and compares every output with the sample's expected_N.npy; then the
errors. Prints one line per check and "python: N passed, M failed"; exits 1
on any failure, 77 (skipped) when numpy is missing."""

import os
import subprocess
import sys

try:
    import numpy as np
except ImportError:
    print("HEXIR_SKIP: python3 has no numpy (apt-get install -y python3-numpy)")
    sys.exit(77)

compile_tool, samples, scratch = sys.argv[1:4]
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))
import hexir  # noqa: E402

passed = failed = 0


def check(ok, what):
    global passed, failed
    if ok:
        passed += 1
        print("ok: " + what)
    else:
        failed += 1
        print("FAILED: " + what)


def compile_hxir(source, name):
    out = os.path.join(scratch, name + ".hxe")
    subprocess.run([compile_tool, source, "-o", out], check=True, stdout=subprocess.DEVNULL)
    return out


def expect_error(code, part, f, what):
    try:
        f()
    except hexir.Error as e:
        check(e.code == code and part in str(e), "%s: %s %s" % (what, e.code, e))
        return
    check(False, what + ": no error raised")


check(hexir.abi_version() == hexir.ABI_VERSION, "ABI version %d" % hexir.abi_version())

# Every sample: its inputs input_<name>.npy, its outputs expected_<index>.npy.
for sample in ("mlp", "convnet", "transformer"):
    program = hexir.load(compile_hxir(os.path.join(samples, sample + ".hxir"), sample))
    fn = program.functions["main"]
    inputs = {t.name: np.load(os.path.join(samples, sample, "input_%s.npy" % t.name)) for t in fn.inputs}
    # Staged: the arguments through device buffers (hexir_buffer_*), as on cuda.
    for ctx, how in ((program.context(), ""), (program.context(staged=True), "staged ")):
        for run in range(2):  # a context runs again with the same results
            out = ctx(**inputs)
            check(list(out) == [t.name or str(j) for j, t in enumerate(fn.outputs)],
                  "%s%s: output names" % (how, sample))
            for j, (name, got) in enumerate(out.items()):
                want = np.load(os.path.join(samples, sample, "expected_%d.npy" % j))
                same = got.shape == want.shape and got.dtype == want.dtype and (
                    np.array_equal(got, want) if got.dtype.kind in "iub" else
                    np.allclose(got, want, rtol=1e-4, atol=1e-5))
                check(same, "%s%s run %d: output %d '%s' %s%s matches expected_%d.npy" % (
                    how, sample, run, j, name, got.dtype, list(got.shape), j))

# Reflection.
program = hexir.load(compile_hxir(os.path.join(samples, "mlp.hxir"), "mlp"), threads=1)
main = program.functions["main"]
check(main.inputs[0].shape == (8, 128) and main.inputs[0].dtype == "f32" and main.inputs[0].byte_size == 4096,
      "mlp: input x f32[8,128], 4096 bytes")
check(program.memory["arena_bytes"] > 0 and program.memory["context_bytes"] >= program.memory["arena_bytes"],
      "mlp: memory %s" % program.memory)
check(program.memory["streamed_constant_bytes"] == 0 and program.memory["host_arena_bytes"] == 0,
      "mlp: no host memory space without a budget: %s" % program.memory)

# A donated input: the caller's array is left alone, the result comes back.
donate = os.path.join(scratch, "donate.hxir")
with open(donate, "w") as f:
    f.write("module @donate\nfunc @step(%cache: f32[4] donate, %x: f32[4]) -> (f32[4]) {\n"
            "  %y = call @add(%cache, %x) : f32[4]\n  return %y\n}\n")
program = hexir.load(compile_hxir(donate, "donate"))
check(program.functions["step"].inputs[0].donated_to == 0, "donate: cache donated to output 0")
cache = np.arange(4, dtype=np.float32)
for staged in (False, True):
    out = program.context(staged=staged)(cache=cache, x=np.full(4, 10, np.float32))
    check(np.array_equal(list(out.values())[0], [10, 11, 12, 13]) and np.array_equal(cache, [0, 1, 2, 3]),
          "donate%s: result %s, caller's cache unchanged" % (" staged" if staged else "", list(out.values())[0]))

# Errors of the C API, raised with its message.
ctx = hexir.load(compile_hxir(os.path.join(samples, "mlp.hxir"), "mlp")).context()
expect_error("INVALID_ARGUMENT", "expected f32[8,128], got f32[4,128]",
             lambda: ctx(x=np.zeros((4, 128), np.float32)), "wrong shape")
expect_error("INVALID_ARGUMENT", "got i32[8,128]", lambda: ctx(x=np.zeros((8, 128), np.int32)), "wrong dtype")
staged = hexir.load(os.path.join(scratch, "mlp.hxe")).context(staged=True)
expect_error("INVALID_ARGUMENT", "expected f32[8,128], got f32[8,64]",
             lambda: staged(x=np.zeros((8, 64), np.float32)), "staged, wrong shape")
expect_error("INVALID_ARGUMENT", "missing x", lambda: ctx(), "missing input")
expect_error("NOT_FOUND", "no function 'nope'", lambda: ctx("nope", x=1), "unknown function")
expect_error("NOT_FOUND", "cannot open", lambda: hexir.load(os.path.join(scratch, "absent.hxe")), "absent file")
bad = os.path.join(scratch, "bad.hxe")
with open(bad, "wb") as f:
    f.write(b"HXE1" + b"\0" * 200)
expect_error("DATA_LOSS", "", lambda: hexir.load(bad), "corrupt file")
expect_error("INVALID_ARGUMENT", "tpu", lambda: hexir.load(os.path.join(scratch, "mlp.hxe"), device="tpu"),
             "unknown device")

print("python: %d passed, %d failed" % (passed, failed))
sys.exit(1 if failed else 0)
