// Greedy generation with onnxruntime-node over what samples/llm/export.py wrote: the prefill of the
// prompt's length, then tokens-1 decode steps feeding each step's present caches back as the next
// step's past (onnxruntime returns fresh tensors), timed per token and checked against torch's
// reference (reference.json, reference_logits.npy).
//
//   node scripts/llm/ort_generate.mjs --dir OUT --ort ORTDIR [--threads 1,2] [--tokens 64]
//        [--variants decode,decode_past] [--prompt-len L] [--repeats 2] [--json FILE] [--md FILE]
//        [--dump-logits DIR]
//
//   --dir OUT        the export (reference.json, decode.onnx, decode_past.onnx, prefill_L.onnx, ...)
//   --ort ORTDIR     where onnxruntime-node is installed (scripts/real-models/ort.sh install_ort)
//   --threads LIST   intra-op thread counts (inter-op 1, sequential, all graph optimizations)
//   --variants LIST  decode (static cache, ScatterElements), decode_where (static cache, Where),
//                    decode_past (growing past: the prefill's caches cut to the prompt's rows, then
//                    one row longer each step)
//   --prompt-len L   prompt_L.npy and prefill_L.onnx (default: the reference's prompt); the tokens
//                    and logits are checked against torch only for the reference's prompt
//   --repeats N      generations per session; the fastest one (decode tokens/s) is reported, the
//                    first is a warm-up where N > 1 (default 2)
//   --json, --md     where the result goes (default OUT/ort_generate.json, OUT/ort_generate.md)
//   --dump-logits DIR  writes DIR/ort_VARIANT_Tt_logits.npy f32[tokens, V] (row 0: the prefill's)
//                    and _tokens.npy i64[tokens], for comparing another runtime against onnxruntime
//
// Each (variant, threads) runs in its own node process (--worker), so its peak RSS is its own.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { spawnSync } from 'node:child_process';
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';
import { readNpy, writeNpy } from '../real-models/npy.mjs';

const SELF = fileURLToPath(import.meta.url);

function parseArgs(argv) {
  const a = { threads: '1,2', tokens: 64, variants: 'decode,decode_past', repeats: 2 };
  for (let i = 0; i < argv.length; ++i) {
    const m = /^--([\w-]+)(?:=(.*))?$/.exec(argv[i]);
    if (!m) throw new Error(`ort_generate: unexpected argument '${argv[i]}'`);
    const key = m[1].replace(/-(\w)/g, (_, c) => c.toUpperCase());
    a[key] = m[2] ?? argv[++i];
  }
  return a;
}

const median = (xs) => { const s = [...xs].sort((x, y) => x - y), n = s.length; return n % 2 ? s[(n - 1) / 2] : (s[n / 2 - 1] + s[n / 2]) / 2; };
const quantile = (xs, q) => { const s = [...xs].sort((x, y) => x - y); return s[Math.min(s.length - 1, Math.ceil(q * s.length) - 1)]; };
function argmax(v) {
  let best = 0;
  for (let i = 1; i < v.length; ++i) if (v[i] > v[best]) best = i;
  return best;
}

