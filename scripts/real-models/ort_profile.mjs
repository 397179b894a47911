// onnxruntime's own per-node times for one model, to set beside `hexir-run --profile`:
//   node scripts/real-models/ort_profile.mjs SPEC.json [RUNS] [THREADS] [ALL_NODES.json]
// SPEC is the ort-spec.json scripts/real-models.sh and scripts/blocks.sh leave in each model's work
// folder (build/real-models/work/<model>/). Runs the session RUNS times (default 100) with
// onnxruntime's profiler on and prints, per operator type and for the slowest nodes, the median
// kernel time in microseconds (onnxruntime's node names: after its graph optimizations, so fused
// and NCHWc-converted nodes appear as onnxruntime runs them).
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { createRequire } from 'node:module';
import { ortFeeds } from './feeds.mjs';

const spec = JSON.parse(fs.readFileSync(process.argv[2], 'utf8'));
const runs = Number(process.argv[3] ?? 100);
const threads = Number(process.argv[4] ?? spec.threads ?? 1);
const require = createRequire(path.join(spec.ortDir, 'package.json'));
const ort = require('onnxruntime-node');

const feeds = ortFeeds(ort, spec);
const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ort-profile-'));
const session = await ort.InferenceSession.create(spec.model, {
  executionProviders: ['cpu'], intraOpNumThreads: threads, interOpNumThreads: 1, executionMode: 'sequential',
  graphOptimizationLevel: 'all', logSeverityLevel: 3, enableProfiling: true, profileFilePrefix: path.join(dir, 'p'),
});
for (let k = 0; k < runs; ++k) await session.run(feeds);
session.endProfiling();
const file = fs.readdirSync(dir).find((f) => f.endsWith('.json'));
const events = JSON.parse(fs.readFileSync(path.join(dir, file), 'utf8'));
fs.rmSync(dir, { recursive: true, force: true });

const median = (v) => {
  const s = [...v].sort((a, b) => a - b), n = s.length;
  return n % 2 ? s[(n - 1) / 2] : (s[n / 2 - 1] + s[n / 2]) / 2;
};
const nodes = new Map();  // node name -> {op, times}
const runsUs = [];
for (const e of events) {
  if (e.cat === 'Node' && e.name.endsWith('_kernel_time')) {
    const name = e.name.slice(0, -'_kernel_time'.length);
    if (!nodes.has(name)) nodes.set(name, { op: e.args.op_name, times: [] });
    nodes.get(name).times.push(e.dur);
  } else if (e.cat === 'Session' && e.name === 'model_run') {
    runsUs.push(e.dur);
  }
}
const byOp = new Map();
for (const { op, times } of nodes.values()) {
  const o = byOp.get(op) ?? { count: 0, us: 0 };
  o.count += 1;
  o.us += median(times);
  byOp.set(op, o);
}
console.log(`${path.basename(spec.model)}: ${runs} runs at ${threads} thread(s), model_run median ` +
            `${(median(runsUs) / 1000).toFixed(3)} ms (profiled)`);
console.log('operator                  count   us/run (sum of node medians)');
for (const [op, o] of [...byOp].sort((a, b) => b[1].us - a[1].us))
  console.log(`  ${op.padEnd(24)}${String(o.count).padStart(5)}  ${o.us.toFixed(1).padStart(9)}`);
console.log('slowest nodes (median us):');
for (const [name, { op, times }] of [...nodes].sort((a, b) => median(b[1].times) - median(a[1].times)).slice(0, 15))
  console.log(`  ${median(times).toFixed(1).padStart(9)}  ${op.padEnd(12)} ${name}`);
// Every node's median as JSON (name, op, us), slowest first, where a fifth
// argument names a file: scripts/real-models/compare_profiles.py reads it
// beside hexir-run --stats-json to set the two side by side node by node.
if (process.argv[5]) {
  const all = [...nodes].map(([name, { op, times }]) => ({ name, op, us: median(times) }));
  fs.writeFileSync(process.argv[5], JSON.stringify(all.sort((a, b) => b.us - a.us), null, 1));
}
