// Driver of scripts/real-models.sh (which fetches and verifies the packages first):
//   node bench.mjs --root REPO --build BUILD --scratch SCRATCH [--write-docs FILE] [--only a,b]
// For each model: deterministic random inputs (.npy), onnxruntime (run_ort.mjs, its own process),
// hexir-compile (wall time = import time), hexir-run --iterations 50 --stats-json (best of 3;
// peak RSS from /usr/bin/time -v), output comparison, and one table row. A model that fails at
// any step is a row that says why; the driver itself only fails on bad arguments.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { MODELS } from './models.mjs';
import { readNpy, writeNpy, toFloat64 } from './npy.mjs';

const HERE = path.dirname(fileURLToPath(import.meta.url));
const ITERATIONS = 50, REPEATS = 3, REL_FLOOR = 1e-3;

const opts = {};
for (let i = 2; i < process.argv.length; i += 2) opts[process.argv[i].replace(/^--/, '')] = process.argv[i + 1];
for (const k of ['root', 'build', 'scratch'])
  if (!opts[k]) { console.error(`bench.mjs: --${k} is required`); process.exit(2); }
const only = opts.only ? new Set(opts.only.split(',')) : null;
if (only) for (const n of only)
  if (!MODELS.some((m) => m.name === n)) { console.error(`bench.mjs: no model '${n}'`); process.exit(2); }

const TOOLS = path.join(opts.build, 'tools');
const ORT_DIR = path.join(opts.scratch, 'ort');

// ---- deterministic inputs (mulberry32 seeded by the model and input names) ----
function seedOf(text) {
  let h = 2166136261;
  for (const c of text) h = Math.imul(h ^ c.charCodeAt(0), 16777619) >>> 0;
  return h;
}
function mulberry32(a) {
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}
function makeInput(model, input, file) {
  const n = input.shape.reduce((a, b) => a * b, 1);
  const rand = mulberry32(seedOf(`${model.name}/${input.name}`));
  let data;
  if (input.dtype === 'float32') {
    data = new Float32Array(n);
    for (let i = 0; i < n; ++i) data[i] = input.lo + (input.hi - input.lo) * rand();
  } else if (input.dtype === 'int64') {
    data = new BigInt64Array(n);
    for (let i = 0; i < n; ++i) data[i] = BigInt(Math.floor(input.lo + (input.hi - input.lo + 1) * rand()));
  } else throw new Error(`input dtype ${input.dtype} not handled`);
  writeNpy(file, input.dtype, input.shape, data);
}

// ---- op types used by a model (a minimal protobuf walk: ModelProto.graph, GraphProto.node,
// NodeProto.op_type, subgraphs in AttributeProto.g / .graphs) ----
function fields(buf, start, end, visit) {
  let p = start;
  const varint = () => {
    let v = 0, mul = 1, b;
    do { b = buf[p++]; v += (b & 0x7f) * mul; mul *= 128; } while (b & 0x80);
    return v;
  };
  while (p < end) {
    const key = varint(), field = Math.floor(key / 8), wire = key & 7;
    if (wire === 0) varint();
    else if (wire === 1) p += 8;
    else if (wire === 5) p += 4;
    else if (wire === 2) { const len = varint(); visit(field, p, p + len); p += len; }
    else throw new Error(`unexpected protobuf wire type ${wire}`);
  }
}
function opTypes(file) {
  const buf = fs.readFileSync(file);
  const counts = new Map();
  const graph = (s, e) => fields(buf, s, e, (f, a, b) => { if (f === 1) node(a, b); });
  const node = (s, e) => fields(buf, s, e, (f, a, b) => {
    if (f === 4) { const op = buf.toString('utf8', a, b); counts.set(op, (counts.get(op) ?? 0) + 1); }
    if (f === 5) fields(buf, a, b, (g, c, d) => { if (g === 6 || g === 11) graph(c, d); });
  });
  fields(buf, 0, buf.length, (f, a, b) => { if (f === 7) graph(a, b); });
  return counts;
}
// The operators the importer's source maps today (its handler table), to name every op a model
// still lacks, not only the first one the importer stops at.
function importerOps() {
  try {
    const src = fs.readFileSync(path.join(opts.root, 'serializer/src/onnx_importer.cc'), 'utf8');
    const ops = new Set([...src.matchAll(/\{"(\w+)",\s*&Importer::op_\w+\}/g)].map((m) => m[1]));
    return ops.size ? ops : null;
  } catch { return null; }
}

