// The onnxruntime feeds of an ort-spec.json (run_ort.mjs, ort_profile.mjs): its .npy inputs and
// its bound scalars, as ort.Tensor values by input name.
import { readNpy } from './npy.mjs';

const ORT_TYPES = { float32: 'float32', int64: 'int64', int32: 'int32', bool: 'bool', float64: 'float64', uint8: 'uint8', int8: 'int8', float16: 'float16' };

export function ortFeeds(ort, spec) {
  const feeds = {};
  for (const i of spec.inputs) {
    const t = readNpy(i.npy);
    feeds[i.name] = new ort.Tensor(ORT_TYPES[t.dtype], t.data, t.shape);
  }
  for (const b of spec.binds ?? []) {
    const data = b.dtype === 'int64' ? BigInt64Array.from([BigInt(b.value)])
               : b.dtype === 'int32' ? Int32Array.from([b.value]) : Float32Array.from([b.value]);
    feeds[b.name] = new ort.Tensor(b.dtype, data, []);
  }
  return feeds;
}
