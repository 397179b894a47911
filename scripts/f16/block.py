#!/usr/bin/python3
"""A transformer-ish block (layernorm, attention-like softmax, MLP, residuals)
as ONNX, in f32 and in f16 with the same (half-rounded) weights, plus one input
and its numpy f32 reference: the f16 path's end-to-end check and benchmark
(docs/design-notes.md "Half precision through the f32 kernels").
Usage: block.py OUT_DIR [tokens] [width]   (Debian's python3-onnx and numpy)"""
import sys
import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

out = sys.argv[1]
T = int(sys.argv[2]) if len(sys.argv) > 2 else 128
D = int(sys.argv[3]) if len(sys.argv) > 3 else 768
rng = np.random.default_rng(30)
# Weights already on the f16 grid, so both models compute from the same values.
w1 = (rng.standard_normal((D, 2 * D)) / np.sqrt(D)).astype(np.float16)
b1 = (rng.standard_normal(2 * D) * 0.1).astype(np.float16)
w2 = (rng.standard_normal((2 * D, D)) / np.sqrt(2 * D)).astype(np.float16)
b2 = (rng.standard_normal(D) * 0.1).astype(np.float16)
gamma = (1 + rng.standard_normal(D) * 0.1).astype(np.float16)
beta = (rng.standard_normal(D) * 0.1).astype(np.float16)
scale = np.array(1 / np.sqrt(D), dtype=np.float16)
x = rng.standard_normal((1, T, D)).astype(np.float16)


def model(dt, npdt):
    inits = [numpy_helper.from_array(a.astype(npdt), n) for a, n in
             [(w1, "w1"), (b1, "b1"), (w2, "w2"), (b2, "b2"), (gamma, "gamma"), (beta, "beta"), (scale, "scale")]]
    nodes = [
        helper.make_node("LayerNormalization", ["x", "gamma", "beta"], ["h"], axis=-1, epsilon=1e-5),
        helper.make_node("Transpose", ["h"], ["ht"], perm=[0, 2, 1]),
        helper.make_node("MatMul", ["h", "ht"], ["s0"]),
        helper.make_node("Mul", ["s0", "scale"], ["s"]),
        helper.make_node("Softmax", ["s"], ["p"], axis=-1),
        helper.make_node("MatMul", ["p", "h"], ["a"]),
        helper.make_node("Add", ["x", "a"], ["r1"]),
        helper.make_node("MatMul", ["r1", "w1"], ["m0"]),
        helper.make_node("Add", ["m0", "b1"], ["m1"]),
        helper.make_node("Relu", ["m1"], ["m2"]),
        helper.make_node("MatMul", ["m2", "w2"], ["m3"]),
        helper.make_node("Add", ["m3", "b2"], ["m4"]),
        helper.make_node("Add", ["r1", "m4"], ["y"]),
    ]
    g = helper.make_graph(nodes, "block", [helper.make_tensor_value_info("x", dt, [1, T, D])],
                          [helper.make_tensor_value_info("y", dt, [1, T, D])], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    onnx.checker.check_model(m)
    return m


def reference(xf):
    xf = xf.astype(np.float32)
    mu = xf.mean(-1, keepdims=True)
    var = ((xf - mu) ** 2).mean(-1, keepdims=True)
    h = (xf - mu) / np.sqrt(var + 1e-5) * gamma.astype(np.float32) + beta.astype(np.float32)
    s = h @ h.transpose(0, 2, 1) * np.float32(scale)
    p = np.exp(s - s.max(-1, keepdims=True))
    p /= p.sum(-1, keepdims=True)
    r1 = xf + p @ h
    m = np.maximum(r1 @ w1.astype(np.float32) + b1.astype(np.float32), 0)
    return r1 + m @ w2.astype(np.float32) + b2.astype(np.float32)


onnx.save(model(TensorProto.FLOAT16, np.float16), f"{out}/block_f16.onnx")
onnx.save(model(TensorProto.FLOAT, np.float32), f"{out}/block_f32.onnx")
np.save(f"{out}/x_f16.npy", x)
np.save(f"{out}/x_f32.npy", x.astype(np.float32))
np.save(f"{out}/y_ref.npy", reference(x))