// ---- one (variant, threads): its own process ----
async function worker(spec) {
  const baselineRss = process.resourceUsage().maxRSS;
  const require = createRequire(path.join(spec.ortDir, 'package.json'));
  const ort = require('onnxruntime-node');
  const loadedRss = process.resourceUsage().maxRSS;
  const ref = JSON.parse(fs.readFileSync(path.join(spec.dir, 'reference.json'), 'utf8'));
  const { layers, context: C, vocab: V } = ref.config;
  const H = ref.heads, Dh = ref.head_dim;
  const L = spec.promptLen, N = spec.tokens;
  const prompt = readNpy(path.join(spec.dir, `prompt_${L}.npy`));
  const checked = L === ref.prompt_len;
  const refLogits = checked ? readNpy(path.join(spec.dir, ref.logits)) : null;
  const refTokens = checked ? ref.tokens : null;
  const pastNames = ref.signature.cache_inputs, presentNames = ref.signature.cache_outputs;

  const options = {
    executionProviders: ['cpu'], intraOpNumThreads: spec.threads, interOpNumThreads: 1,
    executionMode: 'sequential', graphOptimizationLevel: 'all', logSeverityLevel: 3,
  };
  let t0 = performance.now();
  const prefill = await ort.InferenceSession.create(path.join(spec.dir, `prefill_${L}.onnx`), options);
  const prefillSessionMs = performance.now() - t0;
  t0 = performance.now();
  const step = await ort.InferenceSession.create(path.join(spec.dir, `${spec.variant}.onnx`), options);
  const decodeSessionMs = performance.now() - t0;
  const growing = spec.variant === 'decode_past';

  const zeros = () => new ort.Tensor('float32', new Float32Array(H * C * Dh), [1, H, C, Dh]);
  const ids = (data, n) => new ort.Tensor('int64', BigInt64Array.from(data, (x) => BigInt(x)), [1, n]);
  // The first `rows` rows of a [1, H, C, Dh] cache, as [1, H, rows, Dh].
  function cut(t, rows) {
    const out = new Float32Array(H * rows * Dh);
    for (let h = 0; h < H; ++h) out.set(t.data.subarray(h * C * Dh, (h * C + rows) * Dh), h * rows * Dh);
    return new ort.Tensor('float32', out, [1, H, rows, Dh]);
  }

  const generations = [];
  for (let r = 0; r < spec.repeats; ++r) {
    const tokens = [], logits = [], stepMs = [];
    let feeds = { input_ids: new ort.Tensor('int64', prompt.data, [1, L]) };
    pastNames.forEach((name) => { feeds[name] = zeros(); });
    const tGen = performance.now();
    let s = performance.now();
    let out = await prefill.run(feeds);
    const prefillMs = performance.now() - s;
    for (let k = 0; ; ++k) {
      const row = out.logits.data;
      logits.push(Float32Array.from(row));
      tokens.push(argmax(row));
      if (k === N - 1) break;
      feeds = { input_ids: ids([tokens[k]], 1) };
      if (!growing) feeds.pos = new ort.Tensor('int64', BigInt64Array.of(BigInt(L + k)), [1]);
      pastNames.forEach((name, j) => {
        const present = out[presentNames[j]];
        feeds[name] = growing && k === 0 ? cut(present, L) : present;
      });
      s = performance.now();
      out = await step.run(feeds);
      stepMs.push(performance.now() - s);
    }
    const totalMs = performance.now() - tGen;
    const decodeMs = stepMs.reduce((x, y) => x + y, 0);
    generations.push({ tokens, logits, stepMs, prefillMs, totalMs, tokensPerS: stepMs.length / (decodeMs / 1000) });
  }
  const best = generations.reduce((x, y) => (y.tokensPerS > x.tokensPerS ? y : x));

  // Against torch: tokens, and each step's logits while the tokens agree (after a different token
  // the two generations see different inputs).
  let check = null;
  if (checked) {
    const n = Math.min(N, refTokens.length);
    let firstMismatch = null, maxAbs = 0, scale = 0;
    const perStep = [];
    for (let k = 0; k < n; ++k) {
      let d = 0;
      const ref = refLogits.data.subarray(k * V, (k + 1) * V);
      for (let i = 0; i < V; ++i) {
        d = Math.max(d, Math.abs(best.logits[k][i] - ref[i]));
        scale = Math.max(scale, Math.abs(ref[i]));
      }
      perStep.push(d);
      maxAbs = Math.max(maxAbs, d);
      if (best.tokens[k] !== refTokens[k]) { firstMismatch = k; break; }
    }
    check = { tokens_checked: n, tokens_match: firstMismatch === null, first_mismatch: firstMismatch,
              max_abs_logit_diff: maxAbs, ref_logit_scale: scale, max_abs_logit_diff_per_step: perStep };
  }
  if (spec.dumpLogits) {
    fs.mkdirSync(spec.dumpLogits, { recursive: true });
    const base = path.join(spec.dumpLogits, `ort_${spec.variant}_${spec.threads}t`);
    const flat = new Float32Array(best.logits.length * V);
    best.logits.forEach((row, k) => flat.set(row, k * V));
    writeNpy(`${base}_logits.npy`, 'float32', [best.logits.length, V], flat);
    writeNpy(`${base}_tokens.npy`, 'int64', [best.tokens.length], BigInt64Array.from(best.tokens, (x) => BigInt(x)));
  }
  const maxRss = process.resourceUsage().maxRSS;
  return {
    variant: spec.variant, threads: spec.threads, prompt_len: L, tokens: N, repeats: spec.repeats,
    session_ms: { prefill: prefillSessionMs, decode: decodeSessionMs },
    prefill_ms: best.prefillMs, first_prefill_ms: generations[0].prefillMs,
    decode_ms_median: median(best.stepMs), decode_ms_p90: quantile(best.stepMs, 0.9),
    decode_ms_min: Math.min(...best.stepMs), decode_ms_max: Math.max(...best.stepMs),
    first_step_ms: generations[0].stepMs[0],
    decode_tokens_per_s: best.tokensPerS, generation_ms: best.totalMs,
    tokens_per_s_all_repeats: generations.map((g) => g.tokensPerS),
    step_ms: best.stepMs,
    max_rss_kb: maxRss, baseline_rss_kb: baselineRss, loaded_rss_kb: loadedRss,
    model_rss_kb: maxRss - loadedRss,
    generated: best.tokens,
    check,
  };
}

// ---- the driver ----
const fmt = (x, d = 2) => (x == null ? '—' : x.toFixed(d));
const sci = (x) => (x == null ? '—' : x === 0 ? '0' : x.toExponential(1));

