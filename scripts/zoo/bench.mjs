// Driver of scripts/zoo.sh (which exports the models and installs onnxruntime-node first):
//   node bench.mjs --root REPO --build BUILD --scratch SCRATCH [--write-docs FILE] [--only a,b]
//                  [--iterations N] [--repeats N]
// Reads SCRATCH/models/zoo.jsonl (export_zoo.py's lines) and measures each model with
// scripts/real-models/harness.mjs (the steps of scripts/real-models.sh and scripts/blocks.sh:
// hexir-compile; onnxruntime and hexir-run at 1 and 2 threads, alternated run by run; peak RSS;
// outputs compared), then prints the zoo table: does it import, how far its outputs are from
// onnxruntime's, which dims are bounded (data-dependent sizes, from hexir-dump), the hexir/ort
// time ratios, memory.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import {
  ITERATIONS, REPEATS, importerOps, measure, run, mb, bytes, ms, sci, cell, ratio, cpuName, gitHead,
  ortVersion, replaceBlock, parseOpts,
} from '../real-models/harness.mjs';

const opts = parseOpts('zoo/bench.mjs');

const TOOLS = path.join(opts.build, 'tools');
const ORT_DIR = path.join(opts.scratch, 'ort');
const MODELS = fs.readFileSync(path.join(opts.scratch, 'models', 'zoo.jsonl'), 'utf8').trim().split('\n')
  .filter((l) => l.startsWith('{')).map((l) => JSON.parse(l));
const only = opts.only ? new Set(opts.only.split(',')) : null;
const iterations = Number(opts.iterations ?? ITERATIONS), repeats = Number(opts.repeats ?? REPEATS);
const load = () => os.loadavg()[0].toFixed(2);
const NPY_DTYPES = { float32: 'float32', float16: 'float16', int64: 'int64', int32: 'int32', bool: 'bool' };

// The bounded dims of the compiled function's signature as hexir-dump prints them (`f32[<=300,4]`).
function boundedDims(hxe) {
  const d = run(path.join(TOOLS, 'hexir-dump'), [hxe]);
  if (d.status !== 0) return null;
  const sig = [...`${d.stdout}`.matchAll(/[a-z0-9]+\[[^\]]*<=[^\]]*\]/g)].map((m) => m[0]);
  return [...new Set(sig)];
}

// hexir-run's own resident set (the process, no model): taken off its peaks
// as node's and onnxruntime's are taken off onnxruntime's.
const hexirBaselineKb = (() => {
  const t = path.join(opts.scratch, 'baseline-time.txt');
  run('/usr/bin/time', ['-v', '-o', t, path.join(TOOLS, 'hexir-run'), '--help']);
  try { return Number(/Maximum resident set size \(kbytes\): (\d+)/.exec(fs.readFileSync(t, 'utf8'))?.[1]) || 0; } catch { return 0; }
})();
const hexirRssKb = (h) => (h?.max_rss_kb != null ? h.max_rss_kb - hexirBaselineKb : null);

const rows = [];
for (const m of MODELS) {
  if (only && !only.has(m.name)) continue;
  process.stderr.write(`zoo: ${m.name} (load ${load()})\n`);
  let row;
  if (m.error) row = { name: m.name, notes: [], error: m.error };
  else {
    const model = {
      name: m.name, file: path.basename(m.file),
      inputs: m.inputs.map((i) => ({ name: i.name, npy: i.npy, dtype: NPY_DTYPES[i.dtype], shape: i.shape })),
    };
    const work = path.join(opts.scratch, 'work', m.name);
    try {
      row = measure(model, { file: m.file, work, tools: TOOLS, ortDir: ORT_DIR, supported: importerOps(opts.root),
        iterations, repeats, detections: m.detections });
      if (row.imported) row.bounded = boundedDims(path.join(work, 'model.hxe'));
    } catch (e) { row = { name: m.name, notes: [], error: `script error: ${e.message}` }; }
  }
  row.family = m.family;
  if (m.note) row.notes.push(m.note);
  row.load = load();
  rows.push(row);
}

// onnxruntime's model-attributable peak: its process's peak less what node
// and onnxruntime held before the model was loaded, or (where node's start
// peaked above the model's use, and that difference is 0) the resident set
// the session added, whichever is larger.
const ortRssKb = (o) =>
  o?.max_rss_kb != null && o?.loaded_rss_kb != null
    ? Math.max(o.max_rss_kb - o.loaded_rss_kb, o.session_rss_kb ?? 0)
    : null;

