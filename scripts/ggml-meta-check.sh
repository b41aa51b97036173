#!/usr/bin/env bash
# dfsel under ggml's meta backend itself: applies integrations/ggml/*.patch (ggml exports a meta
# tensor's per-device tensor) to a copy of the ggml source (GGML_SOURCE, default ../shared/ggml;
# the source itself is never changed), builds that ggml into a temporary prefix (ggml-cuda too
# with --cuda), dfsel::ggml against it, and runs dfsel_ggml_meta_tests: on a meta device over two
# CPU devices, and with --cuda over two ggml-cuda devices (GGML_CUDA_DEVICES=2 shows two on one
# GPU). Exits non-zero on any failure, on a patch that does not apply, or when --cuda finds no GPU.
#   scripts/ggml-meta-check.sh [--cuda] [--build DIR]      (default build-ggml-meta)
# A build folder of another ggml (CI's build-ggml) is reconfigured against the patched one: only
# what includes ggml's headers is rebuilt.
set -euo pipefail
cd "$(dirname "$0")/.."
dir=build-ggml-meta
cuda=0
while [ $# -gt 0 ]; do
  case $1 in
    --cuda) cuda=1 ;;
    --build) dir=$2; shift ;;
    *) echo "ggml-meta-check: unknown option $1" >&2; exit 2 ;;
  esac
  shift
done
src=${GGML_SOURCE:-../shared/ggml}
[ -f "$src/CMakeLists.txt" ] || { echo "ggml-meta-check: no ggml source at $src (set GGML_SOURCE)" >&2; exit 1; }
if [ -d /usr/local/cuda/bin ]; then export PATH=/usr/local/cuda/bin:$PATH; fi
gen=()
command -v ninja >/dev/null && gen=(-G Ninja)
work=$(mktemp -d "${TMPDIR:-/tmp}/dfsel-ggml-meta.XXXXXX")
trap 'rm -rf "$work"' EXIT

cp -R "$src" "$work/ggml"
for p in integrations/ggml/*.patch; do
  echo "ggml-meta-check: applying $p"
  patch -p1 --forward --quiet -d "$work/ggml" <"$p"
done
ggml_flags=(-DGGML_CUDA=OFF)
dfsel_flags=(-DDFSEL_CUDA=OFF)
if [ $cuda = 1 ]; then
  ggml_flags=(-DGGML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 -DGGML_CUDA_FA=OFF -DGGML_CUDA_GRAPHS=ON -DGGML_CUDA_NCCL=OFF)
  dfsel_flags=(-DDFSEL_CUDA=ON)
fi
echo "ggml-meta-check: the patched ggml into $work/prefix"
cmake -S "$work/ggml" -B "$work/ggml-build" "${gen[@]}" -DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=OFF \
  -DGGML_BUILD_TESTS=OFF -DGGML_BUILD_EXAMPLES=OFF "${ggml_flags[@]}" -DCMAKE_INSTALL_PREFIX="$work/prefix" >/dev/null
cmake --build "$work/ggml-build" -j"$(nproc)" >/dev/null
cmake --install "$work/ggml-build" >/dev/null
export LD_LIBRARY_PATH="$work/prefix/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"

echo "ggml-meta-check: dfsel::ggml against it in $dir"
cmake -S . -B "$dir" "${gen[@]}" -DCMAKE_BUILD_TYPE=Release -DDFSEL_GGML=ON "${dfsel_flags[@]}" \
  -DDFSEL_BUILD_BENCH=OFF -DDFSEL_BUILD_TOOLS=OFF -Dggml_DIR="$work/prefix/lib/cmake/ggml" >/dev/null
cmake --build "$dir" -j"$(nproc)" --target dfsel_ggml_meta_tests
"$dir/tests/ggml_meta/dfsel_ggml_meta_tests" --gtest_filter='GgmlMetaRoute.TwoCpuDevicesReadInPlace'
if [ $cuda = 1 ]; then
  log=$(mktemp)
  DFSEL_REQUIRE_GPU=1 GGML_CUDA_DEVICES=2 "$dir/tests/ggml_meta/dfsel_ggml_meta_tests" \
    --gtest_filter='GgmlMetaRoute.TwoCudaDevicesReadInPlace' 2>&1 | tee "$log"
  if grep -q '^\[  SKIPPED \]' "$log" || ! grep -q '^\[  PASSED  \] 1 test' "$log"; then
    echo "ggml-meta-check: the ggml-cuda case did not run on two devices" >&2
    exit 1
  fi
fi
echo "ggml-meta-check: passed"
