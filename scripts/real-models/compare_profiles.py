#!/usr/bin/env python3
"""Hexir's and onnxruntime's time per node, side by side.

    hexir-run MODEL.hxe --threads 1 --iterations 50 --profile --stats-json hexir.json
    node scripts/real-models/ort_profile.mjs SPEC.json 50 1 ort.json
    scripts/real-models/compare_profiles.py hexir.json ort.json [--top N] [--onnx MODEL.onnx]

Nodes are matched by the value they write: Hexir's instruction result
(`%name`, less a layout suffix such as `.nhwc`) against onnxruntime's node
name (less `_nchwc`), which for an exported model is its output's name.
Unmatched rows on either side are listed with the other column empty.

With --onnx MODEL.onnx, an instruction that fused an Add or activation into
a convolution or GEMM (named after the Add's or activation's output) that
has no onnxruntime node of that name takes the name of the node it fused
into: onnxruntime names its fused Conv+Add after the Conv's output.
"""
import argparse
import json
import re


def key(name):
    name = name.lstrip('%')
    name = re.sub(r'(\.nhwc|\.nchw|_nchwc|_token_\d+)$', '', name)
    # onnxruntime's QuickGelu (a SiLU's x * sigmoid(x)) keeps the Mul node's name.
    name = re.sub(r'/QuickGeluFusion/$', '_output_0', name)
    return name


def producers(onnx_path):
    """Output of each Add / Relu / Clip -> its inputs written by a node it could have fused into."""
    import onnx
    graph = onnx.load(onnx_path, load_external_data=False).graph
    writer = {o: n for n in graph.node for o in n.output}
    fusable = ('Conv', 'Gemm', 'MatMul', 'Add', 'Relu', 'Clip')
    return {n.output[0]: [i for i in n.input if i in writer and writer[i].op_type in fusable]
            for n in graph.node if n.op_type in ('Add', 'Relu', 'Clip') and n.output}


def renamed(k, fused_into, ort_keys):
    """The first name back along fused_into that onnxruntime has a node for, else k."""
    todo, seen = [k], set()
    while todo:
        name = todo.pop(0)
        if name in seen:
            continue
        seen.add(name)
        if name != k and name in ort_keys:
            return name
        todo.extend(fused_into.get(name, []))
    return k


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('hexir')
    ap.add_argument('ort')
    ap.add_argument('--top', type=int, default=40)
    ap.add_argument('--onnx', help='the model both ran, to match fused residual convolutions')
    a = ap.parse_args()
    hx = json.load(open(a.hexir))['profile']['instructions']
    ort = json.load(open(a.ort))
    ort_keys = {key(r['name']) for r in ort}
    fused_into = producers(a.onnx) if a.onnx else {}
    rows = {}
    for r in hx:
        # "#k op %result type"
        _, op, result, *_ = r['instruction'].split(' ')
        k = key(result)
        if k not in ort_keys:
            k = renamed(k, fused_into, ort_keys)
        row = rows.setdefault(k, {'hexir_op': '', 'hexir_ms': 0.0, 'ort_op': '', 'ort_ms': 0.0})
        row['hexir_op'] = (row['hexir_op'] + '+' if row['hexir_op'] else '') + op
        row['hexir_ms'] += r['ms_per_invoke']
    hexir_keys = set(rows)
    for r in ort:
        k = key(r['name'])
        # A node onnxruntime did not rewrite is profiled under its node name
        # (an exported model's "/a/Mul"), Hexir's instruction under the value
        # it writes ("/a/Mul_output_0").
        if k not in hexir_keys and k + '_output_0' in hexir_keys:
            k += '_output_0'
        row = rows.setdefault(k, {'hexir_op': '', 'hexir_ms': 0.0, 'ort_op': '', 'ort_ms': 0.0})
        row['ort_op'] = (row['ort_op'] + '+' if row['ort_op'] else '') + r['op']
        row['ort_ms'] += r['us'] / 1000.0
    total_h = sum(r['hexir_ms'] for r in rows.values())
    total_o = sum(r['ort_ms'] for r in rows.values())
    print(f'sum of nodes: hexir {total_h:.3f} ms, onnxruntime {total_o:.3f} ms')
    print(f'{"hexir-ort ms":>12} {"hexir ms":>9} {"ort ms":>9}  ops  value')
    ordered = sorted(rows.items(), key=lambda kv: kv[1]['ort_ms'] - kv[1]['hexir_ms'])
    for k, r in ordered[:a.top]:
        print(f'{r["hexir_ms"] - r["ort_ms"]:12.4f} {r["hexir_ms"]:9.4f} {r["ort_ms"]:9.4f}  '
              f'{r["hexir_op"] or "-"}/{r["ort_op"] or "-"}  {k}')


if __name__ == '__main__':
    main()
