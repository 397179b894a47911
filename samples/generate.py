#!/usr/bin/python3
"""Writes the weights, a fixed input and the reference outputs of the samples.

Run with Debian's interpreter (needs python3-numpy):

    /usr/bin/python3 samples/generate.py

Everything is deterministic (fixed seeds). Weights are stored as float32; the
references are computed in float64 from those float32 values and cast to
float32 at the end, so they are as exact as the data allows. Constants written
inline in the .hxir files (splat / dense) are repeated here; keep both in sync.
"""

import math
import os

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))

_erf = np.vectorize(math.erf, otypes=[np.float64])


def gelu(x):
    # Exact (erf) form, the catalog's default (approximate = 0).
    return 0.5 * x * (1.0 + _erf(x / math.sqrt(2.0)))


def relu(x):
    return np.maximum(x, 0.0)


def softmax(x, axis=-1):
    m = np.max(x, axis=axis, keepdims=True)
    e = np.exp(x - m)
    return e / np.sum(e, axis=axis, keepdims=True)


def layernorm(x, gamma, beta, eps=1e-5):
    mean = np.mean(x, axis=-1, keepdims=True)
    var = np.mean((x - mean) ** 2, axis=-1, keepdims=True)
    return (x - mean) / np.sqrt(var + eps) * gamma + beta


def f32(a):
    return np.ascontiguousarray(np.asarray(a, dtype=np.float32))


def save(folder, name, array):
    array = f32(array)
    np.save(os.path.join(HERE, folder, name + ".npy"), array)
    return array.astype(np.float64)  # what the reference computes with


def uniform(rng, shape, fan_in):
    bound = 1.0 / math.sqrt(fan_in)
    return rng.uniform(-bound, bound, size=shape)


# --------------------------------------------------------------------------
# mlp: x f32[8,128] -> 256 (gelu) -> 128 (relu) -> 10 -> softmax
# --------------------------------------------------------------------------
MLP_B2 = 0.01  # @b2 : f32[128] = splat 0.01
MLP_B3 = [0.1, -0.1, 0.2, -0.2, 0.0, 0.05, -0.05, 0.15, -0.15, 0.3]  # @b3 dense


def mlp():
    rng = np.random.default_rng(1234)
    os.makedirs(os.path.join(HERE, "mlp"), exist_ok=True)
    x = save("mlp", "input_x", rng.standard_normal((8, 128)))
    w1 = save("mlp", "w1", uniform(rng, (128, 256), 128) * 2.0)
    b1 = save("mlp", "b1", rng.uniform(-0.1, 0.1, size=(256,)))
    w2 = save("mlp", "w2", uniform(rng, (256, 128), 256) * 2.0)
    w3 = save("mlp", "w3", uniform(rng, (128, 10), 128) * 2.0)
    b2 = np.float64(np.float32(MLP_B2))
    b3 = f32(MLP_B3).astype(np.float64)

    h = gelu(x @ w1 + b1)
    h = relu(h @ w2 + b2)
    y = softmax(h @ w3 + b3, axis=-1)
    save("mlp", "expected_0", y)


# --------------------------------------------------------------------------
# transformer: one pre-norm block, seq 16, d_model 64, 4 heads of 16, ffn 256
# --------------------------------------------------------------------------
SEQ, D, HEADS, DH, FFN = 16, 64, 4, 16, 256
TF_SCALE = 0.25      # @scale : f32[] = splat 0.25   (1/sqrt(16))
TF_GAMMA2 = 1.0      # @ln2_g : f32[64] = splat 1.0
TF_BETA2 = 0.0       # @ln2_b : f32[64] = splat 0.0
TF_BO = [0.02, -0.02, 0.01, -0.01]  # @bo : f32[64] = dense, this pattern x16


