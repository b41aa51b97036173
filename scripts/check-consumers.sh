#!/usr/bin/env bash
# Proves that dfsel can be consumed: installs the already-built BUILD_DIR to a temporary
# prefix, then configures, builds and runs tests/consumers/find_package (a C program against
# the installed package) and tests/consumers/add_subdirectory (a C++ project vendoring the
# source tree, CPU backend only). Exits non-zero when any step fails.
#   scripts/check-consumers.sh BUILD_DIR
set -euo pipefail
if [ $# -ne 1 ]; then
  echo "usage: $0 BUILD_DIR" >&2
  exit 2
fi
root=$(cd "$(dirname "$0")/.." && pwd)
# The consumers ask find_package for the version the header says (MAJOR.MINOR), as the README does.
wanted=$("$root/scripts/version.sh" | cut -d. -f1,2)
build=$(cd "$1" && pwd)
if [ -d /usr/local/cuda/bin ]; then export PATH=/usr/local/cuda/bin:$PATH; fi
gen=()
command -v ninja >/dev/null && gen=(-G Ninja)
work=$(mktemp -d "${TMPDIR:-/tmp}/dfsel-consumers.XXXXXX")
trap 'rm -rf "$work"' EXIT

echo "check-consumers: installing $build to $work/prefix"
cmake --install "$build" --prefix "$work/prefix" >"$work/install.log" || {
  cat "$work/install.log"
  exit 1
}

echo "check-consumers: find_package(dfsel) from a C program"
cmake -S "$root/tests/consumers/find_package" -B "$work/find_package" "${gen[@]}" -DDFSEL_VERSION_WANTED="$wanted" \
  -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH="$work/prefix" >"$work/fp.log" || {
  cat "$work/fp.log"
  exit 1
}
cmake --build "$work/find_package" -j"$(nproc)"
"$work/find_package/consumer"

echo "check-consumers: add_subdirectory(dfsel) from a C++ project (CPU backend)"
cmake -S "$root/tests/consumers/add_subdirectory" -B "$work/add_subdirectory" "${gen[@]}" \
  -DCMAKE_BUILD_TYPE=Release -DDFSEL_SOURCE_DIR="$root" -DDFSEL_CUDA=OFF >"$work/as.log" || {
  cat "$work/as.log"
  exit 1
}
cmake --build "$work/add_subdirectory" -j"$(nproc)"
"$work/add_subdirectory/consumer"
echo "check-consumers: both consumers built and ran"
