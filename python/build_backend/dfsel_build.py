"""The PEP 517 build backend of the dfsel package: a pure-Python wheel of dfsel/ (plus
dfsel/libdfsel.so when one was copied there, which makes the wheel platform-specific).
It imports only the standard library and asks for no build requirements, so pip builds it
offline. PEP 660 editable installs are a .pth file naming this folder."""
import base64
import hashlib
import io
import os
import re
import sysconfig
import tarfile
import zipfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
NAME = "dfsel"
SUMMARY = "The DFlash2 candidate selector on a vocabulary split across GPUs (Python over libdfsel.so)"


def _version():
    with open(os.path.join(ROOT, NAME, "__init__.py")) as f:
        return re.search(r'^__version__ = "([^"]+)"', f.read(), re.M).group(1)


def _metadata():
    return ("Metadata-Version: 2.1\nName: %s\nVersion: %s\nSummary: %s\nRequires-Python: >=3.8\n"
            "Provides-Extra: numpy\nRequires-Dist: numpy; extra == \"numpy\"\n" % (NAME, _version(), SUMMARY))


def _package_files():
    pkg = os.path.join(ROOT, NAME)
    names = sorted(n for n in os.listdir(pkg) if n.endswith(".py") or n == "libdfsel.so")
    return [(os.path.join(pkg, n), "%s/%s" % (NAME, n)) for n in names]


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


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    files = _package_files()
    tag, purelib = _tag(files)
    entries = []
    for path, arc in files:
        with open(path, "rb") as f:
            entries.append((arc, f.read()))
    return _write_wheel(wheel_directory, entries, tag, purelib)


def build_editable(wheel_directory, config_settings=None, metadata_directory=None):
    return _write_wheel(wheel_directory, [(NAME + ".pth", (ROOT + "\n").encode())], "py3-none-any", True)


def build_sdist(sdist_directory, config_settings=None):
    base = "%s-%s" % (NAME, _version())
    name = base + ".tar.gz"
    with tarfile.open(os.path.join(sdist_directory, name), "w:gz") as t:
        for rel in ["pyproject.toml", "build_backend/dfsel_build.py"] + [
                arc for _, arc in _package_files() if not arc.endswith(".so")]:
            t.add(os.path.join(ROOT, rel), arcname="%s/%s" % (base, rel))
        info = tarfile.TarInfo("%s/PKG-INFO" % base)
        data = _metadata().encode()
        info.size = len(data)
        t.addfile(info, io.BytesIO(data))
    return name
