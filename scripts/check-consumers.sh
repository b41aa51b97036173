#!/usr/bin/env bash
# Proves that dfsel can be consumed: installs the already-built BUILD_DIR to a temporary
# prefix, then configures, builds and runs tests/consumers/find_package (a C program against
# the installed package), builds its C program again by pkg-config's link lines (static
# archive and shared library), and tests/consumers/add_subdirectory (a C++ project vendoring the
# source tree, CPU backend only), which it then installs with a libdir two folders deep
# (lib/x86_64-linux-gnu, Debian's own) and links by pkg-config again. Exits non-zero when any
# step fails.
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

# An install without dfsel::ggml has no header declaring its functions.
if ! compgen -G "$work/prefix/lib*/cmake/dfsel/dfselGgmlTargets.cmake" >/dev/null &&
  [ -e "$work/prefix/include/dfsel/ggml.h" ]; then
  echo "check-consumers: the install has include/dfsel/ggml.h but no dfsel::ggml" >&2
  exit 1
fi
# The public headers are C: the exported target holds a consumer to no C++ standard.
if grep -q "INTERFACE_COMPILE_FEATURES" "$work"/prefix/lib*/cmake/dfsel/dfselTargets.cmake; then
  echo "check-consumers: dfsel::dfsel exports compile features to its consumers:" >&2
  grep -n "INTERFACE_COMPILE_FEATURES" "$work"/prefix/lib*/cmake/dfsel/dfselTargets.cmake >&2
  exit 1
fi

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
# against libdfsel.so (dfsel.pc), from the install in PREFIX.
consumer_c="$root/tests/consumers/find_package/consumer.c"
pkg_config_links() {
  local prefix=$1 pc libdir
  pc=$(find "$prefix" -name dfsel.pc -path "*/pkgconfig/*" | head -n 1)
  if [ -z "$pc" ]; then
    echo "check-consumers: the install in $prefix has no pkgconfig/dfsel.pc" >&2
    return 1
  fi
  echo "check-consumers: pkg-config ($pc): the same C program against libdfsel.a and libdfsel.so"
  local -x PKG_CONFIG_PATH
  PKG_CONFIG_PATH=$(dirname "$pc")
  # The paths the files give must be the install's own, however deep its libdir is.
  local includedir
  includedir=$(pkg-config --variable=includedir dfsel)
  if [ ! -f "$includedir/dfsel/dfsel.h" ]; then
    echo "check-consumers: $pc gives includedir $includedir, which has no dfsel/dfsel.h" >&2
    return 1
  fi
  # shellcheck disable=SC2046 # the link line is words
  "${CC:-cc}" -std=c99 -o "$work/pc_static" "$consumer_c" $(pkg-config --cflags --libs dfsel-static)
  "$work/pc_static"
  libdir=$(pkg-config --variable=libdir dfsel)
  if [ -f "$libdir/libdfsel.so" ]; then
    # shellcheck disable=SC2046
    "${CC:-cc}" -std=c99 -o "$work/pc_shared" "$consumer_c" $(pkg-config --cflags --libs dfsel) -Wl,-rpath,"$libdir"
    "$work/pc_shared"
  fi
}
pkg_config_links "$work/prefix"

echo "check-consumers: add_subdirectory(dfsel) from a C++ project (CPU backend)"
# Its install rules too (DFSEL_INSTALL), with Debian's own libdir, two folders deep: the
# pkg-config files must still find the prefix.
cmake -S "$root/tests/consumers/add_subdirectory" -B "$work/add_subdirectory" "${gen[@]}" \
  -DCMAKE_BUILD_TYPE=Release -DDFSEL_SOURCE_DIR="$root" -DDFSEL_CUDA=OFF \
  -DDFSEL_INSTALL=ON -DCMAKE_INSTALL_LIBDIR=lib/x86_64-linux-gnu >"$work/as.log" || {
  cat "$work/as.log"
  exit 1
}
cmake --build "$work/add_subdirectory" -j"$(nproc)"
"$work/add_subdirectory/consumer"
echo "check-consumers: the vendored build installed with libdir lib/x86_64-linux-gnu"
cmake --install "$work/add_subdirectory" --prefix "$work/multiarch" >"$work/install-multiarch.log" || {
  cat "$work/install-multiarch.log"
  exit 1
}
pkg_config_links "$work/multiarch"
echo "check-consumers: both consumers built and ran"
