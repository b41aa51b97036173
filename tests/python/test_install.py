"""pip installs ./python into a temporary folder with no package index: from the source tree it
builds libdfsel.so with CMake and bundles it, so the installed package runs with no
DFSEL_LIBRARY; a library given at install time (DFSEL_LIBRARY, or copied into dfsel/) is
bundled instead; a copy of the package without the tree (as an sdist) is pure Python and finds
its library at run time or fails with a dfsel.Error that says what it tried. The README's
Python snippet runs as written."""
import ctypes.util
import importlib.util
import os
import shutil
import subprocess
import sys

import pytest

import dfsel
from conftest import ROOT

SOURCE = os.path.join(ROOT, "python")
SMOKE = """
import numpy as np, dfsel
rng = np.random.default_rng(0)
w = lambda *s: rng.standard_normal(s).astype(np.float32)
p = dfsel.Plan(n_vocab=64, n_embd=16, codebook_rank=8, top_k=4, block_size=3, max_blocks=1,
               e_prev=w(64, 8), e_next=w(64, 8), w_h=w(8, 16))
out = p.run(w(3, 64), w(3, 16), np.array([5], np.int32))
print(dfsel.__file__)
print(dfsel.library_path())
print(int(out.n_emitted[0]), list(out.path[0]))
"""


def pip_install(source, target, **env_changes):
    """pip install source --target target, with DFSEL_LIBRARY unset unless env_changes set it."""
    try:
        import pip  # noqa: F401
    except ImportError:
        pytest.fail("pip is not installed for %s (Debian: python3-pip)" % sys.executable)
    env = {k: v for k, v in os.environ.items() if k not in ("DFSEL_LIBRARY", "DFSEL_CMAKE_ARGS")}
    env.update(env_changes)
    r = subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "--no-index", "--target", str(target),
                        str(source)], capture_output=True, text=True, env=env)
    assert r.returncode == 0, r.stdout + r.stderr


def package_copy(tmp_path):
    """python/ alone, with the header an sdist carries: no source tree to build the library in."""
    src = tmp_path / "src"
    shutil.copytree(SOURCE, src, ignore=shutil.ignore_patterns("__pycache__", "*.so", "dfsel.h"))
    shutil.copy(os.path.join(ROOT, "include", "dfsel", "dfsel.h"), src / "dfsel" / "dfsel.h")
    return src


def run_python(code, cwd, pythonpath, library):
    env = {k: v for k, v in os.environ.items() if k not in ("DFSEL_LIBRARY", "LD_LIBRARY_PATH", "PYTHONPATH")}
    env["PYTHONPATH"] = str(pythonpath)
    if library is not None:
        env["DFSEL_LIBRARY"] = library
    return subprocess.run([sys.executable, "-c", code], cwd=str(cwd), env=env, capture_output=True, text=True)


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    target = tmp_path_factory.mktemp("site")
    pip_install(package_copy(tmp_path_factory.mktemp("copy")), target)
    return target


def test_installed_package_runs_with_dfsel_library(installed, tmp_path):
    lib = dfsel.library_path()
    r = run_python(SMOKE, tmp_path, installed, lib)
    assert r.returncode == 0, r.stderr
    where, path, result = r.stdout.splitlines()
    assert where.startswith(str(installed)), "imported %s, not the installed copy" % where
    assert path == lib
    n, drafted = result.split(" ", 1)
    assert 0 <= int(n) <= 2 and drafted.startswith("[")
    assert os.path.exists(os.path.join(installed, "dfsel-%s.dist-info" % dfsel.__version__, "RECORD"))


def test_missing_library_is_a_dfsel_error(installed, tmp_path):
    code = ("import dfsel\ntry:\n    dfsel.library()\nexcept dfsel.Error as e:\n"
            "    print(e.status.name)\n    print(e.message)\nelse:\n    print('loaded')\n")
    r = run_python(code, tmp_path, installed, str(tmp_path / "nowhere" / "libdfsel.so"))
    assert r.returncode == 0, r.stderr
    status, message = r.stdout.splitlines()
    assert status == "IO_ERROR" and "DFSEL_LIBRARY=" in message and "does not exist" in message
    if ctypes.util.find_library("dfsel"):
        pytest.skip("a libdfsel is installed on the loader path, so the search without DFSEL_LIBRARY finds it")
    r = run_python(code, tmp_path, installed, None)
    status, message = r.stdout.splitlines()
    assert status == "IO_ERROR" and "next to the package" in message and "the loader path" in message
    assert "DFSEL_LIBRARY" in message  # the hint says how to point at a build


