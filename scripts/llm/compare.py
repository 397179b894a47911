#!/usr/bin/python3
"""Compares one greedy generation's per-step logits with another's (torch's reference_logits.npy,
or onnxruntime's ort_decode_Tt_logits.npy from scripts/llm/ort_generate.mjs --dump-logits).

  /usr/bin/python3 scripts/llm/compare.py CANDIDATE_LOGITS.npy REFERENCE_LOGITS.npy [--json]

Both f32[steps, V] (row 0: the prefill's). The tokens are the argmax of each row. Prints the
steps whose tokens agree, the first that does not, and the largest |logit difference| over the
agreeing steps (after a different token the two generations see different inputs); exits 1 when
the tokens differ.
"""
import json
import sys

import numpy as np


def main():
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    if len(args) != 2:
        sys.exit(__doc__)
    cand, ref = np.load(args[0]), np.load(args[1])
    steps = min(len(cand), len(ref))
    if cand.shape[1:] != ref.shape[1:]:
        sys.exit(f"compare.py: logits {cand.shape} vs {ref.shape}")
    ct, rt = cand[:steps].argmax(1), ref[:steps].argmax(1)
    differ = np.nonzero(ct != rt)[0]
    first = int(differ[0]) if len(differ) else None
    upto = steps if first is None else first + 1
    per_step = np.abs(cand[:upto].astype(np.float64) - ref[:upto]).max(1)
    result = {"steps": steps, "tokens_match": first is None, "first_mismatch": first,
              "max_abs_logit_diff": float(per_step.max()), "ref_logit_scale": float(np.abs(ref[:upto]).max()),
              "max_abs_logit_diff_per_step": [float(x) for x in per_step]}
    if "--json" in sys.argv:
        print(json.dumps(result))
    else:
        what = f"{steps}/{steps} tokens match" if first is None else f"tokens differ at step {first}"
        print(f"compare.py: {what}; max |logit diff| {result['max_abs_logit_diff']:.2e} "
              f"(largest |logit| {result['ref_logit_scale']:.2f})")
    sys.exit(0 if first is None else 1)


if __name__ == "__main__":
    main()
