"""The package's version: DFSEL_VERSION_MAJOR, _MINOR and _PATCH of include/dfsel/dfsel.h, the
one place it is written. An installed package carries that header as dfsel/dfsel.h (the build
backend puts it there); the source tree's package reads ../include/dfsel/dfsel.h."""
import os
import re

HERE = os.path.dirname(os.path.abspath(__file__))
HEADERS = (os.path.join(HERE, "dfsel.h"), os.path.join(HERE, "..", "..", "include", "dfsel", "dfsel.h"))


def header_path():
    for path in HEADERS:
        if os.path.exists(path):
            return os.path.normpath(path)
    raise ImportError("dfsel: the C header that holds the version is in none of %s" % ", ".join(HEADERS))


def read_version(path):
    """(major, minor, patch) as the header at path defines them."""
    with open(path) as f:
        text = f.read()
    parts = []
    for name in ("MAJOR", "MINOR", "PATCH"):
        m = re.search(r"^#define DFSEL_VERSION_%s (\d+)$" % name, text, re.M)
        if m is None:
            raise ImportError("dfsel: %s defines no DFSEL_VERSION_%s" % (path, name))
        parts.append(int(m.group(1)))
    return tuple(parts)


VERSION = read_version(header_path())
__version__ = "%d.%d.%d" % VERSION
