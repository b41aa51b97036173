"""scripts/install-deps.sh checks the Python the tests will use: python3 on PATH may be a pyenv,
conda or venv interpreter for which Debian's python3-numpy and python3-pytest do nothing, and
the script used to install those and say nothing more."""
import os
import subprocess

from conftest import ROOT

SCRIPT = os.path.join(ROOT, "scripts", "install-deps.sh")


def run_script(tmp_path, **env_changes):
    env = dict(os.environ)
    env.update(env_changes)
    return subprocess.run(["bash", SCRIPT, "--dry-run"], capture_output=True, text=True, env=env, cwd=str(tmp_path))


def test_a_python_without_numpy_or_pytest_is_named_with_the_fix(tmp_path):
    # A python3 that finds no site packages: like a fresh pyenv interpreter.
    fake = tmp_path / "bin" / "python3"
    fake.parent.mkdir()
    fake.write_text("#!/bin/sh\nexec /usr/bin/python3 -S \"$@\"\n")
    fake.chmod(0o755)
    r = run_script(tmp_path, PATH="%s:%s" % (fake.parent, os.environ["PATH"]))
    assert r.returncode == 0, r.stdout + r.stderr
    assert "%s (Python 3." % fake in r.stderr and "lacks: numpy pytest" in r.stderr, r.stderr
    assert "%s -m pip install numpy pytest" % fake in r.stderr, r.stderr
    assert "/usr/bin/python3 -m pytest tests/python" in r.stderr, r.stderr


def test_the_python_of_these_tests_passes_the_check(tmp_path):
    import sys
    r = run_script(tmp_path, PYTHON=sys.executable)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "lacks" not in r.stderr, r.stderr
