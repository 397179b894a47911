#!/usr/bin/python3
"""Output drift of quantized models against their float originals, both run by Hexir, over a set
of realistic inputs (scripts/qdq.sh --drift runs it after the benchmark):

  /usr/bin/python3 scripts/qdq/drift.py --scratch SCRATCH --build BUILD [--inputs 8]

For every image classifier of SCRATCH/models/zoo.jsonl (the QDQ files) and its float original
(SCRATCH/float/NAME.onnx): both compiled with hexir-compile, and the float model also with
--weights int8 (weight-only int8); N synthetic photograph-like images (scripts/zoo/export_zoo.py's
image(), other seeds than the calibration's) through hexir-run. Prints, per model and form, the
largest and mean |output - float output| over the float output's largest |value|, and how often
the top-1 class agrees, as a Markdown table.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "zoo"))
from export_zoo import image  # noqa: E402


def compile_model(build, onnx_path, out, extra=()):
    subprocess.run([os.path.join(build, "tools", "hexir-compile"), onnx_path, "-o", out, *extra], check=True,
                   stdout=subprocess.DEVNULL)


def run(build, hxe, name, x, tmp):
    inp = os.path.join(tmp, "x.npy")
    np.save(inp, x)
    out = os.path.join(tmp, "out")
    os.makedirs(out, exist_ok=True)
    subprocess.run([os.path.join(build, "tools", "hexir-run"), hxe, "--input", f"{name}={inp}", "--output-dir", out],
                   check=True, stdout=subprocess.DEVNULL)
    return np.load(os.path.join(out, sorted(os.listdir(out))[0])).reshape(-1)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--scratch", required=True)
    ap.add_argument("--build", required=True)
    ap.add_argument("--inputs", type=int, default=8)
    a = ap.parse_args()
    rows = []
    for raw in open(os.path.join(a.scratch, "models", "zoo.jsonl")):
        line = json.loads(raw)
        if "classifier" not in line.get("family", "") or len(line["inputs"]) != 1:
            continue
        base = line["name"][:-len("_qdq")]
        float_onnx = os.path.join(a.scratch, "float", base + ".onnx")
        if not os.path.exists(float_onnx):
            continue
        with tempfile.TemporaryDirectory() as tmp:
            forms = {"float": os.path.join(tmp, "f.hxe"), "QDQ int8": os.path.join(tmp, "q.hxe"),
                     "float --weights int8": os.path.join(tmp, "w.hxe")}
            compile_model(a.build, float_onnx, forms["float"])
            compile_model(a.build, line["file"], forms["QDQ int8"])
            compile_model(a.build, float_onnx, forms["float --weights int8"], ["--weights", "int8"])
            spec = line["inputs"][0]
            h, w = spec["shape"][-2:]
            outputs = {f: [] for f in forms}
            for i in range(a.inputs):
                x = image(f"{base}-drift-{i}", h, w)
                for f, hxe in forms.items():
                    outputs[f].append(run(a.build, hxe, spec["name"], x, tmp))
            for f in ("QDQ int8", "float --weights int8"):
                errs, means, agree = [], [], 0
                for ref, got in zip(outputs["float"], outputs[f]):
                    scale = max(np.abs(ref).max(), 1e-12)
                    errs.append(np.abs(got - ref).max() / scale)
                    means.append(np.abs(got - ref).mean() / scale)
                    agree += int(ref.argmax() == got.argmax())
                rows.append((base, f, max(errs), float(np.mean(means)), agree, a.inputs))
    print("| model | form | max err / scale | mean err / scale | top-1 as float |")
    print("| --- | --- | ---: | ---: | ---: |")
    for base, f, e, m, agree, n in rows:
        print(f"| {base} | {f} | {e:.2e} | {m:.2e} | {agree}/{n} |")


if __name__ == "__main__":
    sys.exit(main())
