#!/usr/bin/env bash
# Configures and builds dfsel (CUDA backend when nvcc is found) into the folder given ($1).
set -euo pipefail
cd "$(dirname "$0")/.."
dir=${1:-build}
if [ -d /usr/local/cuda/bin ]; then export PATH=/usr/local/cuda/bin:$PATH; fi
gen=()
command -v ninja >/dev/null && gen=(-G Ninja)
cmake -S . -B "$dir" "${gen[@]}" -DCMAKE_BUILD_TYPE=Release "${@:2}"
cmake --build "$dir" -j"$(nproc)"
