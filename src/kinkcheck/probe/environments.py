"""Environments: one virtualenv per framework release, its interpreter and installs, and the record of a
release that could not be measured.

``nox -s "probe(<framework>-<version>)"`` calls :func:`probe_release`: plan what the release's shard lacks
(:mod:`kinkcheck.probe.plan`; a fresh shard installs nothing), make the virtualenv with the Python the release
has wheels for, install the release and kinkcheck, run ``kinkcheck probe`` there (or the lanes of a device),
and record a failed install or probe in the shard without losing a measurement. The other sessions install
with :func:`install_once` and :func:`requirements`.

Imported into nox's own Python (the noxfile's), so this module reads only the standard library at import;
nox itself, and kinkcheck's catalog and shard modules, are imported where they are used.
"""

from __future__ import annotations

import contextlib
import glob
import hashlib
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from kinkcheck import __version__, catalog, platforms, vocabulary
from kinkcheck import platforms as plat
from kinkcheck.platforms.isa import IsaError, capped_tag, check_cap
from kinkcheck.probe.plan import drop_removed, missing_work, record_failed_attempt
from kinkcheck.probe.run import runner
from kinkcheck.registry import REGISTRY
from kinkcheck.shards import ShardBusy, _read_loose, shard_lock
from kinkcheck.vocabulary import DTYPES, FRAMEWORK_MODES

__all__ = ["DEVICE_DEADLINE_ENV", "FALLBACK_PYTHON", "Places", "install_env", "install_once", "probe_release",
           "requirements", "tested_requirements"]

#: Python of a probe whose release has no wheels for the running interpreter (every release of the matrix
#: has wheels for it).
FALLBACK_PYTHON = "3.11"
#: Seconds a probe session on an accelerator (``-- --device cuda``) may take in all (default 12600: the CI
#: workflow's GPU jobs have 240 minutes): ``python -m kinkcheck.lanes --deadline``.
DEVICE_DEADLINE_ENV = "KINKCHECK_DEVICE_DEADLINE"


@dataclass(frozen=True)
class Places:
    """Where a checkout keeps what the probe sessions read and write."""

    #: The checkout (its ``pyproject.toml`` is installed into each virtualenv).
    root: Path
    #: The shards, one per environment.
    observations: Path
    #: The catalog (its ``programs/`` and ``staged/`` beside it).
    catalog: Path
    #: Each probe's virtualenv (``probe-<framework>-<version>``), installer cache and fresh-shard markers.
    venvs: Path

    @classmethod
    def of(cls, root: Path) -> Places:
        """A checkout's places: ``references/observations``, ``references/catalog.toml``, ``.nox``."""
        return cls(root, root / "references" / "observations", root / "references" / "catalog.toml", root / ".nox")


# --- Installs -------------------------------------------------------------------------------------------------


def requirements(framework: str, version: str, device: str = "cpu") -> list[str]:
    """What to install for one environment (``registry.Framework.requirements_for``; [] when the release has no
    build for ``device``)."""
    return REGISTRY[framework].requirements_for(version, device) or []


def tested_requirements() -> list[str]:
    """Every framework's tested release (``registry.Framework.tested``, those not tested alone), for the test,
    bench and fuzz sessions."""
    return [r for fw in REGISTRY.values() if fw.tested and not fw.test_alone
            for r in requirements(fw.name, fw.tested)]


def install_env() -> dict[str, str]:
    """Honour pip's find-links (a local wheel folder) for uv as well, so a local CPU torch build is used."""
    env = {}
    links = os.environ.get("PIP_FIND_LINKS")
    if links and "UV_FIND_LINKS" not in os.environ:
        env["UV_FIND_LINKS"] = links
    return env


def install_once(session: Any, root: Path, *args: str, env: dict[str, str] | None = None) -> None:
    """``session.install(*args)`` unless this virtualenv already got exactly that (same ``root/pyproject.toml``).

    Keeps a re-run of ``nox -s report`` with nothing changed from installing anything.
    """
    venv = getattr(session.virtualenv, "location", None)
    stamp = Path(venv) / ".kinkcheck-installed" if venv else None
    if stamp is not None and _stamped(stamp, root, args):
        session.log(f"already installed: {' '.join(args)}")
        return
    session.install(*args, env=env or {})
    if stamp is not None:
        _stamp(stamp, root, args)


