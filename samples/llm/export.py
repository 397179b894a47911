#!/usr/bin/python3
"""A GPT-2-small-class decoder in plain PyTorch (nanoGPT style, random weights), exported to ONNX for
the decoding benchmark of scripts/llm.sh: one decode step with a static KV cache (scatter and where
forms), prefills of a few prompt lengths with the same cache signature, and the growing-past step
that HF-style exports use; plus a prompt and torch's own greedy generation as the reference.

  /usr/bin/python3 samples/llm/export.py OUT [--tiny] [--layers N] [--d N] [--heads N] [--vocab N]
                   [--context N] [--prefill 32,128,512] [--tokens 64] [--seed N] [--force]

Writes into OUT (created; model files are never committed):
  decode.onnx        one step, static cache: input_ids i64[1,1], pos i64[1], past.{i}.key/value
                     f32[1,H,C,Dh] -> logits f32[1,1,V], present.{i}.key/value (the past with row
                     `pos` written by index_copy_: ONNX ScatterElements); attention over all C rows
                     masked to rows <= pos
  decode_where.onnx  the same step, the row written as where(arange(C)[:,None] == pos, row, cache)
  prefill_{L}.onnx   input_ids i64[1,L] + the same static caches (zeros when generation starts) ->
                     logits of the last position f32[1,1,V], present.* with rows 0..L-1 written
                     (index_copy_ with arange(L)); the cache signature is decode.onnx's, so one
                     cache buffer goes from the prefill to every decode step
  decode_past.onnx   the growing past: input_ids i64[1,1], past.{i}.key/value f32[1,H,P,Dh] (P:
                     dynamic axis `past_len`) -> logits, present.* f32[1,H,P+1,Dh] (torch.cat);
                     the position is P, taken from the past's shape in the graph
  prompt_{L}.npy     i64[1,L] random tokens (seeded) for each prefill length; prompt.npy is the
                     first one's
  reference.json     the configuration, every file, and torch's greedy generation (eager, static
                     cache) from prompt.npy: `tokens` (prefill's then tokens-1 decode steps')
  reference_logits.npy  f32[tokens, V]: each step's logits (row 0 is the prefill's)
  reference_tokens.npy  i64[tokens]

A folder already holding an export of the same configuration (and script) is left as it is (--force redoes it).
Needs Debian's python3-torch, python3-onnx, python3-numpy (/usr/bin/python3).
"""
import argparse
import hashlib
import json
import math
import os
import sys
import time

import numpy as np
import torch
import torch.nn.functional as F

OPSET = 17
GPT2_SMALL = dict(layers=12, d=768, heads=12, vocab=50257, context=1024, prefill=[32, 128, 512])
# The tiny preset's context holds the largest prefill plus 64 generated tokens.
TINY = dict(layers=2, d=64, heads=2, vocab=512, context=128, prefill=[8, 16])


