#!/usr/bin/python3
"""QDQ models the way onnxruntime's static quantizer writes them, from float ONNX models, with
Debian's python3-onnx and numpy only (scripts/qdq.sh runs it):

  /usr/bin/python3 scripts/qdq/make_qdq.py --zoo ZOO.jsonl --out OUTDIR --ort ORTDIR [--only a,b]

For each model of ZOO.jsonl (scripts/zoo/export_zoo.py's lines: the float model and its inputs):
  0. an Identity of an initializer becomes an initializer of its own (torch's exporter writes
     parameters of equal values, such as the layers of a TransformerEncoder deep-copied from one
     random layer, as one initializer and Identity nodes; onnxruntime's quantization preprocessing
     folds them, and a weight behind an Identity would otherwise be quantized as an activation);
  1. the tensors to quantize: every float activation a Conv, Gemm or MatMul reads, and what each
     of them writes (a Relu or Clip that alone reads a Conv's or Gemm's result is removed, the
     result quantized at the activation's range: onnxruntime's QDQRemovableActivation);
  2. calibration: the model with those tensors as extra outputs runs once in onnxruntime-node on
     the model's own (realistic) inputs (scripts/qdq/calibrate.mjs): each tensor's min and max;
  3. the QDQ model: each such activation x becomes DequantizeLinear(QuantizeLinear(x)) with a
     uint8 scale and zero point from its range (asymmetric, the range widened to hold 0);
     weights int8, symmetric per output channel (Conv axis 0, Gemm/MatMul along N), behind a
     DequantizeLinear; biases int32 at scale x_scale * w_scale. The float graph is otherwise
     unchanged (opset 17).
Writes OUTDIR/NAME_qdq.onnx and prints one JSON line per model in export_zoo.py's form (name
NAME_qdq, the same inputs), for scripts/zoo/bench.mjs.
"""
import argparse
import json
import os
import subprocess
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

HERE = os.path.dirname(os.path.abspath(__file__))


def fold_identities(model):
    """Each Identity of an initializer (or of one folded before it) replaced by a copy of it under
    the Identity's output name."""
    g = model.graph
    inits = {i.name: i for i in g.initializer}
    outputs = {o.name for o in g.output}
    kept = []
    for node in g.node:
        if node.op_type == "Identity" and node.input[0] in inits and node.output[0] not in outputs:
            copy = onnx.TensorProto()
            copy.CopyFrom(inits[node.input[0]])
            copy.name = node.output[0]
            g.initializer.append(copy)
            inits[copy.name] = copy
        else:
            kept.append(node)
    del g.node[:]
    g.node.extend(kept)
    return model


def removable_activations(model):
    """{Conv/Gemm output: the Relu or Clip node that alone reads it}: onnxruntime's quantizer removes
    such an activation (QDQRemovableActivation) and quantizes the Conv's output at the activation's
    range, so the uint8 clamp applies it."""
    readers = {}
    for node in model.graph.node:
        for x in node.input:
            readers.setdefault(x, []).append(node)
    outputs = {o.name for o in model.graph.output}
    writers = {y: node for node in model.graph.node for y in node.output}
    found = {}
    for node in model.graph.node:
        if node.op_type not in ("Relu", "Clip") or not node.input:
            continue
        x = node.input[0]
        w = writers.get(x)
        if w is not None and w.op_type in ("Conv", "Gemm") and len(readers.get(x, [])) == 1 and x not in outputs:
            found[x] = node
    return found


def float_activations(model):
    """(activation tensors read by Conv/Gemm/MatMul, tensors they write), in graph order (a removable
    activation's output stands for the Conv's)."""
    inits = {i.name for i in model.graph.initializer}
    removable = removable_activations(model)
    reads, writes = [], []
    for node in model.graph.node:
        if node.op_type not in ("Conv", "Gemm", "MatMul"):
            continue
        operands = node.input[:1] if node.op_type != "MatMul" else node.input[:2]
        for x in operands:
            if x and x not in inits and x not in reads:
                reads.append(x)
        y = node.output[0]
        y = removable[y].output[0] if y in removable else y
        if y not in writes:
            writes.append(y)
    return reads, writes


def calibrate(model, tensors, line, ort_dir, scratch):
    """{tensor: (min, max)} from one onnxruntime-node run with the tensors as outputs."""
    m = onnx.ModelProto()
    m.CopyFrom(model)
    have = {o.name for o in m.graph.output}
    for t in tensors:
        if t not in have:
            m.graph.output.append(helper.make_tensor_value_info(t, TensorProto.FLOAT, None))
    path = os.path.join(scratch, line["name"] + ".calibrate.onnx")
    onnx.save(m, path)
    out = os.path.join(scratch, line["name"] + ".ranges.json")
    feeds = [f"{i['name']}={i['npy']}" for i in line["inputs"]]
    subprocess.run(["node", os.path.join(HERE, "calibrate.mjs"), "--ort", ort_dir, "--model", path, "--out", out]
                   + feeds, check=True)
    os.remove(path)
    return json.load(open(out))


def activation_qparams(lo, hi):
    """uint8 asymmetric: the range widened to hold 0, zero point round(-lo / scale)."""
    lo, hi = min(float(lo), 0.0), max(float(hi), 0.0)
    scale = (hi - lo) / 255.0 if hi > lo else 1.0
    zero = int(np.clip(np.round(-lo / scale), 0, 255))
    return np.float32(scale), np.uint8(zero)