def _stamp_text(root: Path, args: Sequence[str]) -> str:
    """What an install is remembered by: ``args`` and the checkout's ``pyproject.toml`` (none where ``root`` is no
    checkout: ``kinkcheck ask``'s folder, whose environments install kinkcheck's requirements by name)."""
    project = root / "pyproject.toml"
    return hashlib.sha256((project.read_bytes() if project.is_file() else b"") + repr(tuple(args)).encode()).hexdigest()


def _stamped(stamp: Path, root: Path, args: Sequence[str]) -> bool:
    return stamp.is_file() and _stamp_text(root, args) in stamp.read_text().split()


def _stamp(stamp: Path, root: Path, args: Sequence[str]) -> None:
    with stamp.open("a") as fh:
        fh.write(_stamp_text(root, args) + "\n")


# --- What to probe (no virtualenv, no framework: the catalog and the shards, read as JSON and TOML) ----------


def _catalog(places: Places) -> Any:
    """The catalog followed by its staged cases (references/staged/): a probe measures both, the report shows
    the catalog's; a staged case measured here is fresh once it moves into the catalog unchanged."""
    return catalog.with_staged(catalog.load_catalog(places.catalog))


def _read(shard: Path) -> dict[str, Any] | None:
    """The shard at ``shard`` as JSON, or None when it is missing or unreadable (then it is probed in full)."""
    return _read_loose(shard)


def _unreadable(shard: Path) -> str | None:
    """Why the file at ``shard`` is not a readable shard (one line), or None when it is one or is missing."""
    if not shard.exists() or _read(shard) is not None:
        return None
    try:
        json.loads(shard.read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError) as err:
        return " ".join(f"{type(err).__name__}: {err}".split())[:200]
    return "not a kinkcheck shard"


def _plan(shard: Path, framework: str, catalog: Any) -> Any:
    """``kinkcheck.probe.plan.Work``: what ``shard`` lacks for the full matrix (every mode of ``framework``, 4
    dtypes)."""
    return missing_work(_read(shard), catalog, framework)


#: The sources that decide whether a shard is fresh (beside the shard and the catalog), with every framework's
#: record (``frameworks/*/record.py``: its modes and dtypes): a change to any of them misses every remembered verdict.
FRESHNESS_SOURCES = ("probe/plan.py", "shards/__init__.py", "catalog.py", "language/expr.py", "language/points.py",
                     "vocabulary.py", "dtypes.py", "registry.py")


def fresh_marker(places: Places, shard: Path, framework: str) -> Path | None:
    """Where the verdict "this shard is fresh" is remembered: a file named by the SHA-256 of the shard's bytes,
    the catalog's bytes, the framework's modes and the dtypes, and :data:`FRESHNESS_SOURCES`; None when a file
    cannot be read. Reading and checking 76 shards in 76 sessions costs seconds; hashing them milliseconds, so
    a warm ``nox -s report`` spends its time rendering. Only a fresh verdict is remembered: any change to the
    shard or the catalog misses the marker and is checked in full."""
    src = Path(catalog.__file__).parent
    try:
        code = b"".join(p.read_bytes() for p in [*(src / f for f in FRESHNESS_SOURCES),
                                                 *sorted((src / "frameworks").glob("*/record.py"))])
        staged = catalog.staged_path(places.catalog)
        programs = b"".join(p.read_bytes() for folder in (places.catalog.parent, staged.parent)
                            for p in [*sorted((folder / "programs").glob("*.toml")),
                                      *([staged] if folder == staged.parent and staged.is_file() else [])])
        digest = hashlib.sha256(
            shard.read_bytes() + b"\0" + places.catalog.read_bytes() + programs + b"\0" + code + b"\0"
            + json.dumps([framework, list(vocabulary.FRAMEWORK_MODES[framework]), list(vocabulary.DTYPES)]).encode()
        ).hexdigest()
    except OSError:
        return None
    return places.venvs / ".fresh-shards" / digest


def probe_args(work: Any, catalog: Any, framework: str, remeasure: bool) -> list[str]:
    """``kinkcheck probe`` options for ``work`` (a ``kinkcheck.probe.plan.Work``).

    ``--replace`` for a full re-measure; else ``--case`` for each case with a missing cell (none when that is
    every case), ``--mode`` and ``--dtype`` for the modes and dtypes missing (none when that is all of them):
    cases × modes × dtypes, a superset of the missing cells, merged into the shard.
    """
    if remeasure:
        return ["--replace"]
    every_case = {c.id for c in catalog if c.programs_for(framework)}
    args = [] if set(work.cases) >= every_case else [a for c in work.cases for a in ("--case", c)]
    if set(work.modes) != set(FRAMEWORK_MODES[framework]):
        args += [a for m in work.modes for a in ("--mode", m)]
    if set(work.dtypes) != set(DTYPES):
        args += [a for d in work.dtypes for a in ("--dtype", d)]
    return args