function markdown(result) {
  const r = result;
  const lines = [
    `onnxruntime-node ${r.ort_version}, ${r.cpu} (${r.cores} cores), load average ${r.loadavg.map((x) => x.toFixed(2)).join(' ')}; ` +
    `${r.model.preset}: ${r.model.layers} layers, d ${r.model.d}, ${r.model.heads} heads, vocab ${r.model.vocab}, context ${r.model.context} ` +
    `(${(r.model.params / 1e6).toFixed(1)}M parameters); prompt ${r.prompt_len} tokens, ${r.tokens} generated greedily ` +
    `(1 by the prefill, ${r.tokens - 1} decode steps); best of ${r.repeats} generations per session.`,
    '',
    '| variant | threads | session ms (prefill + decode) | prefill ms | decode ms median | p90 | decode tokens/s | peak RSS (model) | tokens vs torch | max abs logit diff |',
    '| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- | ---: |',
  ];
  for (const x of r.runs) {
    if (x.error) { lines.push(`| ${x.variant} | ${x.threads} | error: ${x.error.replace(/\|/g, '\\|').slice(0, 200)} | | | | | | | |`); continue; }
    const c = x.check;
    const match = !c ? 'not checked' : c.tokens_match ? `${c.tokens_checked}/${c.tokens_checked} match` : `differ at ${c.first_mismatch}`;
    lines.push(`| ${x.variant} | ${x.threads} | ${fmt(x.session_ms.prefill + x.session_ms.decode, 0)} | ${fmt(x.prefill_ms, 1)} | ` +
      `${fmt(x.decode_ms_median)} | ${fmt(x.decode_ms_p90)} | ${fmt(x.decode_tokens_per_s, 1)} | ${(x.model_rss_kb / 1024).toFixed(0)} MiB | ` +
      `${match} | ${c ? sci(c.max_abs_logit_diff) : '—'} |`);
  }
  return lines.join('\n') + '\n';
}

async function main() {
  const a = parseArgs(process.argv.slice(2));
  if (a.worker) {
    console.log(JSON.stringify(await worker(JSON.parse(fs.readFileSync(a.worker, 'utf8')))));
    return;
  }
  if (!a.dir || !a.ort) throw new Error('ort_generate: --dir OUT and --ort ORTDIR are required');
  const dir = path.resolve(a.dir), ortDir = path.resolve(a.ort);
  const ref = JSON.parse(fs.readFileSync(path.join(dir, 'reference.json'), 'utf8'));
  const promptLen = Number(a.promptLen ?? ref.prompt_len);
  const tokens = Number(a.tokens), repeats = Number(a.repeats);
  const ortVersion = JSON.parse(fs.readFileSync(path.join(ortDir, 'node_modules/onnxruntime-node/package.json'), 'utf8')).version;
  const runs = [];
  const specFile = path.join(os.tmpdir(), `ort_generate_${process.pid}.json`);
  for (const variant of a.variants.split(',')) {
    for (const threads of a.threads.split(',').map(Number)) {
      const spec = { dir, ortDir, variant, threads, promptLen, tokens, repeats,
                     dumpLogits: a.dumpLogits ? path.resolve(a.dumpLogits) : null };
      fs.writeFileSync(specFile, JSON.stringify(spec));
      const r = spawnSync(process.execPath, [SELF, '--worker', specFile], { encoding: 'utf8', maxBuffer: 64 << 20 });
      let row;
      try { row = JSON.parse(r.stdout.trim().split('\n').at(-1)); }
      catch { row = { variant, threads, error: (r.stderr || `exit ${r.status}`).trim().split('\n').slice(-3).join(' ') }; }
      runs.push(row);
      const c = row.check;
      console.error(row.error ? `ort_generate: ${variant} ${threads}t: ${row.error}` :
        `ort_generate: ${variant} ${threads}t: prefill ${fmt(row.prefill_ms, 1)} ms, decode median ${fmt(row.decode_ms_median)} ms ` +
        `(p90 ${fmt(row.decode_ms_p90)}), ${fmt(row.decode_tokens_per_s, 1)} tokens/s; ` +
        (c ? `tokens ${c.tokens_match ? 'match' : `differ at ${c.first_mismatch}`} torch, max |logit diff| ${sci(c.max_abs_logit_diff)}` : 'not checked'));
    }
  }
  fs.rmSync(specFile, { force: true });
  const result = {
    date: new Date().toISOString(), ort_version: ortVersion, cpu: os.cpus()[0]?.model ?? '?', cores: os.cpus().length,
    loadavg: os.loadavg(), model: { ...ref.config, params: ref.params }, prompt_len: promptLen, tokens, repeats,
    reference_tokens: promptLen === ref.prompt_len ? ref.tokens : null, runs,
  };
  const jsonPath = a.json ?? path.join(dir, 'ort_generate.json'), mdPath = a.md ?? path.join(dir, 'ort_generate.md');
  fs.writeFileSync(jsonPath, JSON.stringify(result, null, 1));
  const md = markdown(result);
  fs.writeFileSync(mdPath, md);
  process.stdout.write(md);
  const bad = runs.filter((x) => x.error || (x.check && !x.check.tokens_match));
  if (bad.length) {
    console.error(`ort_generate: ${bad.length} of ${runs.length} runs failed or differ from torch`);
    process.exitCode = 1;
  }
}

await main();
