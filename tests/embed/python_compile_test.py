"""hexir.compile (python/hexir over libhexir_compile, hexir/compile.h):
the mlp sample and a small ONNX model (samples/onnx/make_model.py) compiled
from Python with hexir-compile's options, run and compared with their
references; refusals raised as hexir.Error with the compiler's message. Run
by tests/embed/install_test.cc:

    python3 python_compile_test.py HEXIR_COMPILE SAMPLES_DIR SCRATCH_DIR

with HEXIR_LIBRARY and HEXIR_COMPILE_LIBRARY naming the libraries under
test. Prints one line per check and "python compile: N passed, M failed";
exits 1 on any failure, 77 (skipped) when numpy is missing. The ONNX part is
skipped with its reason (a line "skipped: ...") when python has no onnx or
the build has no ONNX front end."""

import os
import subprocess
import sys

from checks import check, error_of, finish, hexir, np  # noqa: E402

_, samples, scratch = sys.argv[1:4]
os.makedirs(scratch, exist_ok=True)


def close(got, want):
    return got.shape == want.shape and np.allclose(got, want, rtol=1e-4, atol=1e-5)


# The mlp sample: the output path back, then run against its reference.
mlp = os.path.join(samples, "mlp.hxir")
x = np.load(os.path.join(samples, "mlp", "input_x.npy"))
want = np.load(os.path.join(samples, "mlp", "expected_0.npy"))
out = hexir.compile(mlp, output=os.path.join(scratch, "mlp.hxe"))
check(out == os.path.join(scratch, "mlp.hxe") and os.path.exists(out), "compile returns the output path")
y = hexir.load(out).context()(x=x)
check(list(y) == ["p"] and close(y["p"], want), "mlp compiled from python matches expected_0.npy")

# Options as keywords, load=True: a Program.
program = hexir.compile(mlp, output=os.path.join(scratch, "mlp-naive.hxe"), load=True, plan="naive", fuse=False,
                        align=256, in_place=True, views=True, channels_last=False, weights="f32")
naive_arena = program.memory["arena_bytes"]
check(isinstance(program, hexir.Program) and close(program.context()(x=x)["p"], want),
      "plan='naive', fuse=False, align=256, ...: a Program that matches expected_0.npy")
check(naive_arena > hexir.load(out).memory["arena_bytes"],
      "plan='naive' reuses nothing: arena %d > %d bytes" % (naive_arena, hexir.load(out).memory["arena_bytes"]))

# Refusals: the parser's and the compiler's messages.
e = error_of(lambda: hexir.compile(mlp, output=os.path.join(scratch, "x.hxe"), bogus=1))
check(e is not None and e.code == "INVALID_ARGUMENT" and str(e) == "unknown option '--bogus=1'",
      "an unknown option: %s" % e)
e = error_of(lambda: hexir.compile(mlp, output=os.path.join(scratch, "x.hxe"), plan="bogus"))
check(e is not None and "--plan expects naive, arena or free-at-last-use, got 'bogus'" in str(e),
      "a wrong value: %s" % e)
e = error_of(lambda: hexir.compile(mlp, output=os.path.join(scratch, "x.hxe"), input_shapes={"x": (8, 128)}))
check(e is not None and "apply to .onnx models" in str(e), "input_shapes on .hxir: %s" % e)
bad = os.path.join(scratch, "bad.hxir")
with open(bad, "w") as f:
    f.write("module @m\nfunc @main(%x: f32[2]) -> (f32[2]) {\n  return %y\n}\n")
e = error_of(lambda: hexir.compile(bad, output=os.path.join(scratch, "x.hxe")))
check(e is not None and e.code == "INVALID_ARGUMENT" and "bad.hxir:3:" in str(e), "a syntax error: %s" % e)
e = error_of(lambda: hexir.compile(os.path.join(scratch, "absent.hxir")))
check(e is not None and "absent.hxir" in str(e), "a missing source: %s" % e)
check(not os.path.exists(os.path.join(scratch, "x.hxe")), "a failed compile leaves no output")
e = error_of(lambda: hexir.compile(mlp, output="a\0b.hxe"))
check(e is not None and "NUL" in str(e), "a NUL in the output path: %s" % e)

# A small ONNX model: its input's batch dim fixed by input_shapes.
try:
    import onnx  # noqa: F401
    have_onnx = True
except ImportError:
    have_onnx = False
if not have_onnx:
    print("skipped: ONNX: python3 has no onnx (apt-get install -y python3-onnx)")
else:
    onnx_dir = os.path.join(scratch, "onnx")
    subprocess.run([sys.executable, os.path.join(samples, "onnx", "make_model.py"), onnx_dir], check=True,
                   stdout=subprocess.DEVNULL)
    model = os.path.join(onnx_dir, "model.onnx")
    try:
        hxe = hexir.compile(model, input_shapes={"input": (1, 3, 16, 16)})
    except hexir.Error as e:
        if e.code != "UNIMPLEMENTED":
            raise
        hxe = None
        print("skipped: ONNX: %s" % e)
    if hxe is not None:
        check(hxe == os.path.join(onnx_dir, "model.hxe"), "the output defaults to the source with .hxe")
        got = hexir.load(hxe).context()(input=np.load(os.path.join(onnx_dir, "input.npy")))
        check(list(got) == ["probs"] and close(got["probs"], np.load(os.path.join(onnx_dir, "expected.npy"))),
              "the ONNX model compiled from python matches numpy's reference")
        e = error_of(lambda: hexir.compile(model, output=os.path.join(onnx_dir, "x.hxe")))
        check(e is not None and "input" in str(e), "an ONNX model with a dynamic dim and no input_shapes: %s" % e)

finish("python compile")
