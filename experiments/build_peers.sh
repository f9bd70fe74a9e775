#!/usr/bin/env bash
# Builds the real peers from their public sources at pinned releases, once each, into
# $MORPH_PEERS (default ~/.cache/morph-peers; experiments/peers.md): sources under src/, the
# binaries the experiments start under bin/. A peer already in bin/ is left as it is (delete it
# to build again).
#   experiments/build_peers.sh [PEER ...]     (default: tei llama-server)
# Peers:
#   tei            text-embeddings-inference $TEI_TAG (v1.9.3) from $TEI_GIT (default its GitHub
#                  repository; a local clone or mirror does too), its ONNX Runtime backend
#                  alone: `cargo build --release -p text-embeddings-router --no-default-features
#                  -F ort,http`, linked to the ONNX Runtime Morph fetches (the one TEI then
#                  loads). Before the build the candle backend leaves the workspace's manifests
#                  (its crates, and the CUDA and test crates TEI takes from git; the ORT path
#                  uses none of them), and `metrics` moves from the locked 0.23.0 to its patch
#                  release 0.23.1 (the locked one did not build when this recipe was made).
#                  TEI's rust-toolchain.toml names Rust 1.92; $PEERS_TOOLCHAIN names another
#                  installed toolchain to build with instead.
#   llama-server   llama.cpp as llama-cpp-python $LLAMA_CPP_PYTHON (0.3.36) vendors it (its
#                  source distribution on PyPI), built as llama.cpp's docs/build.md builds it:
#                  CMake Release, native (GGML_NATIVE on: every instruction set this CPU has),
#                  without curl. Where a native build dies on this host, name the instruction
#                  sets to leave out of -march=native: LLAMA_NATIVE_WITHOUT='amx-tile amx-int8
#                  amx-bf16' (on AMX hosts llama.cpp 0.3.36's AMX matrix product faults at
#                  ldtilecfg: experiments/peers.md); or give CMake options: LLAMA_CMAKE_ARGS.
#   llama-server-morph-kernels
#                  the same source with the CPU kernels Morph's decoder links
#                  (experiments/llama_kernels.sh; needs a release build of this checkout).
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${MORPH_BIN:-target/release/morph}
. experiments/peers.sh
tei_tag=${TEI_TAG:-v1.9.3}
tei_git=${TEI_GIT:-https://github.com/huggingface/text-embeddings-inference}
llama_cpp_python=${LLAMA_CPP_PYTHON:-0.3.36}
mkdir -p "$peers/src" "$peers/bin"

# TEI's manifests without the candle backend and its git dependencies.
tei_ort_only() {
  python3 - "$1" <<'PY'
import re, sys
root = sys.argv[1]
def edit(path, keep):
    with open(f"{root}/{path}") as f:
        lines = f.read().split("\n")
    with open(f"{root}/{path}", "w") as f:
        f.write("\n".join(l for l in map(keep, lines) if l is not None))
def workspace(l):
    s = l.strip()
    if s == '"backends/candle",' or s.startswith(("cudarc ", "cudarc=", "candle")):
        return None
    return l
def backends(l):
    return None if "candle" in l else l
def router(l):
    s = l.strip()
    if re.match(r'(cudarc|insta|candle[-\w]*|metal|accelerate|mkl) *=', s):
        return None
    if s.startswith("default ="):
        return 'default = ["http", "dynamic-linking"]'
    return l.replace('"cudarc?/static-linking", ', "").replace('"cudarc?/dynamic-linking", ', "")
edit("Cargo.toml", workspace)
edit("backends/Cargo.toml", backends)
edit("router/Cargo.toml", router)
PY
}

build_tei() {
  local src=$peers/src/tei-$tei_tag
  if [ ! -d "$src" ]; then
    git clone -q --depth 1 --branch "$tei_tag" "$tei_git" "$src.part" || git clone -q --branch "$tei_tag" "$tei_git" "$src.part"
    tei_ort_only "$src.part"
    mv "$src.part" "$src"
  fi
  tei_library
  (
    cd "$src"
    [ -n "${PEERS_TOOLCHAIN:-}" ] && export RUSTUP_TOOLCHAIN=$PEERS_TOOLCHAIN
    grep -q '^version = "0.23.0"' <(grep -A1 '^name = "metrics"$' Cargo.lock) &&
      cargo update -q -p metrics@0.23.0 --precise 0.23.1
    ORT_LIB_LOCATION=$peers/lib ORT_PREFER_DYNAMIC_LINK=1 \
      cargo build --release -p text-embeddings-router --no-default-features -F ort,http
  )
  cp "${CARGO_TARGET_DIR:-$src/target}/release/text-embeddings-router" "$peers/bin/text-embeddings-router"
}

# llama.cpp's source as llama-cpp-python vendors it.
llama_source() {
  local dir=$peers/src/llama_cpp_python-$llama_cpp_python
  if [ ! -d "$dir" ]; then
    pip download -q --no-deps --no-binary :all: "llama-cpp-python==$llama_cpp_python" -d "$peers/src" >&2
    tar -xzf "$peers/src/llama_cpp_python-$llama_cpp_python.tar.gz" -C "$peers/src"
  fi
  echo "$dir/vendor/llama.cpp"
}

# build_llama NAME BUILD_DIR CMAKE_OPTIONS...: llama-server built there, linked as bin/NAME (it
# loads its own libraries from its build folder).
build_llama() {
  local name=$1 build=$2 source
  shift 2
  source=$(llama_source)
  cmake -S "$source" -B "$source/$build" -DCMAKE_BUILD_TYPE=Release "$@"
  cmake --build "$source/$build" --config Release -j "$(nproc)" --target llama-server
  ln -sfn "$source/$build/bin/llama-server" "$peers/bin/$name"
}

for peer in ${*:-tei llama-server}; do
  if [ -x "$peers/bin/${peer/#tei/text-embeddings-router}" ]; then
    echo "$peer: $peers/bin/${peer/#tei/text-embeddings-router} is built already"
    continue
  fi
  case $peer in
    tei) build_tei ;;
    # shellcheck disable=SC2086 # the options and instruction sets are words
    llama-server)
      if [ -n "${LLAMA_NATIVE_WITHOUT:-}" ]; then
        flags="-march=native$(printf ' -mno-%s' $LLAMA_NATIVE_WITHOUT)"
        # As CMake options, not CFLAGS: a build directory configured before keeps its first
        # CFLAGS, and would build without any of these.
        build_llama llama-server build -DLLAMA_CURL=OFF -DGGML_NATIVE=OFF \
          "-DCMAKE_C_FLAGS=$flags" "-DCMAKE_CXX_FLAGS=$flags" ${LLAMA_CMAKE_ARGS:-}
      else
        # Native, and no flags a build without AMX may have left in the directory's cache.
        build_llama llama-server build -DLLAMA_CURL=OFF -DGGML_NATIVE=ON "-DCMAKE_C_FLAGS=" \
          "-DCMAKE_CXX_FLAGS=" ${LLAMA_CMAKE_ARGS:-}
      fi ;;
    # shellcheck disable=SC2046
    llama-server-morph-kernels) build_llama "$peer" build-morph-kernels $(experiments/llama_kernels.sh) ;;
    *) echo "unknown peer $peer (tei, llama-server, llama-server-morph-kernels)" >&2; exit 2 ;;
  esac
done
peer_versions
