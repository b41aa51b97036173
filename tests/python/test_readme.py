"""The README's Python snippet runs as written, in a fresh interpreter: every name it uses is
defined in it, its shapes are the ones the package takes, and it prints a path. It used to use
V, e_prev, logits_shard and others without defining them."""
import os
import re
import subprocess
import sys

from conftest import PACKAGE_DIR, ROOT


def readme_python_snippet():
    text = open(os.path.join(ROOT, "README.md")).read()
    section = text[text.index("## From Python"):]
    m = re.search(r"```python\n(.*?)```", section, re.S)
    assert m, "the README's Python section has no python block"
    return m.group(1)


def test_the_readme_snippet_runs_as_written(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["PYTHONPATH"] = PACKAGE_DIR
    r = subprocess.run([sys.executable, "-c", readme_python_snippet()], cwd=str(tmp_path), env=env,
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert re.search(r"\[\[ *-?\d", r.stdout), r.stdout  # the path array was printed