// ---- helpers ----
function run(cmd, args, timeoutS = 900) {
  const t0 = process.hrtime.bigint();
  const r = spawnSync(cmd, args, { encoding: 'utf8', timeout: timeoutS * 1000, maxBuffer: 64 << 20 });
  const ms = Number(process.hrtime.bigint() - t0) / 1e6;
  return { ...r, ms };
}
function why(r, tool, modelFile) {
  if (r.error) return `${tool}: ${r.error.message}`;
  if (r.signal) return `${tool} killed by ${r.signal}`;
  const lines = `${r.stderr ?? ''}`.trim().split('\n').filter((l) => l && !/^usage:/.test(l));
  let msg = lines.find((l) => l.startsWith(`${tool}:`)) ?? lines.at(-1) ?? `exit status ${r.status}`;
  msg = msg.replace(`${tool}: `, '').replace(`${modelFile}: `, '').replace(' (docs/onnx.md lists what is)', '');
  return msg.length > 300 ? msg.slice(0, 297) + '...' : msg;
}
const median = (xs) => { const s = [...xs].sort((a, b) => a - b), n = s.length; return n % 2 ? s[(n - 1) / 2] : (s[n / 2 - 1] + s[n / 2]) / 2; };
const mb = (kb) => (kb == null ? '—' : `${(kb / 1024).toFixed(1)} MiB`);
function bytes(n) {
  if (n == null) return '—';
  if (n < 1024) return `${n} B`;
  if (n < 1024 * 1024) return `${(n / 1024).toFixed(1)} KiB`;
  return `${(n / 1048576).toFixed(1)} MiB`;
}
const ms = (x) => (x == null ? '—' : x < 10 ? x.toFixed(3) : x.toFixed(1));
const sci = (x) => (x == null ? '—' : Number.isNaN(x) ? 'NaN' : x === 0 ? '0' : x.toExponential(1));
const cell = (s) => String(s).replace(/\|/g, '\\|').replace(/\n/g, ' ');

function compare(hexirDir, ortDir, count) {
  let maxAbs = 0, maxRel = 0;
  const notes = [];
  for (let j = 0; j < count; ++j) {
    const h = readNpy(path.join(hexirDir, `${j}.npy`)), o = readNpy(path.join(ortDir, `${j}.npy`));
    if (h.shape.join('x') !== o.shape.join('x')) {
      const hn = h.data.length, on = o.data.length;
      notes.push(`output ${j}: hexir ${h.shape.join('x') || 'scalar'} vs ort ${o.shape.join('x') || 'scalar'}`);
      if (hn !== on) return { maxAbs: null, maxRel: null, notes };
    }
    const a = toFloat64(h), b = toFloat64(o);
    for (let i = 0; i < a.length; ++i) {
      if (Number.isNaN(a[i]) !== Number.isNaN(b[i])) { maxAbs = NaN; maxRel = NaN; continue; }
      if (Number.isNaN(a[i])) continue;
      const d = Math.abs(a[i] - b[i]);
      if (!(d <= maxAbs)) maxAbs = Number.isNaN(maxAbs) ? maxAbs : d;
      const r = d / Math.max(Math.abs(b[i]), REL_FLOOR);
      if (!(r <= maxRel)) maxRel = Number.isNaN(maxRel) ? maxRel : r;
    }
  }
  return { maxAbs, maxRel, notes };
}

