#!/usr/bin/env bash
# Proves that dfsel builds beside ggml in one project, as docs/ggml.md sets it up: configures
# tests/consumers/beside_ggml (ggml's source tree, then dfsel's, each with add_subdirectory;
# ggml turns BUILD_SHARED_LIBS on) with Ninja, builds only its two consumers (ggml's CPU
# backend, dfsel's libraries, dfsel::ggml) and runs them, then checks the names the libraries
# define (scripts/check-symbols.sh). Non-zero on failure.
#   scripts/check-beside-ggml.sh GGML_SOURCE_DIR
set -euo pipefail
if [ $# -ne 1 ]; then
  echo "usage: $0 GGML_SOURCE_DIR" >&2
  exit 2
fi
root=$(cd "$(dirname "$0")/.." && pwd)
ggml_src=$(cd "$1" && pwd)
if ! command -v ninja >/dev/null; then
  # Ninja is the generator that refuses two rules for one file; make would only warn.
  echo "check-beside-ggml: ninja is not installed" >&2
  exit 1
fi
work=$(mktemp -d "${TMPDIR:-/tmp}/dfsel-beside-ggml.XXXXXX")
trap 'rm -rf "$work"' EXIT

echo "check-beside-ggml: ggml and dfsel added side by side (CPU only), Ninja"
cmake -S "$root/tests/consumers/beside_ggml" -B "$work/build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DGGML_SOURCE_DIR="$ggml_src" -DDFSEL_SOURCE_DIR="$root" -DDFSEL_CUDA=OFF >"$work/configure.log" || {
  cat "$work/configure.log"
  exit 1
}
# The case this guards: ggml's default left BUILD_SHARED_LIBS on for dfsel too.
if ! grep -q "^BUILD_SHARED_LIBS:BOOL=ON$" "$work/build/CMakeCache.txt"; then
  echo "check-beside-ggml: BUILD_SHARED_LIBS is not ON beside ggml; the check proves nothing" >&2
  exit 1
fi
cmake --build "$work/build" -j"$(nproc)" --target consumer consumer_shared
"$work/build/consumer"
"$work/build/consumer_shared"
# The archives built with ggml, dfsel::ggml's included, claim no name that is not dfsel's.
bash "$root/scripts/check-symbols.sh" "$work/build/dfsel/host/libdfsel.a" "$work/build/dfsel/host/ggml/libdfsel_ggml.a" \
  "$work/build/dfsel/host/libdfsel.so"
echo "check-beside-ggml: dfsel::ggml beside ggml and libdfsel.so built and ran"
