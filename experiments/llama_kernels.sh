#!/usr/bin/env bash
# The CMake options that build a llama.cpp (llama-server) with the CPU kernels Morph's decoder
# links: llama-cpp-sys-2 turns GGML_NATIVE off and enables exactly the x86 features rustc
# targets (read here from the build's own CMake cache), so a side-by-side run compares the
# same kernels rather than a -march=native build against a portable one (a native build also
# picks instructions, such as AMX, that a virtual machine may refuse at run time).
set -euo pipefail
cd "$(dirname "$0")/.."
cache=$(ls target/release/build/llama-cpp-sys-2-*/out/build/CMakeCache.txt 2>/dev/null | head -1)
if [ -z "$cache" ]; then
  echo "no llama-cpp-sys-2 build under target/release: run cargo build --release first" >&2
  exit 1
fi
options="-DLLAMA_CURL=OFF -DGGML_NATIVE=OFF"
for feature in SSE42 AVX AVX2 BMI2 F16C FMA AVX_VNNI AVX512 AVX512_VBMI AVX512_VNNI AVX512_BF16; do
  value=$(sed -n "s/^GGML_${feature}:BOOL=\(.*\)/\1/p" "$cache")
  options+=" -DGGML_${feature}=${value:-OFF}"
done
echo "$options"
