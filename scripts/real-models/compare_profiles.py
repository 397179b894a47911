#!/usr/bin/env python3
"""Hexir's and onnxruntime's time per node, side by side.

    hexir-run MODEL.hxe --threads 1 --iterations 50 --profile --stats-json hexir.json
    node scripts/real-models/ort_profile.mjs SPEC.json 50 1 ort.json
    scripts/real-models/compare_profiles.py hexir.json ort.json [--top N]

Nodes are matched by the value they write: Hexir's instruction result
(`%name`, less a layout suffix such as `.nhwc`) against onnxruntime's node
name (less `_nchwc`), which for an exported model is its output's name.
Unmatched rows on either side are listed with the other column empty.
"""
import argparse
import json
import re


def key(name):
    name = name.lstrip('%')
    name = re.sub(r'(\.nhwc|\.nchw|_nchwc|_token_\d+)$', '', name)
    return name


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('hexir')
    ap.add_argument('ort')
    ap.add_argument('--top', type=int, default=40)
    a = ap.parse_args()
    hx = json.load(open(a.hexir))['profile']['instructions']
    ort = json.load(open(a.ort))
    rows = {}
    for r in hx:
        # "#k op %result type"
        _, op, result, *_ = r['instruction'].split(' ')
        k = key(result)
        row = rows.setdefault(k, {'hexir_op': '', 'hexir_ms': 0.0, 'ort_op': '', 'ort_ms': 0.0})
        row['hexir_op'] = (row['hexir_op'] + '+' if row['hexir_op'] else '') + op
        row['hexir_ms'] += r['ms_per_invoke']
    for r in ort:
        k = key(r['name'])
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
