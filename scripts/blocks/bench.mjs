// Driver of scripts/blocks.sh (which generates the models and installs onnxruntime-node first):
//   node bench.mjs --root REPO --build BUILD --scratch SCRATCH [--write-docs FILE] [--only a,b]
// Reads SCRATCH/models/blocks.jsonl (gen_blocks.py's lines), measures each block with
// scripts/real-models/harness.mjs (the same steps as scripts/real-models.sh: onnxruntime at 1 and
// 2 intra-op threads, hexir-compile, hexir-run --threads 1 and 2, medians of 50 best of 5 with the
// two alternated run by run, peak
// RSS, output comparison) and prints a markdown table with hexir/ort ratios. With --profile
// support in hexir-run, each block slower than onnxruntime also gets a profile
// (SCRATCH/work/NAME/profile-Nt.txt).
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import {
  ITERATIONS, REPEATS, importerOps, measure, compare, run, median, mb, bytes, ms, sci, cell, ratio, cpuName,
  gitHead, ortVersion, replaceBlock, parseOpts,
} from '../real-models/harness.mjs';

const opts = parseOpts('blocks/bench.mjs');

const TOOLS = path.join(opts.build, 'tools');
const ORT_DIR = path.join(opts.scratch, 'ort');
const MODELS_DIR = path.join(opts.scratch, 'models');
const BLOCKS = fs.readFileSync(path.join(MODELS_DIR, 'blocks.jsonl'), 'utf8').trim().split('\n').map((l) => JSON.parse(l));
const only = opts.only ? new Set(opts.only.split(',')) : null;
if (only) for (const n of only)
  if (!BLOCKS.some((b) => b.name === n)) { console.error(`blocks/bench.mjs: no block '${n}'`); process.exit(2); }

const help = run(path.join(TOOLS, 'hexir-run'), ['--help']);
const canProfile = /--profile/.test(`${help.stdout}${help.stderr}`);

// The commit the build was made from (its meson source folder), '+ uncommitted changes' when that
// checkout has edits to tracked files.
function buildCommit() {
  let src = opts.root;
  try { src = JSON.parse(fs.readFileSync(path.join(opts.build, 'meson-info', 'meson-info.json'), 'utf8')).directories.source; } catch {}
  const dirty = run('git', ['-C', src, 'status', '--porcelain', '--untracked-files=no']).stdout?.trim();
  return gitHead(src) + (dirty ? ' + uncommitted changes' : '');
}

const load = () => os.loadavg()[0].toFixed(2);
const gflops = (flops, msv) => (flops && msv ? (flops / msv / 1e6).toFixed(1) : '—');
const ortModelKb = (o) => (o?.max_rss_kb && o?.loaded_rss_kb ? o.max_rss_kb - o.loaded_rss_kb : null);

function table(rows) {
  const head = ['block', 'GFLOP', 'max abs err', 'max rel err', 'ort ms 1t', 'hexir ms 1t', 'hexir/ort 1t',
    'ort ms 2t', 'hexir ms 2t', 'hexir/ort 2t', 'hexir GFLOP/s 1t / 2t', 'ort peak RSS: model (whole process)',
    'hexir peak RSS', 'hexir arena / lower bound', 'hexir constants', 'load avg', 'notes'];
  const lines = [`| ${head.join(' | ')} |`, `|${head.map((h, i) => (i === 0 || i === head.length - 1 ? ' --- ' : ' ---: ')).join('|')}|`];
  for (const r of rows) {
    const notes = [];
    if (r.error) notes.push(r.error);
    if (r.ortError) notes.push(`onnxruntime: ${r.ortError}`);
    if (r.missing?.length) notes.push(`not in the importer: ${r.missing.join(', ')}`);
    notes.push(...r.notes);
    const h = r.hexir;
    lines.push('| ' + [
      r.name, r.flops ? (r.flops / 1e9).toFixed(3) : '—',
      sci(r.maxAbs), sci(r.maxRel),
      ms(r.ort?.ms_median), ms(h?.ms_best), ratio(h?.ms_best, r.ort?.ms_median),
      ms(r.ort2?.ms_median), ms(r.hexir2?.ms_best), ratio(r.hexir2?.ms_best, r.ort2?.ms_median),
      `${gflops(r.flops, h?.ms_best)} / ${gflops(r.flops, r.hexir2?.ms_best)}`,
      r.ort ? `${mb(ortModelKb(r.ort))} (${mb(r.ort.max_rss_kb)})` : '—',
      h ? mb(h.max_rss_kb) : '—',
      h ? `${bytes(h.arena_bytes)} / ${bytes(h.lower_bound_bytes)}` : '—',
      h ? bytes(h.constant_bytes) : '—',
      r.load ?? '—',
      notes.length ? notes.join('; ') : 'ok',
    ].map(cell).join(' | ') + ' |');
  }
  return lines.join('\n');
}

