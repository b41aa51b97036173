"""pip installs ./python into a temporary folder with no compiler and no package index, and the
installed package finds its library: through DFSEL_LIBRARY, next to itself (a libdfsel.so
bundled into the wheel), or fails with a dfsel.Error that says what it tried."""
import ctypes.util
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


def pip_install(source, target):
    try:
        import pip  # noqa: F401
    except ImportError:
        pytest.fail("pip is not installed for %s (Debian: python3-pip)" % sys.executable)
    r = subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "--no-index", "--target", str(target),
                        str(source)], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr


def run_python(code, cwd, pythonpath, library):
    env = {k: v for k, v in os.environ.items() if k not in ("DFSEL_LIBRARY", "LD_LIBRARY_PATH", "PYTHONPATH")}
    env["PYTHONPATH"] = str(pythonpath)
    if library is not None:
        env["DFSEL_LIBRARY"] = library
    return subprocess.run([sys.executable, "-c", code], cwd=str(cwd), env=env, capture_output=True, text=True)


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    target = tmp_path_factory.mktemp("site")
    pip_install(SOURCE, target)
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


def test_library_bundled_next_to_the_package(tmp_path):
    src = tmp_path / "src"
    shutil.copytree(SOURCE, src, ignore=shutil.ignore_patterns("__pycache__", "*.so"))
    shutil.copy(dfsel.library_path(), src / "dfsel" / "libdfsel.so")
    target = tmp_path / "site"
    pip_install(src, target)
    r = run_python(SMOKE, tmp_path, target, None)
    assert r.returncode == 0, r.stderr
    where, path, _ = r.stdout.splitlines()
    assert path == os.path.join(str(target), "dfsel", "libdfsel.so")
    wheel_tag = open(os.path.join(target, "dfsel-%s.dist-info" % dfsel.__version__, "WHEEL")).read()
    assert "Root-Is-Purelib: false" in wheel_tag and "py3-none-any" not in wheel_tag