def weight_qparams(w, axis):
    """int8 symmetric per channel along axis: scale max|w| / 127."""
    reduce = tuple(d for d in range(w.ndim) if d != axis)
    amax = np.abs(w).max(axis=reduce) if reduce else np.abs(w)
    scale = np.where(amax > 0, amax / 127.0, 1.0).astype(np.float32)
    shape = [1] * w.ndim
    shape[axis] = -1
    q = np.clip(np.round(w / scale.reshape(shape)), -127, 127).astype(np.int8)
    return q, scale


def make_qdq(model, ranges):
    g = model.graph
    inits = {i.name: i for i in g.initializer}
    reads, writes = float_activations(model)
    quantized = set(reads) | set(writes)
    new_inits, nodes, renamed = [], [], {}  # renamed: activation -> its DequantizeLinear output

    def const(name, array):
        new_inits.append(numpy_helper.from_array(array, name))
        return name

    def insert_qdq(x):
        scale, zero = activation_qparams(*ranges[x])
        s, z = const(x + "_scale", np.array(scale, np.float32)), const(x + "_zero_point", np.array(zero, np.uint8))
        nodes.append(helper.make_node("QuantizeLinear", [x, s, z], [x + "_quantized"], name=x + "_QuantizeLinear"))
        nodes.append(helper.make_node("DequantizeLinear", [x + "_quantized", s, z], [x + "_dequantized"],
                                      name=x + "_DequantizeLinear"))
        renamed[x] = x + "_dequantized"

    def dequantized_weight(name, array, axis):
        q, scale = weight_qparams(array, axis)
        inputs = [const(name + "_quantized", q), const(name + "_scale", scale),
                  const(name + "_zero_point", np.zeros(scale.shape, np.int8))]
        nodes.append(helper.make_node("DequantizeLinear", inputs, [name + "_dequantized"],
                                      name=name + "_DequantizeLinear", axis=axis))
        return name + "_dequantized", scale

    def dequantized_bias(name, array, scale):
        q = np.clip(np.round(array / scale), -2**31, 2**31 - 1).astype(np.int32)
        inputs = [const(name + "_quantized", q), const(name + "_scale", scale.astype(np.float32)),
                  const(name + "_zero_point", np.zeros(scale.shape, np.int32))]
        nodes.append(helper.make_node("DequantizeLinear", inputs, [name + "_dequantized"],
                                      name=name + "_DequantizeLinear", axis=0))
        return name + "_dequantized"

    for x in g.input:
        if x.name in quantized and x.name in ranges:
            insert_qdq(x.name)
    removable = removable_activations(model)
    for node in g.node:
        if node.op_type in ("Relu", "Clip") and node.input and node.input[0] in removable:
            continue
        if node.op_type in ("Conv", "Gemm") and node.output[0] in removable:
            node.output[0] = removable[node.output[0]].output[0]
        inputs = [renamed.get(x, x) for x in node.input]
        w = inputs[1] if len(inputs) > 1 else ""
        if node.op_type in ("Conv", "Gemm", "MatMul") and w in inits and inits[w].data_type == TensorProto.FLOAT:
            array = numpy_helper.to_array(inits[w])
            trans_b = next((a.i for a in node.attribute if a.name == "transB"), 0)
            axis = 0 if node.op_type == "Conv" or (node.op_type == "Gemm" and trans_b) else array.ndim - 1
            inputs[1], w_scale = dequantized_weight(w, array, axis)
            bias = inputs[2] if len(inputs) > 2 and node.op_type in ("Conv", "Gemm") else ""
            if bias in inits and node.input[0] in ranges:
                b = numpy_helper.to_array(inits[bias])
                b_scale = activation_qparams(*ranges[node.input[0]])[0] * w_scale
                if b.ndim == 1 and b_scale.size == b.size:
                    inputs[2] = dequantized_bias(bias, b, b_scale)
        del node.input[:]
        node.input.extend(inputs)
        nodes.append(node)
        for y in node.output:
            if y in quantized and y in ranges:
                insert_qdq(y)
    used = {x for n in nodes for x in n.input}
    del g.node[:]
    g.node.extend(nodes)
    keep = [i for i in list(g.initializer) + new_inits if i.name in used]
    del g.initializer[:]
    g.initializer.extend(keep)
    return model


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--zoo", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--ort", required=True)
    ap.add_argument("--only", default="")
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    only = set(filter(None, a.only.split(",")))
    for raw in open(a.zoo):
        if not raw.startswith("{"):
            continue
        line = json.loads(raw)
        if "error" in line or (only and line["name"] not in only):
            continue
        model = fold_identities(onnx.load(line["file"]))
        reads, writes = float_activations(model)
        ranges = calibrate(model, reads + writes, line, a.ort, a.out)
        qdq = make_qdq(model, ranges)
        path = os.path.join(a.out, line["name"] + "_qdq.onnx")
        onnx.save(qdq, path)
        out = dict(line, name=line["name"] + "_qdq", file=path, family="qdq " + line.get("family", ""),
                   note=f"QDQ of {line['name']}: {len(reads)} activations read, {len(writes)} written, "
                        f"int8 per-channel weights")
        print(json.dumps(out), flush=True)


if __name__ == "__main__":
    sys.exit(main())
