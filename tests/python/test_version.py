"""One version, written once in include/dfsel/dfsel.h: the CMake package of the build the tests
run against, the Python package and the README's find_package all say the same. The CMake
package used to say 0.1.0 while the header said 0.2.0, so the README's
find_package(dfsel 0.2 REQUIRED) failed after cmake --install."""
import os
import re

import pytest

import dfsel
from dfsel import _version
from conftest import ROOT

HEADER = os.path.join(ROOT, "include", "dfsel", "dfsel.h")


def header_version():
    return "%d.%d.%d" % _version.read_version(HEADER)


def test_python_package_is_the_header_version():
    assert dfsel.__version__ == header_version()
    assert dfsel.version() == _version.read_version(HEADER), "the loaded library is another version"


def test_cmake_package_is_the_header_version():
    build = os.path.dirname(os.path.dirname(os.path.realpath(dfsel.library_path())))
    config = os.path.join(build, "dfselConfigVersion.cmake")
    if not os.path.exists(config):
        pytest.skip("the library under test is not in a build folder (%s)" % build)
    m = re.search(r'^set\(PACKAGE_VERSION "([^"]+)"\)', open(config).read(), re.M)
    assert m and m.group(1) == header_version(), config


def test_readme_and_consumers_ask_for_the_header_version():
    wanted = ".".join(header_version().split(".")[:2])
    readme = open(os.path.join(ROOT, "README.md")).read()
    asked = re.findall(r"find_package\(dfsel ([0-9.]+)", readme)
    assert asked and all(v == wanted for v in asked), asked
    for consumer in ("find_package", "ggml"):
        text = open(os.path.join(ROOT, "tests", "consumers", consumer, "CMakeLists.txt")).read()
        assert re.search(r"find_package\(dfsel \$\{DFSEL_VERSION_WANTED\}", text), consumer
