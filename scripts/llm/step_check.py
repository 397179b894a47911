#!/usr/bin/python3
"""One prefill and one decode step with hexir-run, checked against torch's reference: until the
generation runner lands, this is what says a compiled prefill / decode step computes the right
thing (scripts/llm.sh runs it).

  /usr/bin/python3 scripts/llm/step_check.py HEXIR_RUN EXPORT_DIR PREFILL.hxe DECODE.hxe [DECODE.hxe ...] [--threads N]

EXPORT_DIR is samples/llm/export.py's folder (reference.json, prompt.npy, reference_logits.npy).
The prefill runs on prompt.npy with zero caches; its logits are compared with the reference's
row 0. Each decode step then runs on the prefill's present caches with the reference's first
token at position L; its logits are compared with row 1. Inputs and outputs go under
EXPORT_DIR/hexir/step_check/. Prints one line per model; exits 1 when a model fails to run or
its greedy token differs from torch's.
"""
import json
import os
import subprocess
import sys

import numpy as np


def run(hexir_run, hxe, inputs, out, threads):
    args = [hexir_run, hxe, "--output-dir", out, "--threads", str(threads)]
    for name, path in inputs:
        args += ["--input", f"{name}={path}"]
    r = subprocess.run(args, capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError((r.stderr.strip().splitlines() or [f"exit {r.returncode}"])[-1])


def main():
    threads = 1
    argv = sys.argv[1:]
    if "--threads" in argv:
        i = argv.index("--threads")
        threads = int(argv[i + 1])
        del argv[i:i + 2]
    if len(argv) < 4:
        sys.exit(__doc__)
    hexir_run, d, prefill, decodes = argv[0], argv[1], argv[2], argv[3:]
    ref = json.load(open(os.path.join(d, "reference.json")))
    cfg = ref["config"]
    names = ref["signature"]["cache_inputs"]
    logits = np.load(os.path.join(d, ref["logits"]))
    work = os.path.join(d, "hexir", "step_check")
    os.makedirs(work, exist_ok=True)
    zeros = os.path.join(work, "zeros.npy")
    np.save(zeros, np.zeros((1, ref["heads"], cfg["context"], ref["head_dim"]), np.float32))
    ok = True

    def report(name, got, row):
        nonlocal ok
        got = got.reshape(-1)
        same = int(got.argmax()) == ref["tokens"][row]
        ok &= same
        print(f"step_check: {name}: max |logit diff| vs torch {np.abs(got - logits[row]).max():.2e}, "
              f"greedy token {'matches' if same else 'DIFFERS from'} torch's ({ref['tokens'][row]})")

    pout = os.path.join(work, "prefill")
    try:
        run(hexir_run, prefill, [("input_ids", os.path.join(d, ref["prompt"]))] + [(n, zeros) for n in names],
            pout, threads)
    except RuntimeError as e:
        print(f"step_check: {os.path.basename(prefill)}: hexir-run failed: {e}")
        sys.exit(1)
    report(os.path.basename(prefill), np.load(os.path.join(pout, "0.npy")), 0)
    np.save(os.path.join(work, "input_ids.npy"), np.array([[ref["tokens"][0]]], np.int64))
    np.save(os.path.join(work, "pos.npy"), np.array([ref["prompt_len"]], np.int64))
    for hxe in decodes:
        name = os.path.basename(hxe)
        out = os.path.join(work, os.path.splitext(name)[0])
        inputs = [("input_ids", os.path.join(work, "input_ids.npy")), ("pos", os.path.join(work, "pos.npy"))]
        inputs += [(n, os.path.join(pout, f"{j + 1}.npy")) for j, n in enumerate(names)]
        try:
            run(hexir_run, hxe, inputs, out, threads)
        except RuntimeError as e:
            print(f"step_check: {name}: hexir-run failed: {e}")
            ok = False
            continue
        report(name, np.load(os.path.join(out, "0.npy")), 1)
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
