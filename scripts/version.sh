#!/usr/bin/env bash
# Prints dfsel's version, MAJOR.MINOR.PATCH, as include/dfsel/dfsel.h defines it (the one place
# it is written; CMakeLists.txt and the Python package read it there too).
set -euo pipefail
header="$(dirname "$0")/../include/dfsel/dfsel.h"
part() { sed -n "s/^#define DFSEL_VERSION_$1 \\([0-9][0-9]*\\)\$/\\1/p" "$header"; }
major=$(part MAJOR) minor=$(part MINOR) patch=$(part PATCH)
if [ -z "$major" ] || [ -z "$minor" ] || [ -z "$patch" ]; then
  echo "version.sh: DFSEL_VERSION_MAJOR, _MINOR or _PATCH is missing from $header" >&2
  exit 1
fi
echo "$major.$minor.$patch"
