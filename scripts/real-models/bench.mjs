// Driver of scripts/real-models.sh (which fetches and verifies the packages first):
//   node bench.mjs --root REPO --build BUILD --scratch SCRATCH [--write-docs FILE] [--only a,b]
// For each model: deterministic random inputs (.npy), onnxruntime (run_ort.mjs, its own process),
// hexir-compile (wall time = import time), hexir-run --iterations 50 --stats-json (best of 5, each run
// alternated with one of onnxruntime;
// peak RSS from /usr/bin/time -v), output comparison, and one table row (harness.mjs, shared with
// scripts/blocks.sh). A model that fails at any step is a row that says why; the driver itself
// only fails on bad arguments.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { MODELS } from './models.mjs';
import {
  ITERATIONS, REPEATS, importerOps, measure, median, mb, bytes, ms, sci, cell, ratio, cpuName, gitHead,
  ortVersion, replaceBlock, parseOpts,
} from './harness.mjs';

const opts = parseOpts('bench.mjs');
const only = opts.only ? new Set(opts.only.split(',')) : null;
if (only) for (const n of only)
  if (!MODELS.some((m) => m.name === n)) { console.error(`bench.mjs: no model '${n}'`); process.exit(2); }

const TOOLS = path.join(opts.build, 'tools');
const ORT_DIR = path.join(opts.scratch, 'ort');

// ---- table ----
function table(rows) {
  const head = ['model', 'import ms', 'max abs err', 'max rel err', 'ort ms 1t', 'hexir ms 1t', 'hexir/ort 1t',
    'ort ms 2t', 'hexir ms 2t', 'hexir/ort 2t', 'ort peak RSS',
    'hexir peak RSS (arena + constants)', 'arena / lower bound', 'notes'];
  const lines = [`| ${head.join(' | ')} |`, `|${head.map((h, i) => (i === 0 || i === head.length - 1 ? ' --- ' : ' ---: ')).join('|')}|`];
  for (const r of rows) {
    const notes = [];
    if (r.error) notes.push(r.error);
    if (r.ortError) notes.push(`onnxruntime: ${r.ortError}`);
    if (r.missing?.length) notes.push(`not in the importer yet: ${r.missing.join(', ')}`);
    notes.push(...r.notes);
    const h = r.hexir;
    lines.push('| ' + [
      r.name,
      r.imported ? ms(r.compile_ms) : 'fails',
      sci(r.maxAbs), sci(r.maxRel),
      ms(r.ort?.ms_median), ms(h?.ms_best), ratio(h?.ms_best, r.ort?.ms_median),
      ms(r.ort2?.ms_median), ms(r.hexir2?.ms_best), ratio(r.hexir2?.ms_best, r.ort2?.ms_median),
      mb(r.ort?.max_rss_kb),
      h ? `${mb(h.max_rss_kb)} (${bytes(h.arena_bytes)} + ${bytes(h.constant_bytes)})` : '—',
      h ? `${bytes(h.arena_bytes)} / ${bytes(h.lower_bound_bytes)}` + (h.lower_bound_bytes ? ` (${(h.arena_bytes / h.lower_bound_bytes).toFixed(2)}x)` : '') : '—',
      notes.length ? notes.join('; ') : 'ok',
    ].map(cell).join(' | ') + ' |');
  }
  return lines.join('\n');
}

// The machine's 1-minute load average when the runs began: the 2-thread
// columns only mean something on an otherwise idle machine (another busy
// process preempts a worker in the middle of a task, and the caller waits).
const LOAD_AT_START = os.loadavg()[0];

function environment(rows) {
  const base = rows.map((r) => r.ort?.baseline_rss_kb).filter((x) => x);
  return `Measured ${new Date().toISOString().slice(0, 10)} on ${cpuName()} (${os.cpus().length} cores), Linux ${os.release()}; ` +
    `hexir ${gitHead(opts.root)} (${path.basename(opts.build)}), onnxruntime-node ${ortVersion(ORT_DIR)} (CPU; 1t/2t: intra-op threads, hexir-run --threads), node ${process.version}. ` +
    `Times are medians of ${ITERATIONS} runs, best of ${REPEATS}, onnxruntime and hexir alternated run by run; ort peak RSS includes node itself` +
    (base.length ? ` (about ${mb(median(base))} before onnxruntime loads)` : '') + '. ' +
    `Load average (1 min) ${LOAD_AT_START.toFixed(2)} when the runs began, ${os.loadavg()[0].toFixed(2)} when they ended.`;
}

const supported = importerOps(opts.root);
const rows = [];
for (const m of MODELS) {
  if (only && !only.has(m.name)) continue;
  process.stderr.write(`real-models: ${m.name}\n`);
  let row;
  try {
    row = measure(m, {
      file: path.join(opts.scratch, 'models', m.file), work: path.join(opts.scratch, 'work', m.name),
      tools: TOOLS, ortDir: ORT_DIR, supported,
    });
  } catch (e) { row = { name: m.name, notes: [], error: `script error: ${e.message}` }; }
  rows.push(row);
}
const inventory = rows.filter((r) => r.ops).map((r) =>
  `* ${r.name} (${r.nodes} nodes): ` + Object.entries(r.ops).map(([op, n]) => (r.missing?.includes(op) ? `**${op}** ${n}` : `${op} ${n}`)).join(', ')).join('\n');
const text = `${environment(rows)}\n\n${table(rows)}\n` +
  (inventory ? `\nOp types per model (node counts, subgraphs included; **bold**: not in the importer yet):\n\n${inventory}\n` : '');
process.stdout.write(text);
fs.writeFileSync(path.join(opts.scratch, 'results.json'), JSON.stringify(rows, null, 1));
fs.writeFileSync(path.join(opts.scratch, 'results.md'), text);

if (opts['write-docs']) {
  const doc = opts['write-docs'];
  replaceBlock(doc, '<!-- real-models:begin (scripts/real-models.sh --write-docs replaces this) -->', '<!-- real-models:end -->', text);
  process.stderr.write(`real-models: wrote the table into ${doc}\n`);
}