class GPT(torch.nn.Module):
    """nanoGPT: token + learned position embedding, pre-LayerNorm blocks (one fused qkv Linear(d,3d),
    causal self-attention, Linear(d,d); MLP d -> 4d -> d with tanh-approximated GELU), final
    LayerNorm, lm_head tied to the token embedding. The step functions below share its weights."""

    def __init__(self, layers, d, heads, vocab, context):
        super().__init__()
        self.layers, self.d, self.heads, self.dh = layers, d, heads, d // heads
        self.vocab, self.context = vocab, context
        self.wte = torch.nn.Embedding(vocab, d)
        self.wpe = torch.nn.Embedding(context, d)
        self.ln1 = torch.nn.ModuleList([torch.nn.LayerNorm(d) for _ in range(layers)])
        self.qkv = torch.nn.ModuleList([torch.nn.Linear(d, 3 * d) for _ in range(layers)])
        self.proj = torch.nn.ModuleList([torch.nn.Linear(d, d) for _ in range(layers)])
        self.ln2 = torch.nn.ModuleList([torch.nn.LayerNorm(d) for _ in range(layers)])
        self.fc = torch.nn.ModuleList([torch.nn.Linear(d, 4 * d) for _ in range(layers)])
        self.fc_proj = torch.nn.ModuleList([torch.nn.Linear(4 * d, d) for _ in range(layers)])
        self.lnf = torch.nn.LayerNorm(d)

    @torch.no_grad()
    def randomize(self, seed):
        """nanoGPT's initialization (weights and embeddings normal(0, 0.02), biases zero) but for the
        layer norms. A random GPT with identity layer norms keeps its input token's embedding as its
        residual stream, the tied head scores that token highest and greedy decoding repeats it
        forever; trained layer norms are far from identity. Block gains drawn from normal(5, 2)
        (zero biases) make each block write more than the embedding carries, and the final gain
        normal(1, 0.2): GPT-2-small then changes its greedy token at nearly every step."""
        g = torch.Generator().manual_seed(seed)
        for name, p in self.named_parameters():
            if name.startswith(("ln1", "ln2")) and name.endswith("weight"):
                p.copy_(5.0 + 2.0 * torch.randn(p.shape, generator=g))
            elif name.startswith("lnf") and name.endswith("weight"):
                p.copy_(1.0 + 0.2 * torch.randn(p.shape, generator=g))
            elif name.endswith("bias"):
                p.zero_()
            else:
                p.copy_(0.02 * torch.randn(p.shape, generator=g))

    def mlp(self, i, x):
        return self.fc_proj[i](F.gelu(self.fc[i](self.ln2[i](x)), approximate="tanh"))

    def qkv_heads(self, i, x):
        """x [1, T, d] -> q, k, v [1, H, T, Dh]"""
        t = x.shape[1]
        q, k, v = self.qkv[i](self.ln1[i](x)).split(self.d, dim=-1)
        return [a.view(1, t, self.heads, self.dh).transpose(1, 2) for a in (q, k, v)]

    def attend(self, i, x, q, k, v, mask):
        """softmax(q k^T / sqrt(Dh), masked) v, merged heads, out projection, residual."""
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(self.dh))
        if mask is not None:
            att = att.masked_fill(~mask, float("-inf"))
        y = att.softmax(-1) @ v
        return x + self.proj[i](y.transpose(1, 2).reshape(1, q.shape[2], self.d))

    def logits(self, x):
        """x [1, T, d] -> the last position's logits [1, 1, V]: lnf, then the tied head as a Gemm
        on the [1, d] row (ONNX Gemm transB=1 reads the embedding table as it is; a MatMul on the
        3-D x would constant-fold a transposed copy of it into the file)."""
        h = self.lnf(x[:, -1, :])                      # [1, d]
        return F.linear(h, self.wte.weight, torch.zeros(self.vocab)).view(1, 1, self.vocab)


class Decode(torch.nn.Module):
    """One step, static cache written in place: index_copy_ (ONNX ScatterElements), or with
    where_write the scatter-free where(arange(C)[:,None] == pos, row, cache)."""

    def __init__(self, gpt, where_write=False):
        super().__init__()
        self.gpt, self.where_write = gpt, where_write

    def forward(self, input_ids, pos, *past):
        g = self.gpt
        x = g.wte(input_ids) + g.wpe(pos)             # [1, 1, d]
        rows = torch.arange(g.context)
        mask = rows <= pos                             # [C]: the rows written so far
        present = []
        for i in range(g.layers):
            q, k, v = g.qkv_heads(i, x)
            kc, vc = past[2 * i], past[2 * i + 1]
            if self.where_write:
                at = (rows[:, None] == pos)            # [C, 1]
                kc = torch.where(at, k, kc)
                vc = torch.where(at, v, vc)
            else:
                kc.index_copy_(2, pos, k)
                vc.index_copy_(2, pos, v)
            x = g.attend(i, x, q, kc, vc, mask)
            x = x + g.mlp(i, x)
            present += [kc, vc]
        return (g.logits(x), *present)


class Prefill(torch.nn.Module):
    """The prompt's L tokens at positions 0..L-1: rows 0..L-1 of every cache written with
    index_copy_(2, arange(L), k); causal attention among the L new rows (the rows after L are not
    yet written, so they take no part: the same result as attending over all C rows masked)."""

    def __init__(self, gpt, length):
        super().__init__()
        self.gpt, self.length = gpt, length

    def forward(self, input_ids, *past):
        g, n = self.gpt, self.length
        positions = torch.arange(n)
        x = g.wte(input_ids) + g.wpe(positions)       # [1, L, d]
        causal = positions[None, :] <= positions[:, None]  # [L, L]
        present = []
        for i in range(g.layers):
            q, k, v = g.qkv_heads(i, x)
            kc, vc = past[2 * i], past[2 * i + 1]
            kc.index_copy_(2, positions, k)
            vc.index_copy_(2, positions, v)
            x = g.attend(i, x, q, k, v, causal)
            x = x + g.mlp(i, x)
            present += [kc, vc]
        return (g.logits(x), *present)


