#!/usr/bin/python3
"""Greedy generation with step.hxir, one hexir-run invoke per token.

    python3 samples/decoder/run_steps.py [--hexir-run PATH] [--hexe STEP.hxe]

Without --hexe it compiles step.hxir with the hexir-compile next to
hexir-run. Each step passes the token, the position and the KV cache in as
.npy files and reads the next token and the updated cache back (outputs 0
and 1). The prompt goes through the same step, one token at a time. Compares
the result with expected_tokens.npy (exactly) and expected_cache.npy (within
1e-4); exits 0 when both match, 1 when not, 77 when numpy is missing.
"""

import argparse
import os
import subprocess
import sys
import tempfile

try:
    import numpy as np
except ImportError:
    print("numpy is not installed (Debian: python3-numpy)")
    sys.exit(77)

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
TOLERANCE = 1e-4


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--hexir-run", default=os.path.join(ROOT, "build", "tools", "hexir-run"))
    ap.add_argument("--hexe", help="step.hxe compiled already (default: compile step.hxir)")
    ap.add_argument("--device", default="cpu")
    args = ap.parse_args()

    prompt = np.load(os.path.join(HERE, "prompt.npy"))
    steps = int(np.load(os.path.join(HERE, "steps.npy")))
    expected_tokens = np.load(os.path.join(HERE, "expected_tokens.npy"))
    expected_cache = np.load(os.path.join(HERE, "expected_cache.npy"))

    with tempfile.TemporaryDirectory(prefix="hexir_decoder_") as tmp:
        hexe = args.hexe
        if hexe is None:
            compiler = os.path.join(os.path.dirname(args.hexir_run), "hexir-compile")
            hexe = os.path.join(tmp, "step.hxe")
            subprocess.run([compiler, os.path.join(HERE, "step.hxir"), "-o", hexe],
                           check=True, stdout=subprocess.DEVNULL)
        cache_path = os.path.join(HERE, "cache0.npy")
        generated = []
        token = int(prompt[0])
        for pos in range(len(prompt) + steps - 1):
            if pos < len(prompt):
                token = int(prompt[pos])
            np.save(os.path.join(tmp, "token.npy"), np.array([token], dtype=np.int64))
            np.save(os.path.join(tmp, "pos.npy"), np.array(pos, dtype=np.int64))
            out = os.path.join(tmp, "out%d" % pos)
            subprocess.run([args.hexir_run, hexe, "--device", args.device, "--function", "step",
                            "--input", "token=" + os.path.join(tmp, "token.npy"),
                            "--input", "pos=" + os.path.join(tmp, "pos.npy"),
                            "--input", "cache=" + cache_path,
                            "--output-dir", out], check=True, stdout=subprocess.DEVNULL)
            token = int(np.load(os.path.join(out, "next.npy"))[0])  # step's outputs, by name
            cache_path = os.path.join(out, "l1_c2.npy")
            if pos >= len(prompt) - 1:
                generated.append(token)
        cache = np.load(cache_path)

    tokens = np.array(generated, dtype=np.int64)
    err = float(np.max(np.abs(cache.astype(np.float64) - expected_cache)))
    print("generated", tokens.tolist())
    print("expected ", expected_tokens.tolist())
    print("final cache: max abs error %.3g (tolerance %g)" % (err, TOLERANCE))
    ok = np.array_equal(tokens, expected_tokens) and cache.shape == expected_cache.shape and err <= TOLERANCE
    print("match" if ok else "MISMATCH")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