# --- Interpreters and virtualenvs ------------------------------------------------------------------------------


def python_for(framework: str, version: str, running: tuple[int, int] | None = None) -> str:
    """The Python to probe ``framework`` ``version`` with: the running one (``sys.executable``) where the release
    has wheels for it, else the oldest it takes (``min_python``, found by :func:`find_python`) or
    :data:`FALLBACK_PYTHON` (a release too old for the running Python)."""
    record = REGISTRY.get(framework)
    cap = dict(record.max_python).get(version) if record else None
    floor = dict(record.min_python).get(version) if record else None
    running = running or (sys.version_info[0], sys.version_info[1])
    if floor is not None and running < floor:
        return find_python(f"{floor[0]}.{floor[1]}")
    return sys.executable if cap is None or running <= cap else FALLBACK_PYTHON


def find_python(version: str) -> str:
    """An interpreter for Python ``version`` ("3.12"): ``python3.12`` on PATH when it runs (a pyenv shim may
    not), else a pyenv installation of it; else ``version`` itself (uv finds or downloads one)."""
    for cand in [shutil.which(f"python{version}"),
                 *sorted(glob.glob(str(Path.home() / ".pyenv" / "versions" / f"{version}.*" / "bin" / "python3")))]:
        if cand and subprocess.run([cand, "-c", "import sys"], capture_output=True, check=False).returncode == 0:
            return cand
    return version


def _uv() -> str | None:
    """The uv executable (nox's own, else on PATH), or None: then venv and pip."""
    try:
        from nox.virtualenv import find_uv

        found, path, _ = find_uv()
        if found:
            return path
    except (ImportError, ValueError, TypeError):
        pass
    return shutil.which("uv")


def _first_error(proc: subprocess.CompletedProcess[str]) -> str:
    lines = [ln.strip() for ln in (proc.stderr + "\n" + proc.stdout).splitlines() if ln.strip()]
    first = next((ln for ln in lines if ln.lower().startswith(("error", "×", "because"))), None)
    return (first or (lines[-1] if lines else f"exit status {proc.returncode}"))[:200]


def venv_python(location: Path) -> Path:
    """The interpreter of the virtualenv at ``location`` (``Scripts\\python.exe`` on a Windows runner)."""
    return location / "Scripts" / "python.exe" if os.name == "nt" else location / "bin" / "python"


def _make_venv(session: Any, location: Path, python: str) -> str | None:
    """Create the probe's virtualenv at ``location`` (kept as it is when it exists); None, else the reason."""
    if venv_python(location).exists():
        return None
    uv = _uv()
    if uv:
        cmd = [uv, "venv", "--quiet", "--python", python, str(location)]
    else:
        interp = python if os.path.isabs(python) else shutil.which(f"python{python}")
        if interp is None:
            return (f"no Python {python} here (this release has no wheels for Python "
                    f"{sys.version_info[0]}.{sys.version_info[1]}): install python{python} or uv")
        cmd = [interp, "-m", "venv", str(location)]
    session.log(" ".join(cmd))
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    return None if proc.returncode == 0 else f"virtualenv failed: {_first_error(proc)}"


def _install(session: Any, location: Path, args: list[str], cache: Path, root: Path) -> str | None:
    """Install ``args`` into the virtualenv at ``location``; None on success, else the reason (one line)."""
    stamp = location / ".kinkcheck-installed"
    if _stamped(stamp, root, args):
        session.log(f"already installed: {' '.join(args)}")
        return None
    python = venv_python(location)
    env = {**os.environ, **install_env(), "UV_CACHE_DIR": str(cache), "PIP_CACHE_DIR": str(cache)}
    uv = _uv()
    cmd = [uv, "pip", "install", "--python", str(python), *args] if uv else [str(python), "-m", "pip", "install", *args]
    session.log(" ".join(cmd))
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=root, check=False)
    if proc.returncode != 0:
        return f"install failed: {' '.join(args)}: {_first_error(proc)}"
    _stamp(stamp, root, args)
    return None


def interrupted(reason: str) -> bool:
    """Whether a failed probe command was stopped from outside rather than failing: killed by a signal
    ("Returned code -9"), or ended by kinkcheck's own handler of SIGINT, SIGHUP or SIGTERM (exit 130, 129, 143:
    128 + the signal, as the README says)."""
    m = re.search(r"code (-?\d+)", reason)
    return m is not None and (int(m.group(1)) < 0 or int(m.group(1)) in (129, 130, 143))


