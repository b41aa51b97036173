"""Finds the package and the library for the tests.

The package is imported from DFSEL_TEST_PACKAGE_DIR when set (an installed copy, as
python/run-gpu-tests.sh does), else from the source tree's python/. The library is
DFSEL_LIBRARY when set, else the first of build/host/libdfsel.so, build-py/host/libdfsel.so
that exists; with none the tests fail (dfsel.Error), they do not skip.
"""
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PACKAGE_DIR = os.environ.get("DFSEL_TEST_PACKAGE_DIR") or os.path.join(ROOT, "python")
sys.path.insert(0, PACKAGE_DIR)
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

if not os.environ.get("DFSEL_LIBRARY"):
    for build in ("build", "build-py"):
        lib = os.path.join(ROOT, build, "host", "libdfsel.so")
        if os.path.exists(lib):
            os.environ["DFSEL_LIBRARY"] = lib
            break
