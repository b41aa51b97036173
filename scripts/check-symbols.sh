#!/usr/bin/env bash
# Proves that dfsel claims no name that is not its own: every global symbol a file defines
# (nm) is a C name starting with dfsel_, or C++ in namespace dfsel, or nvcc's host stub of a
# kernel of namespace dfsel (__device_stub__ and the kernel's mangled dfsel:: name: a reserved
# name, which nvcc defines at global scope for a kernel of an anonymous namespace); a weak or
# unique one may also be an instance of the C++ runtime's own templates (std::, __gnu_cxx::) or
# GCC's DW.ref.* (both are merged with any other copy, never a clash). A C program that defines
# open_draft or any other plain name links against the static archive. For libdfsel.so the
# dynamic table is read: dfsel_* alone. Non-zero, with the offending symbols, on failure.
#   scripts/check-symbols.sh LIBDFSEL.a|OBJECT.o|LIBDFSEL.so...
set -euo pipefail
if [ $# -lt 1 ]; then
  echo "usage: $0 FILE..." >&2
  exit 2
fi
# Itanium manglings: an optional special prefix (typeinfo, its name, vtable, VTT, guard
# variable, thread-local wrapper, thunk, a function's local static), then a nested name in
# namespace dfsel (N, cv-qualifiers, 5dfsel).
special='(T[ISVTHW]|GV|Th[n0-9]+_|Tv[n0-9_]+_|Tc[hv0-9n_]+_|Z)?'
own="^_Z${special}N[rVKRO]*5dfsel"
runtime="^_Z${special}(N[rVKRO]*)?(St|Sa|Sb|Ss|Si|So|Sd|9__gnu_cxx)"
stub="^_Z[0-9]+__device_stub__ZN[rVK]*5dfsel"
bad=0
for f in "$@"; do
  if [ ! -f "$f" ]; then
    echo "check-symbols: $f does not exist" >&2
    exit 1
  fi
  case $f in
    *.so | *.so.*) list=$(nm -D --defined-only "$f") ;;
    *) list=$(nm -g --defined-only "$f") ;;
  esac
  # Lines "ADDRESS TYPE NAME" (an archive adds "member:" lines and blank lines).
  offending=$(awk 'NF == 3 { print $2, $3 } NF == 2 && $1 ~ /^[A-Za-z]$/ { print $1, $2 }' <<<"$list" |
    while read -r type name; do
      case $f in
        *.so | *.so.*)
          # The version script's node (DFSEL_x.y, type A) is not a symbol of the C ABI.
          [[ $type == A || $name == dfsel_* ]] || echo "$type $name"
          continue
          ;;
      esac
      if [[ $name == dfsel_* ]] || [[ $name =~ $own ]] || [[ $name =~ $stub ]]; then continue; fi
      if [[ $type =~ ^[WVu]$ ]] && { [[ $name =~ $runtime ]] || [[ $name == DW.ref.* ]]; }; then continue; fi
      echo "$type $name"
    done | sort -u)
  if [ -n "$offending" ]; then
    echo "check-symbols: $f defines global symbols outside dfsel_ and namespace dfsel:" >&2
    while read -r line; do
      printf '  %s   %s\n' "$line" "$(c++filt <<<"${line#* }")" >&2
    done <<<"$offending"
    bad=1
  else
    echo "check-symbols: $f: every global symbol is dfsel's"
  fi
done
exit "$bad"
