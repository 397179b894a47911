#!/usr/bin/python3
"""The decoding comparison of scripts/llm.sh (issue 32): onnxruntime-node against Hexir on what
samples/llm/export.py wrote and what scripts/llm.sh compiled (lm.hxe: decode + every prefill, the
caches donated; lm_where.hxe: the same with decode_where.onnx as decode).

  /usr/bin/python3 scripts/llm/bench.py --dir SCRATCH --ort ORTDIR --build BUILD
        [--threads 1,2] [--tokens 64] [--rounds 3] [--ort-repeats 2] [--pss 1,2,4] [--pss-tokens 300]
        [--max-size-ratio 1.02] [--md FILE] [--json FILE]

  1. sizes: lm.hxe and lm_where.hxe against decode.onnx's initializers (the weights' bytes; above
     --max-size-ratio is a failure), their compile time and peak RSS
     (SCRATCH/hexir/NAME.compile.time, written by scripts/llm.sh)
  2. speed, alternated run by run in each round (onnxruntime, Hexir, onnxruntime, Hexir; the order
     reversed every other round), at each thread count:
       ort decode       ort_generate.mjs --variants decode (static cache: ScatterElements)
       hexir packed     hexir-generate lm.hxe (the cpu device's default: GEMM weights packed)
       ort decode_past  ort_generate.mjs --variants decode_past (the growing past)
       hexir unpacked   hexir-generate lm.hxe --device 'cpu?pack_weights=0'
     each: prefill ms, decode tokens/s (decode steps over their summed time), per-token median and
     p90 over the decode steps, peak RSS (onnxruntime: the worker's maxRSS; Hexir: /usr/bin/time
     %M). onnxruntime reports the faster of --ort-repeats generations in one session (the first is
     a warm-up); hexir-generate one generation per process. The tables give the median over rounds.
  3. correctness: hexir-generate --logits-dir (lm.hxe packed at each thread count and unpacked,
     lm_where.hxe) against torch's reference (tokens, logits) and onnxruntime's dump (decode at
     the same thread count, from the first round: tokens, max |logit diff| per step); the logits
     stacked as SCRATCH/hexir/bench/logits_RUN.npy, onnxruntime's in .../bench/ort_logits/
  4. memory: device allocations during generation, bytes copied per invoke (hexir-dump), context
     bytes against the arena's lower bound, generator bytes (the caches) against 24 caches
  5. PSS: N hexir-generate processes (1 thread, --pss-tokens tokens) on lm.hxe unpacked and packed;
     /proc/PID/smaps_rollup summed over the N every 0.5 s while all run; the largest sum in the
     second half of the time all N were alive is reported (every process then decodes)

Writes SCRATCH/llm_bench.json and SCRATCH/llm_bench.md (default), prints the markdown; exits 1
when a token differs from torch's or onnxruntime's, or a run fails.
"""
import argparse
import json
import math
import os
import platform
import subprocess
import sys
import time
from datetime import datetime, timezone

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def log(msg):
    print(f"bench.py: {msg}", file=sys.stderr, flush=True)


