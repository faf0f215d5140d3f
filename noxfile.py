"""kinkcheck's sessions: ``nox -l`` is the menu.

* ``nox -s report``  — the main job: probe every environment of the version matrix that has no fresh shard
  (each in its own virtualenv, one after another, removed once its shard is written), then render
  ``reports/conventions.{md,json}`` from all shards in ``references/observations/``.
* ``nox -t latest``  — probe only the newest release of each framework (then ``nox -s render``).
* ``nox -s tests``   — the test suite (pinned PyTorch and JAX, CPU); the version matrix stays out of it.
* ``nox -s bench``   — import time vs probe time vs a hand-written loop, printed side by side.

Posargs: ``nox -s report -- --remeasure`` re-probes environments whose shard is fresh; ``-- --keep`` keeps
each probe's virtualenv (and installer cache) instead of removing it after its shard is written.
"""

from __future__ import annotations

import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
from datetime import datetime, timezone
from pathlib import Path

import nox

nox.needs_version = ">=2024.3.2"
nox.options.default_venv_backend = "uv|virtualenv"
nox.options.reuse_venv = "yes"
nox.options.sessions = ["tests"]

ROOT = Path(__file__).parent
OBSERVATIONS = ROOT / "references" / "observations"
PYTHON = "3.11"

#: The default version matrix (checked 2026-11-29 with `pip index versions`): PyTorch 1.13.1 and the newest
#: patch of every minor line from 2.0; JAX 0.4.13, 0.4.20, 0.4.26, 0.4.30, 0.4.38 and the newest patch of
#: every minor line from 0.5. The last entry of each list is the newest release.
MATRIX: dict[str, list[str]] = {
    "torch": ["1.13.1", "2.0.1", "2.1.2", "2.2.2", "2.3.1", "2.4.1", "2.5.1", "2.6.0", "2.7.1", "2.8.0",
              "2.9.1", "2.10.0", "2.11.0", "2.12.1", "2.13.0", "2.14.1", "2.15.0"],
    "jax": ["0.4.13", "0.4.20", "0.4.26", "0.4.30", "0.4.38", "0.5.3", "0.6.2", "0.7.2", "0.8.3", "0.9.2",
            "0.10.2"],
}
LATEST = {fw: versions[-1] for fw, versions in MATRIX.items()}
#: Versions the tests pin their expected values to (torch 2.13.0 has a CPU wheel on the dev machines, and
#: it is the release the public cases P0-P2 were reported against).
TESTED = {"torch": "2.13.0", "jax": "0.10.2"}

PROBES = [
    nox.param(fw, v, id=f"{fw}-{v}", tags=["probe", fw] + (["latest"] if v == LATEST[fw] else []))
    for fw, versions in MATRIX.items()
    for v in versions
]


def _version_tuple(v: str) -> tuple[int, ...]:
    return tuple(int(p) for p in v.split(".") if p.isdigit())


def _requirements(framework: str, version: str) -> list[str]:
    """What to install for one environment; old releases were built against NumPy 1."""
    if framework == "torch":
        # setuptools: inductor imports it at compile time (torch <= 2.10); uv's virtualenvs have none. torch 2.1
        # imports pkg_resources, which recent setuptools no longer ships: an older setuptools for old torch.
        reqs = [f"torch=={version}", "setuptools" if _version_tuple(version) >= (2, 4) else "setuptools<70"]
        if _version_tuple(version) < (2, 3):
            reqs.append("numpy<2")
        return reqs
    reqs = [f"jax=={version}", f"jaxlib=={version}"]
    if _version_tuple(version) < (0, 4, 26):
        reqs += ["numpy<2", "scipy<1.13"]
    return reqs


def _install_env() -> dict[str, str]:
    """Honour pip's find-links (a local wheel folder) for uv as well, so a local CPU torch build is used."""
    env = {}
    links = os.environ.get("PIP_FIND_LINKS")
    if links and "UV_FIND_LINKS" not in os.environ:
        env["UV_FIND_LINKS"] = links
    return env


