#!/usr/bin/python3
"""A static KV-cache write as PyTorch exports it, imported by Hexir and checked against torch.

Two tiny modules, each returning the cache after writing one new position along dim 2 of a
[B, H, S, D] cache:
  index_copy   cache.index_copy_(2, pos, new)   -> ONNX ScatterElements (opset 17)
  index_put    cache[:, :, pos] = new           -> ONNX ScatterND (opset 17)
Each is exported with torch.onnx.export, compiled with hexir-compile, run with hexir-run, and its
output compared with torch's (exact: scatters move values).

  /usr/bin/python3 scripts/kv_cache/export_kv.py BUILD_DIR [SCRATCH_DIR]

Needs python3-torch (Debian) and numpy. Without torch it prints the reason and exits 77 (skipped).
"""
import os
import subprocess
import sys
import tempfile

try:
    import numpy as np
    import torch
except ImportError as e:
    print(f"export_kv: skipped: {e.name} is not installed (Debian: apt-get install python3-numpy python3-torch)")
    sys.exit(77)

B, H, S, D = 1, 2, 8, 4
POS = 5


class IndexCopy(torch.nn.Module):
    def forward(self, cache, pos, new):
        return cache.index_copy_(2, pos, new)


class IndexPut(torch.nn.Module):
    def forward(self, cache, pos, new):
        cache[:, :, pos] = new
        return cache


def check(build, scratch, name, module):
    cache = torch.arange(B * H * S * D, dtype=torch.float32).reshape(B, H, S, D)
    pos = torch.tensor([POS], dtype=torch.int64)
    new = -1.0 - torch.arange(B * H * D, dtype=torch.float32).reshape(B, H, 1, D)
    model = os.path.join(scratch, name + ".onnx")
    torch.onnx.export(module, (cache.clone(), pos, new), model, opset_version=17,
                      input_names=["cache", "pos", "new"], output_names=["out"])
    want = module(cache.clone(), pos, new).numpy()
    hxe = os.path.join(scratch, name + ".hxe")
    subprocess.run([os.path.join(build, "tools", "hexir-compile"), model, "-o", hxe], check=True)
    inputs = []
    for arg, value in (("cache", cache), ("pos", pos), ("new", new)):
        path = os.path.join(scratch, f"{name}-{arg}.npy")
        np.save(path, value.numpy())
        inputs += ["--input", f"{arg}={path}"]
    out_dir = os.path.join(scratch, name + "-out")
    subprocess.run([os.path.join(build, "tools", "hexir-run"), hxe, *inputs, "--output-dir", out_dir],
                   check=True)
    got = np.load(os.path.join(out_dir, "out.npy"))  # the exported output's name
    ok = got.shape == want.shape and np.array_equal(got, want)
    print(f"export_kv: {name}: {'match' if ok else 'MISMATCH'} (max abs error "
          f"{float(np.max(np.abs(got - want))) if got.shape == want.shape else 'shape'})")
    return ok


def main():
    if len(sys.argv) < 2:
        print(__doc__)
        return 2
    build = sys.argv[1]
    scratch = sys.argv[2] if len(sys.argv) > 2 else tempfile.mkdtemp(prefix="export_kv-")
    os.makedirs(scratch, exist_ok=True)
    ok = all([check(build, scratch, "index_copy", IndexCopy()), check(build, scratch, "index_put", IndexPut())])
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
