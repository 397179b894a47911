# Sourced by scripts/real-models.sh and scripts/blocks.sh: onnxruntime-node in a scratch folder.
#   install_ort DIR VERSION TAG   (TAG prefixes the progress line)
# Installs onnxruntime-node@VERSION into DIR/node_modules unless that version is already there,
# with ONNXRUNTIME_NODE_INSTALL=skip (the CPU binaries the package ships; no CUDA download).
install_ort() {
  local dir="$1" version="$2" tag="$3"
  if [[ ! -f "$dir/node_modules/onnxruntime-node/package.json" ]] ||
     [[ "$(node -p "require('$dir/node_modules/onnxruntime-node/package.json').version")" != "$version" ]]; then
    echo "$tag: npm install onnxruntime-node@$version (CPU binaries from the package; ONNXRUNTIME_NODE_INSTALL=skip)" >&2
    [[ -f "$dir/package.json" ]] || echo '{"name":"hexir-real-models","private":true}' > "$dir/package.json"
    (cd "$dir" && ONNXRUNTIME_NODE_INSTALL=skip npm install --no-audit --no-fund --silent "onnxruntime-node@$version")
  fi
}
