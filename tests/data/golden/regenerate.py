#!/usr/bin/env python3
"""Regenerates the golden executables: NAME.hxe from NAME.hxir, compiled by
BUILD_DIR's hexir-compile, and for each function FUNC its inputs
NAME/FUNC/input_ARG.npy and what hexir-run computes from them,
NAME/FUNC/expected_N.npy. tests/format/golden_test.cc runs every NAME.hxe
with the VM and compares its results with expected_N.npy.

Run it only when the format version was bumped (or a golden model was added):
a golden file is what a file of that version means, so regenerating it to
make the test pass after a change of meaning hides the change instead of
versioning it (docs/design-notes.md, "The format version").

usage: tests/data/golden/regenerate.py BUILD_DIR
"""
import pathlib
import shutil
import subprocess
import sys
import tempfile

import numpy as np

HERE = pathlib.Path(__file__).resolve().parent

# Inputs per golden model and function, by argument name.
def inputs(rng):
    normal = lambda *shape: rng.standard_normal(shape).astype(np.float32)
    return {
        "matmul": {"main": {"x": normal(4, 8)}},
        "conv": {"main": {"x": normal(1, 2, 8, 8)}},
        "norm": {"main": {"x": normal(4, 16)}},
        "control": {
            "scale": {"v": normal(3, 4)},
            "main": {"x": normal(3, 4), "n": np.array(3, dtype=np.int64)},
            "step": {"acc": normal(3, 4), "x": normal(3, 4)},
        },
    }


def run(*command):
    subprocess.run([str(c) for c in command], check=True, stdout=subprocess.DEVNULL)


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    tools = pathlib.Path(sys.argv[1]).resolve() / "tools"
    cases = inputs(np.random.default_rng(20261205))
    models = sorted(p.stem for p in HERE.glob("*.hxir"))
    if models != sorted(cases):
        sys.exit("regenerate.py: inputs() names %s, the .hxir files are %s" % (sorted(cases), models))
    for name in models:
        hxe = HERE / (name + ".hxe")
        run(tools / "hexir-compile", HERE / (name + ".hxir"), "-o", hxe)
        for function, args in cases[name].items():
            folder = HERE / name / function
            folder.mkdir(parents=True, exist_ok=True)
            for old in folder.glob("*.npy"):
                old.unlink()
            command = [tools / "hexir-run", hxe, "--function", function]
            for arg, value in args.items():
                np.save(folder / ("input_%s.npy" % arg), value)
                command += ["--input", "%s=%s" % (arg, folder / ("input_%s.npy" % arg))]
            with tempfile.TemporaryDirectory() as out:
                run(*command, "--output-dir", out)
                for result in sorted(pathlib.Path(out).glob("*.npy")):
                    shutil.move(result, folder / ("expected_" + result.name))
        print("regenerated", hxe.name)


if __name__ == "__main__":
    main()
