// What scripts/real-models.sh (bench.mjs) and scripts/blocks.sh (blocks/bench.mjs) share: the
// deterministic inputs, the op inventory of an .onnx file, one model measured with onnxruntime
// (run_ort.mjs, its own process) and hexir-compile + hexir-run at 1 and 2 threads, the output
// comparison and the table's number formats.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { outputNpyName, readNpy, writeNpy, toFloat64 } from './npy.mjs';

const HERE = path.dirname(fileURLToPath(import.meta.url));
export const ITERATIONS = 50, REPEATS = 5, REL_FLOOR = 1e-3;

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
export function makeInput(model, input, file) {
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
export function opTypes(file) {
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
export function importerOps(root) {
  try {
    const src = fs.readFileSync(path.join(root, 'compiler/frontends/onnx/registry.cc'), 'utf8');
    const ops = new Set([...src.matchAll(/\{"(\w+)",\s*op_\w+\}/g)].map((m) => m[1]));
    return ops.size ? ops : null;
  } catch { return null; }
}

// ---- helpers ----
export function run(cmd, args, timeoutS = 900) {
  const t0 = process.hrtime.bigint();
  const r = spawnSync(cmd, args, { encoding: 'utf8', timeout: timeoutS * 1000, maxBuffer: 64 << 20 });
  const ms = Number(process.hrtime.bigint() - t0) / 1e6;
  return { ...r, ms };
}
export function why(r, tool, modelFile) {
  if (r.error) return `${tool}: ${r.error.message}`;
  if (r.signal) return `${tool} killed by ${r.signal}`;
  const lines = `${r.stderr ?? ''}`.trim().split('\n').filter((l) => l && !/^usage:/.test(l));
  let msg = lines.find((l) => l.startsWith(`${tool}:`)) ?? lines.at(-1) ?? `exit status ${r.status}`;
  msg = msg.replace(`${tool}: `, '').replace(`${modelFile}: `, '').replace(' (docs/onnx.md lists what is)', '');
  return msg.length > 300 ? msg.slice(0, 297) + '...' : msg;
}
export const median = (xs) => { const s = [...xs].sort((a, b) => a - b), n = s.length; return n % 2 ? s[(n - 1) / 2] : (s[n / 2 - 1] + s[n / 2]) / 2; };
export const mb = (kb) => (kb == null ? '—' : `${(kb / 1024).toFixed(1)} MiB`);
export function bytes(n) {
  if (n == null) return '—';
  if (n < 1024) return `${n} B`;
  if (n < 1024 * 1024) return `${(n / 1024).toFixed(1)} KiB`;
  return `${(n / 1048576).toFixed(1)} MiB`;
}
export const ms = (x) => (x == null ? '—' : x < 10 ? x.toFixed(3) : x.toFixed(1));
export const sci = (x) => (x == null ? '—' : Number.isNaN(x) ? 'NaN' : x === 0 ? '0' : x.toExponential(1));
export const cell = (s) => String(s).replace(/\|/g, '\\|').replace(/\n/g, ' ');
export const ratio = (a, b) => (a && b ? `${(a / b).toFixed(2)}` : '—');

// Detections (boxes [n,4], scores [n], labels [n], sorted by score) whose
// scores tie within rounding come in either order: two detections 2e-7
// apart swap when a convolution sums in another order. Hexir's detections
// are put in onnxruntime's order where a detection at most `window` places
// away has the same label, a score within 1e-4 (relative) and the nearest
// box; returns the permutation and how many moved.
function matchDetections(h, o, det, window = 8) {
  const n = o[det.scores].data.length;
  const hs = toFloat64(h[det.scores]), os = toFloat64(o[det.scores]);
  const hl = toFloat64(h[det.labels]), ol = toFloat64(o[det.labels]);
  const hb = toFloat64(h[det.boxes]), ob = toFloat64(o[det.boxes]);
  const used = new Array(n).fill(false), perm = new Array(n).fill(-1);
  let moved = 0;
  for (let k = 0; k < n; ++k) {
    let best = -1, bestDist = Infinity;
    for (let i = Math.max(0, k - window); i < Math.min(n, k + window + 1); ++i) {
      if (used[i] || hl[i] !== ol[k] || Math.abs(hs[i] - os[k]) > 1e-4 * Math.max(Math.abs(os[k]), 1e-3)) continue;
      let d = 0;
      for (let c = 0; c < 4; ++c) d = Math.max(d, Math.abs(hb[i * 4 + c] - ob[k * 4 + c]));
      if (d < bestDist) { best = i; bestDist = d; }
    }
    if (best < 0) best = used[k] ? used.indexOf(false) : k;  // no match: compared in place (the error shows)
    used[best] = true;
    perm[k] = best;
    if (best !== k) ++moved;
  }
  return { perm, moved };
}

function permuteRows(t, perm) {
  const rows = perm.length, width = t.data.length / rows;
  const data = new t.data.constructor(t.data.length);
  for (let k = 0; k < rows; ++k) for (let c = 0; c < width; ++c) data[k * width + c] = t.data[perm[k] * width + c];
  return { ...t, data };
}

// The outputs `names` (in order) of both folders, each NAME.npy as hexir-run writes it.
// `detections`: { boxes, scores, labels } output indices, for matchDetections.
export function compare(hexirDir, ortDir, names, detections = null) {
  const count = names.length;
  let maxAbs = 0, maxRel = 0, maxScaled = 0;  // scaled: an output's largest error over its largest |ort|
  const notes = [];
  const hs = [], os = [];
  for (let j = 0; j < count; ++j) {
    hs.push(readNpy(path.join(hexirDir, outputNpyName(names[j], j))));
    os.push(readNpy(path.join(ortDir, outputNpyName(names[j], j))));
  }
  if (detections && count > Math.max(detections.boxes, detections.scores, detections.labels) &&
      hs[detections.scores].data.length === os[detections.scores].data.length) {
    const { perm, moved } = matchDetections(hs, os, detections);
    if (moved > 0) {
      for (const j of [detections.boxes, detections.scores, detections.labels]) hs[j] = permuteRows(hs[j], perm);
      notes.push(`${moved} detections with scores tied within 1e-4 in another order`);
    }
  }
  for (let j = 0; j < count; ++j) {
    const h = hs[j], o = os[j];
    if (h.shape.join('x') !== o.shape.join('x')) {
      const hn = h.data.length, on = o.data.length;
      notes.push(`output ${j}: hexir ${h.shape.join('x') || 'scalar'} vs ort ${o.shape.join('x') || 'scalar'}`);
      if (hn !== on) return { maxAbs: null, maxRel: null, notes };
    }
    const a = toFloat64(h), b = toFloat64(o);
    let outAbs = 0, outScale = 0;
    for (let i = 0; i < a.length; ++i) {
      if (!Number.isNaN(a[i]) && !Number.isNaN(b[i])) {
        outAbs = Math.max(outAbs, Math.abs(a[i] - b[i]));
        outScale = Math.max(outScale, Math.abs(b[i]));
      }
      if (Number.isNaN(a[i]) !== Number.isNaN(b[i])) { maxAbs = NaN; maxRel = NaN; continue; }
      if (Number.isNaN(a[i])) continue;
      const d = Math.abs(a[i] - b[i]);
      if (!(d <= maxAbs)) maxAbs = Number.isNaN(maxAbs) ? maxAbs : d;
      const r = d / Math.max(Math.abs(b[i]), REL_FLOOR);
      if (!(r <= maxRel)) maxRel = Number.isNaN(maxRel) ? maxRel : r;
    }
    maxScaled = Math.max(maxScaled, outAbs / Math.max(outScale, REL_FLOOR));
  }
  return { maxAbs, maxRel, maxScaled, notes };
}

// ---- one model ----
// model: { name, file (as named in the row's error), inputs: [{name, dtype, shape, lo, hi}], binds }
// ctx: { file: the .onnx path, work: a folder for this model (emptied), tools: BUILD/tools,
//        ortDir: where onnxruntime-node is installed, supported: importerOps() or null,
//        iterations, repeats (ITERATIONS, REPEATS when absent), detections (compare's), compileArgs (extra hexir-compile
//        arguments) }
// A row: ort / ort2 (run_ort.mjs at 1 / 2 threads), hexir (stats of the first 1-thread run,
// max_rss_kb, ms_best, medians) / hexir2 (ms_best, medians), compile_ms, maxAbs / maxRel, notes,
// error / ortError. Outputs stay in work/{ort,ort-2t,hexir,hexir-2t}/NAME.npy (npy.mjs, outputNpyName).
export function measure(model, ctx) {
  const row = { name: model.name, notes: [] };
  const { file, work } = ctx;
  fs.rmSync(work, { recursive: true, force: true });
  fs.mkdirSync(work, { recursive: true });
  if (!fs.existsSync(file)) { row.error = `model file missing: ${model.file}`; return row; }

  try {
    const ops = opTypes(file);
    row.nodes = [...ops.values()].reduce((a, b) => a + b, 0);
    row.ops = Object.fromEntries([...ops].sort());
    if (ctx.supported) row.missing = [...ops.keys()].filter((op) => !ctx.supported.has(op)).sort();
  } catch (e) { row.notes.push(`op inventory failed: ${e.message}`); }

  // An input given as a .npy file (i.npy) is used as it is; the others are generated.
  const inputs = model.inputs.map((i) => ({ name: i.name, npy: i.npy ?? path.join(work, `in-${i.name.replace(/[^\w.-]/g, '_')}.npy`) }));
  model.inputs.forEach((i, k) => { if (!i.npy) makeInput(model, i, inputs[k].npy); });
  const iterations = ctx.iterations ?? ITERATIONS, repeats = ctx.repeats ?? REPEATS;

  // hexir-compile
  const hxe = path.join(work, 'model.hxe');
  const copts = [];
  for (const i of model.inputs) copts.push('--input-shape', `${i.name}=${i.shape.join('x')}`);
  for (const b of model.binds ?? []) copts.push('--bind', `${b.name}=${b.value}`);
  copts.push(...(ctx.compileArgs ?? []));
  // import time: the fastest of REPEATS whole hexir-compile processes
  const c = run(path.join(ctx.tools, 'hexir-compile'), [file, '-o', hxe, ...copts]);
  if (c.status !== 0) { row.error = `import: ${why(c, 'hexir-compile', file)}`; return row; }
  row.imported = true;
  row.compile_ms = c.ms;
  row.compile_summary = c.stdout.trim();
  for (let r = 1; r < repeats; ++r) {
    const again = run(path.join(ctx.tools, 'hexir-compile'), [file, '-o', hxe, ...copts]);
    if (again.status === 0) row.compile_ms = Math.min(row.compile_ms, again.ms);
  }

  // onnxruntime (run_ort.mjs, one process a repeat) and hexir-run, alternated
  // repeat by repeat at each thread count: this host's slow phases last
  // seconds, so the two sides of a ratio are timed in the same minutes. Best
  // of REPEATS medians each; outputs, peak RSS and load from the first
  // 1-thread run of each.
  const spec = path.join(work, 'ort-spec.json');
  const stats = path.join(work, 'stats.json'), timeFile = path.join(work, 'time.txt');
  const runArgs = [];
  for (const i of inputs) runArgs.push('--input', `${i.name}=${i.npy}`);
  for (const threads of [1, 2]) {
    fs.writeFileSync(spec, JSON.stringify({
      ortDir: ctx.ortDir, model: file, inputs, binds: model.binds ?? [],
      outDir: path.join(work, threads === 1 ? 'ort' : `ort-${threads}t`),
      iterations, repeats: 1, threads,
    }));
    const ortMedians = [], medians = [];
    let ort = null;
    for (let r = 0; r < repeats; ++r) {
      if (!row.ortError) {
        const o = run(process.execPath, [path.join(HERE, 'run_ort.mjs'), spec]);
        if (o.status === 0) {
          try {
            const result = JSON.parse(o.stdout.trim().split('\n').at(-1));
            ort ??= result;
            ortMedians.push(result.ms_median);
          } catch (e) { row.ortError = `unreadable output: ${e.message}`; }
        } else row.ortError = why(o, 'node', file).slice(0, 200);
      }
      const h = run('/usr/bin/time', ['-v', '-o', timeFile, path.join(ctx.tools, 'hexir-run'), hxe, ...runArgs,
        '--output-dir', path.join(work, threads === 1 ? 'hexir' : `hexir-${threads}t`), '--iterations', String(iterations),
        '--stats-json', stats, '--threads', String(threads)]);
      if (h.status !== 0) { row.error = `run: ${why(h, 'hexir-run', hxe)}`; return row; }
      const s = JSON.parse(fs.readFileSync(stats, 'utf8'));
      medians.push(s.invoke.ms_median);
      const rss = Number(/Maximum resident set size \(kbytes\): (\d+)/.exec(fs.readFileSync(timeFile, 'utf8'))?.[1]);
      if (r === 0 && threads === 1) row.hexir = { ...s, max_rss_kb: rss };
    }
    if (ort && !row.ortError) {
      ort.ms_median = Math.min(...ortMedians);
      ort.medians = ortMedians;
      if (threads === 1) row.ort = ort; else row.ort2 = ort;
    }
    if (threads === 1) { row.hexir.ms_best = Math.min(...medians); row.hexir.medians = medians; }
    else row.hexir2 = { ms_best: Math.min(...medians), medians };
  }

  // compare
  if (row.ort) {
    const outs = fs.readdirSync(path.join(work, 'hexir')).filter((f) => f.endsWith('.npy')).length;
    if (outs !== row.ort.output_names.length)
      row.notes.push(`hexir gives ${outs} outputs, onnxruntime ${row.ort.output_names.length}`);
    try {
      const cmp = compare(path.join(work, 'hexir'), path.join(work, 'ort'),
        row.ort.output_names.slice(0, Math.min(outs, row.ort.output_names.length)), ctx.detections);
      row.maxAbs = cmp.maxAbs; row.maxRel = cmp.maxRel; row.maxScaled = cmp.maxScaled; row.notes.push(...cmp.notes);
    } catch (e) { row.notes.push(`compare failed: ${e.message}`); }
  }
  return row;
}

// ---- the drivers' command line: --key value pairs, some required ----
export function parseOpts(tool, required = ['root', 'build', 'scratch']) {
  const opts = {};
  for (let i = 2; i < process.argv.length; i += 2) opts[process.argv[i].replace(/^--/, '')] = process.argv[i + 1];
  for (const k of required)
    if (!opts[k]) { console.error(`${tool}: --${k} is required`); process.exit(2); }
  return opts;
}

// ---- environment ----
export function cpuName() {
  return (() => { try { return /model name\s*:\s*(.*)/.exec(fs.readFileSync('/proc/cpuinfo', 'utf8'))?.[1]; } catch { return null; } })() ?? os.cpus()[0]?.model ?? 'unknown CPU';
}
export function gitHead(root) {
  return spawnSync('git', ['-C', root, 'rev-parse', '--short', 'HEAD'], { encoding: 'utf8' }).stdout?.trim() || 'unknown';
}
export function ortVersion(ortDir) {
  try { return JSON.parse(fs.readFileSync(path.join(ortDir, 'node_modules/onnxruntime-node/package.json'), 'utf8')).version; } catch { return 'unknown'; }
}

// Replace the text between BEGIN and END in doc (append the block when the markers are missing).
export function replaceBlock(doc, BEGIN, END, text) {
  let body = fs.existsSync(doc) ? fs.readFileSync(doc, 'utf8') : '';
  const a = body.indexOf(BEGIN), b = body.indexOf(END);
  const block = `${BEGIN}\n${text}${END}`;
  if (a >= 0 && b > a) body = body.slice(0, a) + block + body.slice(b + END.length);
  else body += (body ? '\n' : '') + block + '\n';
  fs.writeFileSync(doc, body);
}
