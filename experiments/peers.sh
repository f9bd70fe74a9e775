# Sourced by the experiments that run the real peers (experiments/peers.md), after
# live_server.sh (its $tmp, $server, $url, await_line and stop). $MORPH_PEERS (default
# ~/.cache/morph-peers) holds what a user built from the peers' public sources:
#   bin/text-embeddings-router   TEI, its ONNX Runtime backend
#   bin/llama-server             llama.cpp's server (bin/llama-server-* for other builds)
# and what this file makes there once: models/<model>/{fp32,int8} (experiments/tei_model.py,
# in a venv of its own, export-venv) and lib/libonnxruntime.so.1, the ONNX Runtime Morph
# fetches, for TEI to load.
#   serve_tei fp32|int8   starts TEI on the default model in that precision; sets $url, $server
#   peer_versions         one line naming each peer binary's version
peers=${MORPH_PEERS:-$HOME/.cache/morph-peers}
morph_home=${MORPH_HOME:-$HOME/.cache/morph}
tei_model=all-MiniLM-L6-v2

need_peer() {
  [ -x "$peers/bin/$1" ] || {
    echo "no $peers/bin/$1: build it from its public source: experiments/build_peers.sh (experiments/peers.md), or set MORPH_PEERS" >&2
    exit 2
  }
}

# The model directories TEI serves, made once from the checkpoint Morph fetches.
tei_models() {
  local dir=$peers/models/$tei_model
  [ -f "$dir/int8/onnx/model.onnx" ] && return
  "$bin" fetch >/dev/null
  [ -x "$peers/export-venv/bin/python" ] || python3 -m venv "$peers/export-venv"
  "$peers/export-venv/bin/pip" install -q torch transformers onnx onnxruntime==1.31.0
  "$peers/export-venv/bin/python" experiments/tei_model.py "$morph_home/models/$tei_model" "$dir"
}

# TEI loads ONNX Runtime by its soname (and links to it by its plain name when built:
# experiments/build_peers.sh); it gets the library Morph fetched.
tei_library() {
  local fetched
  fetched=$(ls "$morph_home"/onnxruntime/*/libonnxruntime.so.* 2>/dev/null | head -1 || true)
  [ -n "$fetched" ] || { "$bin" fetch >/dev/null; fetched=$(ls "$morph_home"/onnxruntime/*/libonnxruntime.so.* | head -1); }
  mkdir -p "$peers/lib"
  ln -sf "$fetched" "$peers/lib/libonnxruntime.so.1"
  ln -sf "$fetched" "$peers/lib/libonnxruntime.so"
}

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

serve_tei() {
  need_peer text-embeddings-router
  tei_models
  tei_library
  local port
  port=$(free_port)
  LD_LIBRARY_PATH=$peers/lib "${launch[@]}" "$peers/bin/text-embeddings-router" \
    --model-id "$peers/models/$tei_model/$1" --hostname 127.0.0.1 --port "$port" \
    >"$tmp/serve.out" 2>"$tmp/serve.err" &
  server=$!
  await_line ' Ready' TEI
  url=http://127.0.0.1:$port
}

peer_versions() {
  local line=""
  [ -x "$peers/bin/text-embeddings-router" ] &&
    line+="$(LD_LIBRARY_PATH=$peers/lib "$peers/bin/text-embeddings-router" --version 2>/dev/null); "
  for server_bin in "$peers"/bin/llama-server*; do
    [ -x "$server_bin" ] && line+="$(basename "$server_bin") $("$server_bin" --version 2>&1 | grep -m1 version); "
  done
  echo "${line:-no peers}"
}
