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

from checks import check, finish, hexir, np  # noqa: E402

compile_tool, samples, scratch = sys.argv[1:4]


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

# A donated input is handed over: the result is computed into the caller's
# array itself (no copy), unless it has to be converted or made contiguous.
donate = os.path.join(scratch, "donate.hxir")
with open(donate, "w") as f:
    f.write("module @donate\nfunc @step(%cache: f32[4] donate, %x: f32[4]) -> (f32[4]) {\n"
            "  %y = call @add(%cache, %x) : f32[4]\n  return %y\n}\n")
program = hexir.load(compile_hxir(donate, "donate"))
check(program.functions["step"].inputs[0].donated_to == 0, "donate: cache donated to output 0")
ten = np.full(4, 10, np.float32)
for staged in (False, True):
    how = "donate%s" % (" staged" if staged else "")
    ctx = program.context(staged=staged)
    cache = np.arange(4, dtype=np.float32)
    address = cache.ctypes.data
    out = ctx(cache=cache, x=ten)["y"]
    check(out is cache and cache.ctypes.data == address and np.array_equal(cache, [10, 11, 12, 13]),
          "%s: the result is the caller's array, written in place: %s" % (how, cache))
    out = ctx(cache=cache, x=ten)["y"]  # the same array again: the previous result is the next state
    check(out is cache and np.array_equal(cache, [20, 21, 22, 23]), "%s: donated twice: %s" % (how, cache))
    readonly = np.arange(4, dtype=np.float32)
    readonly.flags.writeable = False
    wide = np.arange(4, dtype=np.float64)
    strided = np.arange(8, dtype=np.float32)[::2]
    for name, kept in (("read-only", readonly), ("float64", wide), ("strided", strided)):
        before = kept.copy()
        out = ctx(cache=kept, x=ten)["y"]
        check(out is not kept and np.array_equal(out, before + 10) and np.array_equal(kept, before),
              "%s: a %s array is copied, left alone: result %s" % (how, name, out))
expect_error("INVALID_ARGUMENT", "input 'cache' of function 'step' (f32[4]): the value 1e+300 at index 1 of the numpy "
             "float64 array overflows f32", lambda: program.context()(cache=np.array([0, 1e300, 0, 0]), x=ten),
             "donate: a float64 cache that overflows f32 (a flat index)")
state = np.zeros(4, np.float32)
expect_error("INVALID_ARGUMENT", "donated input 'cache' of function 'step' overlaps input 'x'",
             lambda: program.context()(cache=state, x=state), "donate: the same array as cache and x")

# Inputs of another dtype are converted by value: every integer that fits,
# every float that stays finite; the first value that does not is named with
# its index. dtypes.hxir has one function per dtype, x: T[2,3] -> T[6].
dtypes = os.path.join(scratch, "dtypes.hxir")
with open(dtypes, "w") as f:
    f.write("module @dtypes\n")
    for t in ("f32", "f16", "i32", "i64", "i8", "u8", "bool"):
        f.write("func @%s(%%x: %s[2,3]) -> (%s[6]) {\n  %%y = call @reshape(%%x) : %s[6]\n  return %%y\n}\n" % (
            t, t, t, t))
    f.write("func @scalar(%x: f32[]) -> (f32[]) {\n  %y = call @add(%x, %x) : f32[]\n  return %y\n}\n")
