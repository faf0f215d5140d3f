"""Environments made on demand for a question (``kinkcheck ask``, ``kinkcheck lock --check``): which releases it is
asked of, its folder, the releases' virtualenvs, and their disk budget.

``$KINKCHECK_ASK_HOME``, else the user cache folder (``platformdirs``) ``…/kinkcheck/ask``, holds
``questions/<digest>/`` (a question's one-case catalog and its shards, written by :mod:`kinkcheck.answers.ask`) and
``envs/``: one virtualenv per release (``envs/<framework>-<version>/``, made by the probe sessions' helpers,
:mod:`kinkcheck.probe.environments`), the installer's cache (``envs/.cache``) and a copy of the running package
(``envs/src-<digest>/``). The virtualenvs and the cache together stay within a disk budget; uv links files from
its cache into the virtualenvs, so their disk is counted once per file (inode), and a virtualenv's files are only
freed once the cache no longer holds them: past the budget the cache goes first, then the least recently used
virtualenvs, never one a question is using.
"""

from __future__ import annotations

import contextlib
import hashlib
import math
import os
import shutil
import sys
import threading
from collections.abc import Sequence
from importlib import metadata
from pathlib import Path
from typing import Any

import kinkcheck
from kinkcheck.errors import UsageError
from kinkcheck.probe import environments as envs
from kinkcheck.probe.environments import _du
from kinkcheck.registry import REGISTRY

__all__ = ["DEFAULT_DISK_BUDGET_GB", "ENV_DISK", "ENV_HOME", "Log", "disk_budget", "disk_use", "environment",
           "environment_path", "home", "installed_release", "make_room", "releases_asked"]

#: The folder questions and their environments are kept in (default: the user cache folder's ``kinkcheck/ask``).
ENV_HOME = "KINKCHECK_ASK_HOME"
#: Disk the kept virtualenvs and the installer's cache may take, in GB (``--disk-budget``; ``$KINKCHECK_ASK_DISK_GB``):
#: a torch release from PyPI takes about 5.5 GB (its CUDA build), much of it shared between releases of one CUDA.
DEFAULT_DISK_BUDGET_GB = 20.0
ENV_DISK = "KINKCHECK_ASK_DISK_GB"
#: The installer's cache inside ``envs/``.
CACHE = ".cache"


def home() -> Path:
    """Where questions and their virtualenvs are kept."""
    env = os.environ.get(ENV_HOME)
    if env is not None:
        if not env.strip():
            raise UsageError(f"{ENV_HOME} is empty: name a folder, or unset it for the user cache folder")
        return Path(env)
    import platformdirs

    return Path(platformdirs.user_cache_dir("kinkcheck")) / "ask"


def installed_release(framework: str) -> str | None:
    """The release of ``framework`` installed beside kinkcheck (its public version, as the probe names its
    environment: ``2.13.0`` for ``2.13.0+cpu``), or None."""
    from packaging.version import InvalidVersion, Version

    try:
        found = metadata.version(REGISTRY[framework].distribution)
    except metadata.PackageNotFoundError:
        return None
    try:
        return Version(found).public
    except InvalidVersion:
        return found


class Log:
    """What the environment helpers report (they were written for a nox session): progress on stderr, through
    ``console`` (a rich console drawing a progress bar) where there is one."""

    def __init__(self, quiet: bool, console: Any = None) -> None:
        self.quiet = quiet
        self.console = console
        self._lock = threading.Lock()  # the next release's environment is made in a thread: whole lines only

    def log(self, message: str) -> None:
        if self.quiet:
            return
        with self._lock:
            if self.console is not None:
                self.console.print(f"  {message}", markup=False, highlight=False)
            else:
                sys.stderr.write(f"  {message}\n")
                sys.stderr.flush()

    warn = log


def _dependencies() -> list[str]:
    """kinkcheck's own requirements (no extras), installed beside a release so that its probe runs there."""
    from packaging.requirements import Requirement

    try:
        reqs = metadata.requires("kinkcheck") or []
    except metadata.PackageNotFoundError:
        raise UsageError("kinkcheck is not installed (pip install kinkcheck, or pip install -e . in a checkout): "
                         "its requirements are what a release's environment installs beside it") from None
    return [r for r in reqs if Requirement(r).marker is None]


def _source_copy(root: Path) -> Path:
    """This kinkcheck's package, copied once per content into ``root/src-<digest>/kinkcheck``: a release's
    environment imports it through ``PYTHONPATH`` (nothing of this interpreter's site-packages)."""
    package = Path(kinkcheck.__file__).parent
    files = sorted(p for p in package.rglob("*") if p.is_file() and "__pycache__" not in p.parts)
    h = hashlib.sha256()
    for p in files:
        h.update(p.relative_to(package).as_posix().encode() + b"\0" + p.read_bytes())
    dest = root / f"src-{h.hexdigest()[:16]}"
    if not (dest / "kinkcheck" / "__init__.py").exists():
        tmp = root / f".{dest.name}.{os.getpid()}"
        shutil.rmtree(tmp, ignore_errors=True)
        shutil.copytree(package, tmp / "kinkcheck", ignore=shutil.ignore_patterns("__pycache__"))
        with contextlib.suppress(OSError):  # another ask made it meanwhile
            tmp.rename(dest)
        shutil.rmtree(tmp, ignore_errors=True)
    for old in root.glob("src-*"):  # earlier kinkchecks' copies
        if old != dest:
            shutil.rmtree(old, ignore_errors=True)
    return dest