def isa_of(posargs: Sequence[str]) -> str | None:
    """The instruction-set level a probe session caps the CPU's kernels at (``-- --isa x86-64-v2``), else None."""
    return _option(posargs, "--isa")


def _option(posargs: Sequence[str], name: str) -> str | None:
    args = list(posargs)
    for i, a in enumerate(args):
        if a == name and i + 1 < len(args):
            return args[i + 1]
        if a.startswith(f"{name}="):
            return a.split("=", 1)[1]
    return None


def device_of(posargs: Sequence[str]) -> str:
    """The device of a probe session: ``-- --device cuda`` or ``metal`` (the CI workflow's GPU runners), else cpu."""
    return _option(posargs, "--device") or "cpu"


def not_measured_environment(places: Places, framework: str, version: str, reason: str, python: str,
                             device: str = "cpu", isa: str | None = None) -> dict[str, Any]:
    """The environment of a record that says why ``framework`` ``version`` was not measured on ``device`` here
    (capped at the x86-64 level ``isa``, :mod:`kinkcheck.platforms.isa`, where the session asked for one)."""
    tag = capped_tag(platforms.host_tag(), isa)
    return {
        "id": platforms.environment_id(framework, version, device, tag), "framework": framework,
        "framework_version": version, "device": device,
        "python": python, "platform": platform.platform(), "platform_tag": tag,
        "runner": {**runner(None, device), **({"isa_cap": isa} if isa else {})},  # where it ran; nothing imported
        "measured_at": datetime.now(UTC).replace(microsecond=0).isoformat(),
        "kinkcheck_version": __version__,
        "catalog_hash": _catalog(places).hash, "not_measured": reason,
    }


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


def _record_disk(session: Any, places: Places, framework: str, version: str, venv: Path, cache: Path) -> None:
    """Log this environment's disk use (virtualenv + installer cache), the matrix's peak while one lives."""
    seen: set[tuple[int, int]] = set()
    venv_bytes, cached = _du(venv, seen), _du(cache, seen)
    session.log(f"disk: virtualenv {venv_bytes / 2**30:.2f} GiB + installer cache {cached / 2**30:.2f} GiB "
                "(hardlinked files counted once)")
    places.venvs.mkdir(exist_ok=True)
    with (places.venvs / "matrix-disk.jsonl").open("a") as fh:
        fh.write(json.dumps({"environment": f"{framework}-{version}", "venv_bytes": venv_bytes,
                             "cache_bytes": cached}) + "\n")


# --- One release: plan, install, probe, record ------------------------------------------------------------------


def probe_release(session: Any, framework: str, version: str, places: Places) -> None:
    """``nox -s "probe(<framework>-<version>)"``: probe one release into its shard, only what it lacks.

    ``session`` is the nox session (``posargs``: ``--device D``, ``--remeasure`` for a full re-measure, ``--keep``
    to keep the virtualenv). A fresh shard installs nothing; a failed install or probe is recorded in the shard
    (:func:`kinkcheck.probe.plan.record_failed_attempt`) and never replaces a measurement; a probe stopped from
    outside leaves its journal for the next run.
    """
    _check_posargs(session)
    shard = _shard_path(session, framework, version, places)
    remeasure = "--remeasure" in session.posargs
    name = shard.relative_to(places.root) if shard.is_relative_to(places.root) else shard
    marker = fresh_marker(places, shard, framework)
    if marker is not None and marker.exists() and not remeasure:
        session.log(f"{name} is fresh (found so before for these exact bytes and this catalog): nothing to install "
                    "or probe")
        return
    catalog = _catalog(places)
    work = _plan(shard, framework, catalog)
    broken = _unreadable(shard)
    if broken is not None:  # before any install: the probe's merge would refuse to write over it anyway
        session.warn(f"{name} is unreadable ({broken}): fix or remove it; not probed")
        return
    if work.fresh and not remeasure:
        _remember_fresh(session, places, shard, framework, catalog, name)
        return
    args = probe_args(work, catalog, framework, remeasure)
    session.log(f"{name}: " + ("full re-measure (--remeasure)" if remeasure else work.summary()))
    _measure(session, framework, version, places, shard, args)


