#!/usr/bin/env bash
# Checks the includes of host/ and kernels/ against the Layers table of docs/DESIGN-NOTES.md.
# Each row whose first cell names `host/...` or `kernels/...` covers those folders and files (a
# `*` stands for any file name, within one folder); a file belongs to the first row that covers
# it and may include the files of its own row and what the row's "may include" cell lists: a
# folder (every file under it) or a file; `include/` is the C ABI, included as "dfsel/...". An
# include that names a file beside the including one ("hd.cuh" in kernels/common/) is that file.
# Only #include "..." counts: <...> is a system or third-party header. Prints every include that
# its row does not list and every file that no row covers, and exits 1 when there is one.
#   scripts/check-layers.sh
set -euo pipefail
cd "$(dirname "$0")/.."

# One line per host row: its own tokens, a tab, the tokens it may include.
rows=$(awk -F'|' '
  function tokens(cell,   out, t) {
    out = ""
    while (match(cell, /`[^`]*`/)) {
      t = substr(cell, RSTART + 1, RLENGTH - 2)
      cell = substr(cell, RSTART + RLENGTH)
      if (t == "include/") t = "dfsel/"
      else if (t !~ /\/$/ && t !~ /\.[a-z]+$/) t = t "/"  # `host/backend`: the folder
      out = out " " t
    }
    return out
  }
  /^\| `(host|kernels)\// { print tokens($2) "\t" tokens($4) }
' docs/DESIGN-NOTES.md)
if [ -z "$rows" ]; then
  echo "check-layers: no host or kernels row found in the Layers table of docs/DESIGN-NOTES.md" >&2
  exit 1
fi

find host kernels -type f \( -name '*.h' -o -name '*.cpp' -o -name '*.cu' -o -name '*.cuh' \) | sort |
  while read -r f; do
    printf '%s\t%s\n' "$f" "-"  # the file itself, so that a file without includes is covered too
    dir=$(dirname "$f")
    { grep -nE '^[[:space:]]*#[[:space:]]*include[[:space:]]*"' "$f" || true; } |
      sed -E 's/^([0-9]+):.*"([^"]*)".*/\1:\2/' |
      while IFS=: read -r line inc; do
        if [ ! -e "$inc" ] && [ -e "$dir/$inc" ]; then inc="$dir/$inc"; fi  # a file beside it
        printf '%s\t%s:%s\n' "$f" "$line" "$inc"
      done
  done |
  awk -F'\t' -v rows="$rows" '
    function covers(list, path,   n, i, t, re) {
      n = split(list, t, " ")
      for (i = 1; i <= n; ++i) {
        if ((t[i] ~ /\/$/ && index(path, t[i]) == 1) || t[i] == path) return 1
        if (index(t[i], "*")) {  # a file-name pattern: * is any name within the folder
          re = t[i]
          gsub(/\./, "\\.", re)
          gsub(/\*/, "[^/]*", re)
          if (path ~ ("^" re "$")) return 1
        }
      }
      return 0
    }
    BEGIN {
      n_rows = split(rows, line, "\n")
      for (r = 1; r <= n_rows; ++r) { split(line[r], cell, "\t"); own[r] = cell[1]; may[r] = cell[2] }
    }
    {
      file = $1
      if (!(file in row_of)) {
        row_of[file] = 0
        for (r = 1; r <= n_rows && !row_of[file]; ++r) if (covers(own[r], file)) row_of[file] = r
        if (!row_of[file]) { print file ": no row of the Layers table covers it"; bad = 1 }
      }
      r = row_of[file]
      if ($2 == "-" || !r) next
      at = index($2, ":")
      inc = substr($2, at + 1)
      if (!covers(own[r], inc) && !covers(may[r], inc)) {
        print file ":" substr($2, 1, at - 1) ": includes \"" inc "\", which its row (" substr(own[r], 2) ") does not list"
        bad = 1
      }
    }
    END {
      if (bad) exit 1
      print "check-layers: every include of host/ and kernels/ is of a layer its row of the Layers table lists"
    }
  '