def check_bundled(target, tmp_path):
    r = run_python(SMOKE, tmp_path, target, None)
    assert r.returncode == 0, r.stderr
    where, path, _ = r.stdout.splitlines()
    assert path == os.path.join(str(target), "dfsel", "libdfsel.so")
    wheel_tag = open(os.path.join(target, "dfsel-%s.dist-info" % dfsel.__version__, "WHEEL")).read()
    assert "Root-Is-Purelib: false" in wheel_tag and "py3-none-any" not in wheel_tag
    assert os.path.exists(os.path.join(target, "dfsel", "dfsel.h")), "the header that holds the version"


def test_library_bundled_next_to_the_package(tmp_path):
    src = package_copy(tmp_path)
    shutil.copy(dfsel.library_path(), src / "dfsel" / "libdfsel.so")
    pip_install(src, tmp_path / "site")
    check_bundled(tmp_path / "site", tmp_path)


def test_library_given_at_install_time_is_bundled(tmp_path):
    pip_install(SOURCE, tmp_path / "site", DFSEL_LIBRARY=dfsel.library_path())
    check_bundled(tmp_path / "site", tmp_path)


def _backend():
    """The build backend as a module of its own."""
    spec = importlib.util.spec_from_file_location("dfsel_build_under_test",
                                                  os.path.join(SOURCE, "build_backend", "dfsel_build.py"))
    backend = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(backend)
    return backend


def test_build_backend_passes_over_a_cmake_that_does_not_run(tmp_path, monkeypatch):
    """A cmake first on PATH that fails, as a virtual environment's launcher does inside pip's
    isolated build (it imports a package that environment hides), is passed over for the next
    cmake on PATH that runs."""
    if not shutil.which("cmake"):
        pytest.skip("cmake is not installed")
    bad = tmp_path / "bin"
    bad.mkdir()
    (bad / "cmake").write_text("#!/bin/sh\necho 'No module named cmake' >&2\nexit 1\n")
    (bad / "cmake").chmod(0o755)
    monkeypatch.setenv("PATH", str(bad) + os.pathsep + os.environ.get("PATH", ""))
    backend = _backend()
    cmake, env = backend._cmake()
    assert cmake is not None and os.path.dirname(cmake) != str(bad)
    assert subprocess.run([cmake, "--version"], capture_output=True, env=env).returncode == 0


def test_build_backend_runs_a_cmake_launcher_outside_pip_isolation(tmp_path, monkeypatch):
    """The only cmake on PATH is a launcher that fails while pip's isolation variables are set
    (as one pip installed fails inside pip's isolated build): it is taken, to run without them."""
    real = shutil.which("cmake")
    if not real:
        pytest.skip("cmake is not installed")
    launcher = tmp_path / "bin"
    launcher.mkdir()
    (launcher / "cmake").write_text('#!/bin/sh\n[ -n "$PYTHONNOUSERSITE" ] && { echo "No module named cmake" >&2; '
                                    'exit 1; }\nexec "%s" "$@"\n' % real)
    (launcher / "cmake").chmod(0o755)
    monkeypatch.setenv("PATH", str(launcher))
    monkeypatch.setenv("PYTHONNOUSERSITE", "1")
    monkeypatch.setenv("PYTHONPATH", str(tmp_path / "overlay"))
    backend = _backend()
    cmake, env = backend._cmake()
    assert cmake == str(launcher / "cmake")
    assert "PYTHONNOUSERSITE" not in env and "PYTHONPATH" not in env and env["PATH"] == str(launcher)
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    assert backend._cmake() == (None, None)


def test_pip_install_from_the_tree_builds_the_library(tmp_path):
    """The README's `pip install ./python`, with no library given: CMake builds it (CPU backend
    here, to keep the test short; nvcc adds the CUDA backend by default)."""
    if not shutil.which("cmake"):
        pytest.skip("cmake is not installed")
    pip_install(SOURCE, tmp_path / "site", DFSEL_CMAKE_ARGS="-DDFSEL_CUDA=OFF")
    check_bundled(tmp_path / "site", tmp_path)


def test_metadata_declares_numpy(tmp_path):
    """NumPy is what outputs are made of: pip installs it with the package, unconditionally
    (an extra left a fresh virtual environment failing on `import numpy`)."""
    sys.path.insert(0, os.path.join(SOURCE, "build_backend"))
    try:
        import dfsel_build
    finally:
        sys.path.pop(0)
    dist_info = dfsel_build.prepare_metadata_for_build_wheel(str(tmp_path))
    lines = (tmp_path / dist_info / "METADATA").read_text().splitlines()
    assert "Requires-Dist: numpy" in lines, lines
