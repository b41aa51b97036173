#!/usr/bin/env bash
# Proves that dfsel's ggml component can be consumed next to ggml: installs BUILD_DIR (a dfsel
# build configured with ggml) to a temporary prefix, then configures, builds and runs
# tests/consumers/ggml against it and the ggml installed in GGML_PREFIX. Non-zero on failure.
#   scripts/check-ggml-consumer.sh BUILD_DIR GGML_PREFIX
set -euo pipefail
if [ $# -ne 2 ]; then
  echo "usage: $0 BUILD_DIR GGML_PREFIX" >&2
  exit 2
fi
root=$(cd "$(dirname "$0")/.." && pwd)
# The consumers ask find_package for the version the header says (MAJOR.MINOR), as the README does.
wanted=$("$root/scripts/version.sh" | cut -d. -f1,2)
build=$(cd "$1" && pwd)
ggml_prefix=$(cd "$2" && pwd)
gen=()
command -v ninja >/dev/null && gen=(-G Ninja)
work=$(mktemp -d "${TMPDIR:-/tmp}/dfsel-ggml-consumer.XXXXXX")
trap 'rm -rf "$work"' EXIT

echo "check-ggml-consumer: installing $build to $work/prefix"
cmake --install "$build" --prefix "$work/prefix" >"$work/install.log" || {
  cat "$work/install.log"
  exit 1
}
echo "check-ggml-consumer: find_package(dfsel COMPONENTS ggml) next to find_package(ggml)"
cmake -S "$root/tests/consumers/ggml" -B "$work/ggml" "${gen[@]}" -DCMAKE_BUILD_TYPE=Release -DDFSEL_VERSION_WANTED="$wanted" \
  -DCMAKE_PREFIX_PATH="$work/prefix;$ggml_prefix" >"$work/configure.log" || {
  cat "$work/configure.log"
  exit 1
}
cmake --build "$work/ggml" -j"$(nproc)"
"$work/ggml/consumer"