# --------------------------------------------------------------------------- the disk budget


def disk_budget(gb: float | None) -> float:
    """The disk budget of the kept virtualenvs in bytes: ``gb``, else ``$KINKCHECK_ASK_DISK_GB``, else the
    default. Raises UsageError for one that is not a positive number."""
    raw: Any = gb if gb is not None else os.environ.get(ENV_DISK, DEFAULT_DISK_BUDGET_GB)
    try:
        value = float(raw)
    except (TypeError, ValueError):
        value = math.nan
    if not (math.isfinite(value) and value > 0):
        where = "--disk-budget" if gb is not None else ENV_DISK
        raise UsageError(f"{where} must be a finite number of GB above 0, got {raw!r}")
    return value * 1e9


def disk_use(envs: Path) -> int:
    """Bytes on disk under ``envs`` (the virtualenvs, the installer's cache, the package copy), each file once
    however many links it has (:func:`kinkcheck.probe.environments._du`)."""
    return _du(envs, set()) if envs.is_dir() else 0


def _kept(envs: Path) -> list[Path]:
    return [p for p in envs.iterdir() if p.is_dir() and not p.name.startswith((".", "src-"))] if envs.is_dir() else []


def make_room(envs: Path, budget_bytes: float, keep: set[Path], log: Log) -> None:
    """Bring what ``envs`` holds within ``budget_bytes``: first the installer's cache (the virtualenvs' files it
    links are freed only without it), then the least recently used virtualenvs, never one in ``keep`` (those a
    question is using)."""
    total = disk_use(envs)
    if total <= budget_bytes:
        return
    cache = envs / CACHE
    if cache.is_dir():
        log.log(f"removing the installer cache: the kept environments take {total / 1e9:.1f} GB, past the disk "
                f"budget of {budget_bytes / 1e9:g} GB")
        shutil.rmtree(cache, ignore_errors=True)
        total = disk_use(envs)
    kept = _kept(envs)
    used = {p: (p / ".last-used").stat().st_mtime if (p / ".last-used").exists() else 0.0 for p in kept}
    for p in sorted(kept, key=lambda q: used[q]):
        if total <= budget_bytes:
            break
        if p in keep:
            continue
        log.log(f"removing {p.name}: the kept environments take {total / 1e9:.1f} GB, past the disk budget of "
                f"{budget_bytes / 1e9:g} GB")
        shutil.rmtree(p, ignore_errors=True)
        total = disk_use(envs)  # files linked from another virtualenv are not freed: count again


# --------------------------------------------------------------------------- a release's environment


def environment_path(root: Path, framework: str, version: str) -> Path:
    return root / "envs" / f"{framework}-{version}"


def environment(framework: str, version: str, root: Path, log: Log) -> tuple[str, dict[str, str]] | str:
    """The interpreter and environment variables that run kinkcheck with ``framework`` ``version``: this one for
    the installed release, else a kept virtualenv (made and installed on first use). A string: why there is none."""
    if version == installed_release(framework):
        return sys.executable, {}
    venv = environment_path(root, framework, version)
    reqs = envs.requirements(framework, version)
    if not reqs:
        return f"no build of {framework} {version} for this machine on a package registry"
    log.log(f"{framework} {version}: environment {venv}")
    reason = (envs._make_venv(log, venv, envs.python_for(framework, version))
              or envs._install(log, venv, [*reqs, *_dependencies()], root / "envs" / CACHE, root))
    if reason is not None:
        return reason
    (venv / ".last-used").touch()
    return str(envs.venv_python(venv)), {"PYTHONPATH": str(_source_copy(root / "envs"))}


def releases_asked(framework: str, release: Sequence[str] = (), releases: str | None = None,
                   every: bool = False) -> list[str]:
    """The releases a question is asked of, oldest first: ``release`` (each one of the matrix or the installed
    one), the matrix's releases in the specifier ``releases`` (``">=2.0"``), or ``every`` one of the matrix; by
    default the installed release. Raises UsageError for a release kinkcheck does not know or an empty choice."""
    from packaging.specifiers import InvalidSpecifier, SpecifierSet
    from packaging.version import InvalidVersion, Version

    matrix = list(REGISTRY[framework].versions)
    installed = installed_release(framework)
    known = matrix + ([installed] if installed and installed not in matrix else [])
    chosen: list[str] = []
    for r in release:
        if r not in known:
            raise UsageError(f"unknown release {r!r} of {framework}: kinkcheck asks the releases of its matrix "
                             f"({', '.join(matrix)}) and the installed one ({installed or 'none'})")
        chosen.append(r)
    if releases is not None:
        if not releases.strip():
            raise UsageError("--releases is empty: give a version specifier (e.g. '>=2.0'), or --all")
        try:
            spec = SpecifierSet(releases)
        except InvalidSpecifier:
            raise UsageError(f"--releases {releases!r} is not a version specifier (e.g. '>=2.0,<2.14')") from None
        inside = [v for v in known if Version(v) in spec]
        if not inside:
            raise UsageError(f"--releases {releases!r} holds none of {framework}'s releases ({', '.join(known)})")
        chosen += inside
    if every:
        chosen += matrix
    if not (release or releases is not None or every):
        if installed is None:
            raise UsageError(f"{framework} is not installed here: name the releases to ask (--release, --releases, "
                             "--all)")
        chosen = [installed]
    try:
        return sorted(dict.fromkeys(chosen), key=Version)
    except InvalidVersion as err:  # an installed development build
        raise UsageError(str(err)) from None
