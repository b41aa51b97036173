#!/usr/bin/env bash
# integrations/ggml/0002-ggml-cuda-top-k-dfsel.patch vendors the top-K of kernels/topk/ into
# ggml-cuda (src/ggml-cuda/dfsel-topk/). Its copies of those files must be kernels/topk/'s, byte
# for byte: the patch is applied to a copy of the ggml source (GGML_SOURCE, default
# ../shared/ggml; the source itself is never changed) and its copies compared with the tree's.
#   scripts/ggml-topk-patch.sh --check    exits 1 if a copy differs, is missing or is extra
#   scripts/ggml-topk-patch.sh --update   rewrites the patch with kernels/topk/'s files, keeping
#                                         its message and its other hunks (top-k.cu, the tests)
set -euo pipefail
cd "$(dirname "$0")/.."
mode=${1:-}
case $mode in --check | --update) ;; *) echo "usage: scripts/ggml-topk-patch.sh --check | --update" >&2; exit 2 ;; esac
src=${GGML_SOURCE:-../shared/ggml}
patch_file=integrations/ggml/0002-ggml-cuda-top-k-dfsel.patch
vendored=src/ggml-cuda/dfsel-topk
[ -f "$src/CMakeLists.txt" ] || { echo "ggml-topk-patch: no ggml source at $src (set GGML_SOURCE)" >&2; exit 1; }
work=$(mktemp -d "${TMPDIR:-/tmp}/dfsel-topk-patch.XXXXXX")
trap 'rm -rf "$work"' EXIT
cp -R "$src" "$work/a"
cp -R "$src" "$work/b"
patch -p1 --forward --quiet -d "$work/b" <"$patch_file"

if [ "$mode" = --check ]; then
  if ! diff -r "$work/b/$vendored" kernels/topk; then
    echo "ggml-topk-patch: $patch_file's $vendored differs from kernels/topk (run scripts/ggml-topk-patch.sh --update)" >&2
    exit 1
  fi
  echo "ggml-topk-patch: $patch_file vendors kernels/topk as it is ($(ls kernels/topk | wc -l) files)"
  exit 0
fi

rm -rf "${work:?}/b/$vendored"
mkdir -p "$work/b/$vendored"
cp kernels/topk/*.cuh "$work/b/$vendored/"
# The message: everything before the first diff line.
awk '/^(diff |--- a\/)/ { exit } { print }' "$patch_file" >"$work/message"
# The diff, file by file in a fixed order, with a/ and b/ prefixes as patch -p1 reads them.
(
  cd "$work"
  diff -ruN a b | sed -E 's#^(---|\+\+\+) ([ab])/([^\t]*)\t.*#\1 \2/\3#' | grep -v '^diff -ruN ' || true
) >"$work/diff"
cat "$work/message" "$work/diff" >"$patch_file"
echo "ggml-topk-patch: $patch_file rewritten from kernels/topk"
