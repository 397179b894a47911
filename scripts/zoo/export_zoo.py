#!/usr/bin/python3
"""The model zoo of scripts/zoo.sh: ordinary models exported from PyTorch the way a new user
exports them (torch.onnx.export, opset 17, batch 1, random weights seeded per model: no download),
each with its inputs as .npy files.

  /usr/bin/python3 scripts/zoo/export_zoo.py OUTDIR [--only NAME,...] [--list]

Writes OUTDIR/NAME.onnx and OUTDIR/NAME.in-INPUT.npy, and prints one JSON line per model:
{name, family, file, inputs: [{name, npy, dtype, shape}], note} (or {name, error} when the export
itself fails). A model already exported (its .onnx and inputs present) is not exported again.

Needs Debian's python3-torch, python3-torchvision, python3-onnx and python3-numpy.
"""
import argparse
import json
import math
import os
import sys

import numpy as np
import onnx
import torch
import torchvision
from onnx import TensorProto, numpy_helper

OPSET = 17


def seed_of(name):
    h = 2166136261
    for c in name.encode():
        h = ((h ^ c) * 16777619) & 0xFFFFFFFF
    return h


# ---- inputs that look like data, not noise ----

def image(name, h, w, normalize=True):
    """A synthetic photograph-like image: a sky-to-ground gradient, a few filled rectangles and
    discs of different colours (objects with edges), mild texture; ImageNet-normalized."""
    rng = np.random.default_rng(seed_of(name))
    y, x = np.mgrid[0:h, 0:w].astype(np.float32)
    img = np.empty((3, h, w), np.float32)
    sky = np.array([0.45, 0.65, 0.9], np.float32)
    ground = np.array([0.35, 0.3, 0.2], np.float32)
    t = (y / h)[None]
    img[:] = sky[:, None, None] * (1 - t) + ground[:, None, None] * t
    for _ in range(6):
        colour = rng.uniform(0, 1, 3).astype(np.float32)
        if rng.uniform() < 0.5:
            y0, x0 = rng.integers(0, h * 3 // 4), rng.integers(0, w * 3 // 4)
            y1, x1 = y0 + rng.integers(h // 8, h // 3), x0 + rng.integers(w // 8, w // 3)
            img[:, y0:y1, x0:x1] = colour[:, None, None]
        else:
            cy, cx, r = rng.uniform(0, h), rng.uniform(0, w), rng.uniform(h / 12, h / 5)
            mask = (y - cy) ** 2 + (x - cx) ** 2 < r * r
            img[:, mask] = colour[:, None]
    img += rng.normal(0, 0.02, img.shape).astype(np.float32)
    img = np.clip(img, 0, 1)
    if normalize:
        mean = np.array([0.485, 0.456, 0.406], np.float32)[:, None, None]
        std = np.array([0.229, 0.224, 0.225], np.float32)[:, None, None]
        img = (img - mean) / std
    return img[None]


def video(name, t, size):
    """A clip of t frames [1, 3, t, size, size]: one synthetic photograph panned a few pixels per frame."""
    frame = image(name, size, size + 2 * t)[0]
    return np.ascontiguousarray(np.stack([frame[:, :, 2 * i:2 * i + size] for i in range(t)], axis=1)[None])


def speech_features(name, t, f):
    """Log-mel-like features: smooth in time and frequency, a few louder syllables."""
    rng = np.random.default_rng(seed_of(name))
    base = np.cumsum(rng.normal(0, 0.3, (t, f)), axis=0) * 0.1
    base += np.sin(np.arange(t)[:, None] / 7.0) * np.cos(np.arange(f)[None] / 5.0)
    return base.astype(np.float32)[None]


def tokens(name, n, vocab):
    rng = np.random.default_rng(seed_of(name))
    return rng.integers(0, vocab, (1, n)).astype(np.int64)


# ---- models written in plain torch ----

class SequenceClassifier(torch.nn.Module):
    """A keyword-spotting style recurrent classifier over [1, T, F] features."""

    def __init__(self, cell, features=40, hidden=128, layers=2, bidirectional=True, classes=12):
        super().__init__()
        rnn = {"gru": torch.nn.GRU, "lstm": torch.nn.LSTM, "rnn": torch.nn.RNN}[cell]
        self.rnn = rnn(features, hidden, num_layers=layers, bidirectional=bidirectional, batch_first=True)
        self.head = torch.nn.Linear(hidden * (2 if bidirectional else 1), classes)

    def forward(self, x):
        y, _ = self.rnn(x)
        return self.head(y[:, -1])


class Encoder(torch.nn.Module):
    """A BERT-style encoder: token + position embeddings, nn.TransformerEncoder (post-LN)."""

    def __init__(self, vocab=8000, d=256, heads=4, layers=4, hidden=1024, seq=128):
        super().__init__()
        self.tok = torch.nn.Embedding(vocab, d)
        self.pos = torch.nn.Parameter(torch.randn(1, seq, d) * 0.02)
        layer = torch.nn.TransformerEncoderLayer(d, heads, hidden, dropout=0.0, batch_first=True,
                                                 activation="gelu")
        self.encoder = torch.nn.TransformerEncoder(layer, layers)
        self.norm = torch.nn.LayerNorm(d)

    def forward(self, ids):
        return self.norm(self.encoder(self.tok(ids) + self.pos))


class StaticCacheDecoder(torch.nn.Module):
    """One decode step of a GPT-style decoder with a static KV cache written in place with
    index_copy_ (the form ExecuTorch and llama.cpp use): one key and one value cache [1, H, S, Dh]
    per layer, the new token's keys/values written at `pos`, attention masked to positions <= pos."""

    def __init__(self, vocab=4096, d=256, heads=4, layers=4, seq=128):
        super().__init__()
        self.heads, self.dh, self.seq, self.layers = heads, d // heads, seq, layers
        self.tok = torch.nn.Embedding(vocab, d)
        self.pos_emb = torch.nn.Embedding(seq, d)
        self.ln1 = torch.nn.ModuleList([torch.nn.LayerNorm(d) for _ in range(layers)])
        self.qkv = torch.nn.ModuleList([torch.nn.Linear(d, 3 * d) for _ in range(layers)])
        self.proj = torch.nn.ModuleList([torch.nn.Linear(d, d) for _ in range(layers)])
        self.ln2 = torch.nn.ModuleList([torch.nn.LayerNorm(d) for _ in range(layers)])
        self.fc = torch.nn.ModuleList([torch.nn.Linear(d, 4 * d) for _ in range(layers)])
        self.out = torch.nn.ModuleList([torch.nn.Linear(4 * d, d) for _ in range(layers)])
        self.lnf = torch.nn.LayerNorm(d)
        self.head = torch.nn.Linear(d, vocab, bias=False)

    def forward(self, token, pos, *caches):
        k_cache, v_cache = caches[: self.layers], caches[self.layers:]
        x = self.tok(token) + self.pos_emb(pos)  # [1, 1, d]
        mask = torch.arange(self.seq) <= pos  # [seq]: run-time integer arithmetic
        for i in range(self.layers):
            h = self.ln1[i](x)
            q, k, v = self.qkv[i](h).split(self.heads * self.dh, dim=-1)
            q = q.view(1, 1, self.heads, self.dh).transpose(1, 2)
            k = k.view(1, 1, self.heads, self.dh).transpose(1, 2)
            v = v.view(1, 1, self.heads, self.dh).transpose(1, 2)
            k_cache[i].index_copy_(2, pos, k)
            v_cache[i].index_copy_(2, pos, v)
            att = (q @ k_cache[i].transpose(-2, -1)) / math.sqrt(self.dh)
            att = att.masked_fill(~mask, float("-inf")).softmax(-1)
            y = (att @ v_cache[i]).transpose(1, 2).reshape(1, 1, -1)
            x = x + self.proj[i](y)
            x = x + self.out[i](torch.nn.functional.gelu(self.fc[i](self.ln2[i](x))))
        return (self.head(self.lnf(x)),) + tuple(k_cache) + tuple(v_cache)


def static_cache_inputs(name, layers=4, heads=4, seq=128, dh=64, pos=37):
    rng = np.random.default_rng(seed_of(name))
    inputs = {"token": np.array([[17]], np.int64), "pos": np.array([pos], np.int64)}
    for kind in "kv":
        for i in range(layers):
            cache = np.zeros((1, heads, seq, dh), np.float32)
            cache[:, :, :pos] = rng.normal(0, 1, (1, heads, pos, dh))
            inputs[f"{kind}_cache_{i}"] = cache
    return inputs


# ---- f16: what onnxconverter-common's convert_float_to_float16 does, for the encoder ----

def to_float16(model):
    """Every float tensor of the graph in half: initializers, Constant values, graph inputs and
    outputs, value_info, Cast targets; weights stay half-size in the file."""
    g = model.graph
    for init in g.initializer:
        if init.data_type == TensorProto.FLOAT:
            init.CopyFrom(numpy_helper.from_array(numpy_helper.to_array(init).astype(np.float16), init.name))
    for node in g.node:
        for a in node.attribute:
            if a.name == "value" and a.t.data_type == TensorProto.FLOAT:
                a.t.CopyFrom(numpy_helper.from_array(numpy_helper.to_array(a.t).astype(np.float16)))
            if node.op_type == "Cast" and a.name == "to" and a.i == TensorProto.FLOAT:
                a.i = TensorProto.FLOAT16
            if node.op_type == "ConstantOfShape" and a.name == "value" and a.t.data_type == TensorProto.FLOAT:
                a.t.CopyFrom(numpy_helper.from_array(numpy_helper.to_array(a.t).astype(np.float16)))
    for v in list(g.input) + list(g.output) + list(g.value_info):
        if v.type.tensor_type.elem_type == TensorProto.FLOAT:
            v.type.tensor_type.elem_type = TensorProto.FLOAT16
    return model


# ---- the zoo ----

def tv(fn, **kw):
    return lambda: getattr(torchvision.models, fn)(weights=None, **kw)


def tv_seg(fn, **kw):
    return lambda: getattr(torchvision.models.segmentation, fn)(weights=None, weights_backbone=None, **kw)


def tv_video(fn, **kw):
    return lambda: getattr(torchvision.models.video, fn)(weights=None, **kw)


def tv_det(fn, **kw):
    return lambda: getattr(torchvision.models.detection, fn)(weights=None, weights_backbone=None, **kw)


def varied(make, norms=True):
    """Untrained torchvision models give outputs that vanish (mobilenet_v2's logits ~1e-9, ViT's head
    is zero, SSDlite gives every anchor the same score), so any two runtimes agree trivially and a
    relative error against max(|ort|, 1e-3) checks nothing: convolutions and linear layers drawn
    fan-in (He) with small biases, and batch norms with varied statistics, make the outputs vary
    at a scale of one (and the detector's scores, labels and boxes; its batch norms are kept, or
    its scores saturate near 1 and near-ties reorder the detections)."""
    def build():
        model = make()
        for mod in model.modules():
            if isinstance(mod, (torch.nn.Conv2d, torch.nn.Conv3d, torch.nn.Linear)):
                torch.nn.init.kaiming_normal_(mod.weight, mode="fan_in", nonlinearity="relu")
                if mod.bias is not None:
                    torch.nn.init.normal_(mod.bias, 0, 0.1)
            elif norms and isinstance(mod, (torch.nn.BatchNorm2d, torch.nn.BatchNorm3d)):
                torch.nn.init.normal_(mod.running_mean, 0, 0.1)
                torch.nn.init.uniform_(mod.running_var, 0.5, 1.5)
                torch.nn.init.uniform_(mod.weight, 0.5, 1.5)
                torch.nn.init.normal_(mod.bias, 0, 0.1)
        return model
    return build


def image_model(make, size, family="classifier", outputs=None):
    return {"family": family, "make": varied(make), "inputs": lambda n: {"x": image(n, size, size)},
            "outputs": outputs}


ZOO = {
    # classifiers
    "resnet18": image_model(tv("resnet18"), 224),
    "resnet50": image_model(tv("resnet50"), 224),
    "mobilenet_v2": image_model(tv("mobilenet_v2"), 224),
    "mobilenet_v3_large": image_model(tv("mobilenet_v3_large"), 224),
    "mobilenet_v3_small": image_model(tv("mobilenet_v3_small"), 224),
    "squeezenet1_1": image_model(tv("squeezenet1_1"), 224),
    "shufflenet_v2_x1_0": image_model(tv("shufflenet_v2_x1_0"), 224),
    "mnasnet1_0": image_model(tv("mnasnet1_0"), 224),
    "efficientnet_b0": image_model(tv("efficientnet_b0"), 224),
    "regnet_y_400mf": image_model(tv("regnet_y_400mf"), 224),
    "googlenet": image_model(tv("googlenet", aux_logits=False, init_weights=True), 224),
    "densenet121": image_model(tv("densenet121"), 224),
    "convnext_tiny": image_model(tv("convnext_tiny"), 224),
    "alexnet": image_model(tv("alexnet"), 224),
    "vgg11": image_model(tv("vgg11"), 224),
    "inception_v3": image_model(tv("inception_v3", aux_logits=False, init_weights=True), 299),
    "vit_b_16": image_model(tv("vit_b_16"), 224),
    "swin_t": image_model(tv("swin_t"), 224),
    # architectures the tuning never saw: grouped 3x3s (ResNeXt, RegNetX), wide bottlenecks, fused
    # MBConv (3x3 expansions), ViT with 32x32 patches, SqueezeNet 1.0's 7x7 stem and ceil-mode pools
    "resnext50_32x4d": image_model(tv("resnext50_32x4d"), 224),
    "wide_resnet50_2": image_model(tv("wide_resnet50_2"), 224),
    "regnet_x_400mf": image_model(tv("regnet_x_400mf"), 224),
    "efficientnet_v2_s": image_model(tv("efficientnet_v2_s"), 224),
    "vit_b_32": image_model(tv("vit_b_32"), 224),
    "squeezenet1_0": image_model(tv("squeezenet1_0"), 224),
    "shufflenet_v2_x0_5": image_model(tv("shufflenet_v2_x0_5"), 224),
    # video classifiers (3-D convolutions; 8 frames of 112 x 112)
    "r3d_18": {"family": "video", "make": varied(tv_video("r3d_18")), "inputs": lambda n: {"x": video(n, 8, 112)}},
    "r2plus1d_18": {"family": "video", "make": varied(tv_video("r2plus1d_18")),
                    "inputs": lambda n: {"x": video(n, 8, 112)}},
    # segmentation
    "lraspp_mobilenet_v3_large": image_model(tv_seg("lraspp_mobilenet_v3_large"), 320, "segmentation"),
    "deeplabv3_mobilenet_v3_large": image_model(tv_seg("deeplabv3_mobilenet_v3_large", aux_loss=False), 320,
                                                "segmentation"),
    # dilated 3x3s in a ResNet-50 backbone (output stride 8)
    "fcn_resnet50": image_model(tv_seg("fcn_resnet50", aux_loss=False), 320, "segmentation"),
    # detection (post-processing in the graph)
    "ssdlite320_mobilenet_v3_large": {
        "family": "detection", "make": varied(tv_det("ssdlite320_mobilenet_v3_large"), norms=False),
        "inputs": lambda n: {"x": image(n, 320, 320, normalize=False)[0]}, "detector": True},
    # sequence models
    "gru_2x_bidir": {"family": "sequence", "make": lambda: SequenceClassifier("gru"),
                     "inputs": lambda n: {"x": speech_features(n, 100, 40)}},
    "lstm_2x_bidir": {"family": "sequence", "make": lambda: SequenceClassifier("lstm"),
                      "inputs": lambda n: {"x": speech_features(n, 100, 40)}},
    "rnn_tanh_1x": {"family": "sequence", "make": lambda: SequenceClassifier("rnn", layers=1, bidirectional=False),
                    "inputs": lambda n: {"x": speech_features(n, 100, 40)}},
    # transformers
    "encoder_t128_d256": {"family": "transformer", "make": lambda: Encoder(),
                          "inputs": lambda n: {"ids": tokens(n, 128, 8000)}},
    "encoder_t128_d256_f16": {"family": "transformer", "make": lambda: Encoder(), "f16": True,
                              "inputs": lambda n: {"ids": tokens(n, 128, 8000)}},
    "decoder_static_kv": {"family": "decoder", "make": lambda: StaticCacheDecoder(),
                          "inputs": static_cache_inputs,
                          "outputs": ["logits"] + [f"{k}_cache_{i}_out" for k in "kv" for i in range(4)]},
}


def export(name, spec, outdir):
    torch.manual_seed(seed_of(name))
    onnx_file = os.path.join(outdir, name + ".onnx")
    inputs = spec["inputs"](name)
    entry = {"name": name, "family": spec["family"], "file": onnx_file, "inputs": []}
    if spec.get("detector"):  # torchvision's outputs: boxes, scores, labels (bench.mjs matches near-ties)
        entry["detections"] = {"boxes": 0, "scores": 1, "labels": 2}
    for k, v in inputs.items():
        npy = os.path.join(outdir, f"{name}.in-{k}.npy")
        if not os.path.exists(npy):
            np.save(npy, v)
        entry["inputs"].append({"name": k, "npy": npy, "dtype": str(v.dtype), "shape": list(v.shape)})
    if os.path.exists(onnx_file):
        return entry
    model = spec["make"]().eval()
    args = tuple(torch.from_numpy(v) for v in inputs.values())
    if spec.get("detector"):
        args = ([args[0]],)  # torchvision detectors take a list of [C, H, W] images
    # Gradients stay enabled: with them off, torch 1.13 runs nn.TransformerEncoderLayer's fused
    # fast path, which has no ONNX export.
    torch.onnx.export(model, args, onnx_file + ".tmp", opset_version=OPSET,
                      input_names=list(inputs), output_names=spec.get("outputs"),
                      do_constant_folding=True)
    m = onnx.load(onnx_file + ".tmp")
    if spec.get("f16"):
        m = to_float16(m)
        entry["note"] = "converted to f16 after export (weights and activations in half)"
    onnx.save(m, onnx_file)
    os.remove(onnx_file + ".tmp")
    return entry


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("outdir")
    ap.add_argument("--only", default="")
    ap.add_argument("--list", action="store_true")
    a = ap.parse_args()
    if a.list:
        print("\n".join(ZOO))
        return
    only = set(filter(None, a.only.split(",")))
    unknown = only - set(ZOO)
    if unknown:
        sys.exit(f"export_zoo: unknown model(s) {', '.join(sorted(unknown))} (--list names them)")
    os.makedirs(a.outdir, exist_ok=True)
    for name, spec in ZOO.items():
        if only and name not in only:
            continue
        print(f"zoo: exporting {name}", file=sys.stderr, flush=True)
        try:
            entry = export(name, spec, a.outdir)
        except Exception as e:  # a model that does not export is a row that says why
            entry = {"name": name, "family": spec["family"], "error": f"export: {type(e).__name__}: {e}"[:300]}
        print(json.dumps(entry), flush=True)


if __name__ == "__main__":
    main()
