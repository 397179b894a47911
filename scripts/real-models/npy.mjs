// Minimal .npy (format 1.0/2.0/3.0) reader and writer: little-endian, C order, the dtypes the
// real-models script needs. No Python involved.
import fs from 'node:fs';

const DTYPES = {
  float32: { descr: '<f4', array: Float32Array },
  float64: { descr: '<f8', array: Float64Array },
  int64: { descr: '<i8', array: BigInt64Array },
  int32: { descr: '<i4', array: Int32Array },
  int16: { descr: '<i2', array: Int16Array },
  int8: { descr: '|i1', array: Int8Array },
  uint8: { descr: '|u1', array: Uint8Array },
  bool: { descr: '|b1', array: Uint8Array },
  float16: { descr: '<f2', array: Uint16Array },  // raw bits; toFloat64 decodes
};
const BY_DESCR = Object.fromEntries(Object.entries(DTYPES).map(([k, v]) => [v.descr, k]));
BY_DESCR['<u1'] = 'uint8'; BY_DESCR['<i1'] = 'int8'; BY_DESCR['<b1'] = 'bool';

// The file hexir-run --output-dir writes an output named `name` (index `index`) to: bytes outside
// [A-Za-z0-9._-] and a leading '.' as %XX, an empty name its index (tools/cli.h, output_file_name).
export function outputNpyName(name, index) {
  if (!name) return `${index}.npy`;
  let file = '';
  Buffer.from(name, 'utf8').forEach((c, i) => {
    const ch = String.fromCharCode(c);
    file += /[A-Za-z0-9_-]/.test(ch) || (ch === '.' && i > 0) ? ch : `%${c.toString(16).toUpperCase().padStart(2, '0')}`;
  });
  return `${file}.npy`;
}

export function writeNpy(path, dtype, shape, data) {
  const d = DTYPES[dtype];
  if (!d) throw new Error(`writeNpy: dtype ${dtype} not supported`);
  const shapeText = shape.length === 1 ? `(${shape[0]},)` : `(${shape.join(', ')})`;
  let header = `{'descr': '${d.descr}', 'fortran_order': False, 'shape': ${shapeText}, }`;
  const total = 10 + header.length + 1;
  header += ' '.repeat((64 - (total % 64)) % 64) + '\n';
  const pre = Buffer.alloc(10);
  pre.write('\x93NUMPY', 0, 'latin1');
  pre[6] = 1; pre[7] = 0;
  pre.writeUInt16LE(header.length, 8);
  const body = Buffer.from(data.buffer, data.byteOffset, data.byteLength);
  fs.writeFileSync(path, Buffer.concat([pre, Buffer.from(header, 'latin1'), body]));
}

export function readNpy(path) {
  const buf = fs.readFileSync(path);
  if (buf.toString('latin1', 0, 6) !== '\x93NUMPY') throw new Error(`${path}: not a .npy file`);
  const major = buf[6];
  const hlen = major === 1 ? buf.readUInt16LE(8) : buf.readUInt32LE(8);
  const hstart = major === 1 ? 10 : 12;
  const header = buf.toString('latin1', hstart, hstart + hlen);
  const descr = /'descr'\s*:\s*'([^']+)'/.exec(header)?.[1];
  const fortran = /'fortran_order'\s*:\s*(True|False)/.exec(header)?.[1];
  const shapeText = /'shape'\s*:\s*\(([^)]*)\)/.exec(header)?.[1];
  if (!descr || !fortran || shapeText === undefined) throw new Error(`${path}: bad .npy header ${header}`);
  if (fortran === 'True') throw new Error(`${path}: fortran order not supported`);
  const dtype = BY_DESCR[descr];
  if (!dtype) throw new Error(`${path}: dtype ${descr} not supported`);
  const shape = shapeText.split(',').map((s) => s.trim()).filter((s) => s).map(Number);
  const count = shape.reduce((a, b) => a * b, 1);
  const A = DTYPES[dtype].array;
  const start = hstart + hlen;
  const bytes = buf.subarray(start, start + count * A.BYTES_PER_ELEMENT);
  const copy = new Uint8Array(bytes.length);
  copy.set(bytes);
  return { dtype, shape, data: new A(copy.buffer, 0, count) };
}

function halfToFloat(h) {
  const s = h & 0x8000 ? -1 : 1, e = (h >> 10) & 0x1f, f = h & 0x3ff;
  if (e === 0) return s * 2 ** -14 * (f / 1024);
  if (e === 31) return f ? NaN : s * Infinity;
  return s * 2 ** (e - 15) * (1 + f / 1024);
}

// The values as plain numbers (for comparing outputs of any dtype).
export function toFloat64(t) {
  const out = new Float64Array(t.data.length);
  for (let i = 0; i < out.length; ++i)
    out[i] = t.dtype === 'float16' ? halfToFloat(t.data[i]) : Number(t.data[i]);
  return out;
}