// ---- one model ----
function measure(model, supported) {
  const row = { name: model.name, notes: [] };
  const file = path.join(opts.scratch, 'models', model.file);
  const work = path.join(opts.scratch, 'work', model.name);
  fs.rmSync(work, { recursive: true, force: true });
  fs.mkdirSync(work, { recursive: true });
  if (!fs.existsSync(file)) { row.error = `model file missing: ${model.file}`; return row; }

  try {
    const ops = opTypes(file);
    row.nodes = [...ops.values()].reduce((a, b) => a + b, 0);
    row.ops = Object.fromEntries([...ops].sort());
    if (supported) row.missing = [...ops.keys()].filter((op) => !supported.has(op)).sort();
  } catch (e) { row.notes.push(`op inventory failed: ${e.message}`); }

  const inputs = model.inputs.map((i) => ({ name: i.name, npy: path.join(work, `in-${i.name.replace(/[^\w.-]/g, '_')}.npy`) }));
  model.inputs.forEach((i, k) => makeInput(model, i, inputs[k].npy));

  // onnxruntime
  const spec = path.join(work, 'ort-spec.json');
  // at 1 thread (outputs, memory, latency), then at 2 (latency)
  for (const threads of [1, 2]) {
    fs.writeFileSync(spec, JSON.stringify({
      ortDir: ORT_DIR, model: file, inputs, binds: model.binds ?? [],
      outDir: path.join(work, threads === 1 ? 'ort' : `ort-${threads}t`),
      iterations: ITERATIONS, repeats: REPEATS, threads,
    }));
    const o = run(process.execPath, [path.join(HERE, 'run_ort.mjs'), spec]);
    if (o.status === 0) {
      try {
        const result = JSON.parse(o.stdout.trim().split('\n').at(-1));
        if (threads === 1) row.ort = result; else row.ort2 = result;
      } catch (e) { row.ortError = `unreadable output: ${e.message}`; }
    } else row.ortError = why(o, 'node', file).slice(0, 200);
  }

  // hexir-compile
  const hxe = path.join(work, 'model.hxe');
  const copts = [];
  for (const i of model.inputs) copts.push('--input-shape', `${i.name}=${i.shape.join('x')}`);
  for (const b of model.binds ?? []) copts.push('--bind', `${b.name}=${b.value}`);
  // import time: the fastest of REPEATS whole hexir-compile processes
  const c = run(path.join(TOOLS, 'hexir-compile'), [file, '-o', hxe, ...copts]);
  if (c.status !== 0) { row.error = `import: ${why(c, 'hexir-compile', file)}`; return row; }
  row.imported = true;
  row.compile_ms = c.ms;
  row.compile_summary = c.stdout.trim();
  for (let r = 1; r < REPEATS; ++r) {
    const again = run(path.join(TOOLS, 'hexir-compile'), [file, '-o', hxe, ...copts]);
    if (again.status === 0) row.compile_ms = Math.min(row.compile_ms, again.ms);
  }

  // hexir-run: best of REPEATS medians; peak RSS of the first run
  const stats = path.join(work, 'stats.json'), timeFile = path.join(work, 'time.txt');
  const runArgs = [];
  for (const i of inputs) runArgs.push('--input', `${i.name}=${i.npy}`);
  for (const threads of [1, 2]) {
    const medians = [];
    for (let r = 0; r < REPEATS; ++r) {
      const h = run('/usr/bin/time', ['-v', '-o', timeFile, path.join(TOOLS, 'hexir-run'), hxe, ...runArgs,
        '--output-dir', path.join(work, threads === 1 ? 'hexir' : `hexir-${threads}t`), '--iterations', String(ITERATIONS),
        '--stats-json', stats, '--threads', String(threads)]);
      if (h.status !== 0) { row.error = `run: ${why(h, 'hexir-run', hxe)}`; return row; }
      const s = JSON.parse(fs.readFileSync(stats, 'utf8'));
      medians.push(s.invoke.ms_median);
      const rss = Number(/Maximum resident set size \(kbytes\): (\d+)/.exec(fs.readFileSync(timeFile, 'utf8'))?.[1]);
      if (r === 0 && threads === 1) row.hexir = { ...s, max_rss_kb: rss };
    }
    if (threads === 1) { row.hexir.ms_best = Math.min(...medians); row.hexir.medians = medians; }
    else row.hexir2 = { ms_best: Math.min(...medians), medians };
  }

  // compare
  if (row.ort) {
    const outs = fs.readdirSync(path.join(work, 'hexir')).filter((f) => /^\d+\.npy$/.test(f)).length;
    if (outs !== row.ort.output_names.length)
      row.notes.push(`hexir gives ${outs} outputs, onnxruntime ${row.ort.output_names.length}`);
    try {
      const cmp = compare(path.join(work, 'hexir'), path.join(work, 'ort'), Math.min(outs, row.ort.output_names.length));
      row.maxAbs = cmp.maxAbs; row.maxRel = cmp.maxRel; row.notes.push(...cmp.notes);
    } catch (e) { row.notes.push(`compare failed: ${e.message}`); }
  }
  return row;
}

// ---- table ----
const ratio = (a, b) => (a && b ? `${(a / b).toFixed(2)}` : '—');
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

function environment(rows) {
  const cpu = (() => { try { return /model name\s*:\s*(.*)/.exec(fs.readFileSync('/proc/cpuinfo', 'utf8'))?.[1]; } catch { return null; } })() ?? os.cpus()[0]?.model ?? 'unknown CPU';
  const git = spawnSync('git', ['-C', opts.root, 'rev-parse', '--short', 'HEAD'], { encoding: 'utf8' }).stdout?.trim() || 'unknown';
  let ortVersion = 'unknown';
  try { ortVersion = JSON.parse(fs.readFileSync(path.join(ORT_DIR, 'node_modules/onnxruntime-node/package.json'), 'utf8')).version; } catch {}
  const base = rows.map((r) => r.ort?.baseline_rss_kb).filter((x) => x);
  return `Measured ${new Date().toISOString().slice(0, 10)} on ${cpu} (${os.cpus().length} cores), Linux ${os.release()}; ` +
    `hexir ${git} (${path.basename(opts.build)}), onnxruntime-node ${ortVersion} (CPU; 1t/2t: intra-op threads, hexir-run --threads), node ${process.version}. ` +
    `Times are medians of ${ITERATIONS} runs, best of ${REPEATS}; ort peak RSS includes node itself` +
    (base.length ? ` (about ${mb(median(base))} before onnxruntime loads)` : '') + '.';
}

const supported = importerOps();
const rows = [];
for (const m of MODELS) {
  if (only && !only.has(m.name)) continue;
  process.stderr.write(`real-models: ${m.name}\n`);
  let row;
  try { row = measure(m, supported); } catch (e) { row = { name: m.name, notes: [], error: `script error: ${e.message}` }; }
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
  const BEGIN = '<!-- real-models:begin (scripts/real-models.sh --write-docs replaces this) -->', END = '<!-- real-models:end -->';
  let body = fs.existsSync(doc) ? fs.readFileSync(doc, 'utf8') : '';
  const a = body.indexOf(BEGIN), b = body.indexOf(END);
  const block = `${BEGIN}\n${text}${END}`;
  if (a >= 0 && b > a) body = body.slice(0, a) + block + body.slice(b + END.length);
  else body += (body ? '\n' : '') + block + '\n';
  fs.writeFileSync(doc, body);
  process.stderr.write(`real-models: wrote the table into ${doc}\n`);
}
