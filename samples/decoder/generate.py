#!/usr/bin/python3
"""Writes the decoder sample's weights, inputs and numpy reference.

A small GPT-style decoder: vocabulary 64, d_model 32, 2 layers of 2 heads of
16, MLP 4x (128, exact gelu), learned positional embedding, pre-norm, causal
attention over a KV cache of 32 positions, final layernorm, logits =
h @ w_vocab, greedy argmax.

Run with an interpreter that has numpy (Debian: python3-numpy):

    python3 samples/decoder/generate.py

Everything is deterministic (a fixed seed). Weights are stored as float32;
the reference runs in float64 from those float32 values and is cast to
float32 at the end (as samples/generate.py does). It writes:

  prompt.npy           i64[P]            the prompt (P = 8)
  steps.npy            i64[]             N, the number of generated tokens (20)
  cache0.npy           f32[2,2,2,32,16]  the initial (zero) KV cache
  expected_tokens.npy  i64[N]            the greedily generated tokens
  expected_cache.npy   f32[2,2,2,32,16]  the KV cache after generation

The KV cache is [layer, k|v, head, position, head_dim]. Generation feeds the
prompt token by token (positions 0..P-1), then each generated token but the
last (positions P..P+N-2): P+N-1 steps, each writing one cache row per layer
and producing one next token; the tokens produced at positions P-1..P+N-2
are the N generated ones. The last generated token is not fed back, so cache
rows P+N-1.. stay zero.
"""

import math
import os

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))

VOCAB, D, LAYERS, HEADS, DH, CTX, FFN = 64, 32, 2, 2, 16, 32, 128
PROMPT_LEN, STEPS = 8, 20
SCALE = 0.25  # 1/sqrt(DH); @scale in the .hxir files
EPS = 1e-5
# Top-1 minus top-2 logit at every generated token must exceed this, so that
# float32 rounding cannot change the argmax.
MIN_MARGIN = 1e-3

_erf = np.vectorize(math.erf, otypes=[np.float64])


def gelu(x):
    return 0.5 * x * (1.0 + _erf(x / math.sqrt(2.0)))


def softmax(x, axis=-1):
    m = np.max(x, axis=axis, keepdims=True)
    e = np.exp(x - m)
    return e / np.sum(e, axis=axis, keepdims=True)


def layernorm(x, gamma, beta):
    mean = np.mean(x, axis=-1, keepdims=True)
    var = np.mean((x - mean) ** 2, axis=-1, keepdims=True)
    return (x - mean) / np.sqrt(var + EPS) * gamma + beta


def save(name, array, dtype=np.float32):
    array = np.asarray(array, dtype=dtype)
    if array.ndim:  # ascontiguousarray would make a scalar 1-D
        array = np.ascontiguousarray(array)
    np.save(os.path.join(HERE, name + ".npy"), array)
    return array.astype(np.float64) if dtype == np.float32 else array


def uniform(rng, shape, fan_in, gain=1.7):
    bound = gain / math.sqrt(fan_in)
    return rng.uniform(-bound, bound, size=shape)


def weights(rng):
    w = {}
    w["wte"] = save("wte", rng.standard_normal((VOCAB, D)))
    w["wpe"] = save("wpe", 0.5 * rng.standard_normal((CTX, D)))
    for l in range(LAYERS):
        p = "l%d_" % l
        w[p + "ln1_g"] = save(p + "ln1_g", 1.0 + 0.1 * rng.standard_normal((D,)))
        w[p + "ln1_b"] = save(p + "ln1_b", 0.1 * rng.standard_normal((D,)))
        for n in ("wq", "wk", "wv", "wo"):
            w[p + n] = save(p + n, uniform(rng, (D, D), D))
        for n in ("bq", "bk", "bv", "bo"):
            w[p + n] = save(p + n, rng.uniform(-0.1, 0.1, size=(D,)))
        w[p + "ln2_g"] = save(p + "ln2_g", 1.0 + 0.1 * rng.standard_normal((D,)))
        w[p + "ln2_b"] = save(p + "ln2_b", 0.1 * rng.standard_normal((D,)))
        w[p + "w_up"] = save(p + "w_up", uniform(rng, (D, FFN), D))
        w[p + "b_up"] = save(p + "b_up", rng.uniform(-0.1, 0.1, size=(FFN,)))
        w[p + "w_down"] = save(p + "w_down", uniform(rng, (FFN, D), FFN))
        w[p + "b_down"] = save(p + "b_down", rng.uniform(-0.1, 0.1, size=(D,)))
    w["lnf_g"] = save("lnf_g", 1.0 + 0.1 * rng.standard_normal((D,)))
    w["lnf_b"] = save("lnf_b", 0.1 * rng.standard_normal((D,)))
    w["w_vocab"] = save("w_vocab", uniform(rng, (D, VOCAB), D, gain=4.0))
    return w


def step(w, token, pos, cache):
    """One decode step: writes cache rows `pos` (in place), returns the logits."""
    x = w["wte"][token] + w["wpe"][pos]  # [D]
    scale = np.float64(np.float32(SCALE))
    for l in range(LAYERS):
        p = "l%d_" % l
        h = layernorm(x, w[p + "ln1_g"], w[p + "ln1_b"])
        q = (h @ w[p + "wq"] + w[p + "bq"]).reshape(HEADS, DH)
        k = (h @ w[p + "wk"] + w[p + "bk"]).reshape(HEADS, DH)
        v = (h @ w[p + "wv"] + w[p + "bv"]).reshape(HEADS, DH)
        cache[l, 0, :, pos] = k
        cache[l, 1, :, pos] = v
        keys = cache[l, 0, :, : pos + 1]  # [H, pos+1, DH]: the causal window
        values = cache[l, 1, :, : pos + 1]
        scores = np.einsum("hd,htd->ht", q, keys) * scale
        o = np.einsum("ht,htd->hd", softmax(scores), values).reshape(D)
        x = x + (o @ w[p + "wo"] + w[p + "bo"])
        g = layernorm(x, w[p + "ln2_g"], w[p + "ln2_b"])
        x = x + (gelu(g @ w[p + "w_up"] + w[p + "b_up"]) @ w[p + "w_down"] + w[p + "b_down"])
    return layernorm(x, w["lnf_g"], w["lnf_b"]) @ w["w_vocab"]


def main():
    rng = np.random.default_rng(2024)
    w = weights(rng)
    prompt = save("prompt", rng.integers(0, VOCAB, size=(PROMPT_LEN,)), np.int64)
    save("steps", STEPS, np.int64)
    save("cache0", np.zeros((LAYERS, 2, HEADS, CTX, DH)))
    assert PROMPT_LEN + STEPS - 1 <= CTX

    cache = np.zeros((LAYERS, 2, HEADS, CTX, DH))
    generated = []
    margins = []
    token = int(prompt[0])
    for pos in range(PROMPT_LEN + STEPS - 1):
        if pos < PROMPT_LEN:
            token = int(prompt[pos])
        logits = step(w, token, pos, cache)
        token = int(np.argmax(logits))
        if pos >= PROMPT_LEN - 1:
            top = np.sort(logits)[::-1]
            margins.append(top[0] - top[1])
            generated.append(token)
    assert min(margins) > MIN_MARGIN, "argmax too close to call: %g" % min(margins)
    save("expected_tokens", generated, np.int64)
    save("expected_cache", cache)
    print("prompt", prompt.tolist())
    print("generated", generated)
    print("smallest top-1/top-2 logit margin %.4g" % min(margins))


if __name__ == "__main__":
    main()