def _install_once(session: nox.Session, *args: str, env: dict[str, str] | None = None) -> None:
    """``session.install(*args)`` unless this virtualenv already got exactly that (same pyproject.toml).

    Keeps a re-run of ``nox -s report`` with nothing changed from installing anything.
    """
    import hashlib

    venv = getattr(session.virtualenv, "location", None)
    stamp_text = hashlib.sha256(((ROOT / "pyproject.toml").read_bytes() + repr(args).encode())).hexdigest()
    stamp = Path(venv) / ".kinkcheck-installed" if venv else None
    if stamp is not None and stamp.is_file() and stamp_text in stamp.read_text().split():
        session.log(f"already installed: {' '.join(args)}")
        return
    session.install(*args, env=env or {})
    if stamp is not None:
        with stamp.open("a") as fh:
            fh.write(stamp_text + "\n")


def _install_framework(session: nox.Session, reqs: list[str], cache: Path) -> str | None:
    """Install ``reqs`` into the session's virtualenv; None on success, else the reason (one line)."""
    venv = Path(session.virtualenv.location)
    python = venv / "bin" / "python"
    env = {**os.environ, **_install_env(), "UV_CACHE_DIR": str(cache), "PIP_CACHE_DIR": str(cache)}
    uv = None
    if session.venv_backend == "uv":
        from nox.virtualenv import find_uv

        found, uv_path, _ = find_uv()
        uv = uv_path if found else shutil.which("uv")
    cmd = [uv, "pip", "install", "--python", str(python), *reqs] if uv else [str(python), "-m", "pip", "install", *reqs]
    session.log(" ".join(cmd))
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if proc.returncode == 0:
        return None
    lines = [ln.strip() for ln in (proc.stderr + "\n" + proc.stdout).splitlines() if ln.strip()]
    first_error = next((ln for ln in lines if ln.lower().startswith(("error", "×", "because"))), None)
    reason = first_error or (lines[-1] if lines else f"exit status {proc.returncode}")
    return f"install failed: {' '.join(reqs)}: {reason[:200]}"


def _catalog_hash() -> str:
    sys.path.insert(0, str(ROOT / "src"))
    try:
        from kinkcheck.catalog import load_catalog
    finally:
        sys.path.pop(0)
    return load_catalog(ROOT / "references" / "catalog.toml").hash


def _fresh(shard: Path) -> bool:
    """A shard is fresh when it parses and was measured against the current catalog (kinkcheck.shards.is_fresh)."""
    sys.path.insert(0, str(ROOT / "src"))
    try:
        from kinkcheck.shards import is_fresh
    finally:
        sys.path.pop(0)
    return is_fresh(shard, _catalog_hash())


def _write_not_measured(shard: Path, framework: str, version: str, reason: str) -> None:
    """A shard with no observations that says why the environment was not measured (shown in the report)."""
    record = {
        "schema": "kinkcheck/shard/v1",
        "environment": {
            "id": f"{framework}-{version}-cpu", "framework": framework, "framework_version": version,
            "device": "cpu", "python": platform.python_version(), "platform": platform.platform(),
            "measured_at": datetime.now(timezone.utc).replace(microsecond=0).isoformat(),
            "kinkcheck_version": "", "catalog_hash": _catalog_hash(), "not_measured": reason,
        },
        "observations": [],
        "networks": [],
    }
    sys.path.insert(0, str(ROOT / "src"))
    try:
        from kinkcheck.shards import write_json_atomic
    finally:
        sys.path.pop(0)
    write_json_atomic(shard, record)

DISK_LOG = ROOT / ".nox" / "matrix-disk.jsonl"


def _du(path: Path, seen: set[tuple[int, int]]) -> int:
    """Bytes of the files under ``path``, each inode once (uv hardlinks its cache into the virtualenv)."""
    total = 0
    for root, _, files in os.walk(path):
        for f in files:
            try:
                st = os.lstat(os.path.join(root, f))
            except OSError:
                continue
            if (st.st_dev, st.st_ino) not in seen:
                seen.add((st.st_dev, st.st_ino))
                total += st.st_blocks * 512
    return total


def _record_disk(session: nox.Session, framework: str, version: str, cache: Path) -> None:
    """Log this environment's disk use (virtualenv + installer cache), the matrix's peak while one lives."""
    seen: set[tuple[int, int]] = set()
    venv, cached = _du(Path(session.virtualenv.location), seen), _du(cache, seen)
    session.log(f"disk: virtualenv {venv / 2**30:.2f} GiB + installer cache {cached / 2**30:.2f} GiB "
                "(hardlinked files counted once)")
    DISK_LOG.parent.mkdir(exist_ok=True)
    with DISK_LOG.open("a") as fh:
        fh.write(json.dumps({"environment": f"{framework}-{version}", "venv_bytes": venv, "cache_bytes": cached}) + "\n")