#: What a probe session takes after ``--``: ``--device D`` (or ``--device=D``), ``--isa LEVEL`` (or ``--isa=LEVEL``:
#: the CPU's kernels capped at an x86-64 level, :mod:`kinkcheck.platforms.isa`), ``--remeasure``, ``--keep``.
POSARGS = ("--device", "--isa", "--remeasure", "--keep")


def _check_posargs(session: Any) -> None:
    """End the session on an argument after ``--`` that a probe session does not take (a typo would otherwise
    probe, or not, as if it were not there)."""
    args = list(session.posargs)
    i = 0
    while i < len(args):
        a = args[i]
        if a in ("--device", "--isa") and i + 1 < len(args) and not args[i + 1].startswith("-"):
            i += 2
            continue
        if a in ("--remeasure", "--keep") or any(a.startswith(f"{o}=") and len(a) > len(o) + 1
                                                 for o in ("--device", "--isa")):
            i += 1
            continue
        what = ("--device needs a device (cpu, cuda, metal)" if a.startswith("--device") else
                "--isa needs a level (x86-64-v2, x86-64-v3, x86-64-v4)" if a.startswith("--isa") else
                f"unknown argument {a!r}")
        session.error(f"{what}; a probe session takes {', '.join(POSARGS)} after --")


def _shard_path(session: Any, framework: str, version: str, places: Places) -> Path:
    """The shard this session writes; an unknown device, one the framework is not measured on, or one this
    machine's platform lacks ends the session before anything is installed or written."""
    device = device_of(session.posargs)
    if device not in plat.DEVICES:
        session.error(f"unknown device {device!r} (known: {', '.join(plat.DEVICES)})")
    devices = REGISTRY[framework].devices
    if device not in devices:
        session.error(f"kinkcheck measures {framework} on {', '.join(map(plat.device_title, devices))} only, not on "
                      f"{plat.device_title(device)}")
    where = plat.DEVICES[device].platforms
    if where is not None and plat.host_tag() not in where:  # no shard: it would name a place that cannot be
        session.error(f"{plat.device_title(device)} exists on {', '.join(plat.title(t) for t in where)} only; "
                      f"this machine is {plat.title(plat.host_tag())}")
    level = isa_of(session.posargs)
    if level is not None:
        try:
            check_cap(level)
        except IsaError as err:
            session.error(str(err))
    tag = capped_tag(plat.host_tag(), level)
    return places.observations / f"{plat.environment_id(framework, version, device, tag)}.json"


def _remember_fresh(session: Any, places: Places, shard: Path, framework: str, catalog: Any, name: Any) -> None:
    """A fresh shard: drop the cases the catalog no longer holds, remember the verdict for these bytes."""
    dropped = drop_removed(shard, catalog)
    marker = fresh_marker(places, shard, framework)  # after drop_removed: the bytes it leaves are the fresh ones
    if marker is not None:
        with contextlib.suppress(OSError):  # a read-only checkout only costs the check next time
            marker.parent.mkdir(parents=True, exist_ok=True)
            marker.touch()
    session.log(f"{name} is fresh (every case × mode × dtype measured as the catalog defines it): nothing to "
                "install or probe" + (f"; dropped the cases no longer in the catalog: {', '.join(dropped)}"
                                      if dropped else ""))


def _measure(session: Any, framework: str, version: str, places: Places, shard: Path, args: list[str]) -> None:
    """Make the release's virtualenv, install it and kinkcheck, probe into ``shard``; record a failure there."""
    device = device_of(session.posargs)
    python = python_for(framework, version)
    venv = places.venvs / f"probe-{framework}-{version}"
    cache = places.venvs / f".cache-{framework}-{version}"
    # One session per virtualenv: a second `nox -s "probe(torch-2.1.2)"` (another device, another terminal) would
    # recreate and then remove the virtualenv the first one's probe is running from.
    in_use = contextlib.ExitStack()
    try:
        in_use.enter_context(shard_lock(places.venvs / f"{venv.name}.json"))
    except ShardBusy:
        session.error(f"another nox session is probing {framework} {version} from {venv}; wait for it (its "
                      "journal keeps what it measured)")
    try:
        reqs = REGISTRY[framework].requirements_for(version, device)
        reason = ((f"no {device} build of {framework} {version} on a package registry" if reqs is None else None)
                  or _make_venv(session, venv, python)
                  or _install(session, venv, reqs or [], cache, places.root)
                  or _install(session, venv, ["-e", str(places.root)], cache, places.root)
                  or _run_probe(session, framework, version, places, shard, venv, args))
        if reason is not None:
            session.warn(f"{framework} {version}: not measured: {reason}")
            env = not_measured_environment(places, framework, version, reason, python if python != sys.executable
                                           else platform.python_version(), device, isa_of(session.posargs))
            session.log(record_failed_attempt(shard, env))
    finally:
        if venv.exists():
            _record_disk(session, places, framework, version, venv, cache)
        shutil.rmtree(cache, ignore_errors=True)
        if "--keep" not in session.posargs and venv.exists():
            session.log(f"removing {venv} (pass -- --keep to keep it)")
            shutil.rmtree(venv, ignore_errors=True)
        in_use.close()


