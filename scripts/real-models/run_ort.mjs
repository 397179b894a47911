// One model in onnxruntime-node (CPU, `threads` intra-op threads, 1 inter-op), in its own process so
// that its peak RSS is the model's: node run_ort.mjs SPEC.json
//   SPEC: { ortDir, model, inputs: [{name, npy}], binds: [{name, dtype, value}], outDir,
//           iterations, repeats, threads }
// Writes outDir/NAME.npy per output, named as hexir-run names them (npy.mjs, outputNpyName) and prints one JSON line: load_ms
// (session creation), first_ms (the first run), ms_median (best of `repeats` medians of `iterations` runs), medians, max_rss_kb (peak),
// baseline_rss_kb (node before onnxruntime was loaded), loaded_rss_kb (peak after onnxruntime was
// loaded, before the inputs and the model), session_rss_kb (the resident set after the runs less
// the one before the session was created: what the model holds, where node's own start peaked
// above the model's use and max_rss_kb - loaded_rss_kb says 0), output_names.
import fs from 'node:fs';
import path from 'node:path';
import { createRequire } from 'node:module';
import { outputNpyName, writeNpy } from './npy.mjs';
import { ortFeeds } from './feeds.mjs';

const baselineRss = process.resourceUsage().maxRSS;
const spec = JSON.parse(fs.readFileSync(process.argv[2], 'utf8'));
const require = createRequire(path.join(spec.ortDir, 'package.json'));
const ort = require('onnxruntime-node');
const loadedRss = process.resourceUsage().maxRSS;

const feeds = ortFeeds(ort, spec);
const rssBefore = process.memoryUsage().rss;  // now, not the peak: node's start may have peaked higher

const t0 = performance.now();
const session = await ort.InferenceSession.create(spec.model, {
  executionProviders: ['cpu'], intraOpNumThreads: spec.threads ?? 1, interOpNumThreads: 1,
  executionMode: 'sequential', graphOptimizationLevel: 'all', logSeverityLevel: 3,
});
const loadMs = performance.now() - t0;

const tFirst = performance.now();
let results = await session.run(feeds);  // warm-up, and the outputs compared
const firstMs = performance.now() - tFirst;
const medians = [];
for (let r = 0; r < spec.repeats; ++r) {
  const times = [];
  for (let k = 0; k < spec.iterations; ++k) {
    const s = performance.now();
    await session.run(feeds);
    times.push(performance.now() - s);
  }
  times.sort((a, b) => a - b);
  const n = times.length;
  medians.push(n % 2 ? times[(n - 1) / 2] : (times[n / 2 - 1] + times[n / 2]) / 2);
}

fs.mkdirSync(spec.outDir, { recursive: true });
session.outputNames.forEach((name, j) => {
  const t = results[name];
  const type = t.type === 'bool' ? 'bool' : t.type;
  writeNpy(path.join(spec.outDir, outputNpyName(name, j)), type, t.dims.map(Number), t.data);
});
console.log(JSON.stringify({
  load_ms: loadMs, first_ms: firstMs, ms_median: Math.min(...medians), medians, max_rss_kb: process.resourceUsage().maxRSS,
  baseline_rss_kb: baselineRss, loaded_rss_kb: loadedRss,
  session_rss_kb: Math.round((process.memoryUsage().rss - rssBefore) / 1024), output_names: session.outputNames,
}));