@nox.session(python=PYTHON)
@nox.parametrize(("framework", "version"), PROBES)
def probe(session: nox.Session, framework: str, version: str) -> None:
    """Probe one framework release in its own virtualenv into references/observations/ (skipped when fresh)."""
    shard = OBSERVATIONS / f"{framework}-{version}-cpu.json"
    if _fresh(shard) and "--remeasure" not in session.posargs:
        session.log(f"{shard.relative_to(ROOT)} is fresh (catalog unchanged): nothing to install or probe")
        return
    keep = "--keep" in session.posargs
    cache = Path(session.virtualenv.location).parent / f".cache-{framework}-{version}"
    try:
        reason = _install_framework(session, _requirements(framework, version), cache)
        if reason is None:
            _install_once(session, "-e", ".", env=_install_env())
            try:
                session.run("kinkcheck", "probe", "--framework", framework, "--out", str(shard))
            except nox.command.CommandFailed as err:
                if "code -" in (err.reason or ""):  # killed by a signal (Ctrl-C, kill): keep the shard there was
                    session.error(f"{framework} {version}: probe interrupted ({err.reason}); shard left as it was")
                reason = f"probe failed: {err.reason}"
        if reason is not None:
            session.warn(f"{framework} {version}: not measured: {reason}")
            _write_not_measured(shard, framework, version, reason)
    finally:
        _record_disk(session, framework, version, cache)
        shutil.rmtree(cache, ignore_errors=True)
        if not keep:
            session.log(f"removing {session.virtualenv.location} (pass -- --keep to keep it)")
            shutil.rmtree(session.virtualenv.location, ignore_errors=True)


def _render(session: nox.Session) -> None:
    _install_once(session, "-e", ".")
    session.run("kinkcheck", "report", "--shards", str(OBSERVATIONS), "--out", str(ROOT / "reports"))


@nox.session(python=PYTHON)
def render(session: nox.Session) -> None:
    """Render reports/conventions.{md,json} from the shards already in references/observations/."""
    _render(session)


@nox.session(python=PYTHON, requires=[f"probe({fw}-{v})" for fw, versions in MATRIX.items() for v in versions])
def report(session: nox.Session) -> None:
    """The main job: probe the version matrix where shards are missing or stale, then render the report."""
    _render(session)


@nox.session(python=PYTHON)
def tests(session: nox.Session) -> None:
    """Run the test suite with the pinned PyTorch and JAX (CPU)."""
    session.install(*_requirements("torch", TESTED["torch"]), *_requirements("jax", TESTED["jax"]),
                    env=_install_env())
    session.install("-e", ".[test]", env=_install_env())
    session.run("pytest", *session.posargs)


@nox.session(python=PYTHON)
def bench(session: nox.Session) -> None:
    """Benchmark: bare framework import, probe of the whole catalog (both dtypes), hand-written loop."""
    session.install(*_requirements("torch", TESTED["torch"]), *_requirements("jax", TESTED["jax"]),
                    env=_install_env())
    session.install("-e", ".", env=_install_env())
    session.run("python", "-m", "kinkcheck.bench", *session.posargs)


@nox.session(python=PYTHON)
def bench_report(session: nox.Session) -> None:
    """Benchmark: a warm `nox -s report` (every shard fresh) beside `kinkcheck report` alone."""
    import time

    _install_once(session, "-e", ".")
    out = Path(tempfile.mkdtemp(prefix="kinkcheck-bench-"))
    t0 = time.perf_counter()
    session.run("kinkcheck", "report", "--shards", str(OBSERVATIONS), "--out", str(out), silent=True)
    render_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-m", "nox", "-f", str(ROOT / "noxfile.py"), "-s", "report"], check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    warm_s = time.perf_counter() - t0
    shutil.rmtree(out, ignore_errors=True)
    session.log(f"warm nox -s report: {warm_s:.2f} s; kinkcheck report alone: {render_s:.2f} s "
                f"(target: warm report <= 5 s)")
