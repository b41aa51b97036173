"""The PEP 517 build backend of the dfsel package: a wheel of dfsel/ with libdfsel.so inside.

The library is, in this order: the file DFSEL_LIBRARY names; a libdfsel.so copied into
dfsel/; or, inside the source tree, one built here with CMake (the CPU backend, and CUDA where
nvcc is found; DFSEL_CMAKE_ARGS adds configure arguments, e.g. -DDFSEL_CUDA=OFF). Without any of
them (an sdist alone) the wheel is pure Python and finds the library at run time (_loader.py).
The wheel also carries the C header, which holds the version (dfsel/_version.py). Only the
standard library is imported and no build requirement is asked for, so pip builds offline.
PEP 660 editable installs are a .pth file naming this folder."""
import base64
import hashlib
import importlib.util
import io
import os
import re
import shlex
import shutil
import subprocess
import sys
import sysconfig
import tarfile
import tempfile
import zipfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TREE = os.path.dirname(ROOT)  # the source tree, when this is its python/ folder
NAME = "dfsel"
SUMMARY = "The DFlash2 candidate selector on a vocabulary split across GPUs (Python over libdfsel.so)"
LIBRARY = "libdfsel.so"


def _version_module():
    spec = importlib.util.spec_from_file_location("_dfsel_version", os.path.join(ROOT, NAME, "_version.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _version():
    return _version_module().__version__


def _in_tree():
    return os.path.exists(os.path.join(TREE, "CMakeLists.txt")) and os.path.exists(os.path.join(TREE, "host"))


# What pip's isolated build environment sets so that Python finds only the build's packages.
_ISOLATION = ("PYTHONPATH", "PYTHONNOUSERSITE")


def _runs(cmake, env):
    try:
        r = subprocess.run([cmake, "--version"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env,
                           timeout=60)
    except (OSError, subprocess.SubprocessError):
        return False
    return r.returncode == 0


def _cmake():
    """(cmake, the environment to run it in): the first cmake on PATH that runs as is, else the
    first that runs without pip's isolation variables; (None, None) when none runs. A cmake that
    pip installed (a launcher importing its package) fails inside pip's isolated build, which
    hides that package; a system cmake later on PATH is taken before it, and without one the
    launcher runs with its own Python's packages back in view."""
    candidates = []
    for folder in os.environ.get("PATH", "").split(os.pathsep):
        cmake = shutil.which("cmake", path=folder or os.curdir)
        if cmake is not None and cmake not in candidates:
            candidates.append(cmake)
    unisolated = {k: v for k, v in os.environ.items() if k not in _ISOLATION}
    for env in (dict(os.environ), unisolated):
        for cmake in candidates:
            if _runs(cmake, env):
                return cmake, env
    return None, None


def _build_library(work):
    """Builds libdfsel.so from the source tree into work and returns its path."""
    cmake, env = _cmake()
    if cmake is None:
        raise RuntimeError("dfsel: building libdfsel.so needs CMake 3.24 or newer (scripts/install-deps.sh), or set "
                           "DFSEL_LIBRARY to a libdfsel.so already built")
    if os.path.isdir("/usr/local/cuda/bin"):  # where the CUDA Toolkit puts nvcc (as scripts/build.sh)
        env["PATH"] = "/usr/local/cuda/bin" + os.pathsep + env.get("PATH", "")
    configure = [cmake, "-S", TREE, "-B", work, "-DCMAKE_BUILD_TYPE=Release", "-DDFSEL_BUILD_TESTS=OFF",
                 "-DDFSEL_BUILD_BENCH=OFF", "-DDFSEL_BUILD_TOOLS=OFF", "-DDFSEL_BUILD_EXAMPLES=OFF",
                 "-DDFSEL_INSTALL=OFF", "-DDFSEL_GGML=OFF"]
    if shutil.which("ninja"):
        configure += ["-G", "Ninja"]
    configure += shlex.split(os.environ.get("DFSEL_CMAKE_ARGS", ""))
    jobs = str(os.cpu_count() or 1)
    for step in (configure, [cmake, "--build", work, "--target", "dfsel_shared", "-j", jobs]):
        sys.stderr.write("dfsel: %s\n" % " ".join(step))
        r = subprocess.run(step, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        if r.returncode != 0:
            raise RuntimeError("dfsel: building libdfsel.so failed (%s):\n%s" % (" ".join(step), r.stdout[-4000:]))
    return os.path.join(work, "host", LIBRARY)


def _library(work):
    """The libdfsel.so to bundle, or None for a pure-Python wheel."""
    given = os.environ.get("DFSEL_LIBRARY")
    if given:
        path = os.path.join(given, LIBRARY) if os.path.isdir(given) else given
        if not os.path.isfile(path):
            raise RuntimeError("dfsel: DFSEL_LIBRARY=%s names no file" % given)
        return path
    copied = os.path.join(ROOT, NAME, LIBRARY)
    if os.path.exists(copied):
        return copied
    return _build_library(work) if _in_tree() else None


def _header():
    """The header to bundle: the tree's, else the one an sdist carries in dfsel/."""
    return _version_module().header_path()


# NumPy is a dependency, not an extra: outputs are NumPy arrays unless the inputs are torch
# tensors or CuPy arrays, so a fresh environment without it failed at the first run.
def _metadata():
    return ("Metadata-Version: 2.1\nName: %s\nVersion: %s\nSummary: %s\nRequires-Python: >=3.8\n"
            "Requires-Dist: numpy\n" % (NAME, _version(), SUMMARY))


def _package_files():
    """The package's Python files and its header (the library comes from _library)."""
    pkg = os.path.join(ROOT, NAME)
    names = sorted(n for n in os.listdir(pkg) if n.endswith(".py"))
    return [(os.path.join(pkg, n), "%s/%s" % (NAME, n)) for n in names] + [(_header(), NAME + "/dfsel.h")]


def _tag(files):
    if any(arc.endswith(".so") for _, arc in files):
        return "py3-none-" + re.sub(r"[-.]", "_", sysconfig.get_platform()), False
    return "py3-none-any", True


def _hash(data):
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return "sha256=%s,%d" % (digest, len(data))


def _write_wheel(wheel_directory, entries, tag, purelib):
    """entries: (archive name, bytes). Writes the wheel with its dist-info and returns its name."""
    version = _version()
    dist_info = "%s-%s.dist-info" % (NAME, version)
    wheel = "Wheel-Version: 1.0\nGenerator: dfsel_build\nRoot-Is-Purelib: %s\nTag: %s\n" % (
        "true" if purelib else "false", tag)
    entries = list(entries) + [(dist_info + "/METADATA", _metadata().encode()),
                               (dist_info + "/WHEEL", wheel.encode())]
    record = "".join("%s,%s\n" % (arc, _hash(data)) for arc, data in entries) + dist_info + "/RECORD,,\n"
    name = "%s-%s-%s.whl" % (NAME, version, tag)
    with zipfile.ZipFile(os.path.join(wheel_directory, name), "w", zipfile.ZIP_DEFLATED) as z:
        for arc, data in entries + [(dist_info + "/RECORD", record.encode())]:
            info = zipfile.ZipInfo(arc, date_time=(2026, 1, 1, 0, 0, 0))
            info.external_attr = (0o755 if arc.endswith(".so") else 0o644) << 16
            z.writestr(info, data, zipfile.ZIP_DEFLATED)
    return name


def get_requires_for_build_wheel(config_settings=None):
    return []


def get_requires_for_build_sdist(config_settings=None):
    return []


def get_requires_for_build_editable(config_settings=None):
    return []


def prepare_metadata_for_build_wheel(metadata_directory, config_settings=None):
    """The dist-info alone, so that pip does not build the library to read the metadata."""
    dist_info = "%s-%s.dist-info" % (NAME, _version())
    os.makedirs(os.path.join(metadata_directory, dist_info), exist_ok=True)
    with open(os.path.join(metadata_directory, dist_info, "METADATA"), "w") as f:
        f.write(_metadata())
    return dist_info


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    work = tempfile.mkdtemp(prefix="dfsel-build-")
    try:
        files = _package_files()
        library = _library(work)
        if library:
            files.append((library, "%s/%s" % (NAME, LIBRARY)))
        tag, purelib = _tag(files)
        entries = []
        for path, arc in files:
            with open(path, "rb") as f:
                entries.append((arc, f.read()))
        return _write_wheel(wheel_directory, entries, tag, purelib)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def build_editable(wheel_directory, config_settings=None, metadata_directory=None):
    return _write_wheel(wheel_directory, [(NAME + ".pth", (ROOT + "\n").encode())], "py3-none-any", True)


def build_sdist(sdist_directory, config_settings=None):
    base = "%s-%s" % (NAME, _version())
    name = base + ".tar.gz"
    with tarfile.open(os.path.join(sdist_directory, name), "w:gz") as t:
        for path, arc in [(os.path.join(ROOT, rel), rel) for rel in ("pyproject.toml", "build_backend/dfsel_build.py")] \
                + _package_files():
            t.add(path, arcname="%s/%s" % (base, arc))
        info = tarfile.TarInfo("%s/PKG-INFO" % base)
        data = _metadata().encode()
        info.size = len(data)
        t.addfile(info, io.BytesIO(data))
    return name