function environment(rows) {
  const base = rows.map((r) => r.ort?.baseline_rss_kb).filter((x) => x);
  const loaded = rows.map((r) => r.ort?.loaded_rss_kb).filter((x) => x);
  return `Measured ${new Date().toISOString().slice(0, 10)} on ${cpuName()} (${os.cpus().length} cores), Linux ${os.release()}; ` +
    `hexir ${buildCommit()} (${path.basename(opts.build)}), onnxruntime-node ${ortVersion(ORT_DIR)} (CPU, all graph optimizations; ` +
    `1t/2t: intraOpNumThreads, hexir-run --threads), node ${process.version}. Times are medians of ${ITERATIONS} runs, best of ${REPEATS}, onnxruntime and hexir alternated run by run. ` +
    `ort's model peak RSS is the node process's peak minus its peak once onnxruntime was loaded` +
    (loaded.length ? ` (about ${mb(median(loaded))}; node alone ${mb(median(base))})` : '') +
    `; hexir's is the whole hexir-run process. GFLOP counts the matmuls only. Load avg: 1-minute load average ` +
    `at the end of each row (this machine has ${os.cpus().length} cores).`;
}

const supported = importerOps(opts.root);
const rows = [];
for (const b of BLOCKS) {
  if (only && !only.has(b.name)) continue;
  process.stderr.write(`blocks: ${b.name} (load ${load()})\n`);
  const model = {
    name: b.name, file: path.basename(b.file),
    inputs: [{ name: b.input.name, dtype: 'float32', shape: b.input.shape, lo: -1, hi: 1 }],
  };
  const work = path.join(opts.scratch, 'work', b.name);
  let row;
  try {
    row = measure(model, { file: path.join(MODELS_DIR, model.file), work, tools: TOOLS, ortDir: ORT_DIR, supported });
    // hexir at 2 threads against onnxruntime too (a threaded kernel must not change the result much)
    if (row.ort && row.hexir2) {
      const c2 = compare(path.join(work, 'hexir-2t'), path.join(work, 'ort'), row.ort.output_names.slice(0, 1));
      if (c2.maxAbs > row.maxAbs * 2 + 1e-6) row.notes.push(`2 threads: max abs err ${sci(c2.maxAbs)}`);
      row.maxAbs2 = c2.maxAbs; row.maxRel2 = c2.maxRel;
    }
    if (canProfile && row.hexir) {
      for (const [t, hms, oms] of [[1, row.hexir?.ms_best, row.ort?.ms_median], [2, row.hexir2?.ms_best, row.ort2?.ms_median]]) {
        if (!(hms && oms && hms > oms)) continue;
        const p = run(path.join(TOOLS, 'hexir-run'), [path.join(work, 'model.hxe'), '--input', `x=${path.join(work, 'in-x.npy')}`,
          '--iterations', String(ITERATIONS), '--threads', String(t), '--profile']);
        const out = `${p.stdout ?? ''}${p.stderr ?? ''}`;
        fs.writeFileSync(path.join(work, `profile-${t}t.txt`), out);
        // the operator table: "  matmul   8   27.3486   73.4%"
        const ops = [...out.matchAll(/^\s+([a-z_0-9]+)\s+(\d+)\s+([\d.]+)\s+([\d.]+)%$/gm)]
          .map((m) => `${m[1]} ${m[2]}x ${Number(m[3]).toFixed(2)} ms (${m[4]} %)`);
        if (ops.length) (row.profiles ??= []).push(`${b.name} at ${t} thread${t > 1 ? 's' : ''}: ${ops.join(', ')}`);
      }
    }
  } catch (e) { row = { name: b.name, notes: [], error: `script error: ${e.message}` }; }
  row.flops = b.flops; row.shape = b; row.load = load();
  rows.push(row);
}

const text = `${environment(rows)}\n\n${table(rows)}\n\nOp types per block: ` +
  rows.filter((r) => r.ops).map((r) => `${r.name} (${r.nodes} nodes): ` + Object.entries(r.ops).map(([op, n]) => `${op} ${n}`).join(', ')).join('; ') + '.\n' +
  (rows.some((r) => r.profiles) ? '\nWhere hexir spends the time where it is slower than onnxruntime (`hexir-run --profile`, ' +
    'per invoke, each instruction waited for):\n\n' + rows.flatMap((r) => r.profiles ?? []).map((l) => `* ${l}`).join('\n') + '\n' : '');
process.stdout.write(text);
fs.writeFileSync(path.join(opts.scratch, 'results.json'), JSON.stringify(rows, null, 1));
fs.writeFileSync(path.join(opts.scratch, 'results.md'), text);
if (canProfile) process.stderr.write(`blocks: profiles of the blocks slower than onnxruntime are in ${opts.scratch}/work/*/profile-*t.txt\n`);

if (opts['write-docs']) {
  replaceBlock(opts['write-docs'], '<!-- blocks:begin (scripts/blocks.sh --write-docs replaces this) -->', '<!-- blocks:end -->', text);
  process.stderr.write(`blocks: wrote the table into ${opts['write-docs']}\n`);
}