class DecodePast(torch.nn.Module):
    """One step with a growing past (HF style): present = cat(past, new row) along dim 2; the
    position is the past's length, read from its shape inside the graph."""

    def __init__(self, gpt):
        super().__init__()
        self.gpt = gpt

    def forward(self, input_ids, *past):
        g = self.gpt
        past_len = past[0].size(2)
        positions = torch.arange(past_len, past_len + input_ids.size(1))
        x = g.wte(input_ids) + g.wpe(positions)
        present = []
        for i in range(g.layers):
            q, k, v = g.qkv_heads(i, x)
            kc = torch.cat([past[2 * i], k], dim=2)
            vc = torch.cat([past[2 * i + 1], v], dim=2)
            x = g.attend(i, x, q, kc, vc, None)       # one query sees every row
            x = x + g.mlp(i, x)
            present += [kc, vc]
        return (g.logits(x), *present)


def cache_names(layers, kind):
    return [f"{kind}.{i}.{kv}" for i in range(layers) for kv in ("key", "value")]


def zeros_cache(g, rows=None):
    shape = (1, g.heads, g.context if rows is None else rows, g.dh)
    return [torch.zeros(shape) for _ in range(2 * g.layers)]


def export(module, args, path, input_names, dynamic_axes=None):
    t0 = time.perf_counter()
    with torch.no_grad():
        torch.onnx.export(module, tuple(args), path, opset_version=OPSET, do_constant_folding=True,
                          input_names=input_names,
                          output_names=["logits"] + cache_names(module.gpt.layers, "present"),
                          dynamic_axes=dynamic_axes)
    return time.perf_counter() - t0


