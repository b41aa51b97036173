"""The ctypes declarations against the C compiler's view of include/dfsel/dfsel.h: every
struct's size and alignment and every field's offset; the enums' values; the header version
against the package's ABI_VERSION; and libdfsel.so exporting dfsel_* and nothing else."""
import ctypes
import os
import re
import shutil
import subprocess

import pytest

import dfsel
from dfsel import _abi
from conftest import ROOT

HEADER = os.path.join(ROOT, "include", "dfsel", "dfsel.h")
HEADERS = (HEADER, os.path.join(ROOT, "include", "dfsel", "dspark.h"))
ENUM_PREFIXES = ((_abi.Status, "DFSEL_"), (_abi.Type, "DFSEL_TYPE_"), (_abi.Backend, "DFSEL_BACKEND_"),
                 (_abi.Placement, "DFSEL_CODEBOOKS_"))


def _compiler():
    for cc in (os.environ.get("CC"), "cc", "gcc", "clang"):
        if cc and shutil.which(cc):
            return cc
    pytest.skip("no C compiler to read the header's layouts with")


def _c_layouts(tmp_path):
    lines = ['#include <stdio.h>', '#include <stddef.h>', '#include <dfsel/dspark.h>', 'int main(void) {']
    for cname, st in _abi.STRUCTS.items():
        lines.append('printf("%s size %%zu\\n%s align %%zu\\n", sizeof(%s), _Alignof(%s));' % (cname, cname, cname, cname))
        for field, _ in st._fields_:
            lines.append('printf("%s.%s offset %%zu\\n", offsetof(%s, %s));' % (cname, field, cname, field))
            lines.append('printf("%s.%s size %%zu\\n", sizeof(((%s*)0)->%s));' % (cname, field, cname, field))
    for enum, prefix in ENUM_PREFIXES:
        for m in enum:
            lines.append('printf("%s%s value %%d\\n", (int)%s%s);' % (prefix, m.name, prefix, m.name))
    lines.append('printf("version %d.%d\\n", DFSEL_VERSION_MAJOR, DFSEL_VERSION_MINOR);')
    lines.append("return 0; }")
    src, exe = tmp_path / "layouts.c", tmp_path / "layouts"
    src.write_text("\n".join(lines) + "\n")
    subprocess.run([_compiler(), "-std=c11", "-I", os.path.join(ROOT, "include"), str(src), "-o", str(exe)],
                   check=True)
    out = subprocess.run([str(exe)], check=True, capture_output=True, text=True).stdout
    return dict((line.rsplit(" ", 1)[0], line.rsplit(" ", 1)[1]) for line in out.splitlines())


@pytest.mark.skipif(not os.path.exists(HEADER), reason="the source tree's header is not here")
def test_structs_match_the_compiler(tmp_path):
    c = _c_layouts(tmp_path)
    checked = 0
    for cname, st in _abi.STRUCTS.items():
        assert (int(c[cname + " size"]), int(c[cname + " align"])) == (ctypes.sizeof(st), ctypes.alignment(st)), cname
        for field, _ in st._fields_:
            f = getattr(st, field)
            assert int(c["%s.%s offset" % (cname, field)]) == f.offset, "%s.%s" % (cname, field)
            assert int(c["%s.%s size" % (cname, field)]) == f.size, "%s.%s" % (cname, field)
            checked += 1
    assert checked >= 70
    assert c["version"] == "%d.%d" % _abi.ABI_VERSION


@pytest.mark.skipif(not os.path.exists(HEADER), reason="the source tree's header is not here")
def test_enums_match_the_compiler(tmp_path):
    c = _c_layouts(tmp_path)
    checked = 0
    for enum, prefix in ENUM_PREFIXES:
        for m in enum:
            assert int(c["%s%s value" % (prefix, m.name)]) == m.value, prefix + m.name
            checked += 1
    assert checked == 12 + 13 + 3 + 2


@pytest.mark.skipif(not os.path.exists(HEADER), reason="the source tree's header is not here")
def test_every_header_struct_and_function_is_declared():
    text = "".join(open(h).read() for h in HEADERS)
    structs = set(re.findall(r"typedef struct (dfsel_\w+) \{", text))
    assert structs == set(_abi.STRUCTS), "structs of the headers and of _abi differ"
    functions = set(re.findall(r"DFSEL_API [^;(]*?\b(dfsel_\w+)\(", text))
    # The GGUF loader's calls are C's alone: the package does not read drafts.
    missing = functions - set(_abi.PROTOTYPES) - {"dfsel_type_name", "dfsel_tensor_2d", "dfsel_gguf_draft_kind",
                                                   "dfsel_gguf_dspark_desc"}
    assert not missing, "functions of the header without a prototype: %s" % sorted(missing)


def test_library_exports_the_c_abi_only():
    nm = shutil.which("nm")
    if not nm:
        pytest.skip("nm is not installed")
    path = dfsel.library_path()
    out = subprocess.run([nm, "-D", "--defined-only", path], check=True, capture_output=True, text=True).stdout
    names = [line.split()[-1] for line in out.splitlines() if line.strip()]
    assert "dfsel_plan_run" in names and "dfsel_gguf_open" in names
    others = [n for n in names if not n.startswith("dfsel_")]
    assert not others, "%s exports more than the C ABI: %s" % (path, others[:10])


def test_version_is_the_header_version():
    assert dfsel.version()[:2] == _abi.ABI_VERSION
    assert dfsel.status_string(dfsel.Status.INVALID_ARGUMENT) == "invalid argument"
