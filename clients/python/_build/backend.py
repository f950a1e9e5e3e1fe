"""A PEP 517 build backend written with the standard library only.

``pip install ./clients/python`` builds the wheel in an isolated
environment into which it installs the backend's requirements first. This
backend requires nothing, so the install works without an index (no PyPI,
``--no-index``) and without setuptools or wheel on the machine: the wheel
is a zip file of the package and its ``.dist-info`` directory, which is all
a pure-Python wheel is (PEP 427).
"""

from __future__ import annotations

import base64
import hashlib
import io
import os
import re
import tarfile
import zipfile

NAME = "tool-engine-client"
PACKAGE = "tool_engine"
SUMMARY = "Client of the session tool-configuration engine's HTTP API (standard library only)."
REQUIRES_PYTHON = ">=3.10"

_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _version() -> str:
    with open(os.path.join(_ROOT, PACKAGE, "__init__.py"), encoding="utf-8") as f:
        m = re.search(r'^__version__ = "([^"]+)"', f.read(), re.M)
    if not m:
        raise RuntimeError(f"{PACKAGE}/__init__.py has no __version__ line")
    return m.group(1)


def _dist() -> str:
    return f"{NAME.replace('-', '_')}-{_version()}"


def _metadata() -> str:
    readme = ""
    path = os.path.join(_ROOT, "README.md")
    if os.path.exists(path):
        with open(path, encoding="utf-8") as f:
            readme = f.read()
    head = (
        "Metadata-Version: 2.1\n"
        f"Name: {NAME}\n"
        f"Version: {_version()}\n"
        f"Summary: {SUMMARY}\n"
        f"Requires-Python: {REQUIRES_PYTHON}\n"
        "Description-Content-Type: text/markdown\n"
    )
    return head + "\n" + readme


_WHEEL = "Wheel-Version: 1.0\nGenerator: tool-engine-backend\nRoot-Is-Purelib: true\nTag: py3-none-any\n"


def _package_files() -> list[tuple[str, bytes]]:
    out = []
    base = os.path.join(_ROOT, PACKAGE)
    for dirpath, dirnames, filenames in os.walk(base):
        dirnames[:] = sorted(d for d in dirnames if d != "__pycache__")
        for name in sorted(filenames):
            if name.endswith(".py") or name == "py.typed":
                full = os.path.join(dirpath, name)
                rel = os.path.relpath(full, _ROOT).replace(os.sep, "/")
                with open(full, "rb") as f:
                    out.append((rel, f.read()))
    return out


def _record_line(path: str, data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{path},sha256={digest},{len(data)}"


def _write_wheel(wheel_directory: str, files: list[tuple[str, bytes]]) -> str:
    dist = _dist()
    info = f"{dist}.dist-info"
    files = files + [
        (f"{info}/METADATA", _metadata().encode()),
        (f"{info}/WHEEL", _WHEEL.encode()),
        (f"{info}/top_level.txt", (PACKAGE + "\n").encode()),
    ]
    record = "\n".join(_record_line(p, d) for p, d in files) + f"\n{info}/RECORD,,\n"
    name = f"{dist}-py3-none-any.whl"
    with zipfile.ZipFile(os.path.join(wheel_directory, name), "w", zipfile.ZIP_DEFLATED) as z:
        for path, data in files:
            z.writestr(path, data)
        z.writestr(f"{info}/RECORD", record)
    return name


def get_requires_for_build_wheel(config_settings=None):
    """Nothing: the backend needs the standard library only."""
    return []


def get_requires_for_build_sdist(config_settings=None):
    """Nothing: the backend needs the standard library only."""
    return []


def get_requires_for_build_editable(config_settings=None):
    """Nothing: the backend needs the standard library only."""
    return []


def prepare_metadata_for_build_wheel(metadata_directory, config_settings=None):
    """Writes the .dist-info directory pip reads before it builds."""
    info = f"{_dist()}.dist-info"
    os.makedirs(os.path.join(metadata_directory, info), exist_ok=True)
    with open(os.path.join(metadata_directory, info, "METADATA"), "w", encoding="utf-8") as f:
        f.write(_metadata())
    with open(os.path.join(metadata_directory, info, "WHEEL"), "w", encoding="utf-8") as f:
        f.write(_WHEEL)
    return info


prepare_metadata_for_build_editable = prepare_metadata_for_build_wheel


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    """Builds the wheel: the package's .py files and py.typed."""
    return _write_wheel(wheel_directory, _package_files())


def build_editable(wheel_directory, config_settings=None, metadata_directory=None):
    """Builds an editable wheel: a .pth file that puts this directory on sys.path."""
    return _write_wheel(wheel_directory, [(f"{PACKAGE}_editable.pth", (_ROOT + "\n").encode())])


def build_sdist(sdist_directory, config_settings=None):
    """Builds the source archive: the package, the tests, the backend and the docs."""
    dist = _dist()
    name = f"{dist}.tar.gz"
    keep = ("pyproject.toml", "README.md", "_build", PACKAGE, "tests")
    with tarfile.open(os.path.join(sdist_directory, name), "w:gz", format=tarfile.PAX_FORMAT) as tar:
        for top in keep:
            full = os.path.join(_ROOT, top)
            if os.path.exists(full):
                tar.add(full, arcname=f"{dist}/{top}", filter=_no_cache)
        pkg_info = _metadata().encode()
        ti = tarfile.TarInfo(f"{dist}/PKG-INFO")
        ti.size = len(pkg_info)
        tar.addfile(ti, io.BytesIO(pkg_info))
    return name


def _no_cache(ti: tarfile.TarInfo):
    return None if "__pycache__" in ti.name else ti
