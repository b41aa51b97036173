#!/usr/bin/env bash
# Proves that dfsel can be consumed: installs the already-built BUILD_DIR to a temporary
# prefix, then configures, builds and runs tests/consumers/find_package (a C program against
# the installed package), builds its C program again by pkg-config's link lines (static
# archive and shared library), and tests/consumers/add_subdirectory (a C++ project vendoring the
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

# Without CMake: a plain C program linked by pkg-config's line, against the static archive
# (dfsel-static.pc: the C++ runtime, and the CUDA runtime and NCCL of a CUDA build) and
# against libdfsel.so (dfsel.pc).
echo "check-consumers: pkg-config: the same C program against libdfsel.a and libdfsel.so"
pc=$(find "$work/prefix" -name dfsel.pc -path "*/pkgconfig/*" | head -n 1)
if [ -z "$pc" ]; then
  echo "check-consumers: the install has no pkgconfig/dfsel.pc" >&2
  exit 1
fi
export PKG_CONFIG_PATH
PKG_CONFIG_PATH=$(dirname "$pc")
consumer_c="$root/tests/consumers/find_package/consumer.c"
if pkg-config --exists dfsel-static; then
  # shellcheck disable=SC2046 # the link line is words
  "${CC:-cc}" -std=c99 -o "$work/pc_static" "$consumer_c" $(pkg-config --cflags --libs dfsel-static)
  "$work/pc_static"
fi
libdir=$(pkg-config --variable=libdir dfsel)
if [ -f "$libdir/libdfsel.so" ]; then
  # shellcheck disable=SC2046
  "${CC:-cc}" -std=c99 -o "$work/pc_shared" "$consumer_c" $(pkg-config --cflags --libs dfsel) -Wl,-rpath,"$libdir"
  "$work/pc_shared"
fi

echo "check-consumers: add_subdirectory(dfsel) from a C++ project (CPU backend)"
cmake -S "$root/tests/consumers/add_subdirectory" -B "$work/add_subdirectory" "${gen[@]}" \
  -DCMAKE_BUILD_TYPE=Release -DDFSEL_SOURCE_DIR="$root" -DDFSEL_CUDA=OFF >"$work/as.log" || {
  cat "$work/as.log"
  exit 1
}
cmake --build "$work/add_subdirectory" -j"$(nproc)"
"$work/add_subdirectory/consumer"
echo "check-consumers: both consumers built and ran"
