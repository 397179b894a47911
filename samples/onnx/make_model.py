#!/usr/bin/env python3
"""Writes a small ONNX classifier, an input and its numpy reference, for the
quick start (scripts/quickstart.sh) and the tests:

    /usr/bin/python3 samples/onnx/make_model.py OUT_DIR

OUT_DIR/model.onnx: input 'input' f32[N,3,16,16] (N dynamic: hexir-compile
fixes it with --input-shape input=1x3x16x16) -> Conv 3->8 3x3 pad 1 -> Relu
-> GlobalAveragePool -> Flatten -> Gemm 8->10 -> Softmax -> output 'probs'
f32[N,10]; OUT_DIR/input.npy f32[1,3,16,16]; OUT_DIR/expected.npy, the
output computed by numpy in float64. Weights and input come from a fixed
seed, so every run writes the same files. Needs numpy and onnx (Debian:
apt-get install -y python3-numpy python3-onnx); generated, never committed."""

import os
import sys

import numpy as np
from onnx import TensorProto, checker, helper, numpy_helper, save


def reference(x, w, b, fc_w, fc_b):
    """The model in numpy, float64."""
    x, w = x.astype(np.float64), w.astype(np.float64)
    n, _, h, wd = x.shape
    padded = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))
    conv = np.zeros((n, w.shape[0], h, wd))
    for i in range(3):
        for j in range(3):
            conv += np.einsum("nchw,oc->nohw", padded[:, :, i:i + h, j:j + wd], w[:, :, i, j])
    conv += b.reshape(1, -1, 1, 1)
    pooled = np.maximum(conv, 0).mean(axis=(2, 3))
    logits = pooled @ fc_w.astype(np.float64).T + fc_b
    e = np.exp(logits - logits.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else "."
    os.makedirs(out, exist_ok=True)
    rng = np.random.RandomState(7)
    w = (rng.randn(8, 3, 3, 3) * 0.3).astype(np.float32)
    b = (rng.randn(8) * 0.1).astype(np.float32)
    fc_w = (rng.randn(10, 8) * 0.5).astype(np.float32)
    fc_b = (rng.randn(10) * 0.1).astype(np.float32)
    x = rng.rand(1, 3, 16, 16).astype(np.float32)
    nodes = [
        helper.make_node("Conv", ["input", "conv.weight", "conv.bias"], ["conv"], kernel_shape=[3, 3],
                         pads=[1, 1, 1, 1], name="conv"),
        helper.make_node("Relu", ["conv"], ["relu"], name="relu"),
        helper.make_node("GlobalAveragePool", ["relu"], ["pool"], name="pool"),
        helper.make_node("Flatten", ["pool"], ["flat"], axis=1, name="flatten"),
        helper.make_node("Gemm", ["flat", "fc.weight", "fc.bias"], ["logits"], transB=1, name="fc"),
        helper.make_node("Softmax", ["logits"], ["probs"], axis=1, name="softmax"),
    ]
    graph = helper.make_graph(
        nodes, "small_classifier",
        [helper.make_tensor_value_info("input", TensorProto.FLOAT, ["N", 3, 16, 16])],
        [helper.make_tensor_value_info("probs", TensorProto.FLOAT, ["N", 10])],
        [numpy_helper.from_array(w, "conv.weight"), numpy_helper.from_array(b, "conv.bias"),
         numpy_helper.from_array(fc_w, "fc.weight"), numpy_helper.from_array(fc_b, "fc.bias")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], producer_name="hexir samples")
    model.ir_version = 8
    checker.check_model(model)
    save(model, os.path.join(out, "model.onnx"))
    np.save(os.path.join(out, "input.npy"), x)
    np.save(os.path.join(out, "expected.npy"), reference(x, w, b, fc_w, fc_b).astype(np.float32))
    print("wrote %s: model.onnx (input f32[N,3,16,16] -> probs f32[N,10]), input.npy, expected.npy" % out)


if __name__ == "__main__":
    main()