def _run_probe(session: Any, framework: str, version: str, places: Places, shard: Path, venv: Path,
               args: list[str]) -> str | None:
    """Run the probe in the virtualenv: ``kinkcheck probe`` (a GPU runner: the lanes a lent GPU machine runs).
    None when it succeeded, else why not (one line); a probe stopped from outside ends the session."""
    from nox.command import CommandFailed

    device = device_of(session.posargs)
    python = str(venv_python(venv))
    try:
        if device != "cpu" and "--remeasure" not in session.posargs:
            session.run(python, "-m", "kinkcheck.lanes", "--device", device, "--framework", framework, "--catalog",
                        str(places.catalog), "--staged", "--drop-removed", "--out-dir", str(shard.parent),
                        "--deadline", os.environ.get(DEVICE_DEADLINE_ENV, "12600"), external=True)
        else:
            level = isa_of(session.posargs)
            session.run(python, "-m", "kinkcheck", "probe", "--framework", framework, "--catalog", str(places.catalog),
                        "--staged", "--device", device, "--out", str(shard), "--drop-removed",
                        *(["--isa", level] if level else []), *args, external=True)
    except CommandFailed as err:
        if interrupted(err.reason or ""):  # killed by a signal (Ctrl-C, kill): the journal resumes it
            session.error(f"{framework} {version}: probe interrupted ({err.reason}); shard left as it was, the next "
                          "run resumes from its journal")
        return f"probe failed: {err.reason}"
    return None


def bench_warm_report(session: Any, places: Places) -> None:
    """``nox -s bench_report``: a warm ``nox -s report`` beside ``kinkcheck report --force`` alone, best of 3 each,
    with the targets (warm <= 5 s and <= 1.2 x rendering alone; the render itself 5 s, printed as it is)."""
    import tempfile  # slow to import

    out = Path(tempfile.mkdtemp(prefix="kinkcheck-bench-"))
    kinkcheck = Path(session.bin) / "kinkcheck"
    nox_report = [sys.executable, "-m", "nox", "-f", str(places.root / "noxfile.py"), "-s", "report"]
    quiet = {"check": True, "stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL}
    subprocess.run(nox_report, **quiet)  # the report venv exists, markers set
    alone, warm = [], []
    try:
        for _ in range(3):
            t0 = time.perf_counter()
            subprocess.run([str(kinkcheck), "report", "--shards", str(places.observations), "--out", str(out),
                            "--force"], **quiet)
            alone.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            subprocess.run(nox_report, **quiet)
            warm.append(time.perf_counter() - t0)
    finally:
        shutil.rmtree(out, ignore_errors=True)
    ratio = min(warm) / min(alone)
    session.log(f"warm nox -s report (reports/ current): {min(warm):.2f} s (best of 3; target <= 5 s: "
                f"{'ok' if min(warm) <= 5 else 'MISSED'}); a full render, kinkcheck report --force alone: "
                f"{min(alone):.2f} s (target <= 5 s: {'ok' if min(alone) <= 5 else 'MISSED'}); ratio {ratio:.2f} "
                f"(target <= 1.2: {'ok' if ratio <= 1.2 else 'MISSED'})")


def write_ci_workflow(session: Any, places: Places) -> None:
    """``nox -s ci_workflow``: list the probe sessions (``nox -l --json -t probe``) and write
    ``.github/workflows/matrix.yml`` from them (``python -m kinkcheck.dev.ci``)."""
    import tempfile  # slow to import

    listing = subprocess.run([sys.executable, "-m", "nox", "-f", str(places.root / "noxfile.py"), "-l", "--json", "-t",
                              "probe"], check=True, capture_output=True, text=True).stdout
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        f.write(listing)
    try:
        session.run("python", "-m", "kinkcheck.dev.ci", "--sessions", f.name, "--out",
                    str(places.root / ".github" / "workflows" / "matrix.yml"))
    finally:
        os.unlink(f.name)