function table() {
  const head = ['model', 'family', 'imports', 'max abs err vs ort', 'max rel err', 'err / output scale', 'dims bounded', 'ort ms 1t',
    'hexir ms 1t', 'hexir/ort 1t', 'ort ms 2t', 'hexir ms 2t', 'hexir/ort 2t', 'ort session ms',
    'hexir load+prepare ms', 'hexir first / median', 'ort RSS (model)', 'hexir RSS (model)', 'hexir/ort RSS',
    'hexir arena', 'load avg', 'notes'];
  const lines = [`| ${head.join(' | ')} |`, `|${head.map((h, i) => (i < 3 || i === head.length - 1 ? ' --- ' : ' ---: ')).join('|')}|`];
  for (const r of rows) {
    const notes = [];
    if (r.error) notes.push(r.error);
    if (r.ortError) notes.push(`onnxruntime: ${r.ortError}`);
    if (r.missing?.length) notes.push(`not in the importer: ${r.missing.join(', ')}`);
    notes.push(...r.notes);
    const h = r.hexir;
    const ortRss = ortRssKb(r.ort);
    lines.push('| ' + [
      r.name, r.family ?? '—', r.imported ? 'yes' : 'no', sci(r.maxAbs), sci(r.maxRel), sci(r.maxScaled),
      r.bounded == null ? '—' : r.bounded.length ? r.bounded.join(' ') : 'none',
      ms(r.ort?.ms_median), ms(h?.ms_best), ratio(h?.ms_best, r.ort?.ms_median),
      ms(r.ort2?.ms_median), ms(r.hexir2?.ms_best), ratio(r.hexir2?.ms_best, r.ort2?.ms_median),
      ms(r.ort?.load_ms), h ? ms(h.load_ms + h.prepare.ms) : '—', ratio(h?.invoke?.ms_first, h?.invoke?.ms_median),
      ortRss != null ? mb(ortRss) : '—', h ? mb(hexirRssKb(h)) : '—', ratio(hexirRssKb(h), ortRss),
      h ? bytes(h.arena_bytes) : '—', r.load ?? '—',
      notes.length ? notes.join('; ') : 'ok',
    ].map(cell).join(' | ') + ' |');
  }
  return lines.join('\n');
}

// The geometric mean of hexir/onnxruntime over the rows that have both.
function geomean(pick) {
  const xs = rows.map(pick).filter((x) => Number.isFinite(x) && x > 0);
  return xs.length ? { value: Math.exp(xs.reduce((a, x) => a + Math.log(x), 0) / xs.length), n: xs.length } : null;
}
function summary() {
  const g1 = geomean((r) => r.hexir?.ms_best / r.ort?.ms_median);
  const g2 = geomean((r) => r.hexir2?.ms_best / r.ort2?.ms_median);
  const gr = geomean((r) => hexirRssKb(r.hexir) / ortRssKb(r.ort));
  const f = (g) => (g ? `${g.value.toFixed(2)} (${g.n} models)` : '—');
  return `Geometric mean of hexir/onnxruntime: time ${f(g1)} at 1 thread, ${f(g2)} at 2 threads; ` +
    `model-attributable peak RSS ${f(gr)} (hexir-run's peak less its ${(hexirBaselineKb / 1024).toFixed(1)} MiB without ` +
    `a model; onnxruntime's less node's and its own before the session).`;
}

const isa = process.env.HEXIR_MAX_CPU_ISA || '';
const imported = rows.filter((r) => r.imported).length;
const matching = rows.filter((r) => r.imported && r.maxScaled != null && r.maxScaled <= 1e-3).length;
const text = `Measured ${new Date().toISOString().slice(0, 10)} on ${cpuName()} (${os.cpus().length} cores); hexir ` +
  `${gitHead(opts.root)}, onnxruntime-node ${ortVersion(ORT_DIR)} (CPU, all graph optimizations; 1t/2t: ` +
  `intraOpNumThreads, hexir-run --threads). Models exported by scripts/zoo/export_zoo.py with PyTorch ` +
  `(opset 17, random weights). Times are medians of ${iterations} runs, best of ${repeats}, alternated run by run. ` +
  `${imported} of ${rows.length} import; ${matching} match onnxruntime within 1e-3 of each output's scale ` +
  `(its largest error over its largest |ort|; "max rel err" is per element, relative to max(|ort|, 1e-3), ` +
  `large where an output crosses zero).${isa ? ` Hexir's kernels limited to ${isa} (HEXIR_MAX_CPU_ISA); onnxruntime keeps its own.` : ''}` +
  `\n\n${table()}\n\n${summary()}\n`;
process.stdout.write(text);
fs.writeFileSync(path.join(opts.scratch, 'results.json'), JSON.stringify(rows, null, 1));
fs.writeFileSync(path.join(opts.scratch, 'results.md'), text);
if (opts['write-docs']) {
  // A run with HEXIR_MAX_CPU_ISA set has its own block (the AVX2 table beside the full one).
  const block = isa ? `zoo-${isa}` : 'zoo';
  replaceBlock(opts['write-docs'], `<!-- ${block}:begin (scripts/zoo.sh --write-docs replaces this) -->`, `<!-- ${block}:end -->`, text);
  process.stderr.write(`zoo: wrote the table into ${opts['write-docs']}\n`);
}
