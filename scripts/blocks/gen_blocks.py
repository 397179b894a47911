#!/usr/bin/python3
"""Transformer and MLP blocks for scripts/blocks.sh, as ONNX models with seeded random
weights, in the form PyTorch's exporter gives them (opset 17):

  mlp-T256-D768        x[1,256,768] -> MatMul+Add (3072) -> GELU -> MatMul+Add (768)
  encoder-T128-D256    one post-LN encoder layer (HF BertLayer), 4 heads, MLP 1024
  encoder-T256-D768    the same at BERT-base size: 12 heads, MLP 3072

Linear layers are MatMul with the weight as an [in, out] initializer plus an Add of the bias (what
torch.onnx.export gives nn.Linear on a 3-D input). GELU is the exact form, x * 0.5 * (1 + erf(x /
sqrt 2)) as Div, Erf, Add, Mul, Mul (nn.GELU() exported below opset 20). Attention is BertSelfAttention:
Reshape [1,T,H,dh] + Transpose [0,2,1,3] per projection, the keys transposed again [0,1,3,2],
MatMul, Div by sqrt(dh), Softmax(-1), MatMul, Transpose [0,2,1,3], Reshape [1,T,D], the output
projection, the residual Add and LayerNormalization (opset 17, as torch exports nn.LayerNorm). No
attention mask (batch 1, no padding).

Run with Debian's /usr/bin/python3 (python3-onnx 1.12, python3-numpy):
  /usr/bin/python3 scripts/blocks/gen_blocks.py OUTDIR [--only NAME,...]
writes OUTDIR/NAME.onnx for each block and prints one JSON line per block (name, file, input
shape, flops of one inference).
"""
import argparse
import json
import math
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OPSET = 17

BLOCKS = {
    # name: kind, T, D, heads, hidden
    "mlp-T256-D768": ("mlp", 256, 768, 0, 3072),
    "encoder-T128-D256": ("encoder", 128, 256, 4, 1024),
    "encoder-T256-D768": ("encoder", 256, 768, 12, 3072),
}


class Graph:
    def __init__(self, seed):
        self.rng = np.random.default_rng(seed)
        self.nodes, self.inits = [], []
        self.count = 0

    def name(self, base):
        self.count += 1
        return f"/{base}_{self.count}"

    def init(self, name, array):
        self.inits.append(numpy_helper.from_array(array, name))
        return name

    def const(self, value, dtype=np.float32):
        return self.init(self.name("const"), np.array(value, dtype=dtype))

    def op(self, op_type, inputs, **attrs):
        out = self.name(op_type) + "_output_0"
        self.nodes.append(helper.make_node(op_type, inputs, [out], name=self.name(op_type), **attrs))
        return out

    def linear(self, x, prefix, d_in, d_out):
        # nn.Linear's default init range (kaiming uniform, a = sqrt 5): U(-1/sqrt(in), 1/sqrt(in)).
        bound = 1.0 / math.sqrt(d_in)
        w = self.init(f"{prefix}.weight_T", self.rng.uniform(-bound, bound, (d_in, d_out)).astype(np.float32))
        b = self.init(f"{prefix}.bias", self.rng.uniform(-bound, bound, (d_out,)).astype(np.float32))
        return self.op("Add", [self.op("MatMul", [x, w]), b])

    def gelu(self, x):
        e = self.op("Erf", [self.op("Div", [x, self.const(math.sqrt(2.0))])])
        return self.op("Mul", [self.op("Mul", [x, self.op("Add", [e, self.const(1.0)])]), self.const(0.5)])

    def layernorm(self, x, prefix, d):
        g = self.init(f"{prefix}.weight", (1.0 + 0.1 * self.rng.standard_normal(d)).astype(np.float32))
        b = self.init(f"{prefix}.bias", (0.1 * self.rng.standard_normal(d)).astype(np.float32))
        return self.op("LayerNormalization", [x, g, b], axis=-1, epsilon=1e-12)


def mlp(g, x, T, D, hidden, prefix):
    return g.linear(g.gelu(g.linear(x, f"{prefix}.intermediate.dense", D, hidden)), f"{prefix}.output.dense", hidden, D)


def encoder(g, x, T, D, H, hidden):
    dh = D // H
    split = g.init("split_heads_shape", np.array([1, T, H, dh], dtype=np.int64))
    merge = g.init("merge_heads_shape", np.array([1, T, D], dtype=np.int64))

    def heads(name):
        y = g.linear(x, f"attention.self.{name}", D, D)
        return g.op("Transpose", [g.op("Reshape", [y, split])], perm=[0, 2, 1, 3])

    q, k, v = heads("query"), heads("key"), heads("value")
    kt = g.op("Transpose", [k], perm=[0, 1, 3, 2])
    s = g.op("Div", [g.op("MatMul", [q, kt]), g.const(math.sqrt(dh))])
    p = g.op("Softmax", [s], axis=-1)
    ctx = g.op("MatMul", [p, v])
    ctx = g.op("Reshape", [g.op("Transpose", [ctx], perm=[0, 2, 1, 3]), merge])
    a = g.linear(ctx, "attention.output.dense", D, D)
    x1 = g.layernorm(g.op("Add", [a, x]), "attention.output.LayerNorm", D)
    m = mlp(g, x1, T, D, hidden, "")
    return g.layernorm(g.op("Add", [m, x1]), "output.LayerNorm", D)


def flops(kind, T, D, H, hidden):
    f = 2 * T * D * hidden * 2  # the two MLP GEMMs
    if kind == "encoder":
        f += 2 * T * D * D * 4  # Q, K, V, output projections
        f += 2 * T * T * D * 2  # scores and context, all heads
    return f


def build(name, seed):
    kind, T, D, H, hidden = BLOCKS[name]
    g = Graph(seed)
    x = "x"
    y = mlp(g, x, T, D, hidden, "mlp") if kind == "mlp" else encoder(g, x, T, D, H, hidden)
    g.nodes.append(helper.make_node("Identity", [y], ["y"], name="/output"))
    graph = helper.make_graph(
        g.nodes, name.replace("-", "_"),
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, T, D])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, T, D])],
        initializer=g.inits)
    model = helper.make_model(graph, producer_name="hexir scripts/blocks/gen_blocks.py",
                              opset_imports=[helper.make_opsetid("", OPSET)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model, {"name": name, "kind": kind, "T": T, "D": D, "heads": H, "hidden": hidden,
                   "input": {"name": "x", "shape": [1, T, D]}, "flops": flops(kind, T, D, H, hidden)}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("outdir")
    ap.add_argument("--only", default="")
    ap.add_argument("--seed", type=int, default=10)
    args = ap.parse_args()
    names = [n for n in args.only.split(",") if n] or list(BLOCKS)
    for n in names:
        if n not in BLOCKS:
            sys.exit(f"gen_blocks.py: no block '{n}' ({', '.join(BLOCKS)})")
    os.makedirs(args.outdir, exist_ok=True)
    for i, n in enumerate(BLOCKS):
        if n not in names:
            continue
        model, info = build(n, args.seed * 1000 + i)
        info["file"] = os.path.join(args.outdir, f"{n}.onnx")
        tmp = info["file"] + ".tmp"
        onnx.save(model, tmp)
        os.replace(tmp, info["file"])
        print(json.dumps(info), flush=True)


if __name__ == "__main__":
    main()