program = hexir.load(compile_hxir(dtypes, "dtypes"))
ctx, unsafe = program.context(), program.context(cast="unsafe")
targets = {"i8": np.int8, "u8": np.uint8, "i32": np.int32, "i64": np.int64}
sources = (np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32, np.uint64)
fits = refused = wraps = 0
for target, tt in targets.items():
    lo, hi = int(np.iinfo(tt).min), int(np.iinfo(tt).max)
    for st in sources:
        s_lo, s_hi = int(np.iinfo(st).min), int(np.iinfo(st).max)
        edges = [v for v in (lo, hi, 0, 1) if s_lo <= v <= s_hi]
        x = np.array((edges * 6)[:6], st).reshape(2, 3)
        got = ctx(target, x=x)["y"]
        ok = got.dtype == tt and [int(v) for v in got] == [int(v) for v in x.reshape(6)]
        fits += ok
        check(ok, "cast %s -> %s: the edges %s pass exactly" % (np.dtype(st), target, edges)) if not ok else None
        for bad in (lo - 1, hi + 1, s_lo, s_hi):
            if not (s_lo <= bad <= s_hi) or lo <= bad <= hi:
                continue
            x = np.ones((2, 3), st)
            x[1, 2] = bad
            what = "cast %s %d -> %s" % (np.dtype(st), bad, target)
            try:
                ctx(target, x=x)
                check(False, what + ": no error raised")
            except hexir.Error as e:
                ok = e.code == "INVALID_ARGUMENT" and "input 'x' of function '%s'" % target in str(e) and (
                    "the value %d at index (1, 2) of the numpy %s array does not fit %s" % (
                        bad, np.dtype(st), target) in str(e))
                refused += ok
                check(ok, "%s: %s" % (what, e)) if not ok else None
            wrapped = unsafe(target, x=x)["y"]
            ok = np.array_equal(wrapped, x.reshape(6).astype(tt))
            wraps += ok
            check(ok, what + ", cast='unsafe': wraps like astype: %s" % wrapped) if not ok else None
check(wraps == refused, "cast='unsafe': the %d refused values wrap like numpy's astype" % wraps)
check(fits == 32, "cast: %d integer (source, target) pairs pass their edge values exactly" % fits)
check(refused > 40, "cast: %d out-of-range integers refused, naming input, index and value" % refused)
expect_error("INVALID_ARGUMENT", "the value 1000 at index (0, 0) of the numpy int64 array does not fit i8",
             lambda: program.context()("i8", x=[[1000, 1, 2], [3, 4, 5]]), "cast: a list's int64 1000 -> i8")
expect_error("INVALID_ARGUMENT", "the value 1099511627776 at index (0, 0) of the numpy int64 array does not fit i32",
             lambda: ctx("i32", x=np.array([[2**40, 2**31, 0]] * 2)), "cast: int64 2^40 -> i32")
expect_error("INVALID_ARGUMENT", "value 300 at index (0, 0) of the numpy int16 array does not fit i8",
             lambda: ctx("i8", x=np.array([[300, -200, 0]] * 2, np.int16)), "cast: int16 300 -> i8")
# Floats: never rounded into integers unless cast="unsafe"; narrowed when finite stays finite.
for target in targets:
    for ft in (np.float16, np.float32, np.float64):
        expect_error("INVALID_ARGUMENT", "input 'x' of function '%s'" % target,
                     lambda: ctx(target, x=np.full((2, 3), 1.5, ft)), "cast: %s -> %s refused" % (np.dtype(ft), target))
check(np.array_equal(unsafe("i32", x=np.full((2, 3), 2.75))["y"], [2] * 6), "cast='unsafe': float64 2.75 -> i32 2")
expect_error("INVALID_ARGUMENT", "got i64[2,3]", lambda: ctx("f32", x=np.ones((2, 3), np.int64)),
             "cast: int64 -> f32 refused")
expect_error("INVALID_ARGUMENT", "input 'x' of function 'bool'", lambda: ctx("bool", x=np.ones((2, 3), np.int8)),
             "cast: int8 -> bool refused")
for target, ft, big in (("f32", np.float64, 1e300), ("f16", np.float64, 1e300), ("f16", np.float32, 70000.0)):
    x = np.array([[0.5, -np.inf, np.nan], [1.0, -big, 2.0]], ft)
    expect_error("INVALID_ARGUMENT", "at index (1, 1) of the numpy %s array overflows %s" % (np.dtype(ft), target),
                 lambda: ctx(target, x=x), "cast: %s %g -> %s" % (np.dtype(ft), -big, target))
    x[1, 1] = 3.0
    got = ctx(target, x=x)["y"]
    check(got.dtype == np.dtype(target.replace("f", "float").replace("float16", "float16")) and got[1] == -np.inf and
          np.isnan(got[2]) and got[5] == 2.0, "cast: %s -> %s keeps inf and nan: %s" % (np.dtype(ft), target, got))
    check(np.isinf(unsafe(target, x=np.full((2, 3), big, ft))["y"]).all(), "cast='unsafe': %s %g -> %s is inf" % (
        np.dtype(ft), big, target))
expect_error("INVALID_ARGUMENT", "cast='wrap'", lambda: program.context(cast="wrap"), "cast: an unknown mode")

