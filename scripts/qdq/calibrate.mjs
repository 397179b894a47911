// Activation ranges for scripts/qdq/make_qdq.py: runs MODEL (the float model with the tensors to
// quantize added as outputs) in onnxruntime-node on the given inputs and writes each output's
// [min, max] as JSON.
//   node calibrate.mjs --ort ORTDIR --model M.onnx --out ranges.json NAME=FILE.npy ...
import fs from 'node:fs';
import path from 'node:path';
import { createRequire } from 'node:module';
import { readNpy } from '../real-models/npy.mjs';

const args = process.argv.slice(2);
const opt = (name) => { const i = args.indexOf(`--${name}`); return i >= 0 ? args[i + 1] : null; };
const ortDir = opt('ort'), model = opt('model'), out = opt('out');
if (!ortDir || !model || !out) {
  console.error('usage: node calibrate.mjs --ort ORTDIR --model M.onnx --out ranges.json NAME=FILE.npy ...');
  process.exit(2);
}
const ort = createRequire(path.join(ortDir, 'package.json'))('onnxruntime-node');
const TYPES = { float32: 'float32', int64: 'int64', int32: 'int32', bool: 'bool', float16: 'float16' };
const feeds = {};
for (const a of args.filter((x) => x.includes('=') && !x.startsWith('--'))) {
  const [name, file] = a.split('=');
  const t = readNpy(file);
  feeds[name] = new ort.Tensor(TYPES[t.dtype] ?? t.dtype, t.data, t.shape);
}
const session = await ort.InferenceSession.create(model, { graphOptimizationLevel: 'disabled' });
const results = await session.run(feeds);
const ranges = {};
for (const [name, t] of Object.entries(results)) {
  if (t.type !== 'float32') continue;
  let lo = Infinity, hi = -Infinity;
  for (const v of t.data) { if (v < lo) lo = v; if (v > hi) hi = v; }
  ranges[name] = [lo, hi];
}
fs.writeFileSync(out, JSON.stringify(ranges));
console.error(`calibrate.mjs: ${Object.keys(ranges).length} ranges -> ${out}`);
