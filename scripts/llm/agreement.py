#!/usr/bin/python3
"""Greedy-token agreement and speed of compressed decoders against the f32 one.

    scripts/llm/agreement.py --generate build/tools/hexir-generate \
        --reference build/llm/hexir/lm.hxe build/llm/hexir/lm_int8.hxe build/llm/hexir/lm_int4.hxe \
        [--prompts 8] [--prompt-length 32] [--new-tokens 64] [--threads 1] [--json out.json]

For each of --prompts random prompts (token ids drawn uniformly from the
vocabulary, numpy's generator seeded with --seed), every file generates
--new-tokens greedy tokens with hexir-generate, the files alternated prompt by
prompt so that a noisy host slows them alike. Printed per candidate: how many
continuations equal the reference's over all tokens, the first token where
each leaves it, and the medians of decode tokens/s and prefill ms
over the prompts (with the reference's in the same run: ratios, not absolute
speeds, are what a shared host measures).
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

import numpy as np


def generate(tool, model, prompt, new_tokens, threads, scratch):
    stats = os.path.join(scratch, "stats.json")
    run = subprocess.run([tool, model, "--prompt", prompt, "--max-new-tokens", str(new_tokens), "--threads",
                          str(threads), "--stats-json", stats], capture_output=True, text=True)
    if run.returncode != 0:
        sys.exit(f"agreement.py: hexir-generate {model} failed:\n{run.stdout}{run.stderr}")
    with open(stats) as f:
        return json.load(f)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--generate", required=True, help="the hexir-generate executable")
    ap.add_argument("--reference", required=True, help="the f32 decoder (.hxe)")
    ap.add_argument("candidates", nargs="+", help="compressed decoders of the same model (.hxe)")
    ap.add_argument("--prompts", type=int, default=8)
    ap.add_argument("--prompt-length", type=int, default=32)
    ap.add_argument("--new-tokens", type=int, default=64)
    ap.add_argument("--vocab", type=int, default=50257)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", help="write the per-prompt results here")
    args = ap.parse_args()

    files = [args.reference] + args.candidates
    rng = np.random.default_rng(args.seed)
    runs = {f: [] for f in files}
    with tempfile.TemporaryDirectory() as scratch:
        for p in range(args.prompts):
            prompt = os.path.join(scratch, "prompt.npy")
            np.save(prompt, rng.integers(0, args.vocab, size=(1, args.prompt_length), dtype=np.int64))
            order = files if p % 2 == 0 else files[::-1]
            for f in order:
                runs[f].append(generate(args.generate, f, prompt, args.new_tokens, args.threads, scratch))

    def same_prefix(a, b):
        n = 0
        while n < min(len(a), len(b)) and a[n] == b[n]:
            n += 1
        return n

    ref = runs[args.reference]
    ref_tps = statistics.median(r["tokens_per_second"] for r in ref)
    print(f"{args.prompts} prompts of {args.prompt_length} random tokens, {args.new_tokens} greedy tokens, "
          f"{args.threads} thread(s)")
    print("| file | bytes | identical continuations | first differing token (per prompt) | decode tokens/s | "
          "vs reference | prefill ms |")
    print("| --- | ---: | ---: | --- | ---: | ---: | ---: |")
    summary = {}
    for f in files:
        rs = runs[f]
        prefixes = [same_prefix(r["tokens"], q["tokens"]) for r, q in zip(rs, ref)]
        identical = sum(n >= args.new_tokens for n in prefixes)
        tps = statistics.median(r["tokens_per_second"] for r in rs)
        prefill = statistics.median(r["prefill_ms"] for r in rs)
        first = ", ".join("-" if n >= args.new_tokens else str(n) for n in prefixes)
        print(f"| {os.path.basename(f)} | {os.path.getsize(f)} | {identical}/{len(rs)} | {first} | {tps:.1f} | "
              f"{tps / ref_tps:.2f}x | {prefill:.1f} |")
        summary[f] = {"bytes": os.path.getsize(f), "identical": identical, "prefixes": prefixes,
                      "tokens_per_second": [r["tokens_per_second"] for r in rs],
                      "prefill_ms": [r["prefill_ms"] for r in rs], "tokens": [r["tokens"] for r in rs]}
    if args.json:
        with open(args.json, "w") as out:
            json.dump({"config": vars(args), "files": summary}, out, indent=1)


if __name__ == "__main__":
    main()