# A scalar (0-d) input: a numpy scalar, a 0-d array, a python float.
for name, value in (("numpy float32", np.float32(1.5)), ("0-d float64 array", np.array(1.5)), ("python float", 1.5)):
    out = ctx("scalar", x=value)["y"]
    check(out.shape == () and out == 3.0, "scalar input from a %s: %r" % (name, out))
expect_error("INVALID_ARGUMENT", "the value 1e+300 at index () of the numpy float64 array overflows f32",
             lambda: ctx("scalar", x=1e300), "scalar input: a python float that overflows f32")
expect_error("INVALID_ARGUMENT", "expected f32[] (rank 0), got rank 1", lambda: ctx("scalar", x=np.ones(1, np.float32)),
             "scalar input: a 1-element array is refused")

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
# What the C API would read differently: a NUL ends a char*, ctypes wraps an int32.
mlp = os.path.join(scratch, "mlp.hxe")
expect_error("INVALID_ARGUMENT", "path", lambda: hexir.load(mlp + "\0.txt"), "a NUL in the path")
expect_error("INVALID_ARGUMENT", "device b'cpu\\x00?threads=2' holds a NUL character at offset 3",
             lambda: hexir.load(mlp, device="cpu\0?threads=2"), "a NUL in the device")
expect_error("INVALID_ARGUMENT", "cpu option 'threads' given twice",
             lambda: hexir.load(mlp, device="cpu?threads=2&threads=3"), "a device option given twice")
for threads in (2**32, 2**31, -2**31 - 1, 1.5, True):
    expect_error("INVALID_ARGUMENT", "threads=%r is not an int32" % (threads,),
                 lambda: hexir.load(mlp, threads=threads), "threads=%r" % (threads,))
expect_error("INVALID_ARGUMENT", "threads", lambda: hexir.load(mlp, threads=2**31 - 1), "threads=2**31-1")
check(hexir.load(mlp, threads=np.int64(2)).functions["main"], "threads=numpy.int64(2)")

# More threads than the address space can start: context creation raises
# RESOURCE_EXHAUSTED (it aborted the C++ tools and hung hexir_context_create).
# In a child under a 2 GiB limit; the timeout only turns a hang into a failure.
child = subprocess.run(
    [sys.executable, "-c", "import sys, resource; resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30)); "
     "sys.path.insert(0, sys.argv[1]); import hexir\ntry:\n hexir.load(sys.argv[2], threads=1024).context()\n"
     "except hexir.Error as e:\n print(e.code, e)", os.path.dirname(os.path.dirname(hexir.__file__)), mlp],
    stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=120)
said = child.stdout.decode(errors="replace").strip()
check(child.returncode == 0 and said.startswith("RESOURCE_EXHAUSTED cpu thread pool: started ") and
      " of the 1023 worker threads asked for (threads=1024" in said,
      "threads=1024 under a 2 GiB address space: %s (exit %d)" % (said, child.returncode))

# A bounded dynamic shape (docs/design-notes.md): nonzero's result comes back
# at its actual shape, its bound in the signature.
nz_source = os.path.join(scratch, "nonzero.hxir")
with open(nz_source, "w") as f:
    f.write("module @nz\nfunc @main(%x: f32[3,4]) -> (i64[2,<=12]) {\n"
            "  %i, %n = call @nonzero(%x) : i64[2,<=12], i64[]\n  return %i\n}\n")
nz = os.path.join(scratch, "nonzero.hxe")
subprocess.run([compile_tool, nz_source, "-o", nz], check=True)
nz_program = hexir.load(nz)
sig = nz_program.functions["main"].outputs[0]
check(sig.shape == (2, 12) and sig.bounded == 1, "nonzero's signature: bound %r, bounded dim %r" % (sig.shape, sig.bounded))
nz_ctx = nz_program.context()
for x in [np.array([[0, 1, 0, 2], [0, 0, 0, 3], [4, 0, 0, 5]], np.float32), np.zeros((3, 4), np.float32)]:
    got = nz_ctx(x=x)["i"]
    want = np.array(np.nonzero(x), np.int64)
    check(got.shape == want.shape and np.array_equal(got, want), "nonzero at its actual shape %r" % (got.shape,))

finish("python")