def transformer():
    rng = np.random.default_rng(5678)
    folder = "transformer"
    os.makedirs(os.path.join(HERE, folder), exist_ok=True)
    x = save(folder, "input_x", rng.standard_normal((SEQ, D)))
    ln1_g = save(folder, "ln1_g", 1.0 + 0.1 * rng.standard_normal((D,)))
    ln1_b = save(folder, "ln1_b", 0.1 * rng.standard_normal((D,)))
    wq = save(folder, "wq", uniform(rng, (D, D), D) * 1.7)
    wk = save(folder, "wk", uniform(rng, (D, D), D) * 1.7)
    wv = save(folder, "wv", uniform(rng, (D, D), D) * 1.7)
    bq = save(folder, "bq", rng.uniform(-0.1, 0.1, size=(D,)))
    bk = save(folder, "bk", rng.uniform(-0.1, 0.1, size=(D,)))
    bv = save(folder, "bv", rng.uniform(-0.1, 0.1, size=(D,)))
    wo = save(folder, "wo", uniform(rng, (D, D), D) * 1.7)
    w_up = save(folder, "w_up", uniform(rng, (D, FFN), D) * 1.7)
    b_up = save(folder, "b_up", rng.uniform(-0.1, 0.1, size=(FFN,)))
    w_down = save(folder, "w_down", uniform(rng, (FFN, D), FFN) * 1.7)
    b_down = save(folder, "b_down", rng.uniform(-0.1, 0.1, size=(D,)))
    scale = np.float64(np.float32(TF_SCALE))
    ln2_g = np.full((D,), np.float64(np.float32(TF_GAMMA2)))
    ln2_b = np.full((D,), np.float64(np.float32(TF_BETA2)))
    bo = np.tile(f32(TF_BO).astype(np.float64), D // len(TF_BO))

    # Attention.
    h = layernorm(x, ln1_g, ln1_b)

    def heads(t):  # [16,64] -> [16,4,16] -> [4,16,16]
        return t.reshape(SEQ, HEADS, DH).transpose(1, 0, 2)

    q = heads(h @ wq + bq)
    k = heads(h @ wk + bk)
    v = heads(h @ wv + bv)
    scores = np.matmul(q, k.transpose(0, 2, 1)) * scale
    p = softmax(scores, axis=-1)
    a = np.matmul(p, v).transpose(1, 0, 2).reshape(SEQ, D)
    x1 = x + (a @ wo + bo)

    # MLP.
    h2 = layernorm(x1, ln2_g, ln2_b)
    m = gelu(h2 @ w_up + b_up) @ w_down + b_down
    y = x1 + m
    save(folder, "expected_0", y)
    # Second output: mean over the sequence (a pooled sentence vector).
    save(folder, "expected_1", np.mean(y, axis=0))


# --------------------------------------------------------------------------
# convnet: conv2d (padded, strided depthwise, 1x1), split, concat, cast,
# where, gather, slice
# --------------------------------------------------------------------------
CN_B2 = 0.05  # @b2 : f32[16] = splat 0.05
CN_CLASSES = [5, 0, -5, 3]  # @classes : i64[4] = dense
CN_TEN = 10.0  # @ten : f32[] = splat 10.0


def conv2d(x, w, b=None, stride=1, pad=0, groups=1):
    """NCHW convolution in float64, written out with loops over the kernel window."""
    n, c, h, wd = x.shape
    k, cg, kh, kw = w.shape
    xp = np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    oh = (h + 2 * pad - kh) // stride + 1
    ow = (wd + 2 * pad - kw) // stride + 1
    out = np.zeros((n, k, oh, ow))
    kg = k // groups
    for g in range(groups):
        for o in range(g * kg, (g + 1) * kg):
            for ci in range(cg):
                for dy in range(kh):
                    for dx in range(kw):
                        patch = xp[:, g * cg + ci, dy:dy + stride * oh:stride, dx:dx + stride * ow:stride]
                        out[:, o] += w[o, ci, dy, dx] * patch
    if b is not None:
        out += b.reshape(1, k, 1, 1)
    return out


def convnet():
    rng = np.random.default_rng(9012)
    folder = "convnet"
    os.makedirs(os.path.join(HERE, folder), exist_ok=True)
    x = save(folder, "input_x", rng.standard_normal((1, 3, 16, 16)))
    w1 = save(folder, "w1", uniform(rng, (8, 3, 3, 3), 27) * 1.5)
    b1 = save(folder, "b1", rng.uniform(-0.1, 0.1, size=(8,)))
    wd = save(folder, "wd", uniform(rng, (8, 1, 3, 3), 9) * 1.5)
    w2 = save(folder, "w2", uniform(rng, (16, 8, 1, 1), 8) * 1.5)
    b2 = np.full((16,), np.float64(np.float32(CN_B2)))

    r1 = relu(conv2d(x, w1, b1, pad=1))
    d = conv2d(r1, wd, stride=2, pad=1, groups=8)
    c2 = conv2d(d, w2, b2)
    a, b = c2[:, :8], c2[:, 8:]
    m = np.maximum(a, b)
    j = np.concatenate([m, b], axis=1)
    magnitude = np.where(j > 0, j, -j)
    pool = magnitude.mean(axis=(2, 3))
    logits = pool[:, CN_CLASSES]
    save(folder, "expected_0", softmax(logits, axis=-1))
    # f32 arithmetic first (as the kernel does), then truncation toward zero.
    level = np.trunc(f32(pool) * np.float32(CN_TEN)).astype(np.int32)
    np.save(os.path.join(HERE, folder, "expected_1.npy"), level)
    save(folder, "expected_2", m[:, :, 7::-2, :])


SAMPLES = {"mlp": mlp, "transformer": transformer, "convnet": convnet}

if __name__ == "__main__":
    import sys

    for name in sys.argv[1:] or SAMPLES:
        SAMPLES[name]()