def median(xs):
    s = sorted(xs)
    n = len(s)
    return s[(n - 1) // 2] if n % 2 else (s[n // 2 - 1] + s[n // 2]) / 2


def quantile(xs, q):  # ort_generate.mjs's definition
    s = sorted(xs)
    return s[min(len(s) - 1, math.ceil(q * len(s)) - 1)]


def loadavg():
    return round(os.getloadavg()[0], 2)


def weights_bytes(onnx_path):
    """The initializers' total bytes (what the weights take as f32 in the file)."""
    import onnx
    from onnx import mapping
    m = onnx.load(onnx_path, load_external_data=False)
    return sum(int(np.prod(t.dims)) * np.dtype(mapping.TENSOR_TYPE_TO_NP_TYPE[t.data_type]).itemsize
               for t in m.graph.initializer)


def read_time_file(path):
    """/usr/bin/time -f '%e %M' output: seconds, peak RSS KB (None when missing)."""
    try:
        last = open(path).read().strip().splitlines()[-1].split()
        return {"seconds": float(last[0]), "max_rss_kb": int(last[1])}
    except (OSError, IndexError, ValueError):
        return None


class Bench:
    def __init__(self, a):
        self.a = a
        self.dir = os.path.abspath(a.dir)
        self.hx = os.path.join(self.dir, "hexir")
        self.gen = os.path.join(os.path.abspath(a.build), "tools", "hexir-generate")
        self.dump = os.path.join(os.path.abspath(a.build), "tools", "hexir-dump")
        self.ref = json.load(open(os.path.join(self.dir, "reference.json")))
        self.lm = os.path.join(self.hx, "lm.hxe")
        self.lm_where = os.path.join(self.hx, "lm_where.hxe")
        self.work = os.path.join(self.hx, "bench")
        os.makedirs(self.work, exist_ok=True)
        self.failures = []

    # ---- one run of each side ----
    def ort(self, variant, threads, dump=None):
        out = os.path.join(self.work, f"ort_{variant}_{threads}t.json")
        args = ["node", os.path.join(ROOT, "scripts/llm/ort_generate.mjs"), "--dir", self.dir, "--ort", self.a.ort,
                "--variants", variant, "--threads", str(threads), "--tokens", str(self.a.tokens),
                "--repeats", str(self.a.ort_repeats), "--json", out, "--md", out + ".md"]
        if dump:
            args += ["--dump-logits", dump]
        load = loadavg()
        r = subprocess.run(args, capture_output=True, text=True)
        try:
            row = json.load(open(out))["runs"][0]
            os.remove(out)
            os.remove(out + ".md")
        except (OSError, ValueError, IndexError):
            row = {"error": (r.stderr.strip().splitlines() or [f"exit {r.returncode}"])[-1]}
        if "error" in row:
            self.failures.append(f"ort {variant} {threads}t: {row['error']}")
            return {"error": row["error"], "load": load}
        steps = row["step_ms"]
        return {"prefill_ms": row["prefill_ms"], "tokens_per_s": row["decode_tokens_per_s"],
                "ms_median": median(steps), "ms_p90": quantile(steps, 0.9), "max_rss_kb": row["max_rss_kb"],
                "model_rss_kb": row["model_rss_kb"], "tokens": row["generated"], "check": row["check"],
                "session_ms": row["session_ms"], "load": load}

    def hexir(self, hxe, threads, unpacked, logits_dir=None, tokens=None):
        tag = f"{os.path.basename(hxe)}_{threads}t{'_unpacked' if unpacked else ''}"
        stats, tfile = os.path.join(self.work, tag + ".json"), os.path.join(self.work, tag + ".time")
        args = ["/usr/bin/time", "-f", "%e %M", "-o", tfile, self.gen, hxe,
                "--prompt", os.path.join(self.dir, self.ref["prompt"]),
                "--max-new-tokens", str(tokens or self.a.tokens), "--threads", str(threads), "--stats-json", stats]
        if unpacked:
            args += ["--device", "cpu?pack_weights=0"]
        if logits_dir:
            args += ["--logits-dir", logits_dir]
        load = loadavg()
        r = subprocess.run(args, capture_output=True, text=True)
        if r.returncode != 0:
            err = (r.stderr.strip().splitlines() or [f"exit {r.returncode}"])[-1]
            self.failures.append(f"hexir {tag}: {err}")
            return {"error": err, "load": load}
        s = json.load(open(stats))
        t = read_time_file(tfile)
        steps = s["token_ms"][1:]
        return {"prefill_ms": s["prefill_ms"], "tokens_per_s": len(steps) / (sum(steps) / 1000),
                "ms_median": median(steps), "ms_p90": quantile(steps, 0.9),
                "max_rss_kb": t["max_rss_kb"] if t else None, "process_s": t["seconds"] if t else None,
                "tokens": s["tokens"], "prepared_bytes": s["prepared_bytes"],
                "context_bytes": s["context_device_bytes"], "generator_bytes": s["generator_device_bytes"],
                "allocations": s["generate_device_allocations"], "load": load, "stdout": r.stdout.strip()}

    # ---- 1. sizes ----
    def sizes(self):
        w = weights_bytes(os.path.join(self.dir, "decode.onnx"))
        out = {"weights_bytes": w, "files": {}}
        for hxe in (self.lm, self.lm_where):
            name = os.path.basename(hxe)
            size = os.path.getsize(hxe)
            out["files"][name] = {"bytes": size, "ratio": size / w,
                                  "compile": read_time_file(os.path.join(self.hx, name[:-4] + ".compile.time"))}
            if size / w > self.a.max_size_ratio:
                self.failures.append(f"{name}: {size} bytes is {size / w:.3f} x the weights' {w} "
                                     f"(more than --max-size-ratio {self.a.max_size_ratio})")
        return out

    def dump_facts(self):
        d = json.loads(subprocess.run([self.dump, self.lm, "--json"], capture_output=True, text=True, check=True).stdout)
        fns = {}
        for f in d["functions"]:
            donated = sum(1 for i in f["inputs"] if (i.get("donated_to") if i.get("donated_to") is not None else -1) >= 0)
            fns[f["name"]] = {"copied_bytes": f["stats"]["copied_bytes"], "arena": f["arena_size"],
                              "lower_bound": f["lower_bound"], "donated_inputs": donated}
        return {"arena": d["arena"]["size"], "arena_lower_bound": d["arena"]["lower_bound"], "functions": fns}

    # ---- 2. speed ----
    def speed(self):
        dump = os.path.join(self.work, "ort_logits")
        threads = [int(t) for t in self.a.threads.split(",")]
        rounds = []
        for r in range(self.a.rounds):
            row = {}
            for t in threads:
                pairs = [("ort decode", lambda t=t: self.ort("decode", t, dump=dump if r == 0 else None)),
                         ("hexir packed", lambda t=t: self.hexir(self.lm, t, False)),
                         ("ort decode_past", lambda t=t: self.ort("decode_past", t)),
                         ("hexir unpacked", lambda t=t: self.hexir(self.lm, t, True))]
                if r % 2:  # Hexir first every other round
                    pairs = [pairs[1], pairs[0], pairs[3], pairs[2]]
                for name, fn in pairs:
                    x = fn()
                    row[f"{name} {t}t"] = x
                    log(f"round {r + 1} {name} {t}t: " + (x["error"] if "error" in x else
                        f"{x['tokens_per_s']:.1f} tokens/s, median {x['ms_median']:.2f} ms, p90 {x['ms_p90']:.2f}, "
                        f"prefill {x['prefill_ms']:.1f} ms (load {x['load']})"))
            rounds.append(row)
        return threads, rounds

    # ---- 3. correctness ----
    def correctness(self, threads):
        ref_tokens = np.load(os.path.join(self.dir, "reference_tokens.npy")).tolist()
        ref_logits = np.load(os.path.join(self.dir, self.ref["logits"]))
        ort_dir = os.path.join(self.work, "ort_logits")  # written by the first round
        rows = []
        ort_logits = {}
        for t in threads:
            p = os.path.join(ort_dir, f"ort_decode_{t}t_logits.npy")
            if os.path.exists(p):
                ort_logits[t] = np.load(p)
        cases = [(self.lm, t, False) for t in threads] + [(self.lm, threads[0], True), (self.lm_where, threads[0], False)]
        for hxe, t, unpacked in cases:
            name = f"{os.path.basename(hxe)} {t}t{' pack_weights=0' if unpacked else ''}"
            ld = os.path.join(self.work, "logits_" + name.replace(" ", "_").replace("=", ""))
            x = self.hexir(hxe, t, unpacked, logits_dir=ld)
            if "error" in x:
                rows.append({"run": name, "error": x["error"]})
                continue
            got = np.concatenate([np.load(os.path.join(ld, f"step_{k:03d}.npy")).reshape(1, -1)
                                  for k in range(len(x["tokens"]))])
            np.save(ld + ".npy", got)  # f32[steps, V], as scripts/llm/compare.py takes
            row = {"run": name, "tokens": len(x["tokens"]),
                   "match_torch": sum(int(a == b) for a, b in zip(x["tokens"], ref_tokens)),
                   "max_diff_torch": float(np.abs(got.astype(np.float64) - ref_logits[:len(got)]).max())}
            ortl = ort_logits.get(t)
            if ortl is not None:
                ort_tokens = ortl.argmax(1).tolist()
                per_step = np.abs(got.astype(np.float64) - ortl[:len(got)]).max(1)
                row.update(match_ort=sum(int(a == b) for a, b in zip(x["tokens"], ort_tokens)),
                           ort_threads=t, max_diff_ort=float(per_step.max()),
                           median_step_diff_ort=float(np.median(per_step)), per_step_diff_ort=per_step.tolist())
            if row["match_torch"] != len(ref_tokens) or row.get("match_ort", 0) != len(ref_tokens):
                self.failures.append(f"{name}: tokens {row['match_torch']}/{len(ref_tokens)} torch, "
                                     f"{row.get('match_ort')} onnxruntime")
            rows.append(row)
            log(f"check {name}: {row['match_torch']}/{len(ref_tokens)} tokens as torch, "
                f"{row.get('match_ort')} as onnxruntime; max |logit diff| {row.get('max_diff_ort', float('nan')):.2e} "
                f"vs onnxruntime, {row['max_diff_torch']:.2e} vs torch")
        ort_vs_torch = {t: float(np.abs(l.astype(np.float64) - ref_logits[:len(l)]).max()) for t, l in ort_logits.items()}
        return rows, ort_vs_torch

    # ---- 5. PSS ----
    @staticmethod
    def smaps(pid):
        out = {}
        try:
            for line in open(f"/proc/{pid}/smaps_rollup"):
                parts = line.split()
                if len(parts) >= 3 and parts[0].endswith(":") and parts[2] == "kB":
                    out[parts[0][:-1]] = int(parts[1])
        except OSError:
            return None
        return out

    def pss(self, counts):
        rows = []
        for unpacked in (True, False):
            for n in counts:
                procs = [subprocess.Popen([self.gen, self.lm, "--prompt", os.path.join(self.dir, self.ref["prompt"]),
                                           "--max-new-tokens", str(self.a.pss_tokens), "--threads", "1"]
                                          + (["--device", "cpu?pack_weights=0"] if unpacked else []),
                                          stdout=subprocess.DEVNULL, stderr=subprocess.PIPE) for _ in range(n)]
                samples, t0 = [], time.time()
                while all(p.poll() is None for p in procs):
                    got = [self.smaps(p.pid) for p in procs]
                    if all(got) and all(p.poll() is None for p in procs):
                        samples.append((time.time() - t0, got))
                    time.sleep(0.5)
                codes = [p.wait() for p in procs]
                mode = "pack_weights=0" if unpacked else "packed"
                if any(codes) or len(samples) < 2:
                    err = f"exit codes {codes}, {len(samples)} samples"
                    self.failures.append(f"pss {mode} N={n}: {err}")
                    rows.append({"mode": mode, "n": n, "error": err})
                    continue
                tail = samples[len(samples) // 2:]
                best = max(tail, key=lambda s: sum(x["Pss"] for x in s[1]))[1]
                total = lambda k: sum(x.get(k, 0) for x in best) / 1024
                rows.append({"mode": mode, "n": n, "samples": len(samples), "seconds": round(samples[-1][0], 1),
                             "pss_mib": total("Pss"), "pss_file_mib": total("Pss_File"),
                             "pss_anon_mib": total("Pss_Anon"), "rss_mib": total("Rss"),
                             "per_process_mib": total("Pss") / n})
                r = rows[-1]
                log(f"pss {mode} N={n}: {r['pss_mib']:.0f} MiB together ({r['pss_file_mib']:.0f} file, "
                    f"{r['pss_anon_mib']:.0f} anon), {r['per_process_mib']:.0f} MiB per process, RSS {r['rss_mib']:.0f} MiB")
        return rows

    def run(self):
        res = {"date": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"), "host": host(),
               "commit": git("rev-parse", "--short", "HEAD"),
               # tracked files changed beside this benchmark's own (the tools may not be HEAD's)
               "dirty": [l[3:] for l in git("status", "--porcelain", "--untracked-files=no").splitlines()
                         if not l[3:].startswith(("scripts/llm", "samples/llm/", "docs/llm.md"))],
               "ort_version": ort_version(self.a.ort), "model": self.ref["config"], "params": self.ref["params"],
               "heads": self.ref["heads"], "head_dim": self.ref["head_dim"],
               "prompt_len": self.ref["prompt_len"], "tokens": self.a.tokens, "ort_repeats": self.a.ort_repeats,
               "load_start": list(os.getloadavg())}
        res["sizes"] = self.sizes()
        res["dump"] = self.dump_facts()
        threads, rounds = self.speed()
        res["threads"], res["rounds"] = threads, rounds
        res["checks"], res["ort_vs_torch"] = self.correctness(threads)
        counts = [int(n) for n in self.a.pss.split(",") if n]
        res["pss"] = self.pss(counts) if counts else []
        res["load_end"] = list(os.getloadavg())
        res["failures"] = self.failures
        return res


def git(*args):
    r = subprocess.run(["git", "-C", ROOT, *args], capture_output=True, text=True)
    return r.stdout.rstrip("\n")


def host():
    cpu = "?"
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    flags = open("/proc/cpuinfo").read()
    isa = "AVX-512" if "avx512f" in flags else "AVX2" if "avx2" in flags else "no AVX2"
    return f"{cpu}, {os.cpu_count()} cores, {isa}, Linux {platform.release()}"


def ort_version(d):
    try:
        return json.load(open(os.path.join(d, "node_modules/onnxruntime-node/package.json")))["version"]
    except (OSError, ValueError):
        return "?"


# ---- the markdown ----
def f1(x):
    return "—" if x is None else f"{x:.1f}"


def f2(x):
    return "—" if x is None else f"{x:.2f}"


def mib(kb):
    return "—" if kb is None else f"{kb / 1024:.0f}"


def markdown(r):
    m = r["model"]
    L = []
    L.append(f"Measured {r['date']} on {r['host']}; hexir {r['commit']}{' (uncommitted changes: ' + ', '.join(r['dirty']) + ')' if r['dirty'] else ''}, "
             f"onnxruntime-node {r['ort_version']} (CPU, all graph optimizations, intra-op threads = T, sequential). "
             f"{m['preset']}: {m['layers']} layers, d {m['d']}, {m['heads']} heads, vocab {m['vocab']}, context {m['context']} "
             f"({r['params'] / 1e6:.1f}M parameters, random weights); prompt {r['prompt_len']} tokens, {r['tokens']} greedy "
             f"tokens (1 by the prefill, {r['tokens'] - 1} decode steps). Load average {r['load_start'][0]:.2f} at the start, "
             f"{r['load_end'][0]:.2f} at the end.")
    L.append("")
    s = r["sizes"]
    L.append("### File and compile")
    L.append("")
    L.append(f"decode.onnx's initializers: {s['weights_bytes']:,} bytes.")
    L.append("")
    L.append("| file | bytes | / weights | compile s | compile peak RSS MiB |")
    L.append("| --- | ---: | ---: | ---: | ---: |")
    for name, x in s["files"].items():
        c = x["compile"] or {}
        L.append(f"| {name} | {x['bytes']:,} | {x['ratio']:.4f} | {f2(c.get('seconds'))} | {mib(c.get('max_rss_kb'))} |")
    L.append("")

    # speed: medians over rounds
    L.append(f"### Speed (median of {len(r['rounds'])} rounds; onnxruntime: the faster of {r['ort_repeats']} generations "
             f"per session, Hexir: one generation per process)")
    L.append("")
    L.append("| runtime | T | decode tokens/s | per-token ms median | p90 | prefill ms | peak RSS MiB | load (per round) |")
    L.append("| --- | ---: | ---: | ---: | ---: | ---: | ---: | --- |")
    med = {}
    for t in r["threads"]:
        for name in ("ort decode", "ort decode_past", "hexir packed", "hexir unpacked"):
            xs = [rd[f"{name} {t}t"] for rd in r["rounds"] if "error" not in rd[f"{name} {t}t"]]
            if not xs:
                L.append(f"| {name} | {t} | error | | | | | |")
                continue
            mm = {k: median([x[k] for x in xs]) for k in ("tokens_per_s", "ms_median", "ms_p90", "prefill_ms")}
            mm["max_rss_kb"] = median([x["max_rss_kb"] for x in xs if x.get("max_rss_kb")] or [0])
            med[(name, t)] = mm
            label = {"ort decode": "onnxruntime decode.onnx (static cache)",
                     "ort decode_past": "onnxruntime decode_past.onnx (growing past)",
                     "hexir packed": "Hexir lm.hxe (packed weights)",
                     "hexir unpacked": "Hexir lm.hxe pack_weights=0"}[name]
            L.append(f"| {label} | {t} | {f1(mm['tokens_per_s'])} | {f2(mm['ms_median'])} | {f2(mm['ms_p90'])} | "
                     f"{f1(mm['prefill_ms'])} | {mib(mm['max_rss_kb'])} | {' '.join(str(x['load']) for x in xs)} |")
    L.append("")
    L.append("Ratios of the medians (Hexir tokens/s over onnxruntime's; above 1: Hexir faster):")
    L.append("")
    L.append("| T | packed / static cache | packed / growing past | unpacked / static cache | unpacked / growing past |")
    L.append("| ---: | ---: | ---: | ---: | ---: |")
    for t in r["threads"]:
        def ratio(h, o):
            a, b = med.get((h, t)), med.get((o, t))
            return f2(a["tokens_per_s"] / b["tokens_per_s"]) if a and b else "—"
        L.append(f"| {t} | {ratio('hexir packed', 'ort decode')} | {ratio('hexir packed', 'ort decode_past')} | "
                 f"{ratio('hexir unpacked', 'ort decode')} | {ratio('hexir unpacked', 'ort decode_past')} |")
    L.append("")
    L.append("Per round (decode tokens/s):")
    L.append("")
    names = [f"{n} {t}t" for t in r["threads"] for n in ("ort decode", "hexir packed", "ort decode_past", "hexir unpacked")]
    L.append("| round | " + " | ".join(names) + " |")
    L.append("| ---: |" + " ---: |" * len(names))
    for i, rd in enumerate(r["rounds"]):
        L.append(f"| {i + 1} | " + " | ".join("err" if "error" in rd[n] else f1(rd[n]["tokens_per_s"]) for n in names) + " |")
    L.append("")

    L.append("### Correctness")
    L.append("")
    L.append("| run | tokens as torch | tokens as onnxruntime (decode, same T) | max \\|logit diff\\| vs onnxruntime | "
             "median per step | max \\|logit diff\\| vs torch |")
    L.append("| --- | ---: | ---: | ---: | ---: | ---: |")
    for c in r["checks"]:
        if "error" in c:
            L.append(f"| {c['run']} | error: {c['error']} | | | | |")
            continue
        L.append(f"| {c['run']} | {c['match_torch']}/{c['tokens']} | {c.get('match_ort', '—')}/{c['tokens']} | "
                 f"{c.get('max_diff_ort', float('nan')):.1e} | {c.get('median_step_diff_ort', float('nan')):.1e} | "
                 f"{c['max_diff_torch']:.1e} |")
    for t, d in r["ort_vs_torch"].items():
        L.append(f"| onnxruntime decode.onnx {t}t | | | | | {d:.1e} |")
    L.append("")

    L.append("### Memory")
    L.append("")
    d = r["dump"]
    ncache, heads, dh = 2 * m["layers"], r["heads"], r["head_dim"]
    row_bytes = ncache * heads * dh * 4
    cache_bytes = row_bytes * m["context"]
    first = next((x for rd in r["rounds"] for k, x in rd.items() if k.startswith("hexir packed") and "error" not in x), None)
    unp = next((x for rd in r["rounds"] for k, x in rd.items() if k.startswith("hexir unpacked") and "error" not in x), None)
    L.append("| function | bytes copied per invoke | arena bytes | lower bound | donated inputs |")
    L.append("| --- | ---: | ---: | ---: | ---: |")
    for name, f in d["functions"].items():
        L.append(f"| {name} | {f['copied_bytes']:,} | {f['arena']:,} | {f['lower_bound']:,} | {f['donated_inputs']} |")
    L.append("")
    dec = d["functions"].get("decode", {}).get("copied_bytes")
    L.append(f"New K/V rows per token: {ncache} caches x {heads} heads x {dh} x 4 B = {row_bytes:,} B; decode copies "
             f"{dec:,} B per invoke. The caches: {ncache} x {cache_bytes // ncache:,} B = {cache_bytes:,} B.")
    L.append("")
    if first:
        L.append(f"hexir-generate (packed): prepared weights {first['prepared_bytes']:,} B, context {first['context_bytes']:,} B "
                 f"(the executable's arena {d['arena']:,} B, lower bound {d['arena_lower_bound']:,} B; "
                 f"1.1 x lower bound = {int(1.1 * d['arena_lower_bound']):,} B), generator {first['generator_bytes']:,} B "
                 f"(the caches and the step's inputs and logits), device allocations during generation: {first['allocations']}. "
                 f"Context = arena + {first['context_bytes'] - d['arena']:,} B (each function's own outputs: its logits); "
                 f"context + generator = {first['context_bytes'] + first['generator_bytes']:,} B against the caches + 1.1 x the "
                 f"arena's lower bound = {cache_bytes + int(1.1 * d['arena_lower_bound']):,} B.")
    if unp:
        L.append(f"Unpacked: prepared weights {unp['prepared_bytes']:,} B, allocations {unp['allocations']}.")
    L.append("")

    if r["pss"]:
        L.append("### PSS (N processes of hexir-generate on lm.hxe, 1 thread each)")
        L.append("")
        L.append("| weights | N | PSS MiB together | of it file | of it anon | per process | RSS MiB together | samples |")
        L.append("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
        for p in r["pss"]:
            if "error" in p:
                L.append(f"| {p['mode']} | {p['n']} | error: {p['error']} | | | | | |")
                continue
            L.append(f"| {p['mode']} | {p['n']} | {p['pss_mib']:.0f} | {p['pss_file_mib']:.0f} | {p['pss_anon_mib']:.0f} | "
                     f"{p['per_process_mib']:.0f} | {p['rss_mib']:.0f} | {p['samples']} |")
        L.append("")
    if r["failures"]:
        L.append("Failures: " + "; ".join(r["failures"]))
        L.append("")
    return "\n".join(L)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--dir", required=True)
    p.add_argument("--ort", required=True)
    p.add_argument("--build", default=os.path.join(ROOT, "build"))
    p.add_argument("--threads", default="1,2")
    p.add_argument("--tokens", type=int, default=64)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--ort-repeats", type=int, default=2)
    p.add_argument("--pss", default="1,2,4")
    p.add_argument("--pss-tokens", type=int, default=300)
    p.add_argument("--max-size-ratio", type=float, default=1.02,
                   help="a .hxe larger than this times decode.onnx's initializers fails (default 1.02)")
    p.add_argument("--json")
    p.add_argument("--md")
    a = p.parse_args()
    res = Bench(a).run()
    d = os.path.abspath(a.dir)
    json.dump(res, open(a.json or os.path.join(d, "llm_bench.json"), "w"), indent=1)
    md = markdown(res)
    open(a.md or os.path.join(d, "llm_bench.md"), "w").write(md + "\n")
    print(md)
    if res["failures"]:
        log(f"{len(res['failures'])} failures: " + "; ".join(res["failures"]))
        sys.exit(1)


if __name__ == "__main__":
    main()
