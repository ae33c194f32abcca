"""Harnesses installed from their own registries into a cache, outside any project.

Layout: ``{cache}/{profile}-{version}/`` is one install — an npm prefix
(``node_modules/.bin/{executable}``) or a private virtual environment
(``bin/{executable}``). A file ``.agentbolt-installed`` holding the packages is written
last, so an interrupted install is redone and a finished one is never touched again.
The cache is ``$AGENTBOLT_HARNESS_CACHE``, else ``~/.cache/agentbolt/harnesses``.
``scripts/install_harnesses`` calls :func:`install` for each profile (CI caches the
directory).
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path
from typing import ClassVar

import orjson

from agentbolt.runner.harness.errors import HarnessConfigError
from agentbolt.runner.harness.profiles.base import HarnessProfile, Install
from agentbolt.runner.harness.sandbox.config import SYSTEM_PATHS

__all__ = [
    "HarnessInstallError",
    "HarnessNotInstalledError",
    "Packaged",
    "default_cache",
    "install",
    "install_dir",
    "installed_executable",
    "runtime_mounts",
]

STAMP = ".agentbolt-installed"


class HarnessNotInstalledError(HarnessConfigError):
    """The harness is not in the cache; the message gives the command that installs it."""


class HarnessInstallError(HarnessConfigError):
    """The registry's client could not install the harness; the message has its output."""


def default_cache() -> Path:
    configured = os.environ.get("AGENTBOLT_HARNESS_CACHE")
    return Path(configured).expanduser() if configured else Path.home() / ".cache" / "agentbolt" / "harnesses"


def install_dir(profile: HarnessProfile, cache: Path | None = None) -> Path:
    return (cache or default_cache()) / f"{profile.name}-{profile.install.version}"


def _executable_in(install: Install, root: Path) -> Path:
    if install.registry == "npm":
        return root / "node_modules" / ".bin" / install.executable
    return root / "bin" / install.executable


def _stamped(install: Install, root: Path) -> bool:
    try:
        return list(orjson.loads((root / STAMP).read_bytes())) == install.specs
    except (OSError, orjson.JSONDecodeError, TypeError):
        return False


def installed_executable(profile: HarnessProfile, cache: Path | None = None) -> Path:
    """The harness's executable in the cache, or :class:`HarnessNotInstalledError`."""
    root = install_dir(profile, cache)
    executable = _executable_in(profile.install, root)
    if not _stamped(profile.install, root) or not executable.exists():
        raise HarnessNotInstalledError(
            f"{profile.name} {profile.install.version} is not installed in {root.parent}: run "
            f"`scripts/install_harnesses {profile.name}` (or agentbolt.runner.harness.profiles.install), set "
            "AGENTBOLT_HARNESS_CACHE to the cache that has it, or pass Harness.for_(..., executable=PATH)"
        )
    return executable


def _python_for(install: Install, python: str | None) -> str:
    """``python``, else ``python{Install.python}`` on PATH, else pyenv's (one that runs)."""
    if python is not None:
        return python
    version = install.python or "3"
    candidates = [shutil.which(f"python{version}")]
    pyenv = Path(os.environ.get("PYENV_ROOT") or Path.home() / ".pyenv") / "versions"
    if install.python and pyenv.is_dir():
        candidates += [str(p / "bin" / f"python{version}") for p in sorted(pyenv.glob(f"{version}.*"), reverse=True)]
    for candidate in filter(None, candidates):
        try:
            if subprocess.run([candidate, "-c", "import venv"], capture_output=True, timeout=60).returncode == 0:
                return candidate
        except (OSError, subprocess.TimeoutExpired):
            continue
    raise HarnessInstallError(
        f"{install.package} needs Python {version} for its virtual environment and none was found (python{version} on "
        "PATH, pyenv's versions): install it (pyenv install, apt-get install python3.12-venv, uv python install) or "
        "pass python=PATH"
    )


def _run(argv: list[str], what: str, env: dict[str, str] | None = None) -> None:
    try:
        done = subprocess.run(argv, capture_output=True, timeout=1800, check=False, env=env)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise HarnessInstallError(f"{what} failed: {exc}") from exc
    if done.returncode != 0:
        tail = (done.stderr or done.stdout).decode("utf-8", "replace").strip()[-2000:]
        raise HarnessInstallError(f"{what} exited with {done.returncode}: {tail}")


def install(profile: HarnessProfile, cache: Path | None = None, *, python: str | None = None) -> Path:
    """Install ``profile``'s pinned packages into the cache (once); its executable.

    npm harnesses get their own prefix (their native binaries come as npm optional
    dependencies); PyPI harnesses a private virtual environment made with the Python
    they need (``python``: that interpreter, else ``python{Install.python}`` on PATH)."""
    spec = profile.install
    root = install_dir(profile, cache)
    if _stamped(spec, root) and _executable_in(spec, root).exists():
        return _executable_in(spec, root)
    if root.exists():
        shutil.rmtree(root)
    root.mkdir(parents=True)
    what = f"installing {' '.join(spec.specs)}"
    if spec.registry == "npm":
        npm = shutil.which("npm")
        if npm is None:
            raise HarnessInstallError(f"{profile.name} is an npm package and npm is not on PATH: install Node.js ≥ 20")
        _run([npm, "install", "--prefix", str(root), "--no-audit", "--no-fund", "--loglevel=error", *spec.specs], what)
    else:
        _run([_python_for(spec, python), "-m", "venv", str(root)], f"creating the virtual environment {root}")
        _run([str(root / "bin" / "python"), "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
              *spec.specs], what)
    executable = _executable_in(spec, root)
    if not executable.exists():
        raise HarnessInstallError(f"{what} finished but {executable} is not there")
    (root / STAMP).write_bytes(orjson.dumps(spec.specs))
    return executable


def _outside_system(path: Path) -> bool:
    real = os.path.realpath(path)
    return not any(real == p or real.startswith(p + "/") for p in map(os.path.realpath, SYSTEM_PATHS))


def runtime_mounts(install: Install, executable: Path) -> list[Path]:
    """What the sandbox must show for ``executable`` to run: its install directory
    (and where its links lead), and the runtime outside the system directories —
    ``node`` for an npm harness, the base interpreter of a PyPI harness's venv."""
    root = executable.parent.parent.parent if install.registry == "npm" else executable.parent.parent
    mounts = [root, Path(os.path.realpath(executable)).parent]
    if install.registry == "npm":
        node = shutil.which("node")
        if node is not None:
            mounts.append(Path(os.path.realpath(node)).parent.parent)
    else:
        cfg = root / "pyvenv.cfg"
        if cfg.is_file():
            for line in cfg.read_text().splitlines():
                key, _, value = line.partition("=")
                if key.strip() == "home":
                    mounts.append(Path(value.strip()).parent)  # .../bin -> the interpreter's prefix
    return [m for m in dict.fromkeys(mounts) if _outside_system(m)]


class Packaged:
    """A profile's :meth:`~HarnessProfile.mounts` for a harness installed by :func:`install`."""

    install: ClassVar[Install]

    def mounts(self, executable: Path) -> list[Path]:
        return runtime_mounts(self.install, executable)