@torch.no_grad()
def reference(g, prompt, tokens):
    """Greedy generation in eager mode with the static cache: Prefill on the prompt (token 0), then
    Decode at positions L, L+1, ... (tokens 1..N-1), the cache tensors updated in place."""
    n = prompt.shape[1]
    cache = zeros_cache(g)
    out = Prefill(g, n)(torch.from_numpy(prompt), *cache)
    logits, out_tokens = [out[0].reshape(-1)], []
    step = Decode(g)
    for k in range(tokens):
        out_tokens.append(int(logits[-1].argmax()))
        if k == tokens - 1:
            break
        out = step(torch.tensor([[out_tokens[-1]]]), torch.tensor([n + k]), *cache)
        logits.append(out[0].reshape(-1))
    logits = torch.stack(logits).numpy().astype(np.float32)
    top2 = np.sort(logits, axis=1)[:, -2:]
    return np.array(out_tokens, np.int64), logits, top2[:, 1] - top2[:, 0]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out")
    ap.add_argument("--tiny", action="store_true", help="2 layers, d 64, 2 heads, vocab 512, context 128, prefill 8,16")
    for k in ("layers", "d", "heads", "vocab", "context"):
        ap.add_argument(f"--{k}", type=int)
    ap.add_argument("--prefill", help="prompt lengths, comma separated (the first is the reference's)")
    ap.add_argument("--tokens", type=int, default=64, help="tokens the reference generates")
    ap.add_argument("--seed", type=int, default=2024)
    ap.add_argument("--force", action="store_true", help="export again even if OUT holds this configuration")
    a = ap.parse_args()

    cfg = dict(TINY if a.tiny else GPT2_SMALL)
    for k in ("layers", "d", "heads", "vocab", "context"):
        if getattr(a, k) is not None:
            cfg[k] = getattr(a, k)
    if a.prefill:
        cfg["prefill"] = [int(x) for x in a.prefill.split(",")]
    with open(__file__, "rb") as f:  # a changed script exports again
        script = hashlib.sha256(f.read()).hexdigest()[:12]
    cfg.update(tokens=a.tokens, seed=a.seed, opset=OPSET, preset="tiny" if a.tiny else "gpt2-small", script=script)
    if cfg["d"] % cfg["heads"]:
        sys.exit("export.py: d must be a multiple of heads")
    if max(cfg["prefill"]) > cfg["context"] or cfg["prefill"][0] + a.tokens - 1 > cfg["context"]:
        sys.exit(f"export.py: context {cfg['context']} is too short for prefill {cfg['prefill']} + {a.tokens} tokens")

    os.makedirs(a.out, exist_ok=True)
    ref_path = os.path.join(a.out, "reference.json")
    if not a.force and os.path.exists(ref_path):
        old = json.load(open(ref_path))
        if old.get("config") == cfg and all(os.path.exists(os.path.join(a.out, f)) for f in old["files"]):
            print(f"export.py: {a.out} already holds this export (--force redoes it)")
            return

    torch.manual_seed(a.seed)
    torch.set_num_threads(max(1, min(2, os.cpu_count() or 1)))
    g = GPT(cfg["layers"], cfg["d"], cfg["heads"], cfg["vocab"], cfg["context"]).eval()
    g.randomize(a.seed)
    params = sum(p.numel() for p in g.parameters())
    print(f"export.py: {cfg['preset']}: {cfg['layers']} layers, d {cfg['d']}, {cfg['heads']} heads, "
          f"vocab {cfg['vocab']}, context {cfg['context']}: {params / 1e6:.1f}M parameters "
          f"({params * 4 / 2**20:.0f} MiB f32)", flush=True)

    files, times = [], {}
    past_in = cache_names(g.layers, "past")

    def done(name, seconds):
        files.append(name)
        times[name] = round(seconds, 2)
        size = os.path.getsize(os.path.join(a.out, name))
        print(f"  {name:<22} {size / 2**20:9.1f} MiB  exported in {seconds:.1f} s", flush=True)

    one = torch.zeros((1, 1), dtype=torch.int64)
    pos = torch.tensor([3])
    done("decode.onnx", export(Decode(g), [one, pos, *zeros_cache(g)], os.path.join(a.out, "decode.onnx"),
                               ["input_ids", "pos"] + past_in))
    done("decode_where.onnx", export(Decode(g, where_write=True), [one, pos, *zeros_cache(g)],
                                     os.path.join(a.out, "decode_where.onnx"), ["input_ids", "pos"] + past_in))
    for n in cfg["prefill"]:
        name = f"prefill_{n}.onnx"
        done(name, export(Prefill(g, n), [torch.zeros((1, n), dtype=torch.int64), *zeros_cache(g)],
                          os.path.join(a.out, name), ["input_ids"] + past_in))
    axes = {k: {2: "past_len"} for k in past_in}
    axes.update({k: {2: "present_len"} for k in cache_names(g.layers, "present")})
    done("decode_past.onnx", export(DecodePast(g), [one, *zeros_cache(g, rows=5)],
                                    os.path.join(a.out, "decode_past.onnx"), ["input_ids"] + past_in, axes))

    rng = np.random.default_rng(a.seed)
    for n in cfg["prefill"]:
        prompt = rng.integers(0, cfg["vocab"], (1, n), dtype=np.int64)
        np.save(os.path.join(a.out, f"prompt_{n}.npy"), prompt)
        files.append(f"prompt_{n}.npy")
        if n == cfg["prefill"][0]:
            np.save(os.path.join(a.out, "prompt.npy"), prompt)
            files.append("prompt.npy")
            ref_prompt = prompt

    t0 = time.perf_counter()
    tokens, logits, margins = reference(g, ref_prompt, a.tokens)
    ref_s = time.perf_counter() - t0
    np.save(os.path.join(a.out, "reference_logits.npy"), logits)
    np.save(os.path.join(a.out, "reference_tokens.npy"), tokens)
    files += ["reference_logits.npy", "reference_tokens.npy"]
    changes = int((tokens[1:] != tokens[:-1]).sum())
    print(f"  reference: {a.tokens} greedy tokens in {ref_s:.1f} s (torch eager, static cache): "
          f"{len(set(tokens.tolist()))} distinct, {changes} of {a.tokens - 1} steps change the token; "
          f"smallest top-1 - top-2 logit margin {margins.min():.2e}; logits std {logits.std():.2f}")
    print(f"  tokens: {tokens.tolist()}")

    ref = {
        "config": cfg,
        "params": params,
        "heads": g.heads, "head_dim": g.dh,
        "signature": {
            "decode": "input_ids i64[1,1], pos i64[1], past.{i}.key/value f32[1,H,C,Dh] -> logits f32[1,1,V], present.{i}.key/value",
            "prefill": "input_ids i64[1,L], past.* -> logits (last position), present.*",
            "decode_past": "input_ids i64[1,1], past.* f32[1,H,P,Dh] -> logits, present.* f32[1,H,P+1,Dh]",
            "cache_inputs": past_in, "cache_outputs": cache_names(g.layers, "present"),
        },
        "prompt": "prompt.npy", "prompt_len": int(ref_prompt.shape[1]),
        "tokens": tokens.tolist(),
        "logits": "reference_logits.npy",
        "min_top2_margin": float(margins.min()),
        "top2_margins": [float(m) for m in margins],
        "export_s": times, "reference_s": round(ref_s, 2),
        "torch": torch.__version__,
        "files": files + ["reference.json"],
    }
    # reference.json last: its presence marks a complete export.
    with open(ref_path, "w") as f:
        json.dump(ref, f, indent=1)
    print(f"export.py: wrote {len(files) + 1} files into {a.out} (export {sum(times.values()):.1f} s)")


if __name__ == "__main__":
    main()
