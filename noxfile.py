"""kinkcheck's sessions (main sessions first, then one probe session per framework release).

  nox -s report    the main job: probe only what each release's shard lacks, then write reports/conventions.*
                   (the staged cases of references/staged/ are probed too, and reported once they move)
  nox -s render    write the reports from the shards in references/observations/; probes nothing
  nox -s tests     the test suite against each framework's tested release (CPU)
  nox -s promote   move the staged cases into the catalog once every shard holds them (-- --check: which lack)
  nox -s releases  release lines published since the matrix's newest (-- --write: add them to matrix.toml)
  nox -s ci_workflow  write .github/workflows/matrix.yml (one GitHub Actions job per probe session and runner)
  nox -s bench     import time vs whole-catalog probe vs a hand-written loop, side by side
  nox -s fuzz      10,000 generated expressions through the parser and the frameworks, and through the oracle
  nox -t latest    probe only the newest release of each framework (then nox -s render)

  nox -s report -- --remeasure   re-measure every release in full (kinkcheck probe --replace)
  nox -s report -- --keep        keep each probe's virtualenv (.nox/probe-<framework>-<version>)

Sessions run on the Python that runs nox; a release with no wheels for it is probed with Python 3.11 where
one is available, else recorded as not measured with the reason. A failed install or probe never replaces a
measured shard.
"""

from __future__ import annotations

import contextlib
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import nox

nox.needs_version = ">=2024.3.2"
nox.options.default_venv_backend = "uv|virtualenv"
nox.options.reuse_venv = "yes"
nox.options.sessions = ["tests"]

ROOT = Path(__file__).parent
OBSERVATIONS = ROOT / "references" / "observations"
CATALOG = ROOT / "references" / "catalog.toml"
#: Where each probe's virtualenv (``probe-<framework>-<version>``) and installer cache live while it runs.
VENVS = ROOT / ".nox"
#: Python of the sessions that install no old framework release (report, render, tests, bench): None is
#: the interpreter running nox, so they run on the Python the user has (README: Python >= 3.11).
PYTHON = None
#: Python of a probe whose release has no wheels for the running interpreter (every release of the matrix
#: has wheels for it).
FALLBACK_PYTHON = "3.11"
#: Seconds a probe session on an accelerator (``-- --device cuda``) may take in all (default 12600: the CI
#: workflow's GPU jobs have 240 minutes): ``python -m kinkcheck.lanes --deadline``.
DEVICE_DEADLINE_ENV = "KINKCHECK_DEVICE_DEADLINE"


def _kinkcheck(module: str = "") -> Any:
    """Import ``kinkcheck.<module>`` (or ``kinkcheck``) from ``src/`` into nox's own Python (stdlib-only modules)."""
    import importlib

    sys.path.insert(0, str(ROOT / "src"))
    try:
        return importlib.import_module("kinkcheck" + (f".{module}" if module else ""))
    finally:
        sys.path.pop(0)


#: The framework registry (``src/kinkcheck/registry.py``, standard library only): each framework's default
#: version matrix (newest patch of each minor line with wheels for Python 3.11 on Linux x86-64; the last entry is
#: the newest release), its install requirements per release, the newest CPython each release has wheels for,
#: and the release the tests install.
REGISTRY = _kinkcheck("registry").REGISTRY
MATRIX: dict[str, list[str]] = {fw.name: list(fw.versions) for fw in REGISTRY.values() if fw.versions}
MAX_PYTHON: dict[str, dict[str, tuple[int, int]]] = {fw.name: dict(fw.max_python) for fw in REGISTRY.values()}
MIN_PYTHON: dict[str, dict[str, tuple[int, int]]] = {fw.name: dict(fw.min_python) for fw in REGISTRY.values()}
LATEST = {fw: versions[-1] for fw, versions in MATRIX.items()}
#: Versions the tests pin their expected values to (torch 2.13.0 has a CPU wheel on the dev machines, and
#: it is the release the public cases P0-P2 were reported against).
TESTED: dict[str, str] = {fw.name: fw.tested for fw in REGISTRY.values() if fw.tested and not fw.test_alone}
#: Frameworks tested in a virtualenv of their own (``registry.Framework.test_alone`` says why), by
#: ``nox -s "framework_tests(<name>)"``; ``nox -s tests`` skips their test file with that command as the reason.
TESTED_ALONE: dict[str, str] = {fw.name: fw.tested for fw in REGISTRY.values() if fw.tested and fw.test_alone}

PROBES = [
    nox.param(fw, v, id=f"{fw}-{v}", tags=["probe", fw] + (["latest"] if v == LATEST[fw] else []))
    for fw, versions in MATRIX.items()
    for v in versions
]


def _version_tuple(v: str) -> tuple[int, ...]:
    return tuple(int(p) for p in v.split(".") if p.isdigit())


def _requirements(framework: str, version: str, device: str = "cpu") -> list[str]:
    """What to install for one environment (``registry.Framework.requirements_for``; [] when the release has no
    build for ``device``)."""
    return REGISTRY[framework].requirements_for(version, device) or []


def _tested_requirements() -> list[str]:
    """Every framework's tested release (:data:`TESTED`), for the test, bench and fuzz sessions."""
    return [r for fw, version in TESTED.items() for r in _requirements(fw, version)]


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
    venv = getattr(session.virtualenv, "location", None)
    stamp = Path(venv) / ".kinkcheck-installed" if venv else None
    if stamp is not None and _stamped(stamp, args):
        session.log(f"already installed: {' '.join(args)}")
        return
    session.install(*args, env=env or {})
    if stamp is not None:
        _stamp(stamp, args)


def _stamp_text(args: tuple[str, ...] | list[str]) -> str:
    import hashlib

    return hashlib.sha256((ROOT / "pyproject.toml").read_bytes() + repr(tuple(args)).encode()).hexdigest()


def _stamped(stamp: Path, args: tuple[str, ...] | list[str]) -> bool:
    return stamp.is_file() and _stamp_text(args) in stamp.read_text().split()


def _stamp(stamp: Path, args: tuple[str, ...] | list[str]) -> None:
    with stamp.open("a") as fh:
        fh.write(_stamp_text(args) + "\n")


# --- What to probe (no virtualenv, no framework: kinkcheck's catalog and shards modules read JSON/TOML) --


def _catalog() -> Any:
    """The catalog followed by its staged cases (references/staged/): a probe measures both, the report shows
    the catalog's; a staged case measured here is fresh once it moves into the catalog unchanged."""
    catalog = _kinkcheck("catalog")
    return catalog.with_staged(catalog.load_catalog(CATALOG))


def _read(shard: Path) -> dict[str, Any] | None:
    """The shard at ``shard`` as JSON, or None when it is missing or unreadable (then it is probed in full)."""
    return _kinkcheck("shards")._read_loose(shard)


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
    """``kinkcheck.shards.Work``: what ``shard`` lacks for the full matrix (every mode of ``framework``, 4 dtypes)."""
    return _kinkcheck("shards").missing_work(_read(shard), catalog, framework)


def _fresh_marker(shard: Path, framework: str) -> Path | None:
    """Where the verdict "this shard is fresh" is remembered: a file named by the SHA-256 of the shard's bytes,
    the catalog's bytes, the framework's modes and the dtypes, and the source of the code that decides
    freshness (``shards.py``, ``catalog.py``, ``vocabulary.py``, ``registry.py``); None when a file cannot be read. Reading and
    checking 28 shards in 28 sessions costs seconds; hashing them milliseconds, so a warm ``nox -s report``
    spends its time rendering. Only a fresh verdict is remembered: any change to the shard or the catalog
    misses the marker and is checked in full."""
    import hashlib

    base = _kinkcheck("vocabulary")
    try:
        code = b"".join((ROOT / "src" / "kinkcheck" / f).read_bytes()
                        for f in ("shards.py", "catalog.py", "vocabulary.py", "dtypes.py", "registry.py"))
        staged = _kinkcheck("catalog").staged_path(CATALOG)
        programs = b"".join(p.read_bytes() for folder in (CATALOG.parent, staged.parent)
                            for p in [*sorted((folder / "programs").glob("*.toml")),
                                      *([staged] if folder == staged.parent and staged.is_file() else [])])
        digest = hashlib.sha256(shard.read_bytes() + b"\0" + CATALOG.read_bytes() + programs + b"\0" + code + b"\0" + json.dumps(
            [framework, list(base.FRAMEWORK_MODES[framework]), list(base.DTYPES)]).encode()).hexdigest()
    except OSError:
        return None
    return VENVS / ".fresh-shards" / digest


def _probe_args(work: Any, catalog: Any, framework: str, remeasure: bool) -> list[str]:
    """``kinkcheck probe`` options for ``work`` (a ``kinkcheck.shards.Work``).

    ``--replace`` for a full re-measure; else ``--case`` for each case with a missing cell (none when that is
    every case), ``--mode`` and ``--dtype`` for the modes and dtypes missing (none when that is all of them):
    cases × modes × dtypes, a superset of the missing cells, merged into the shard.
    """
    if remeasure:
        return ["--replace"]
    base = _kinkcheck("vocabulary")
    every_case = {c.id for c in catalog if c.programs_for(framework)}
    args = [] if set(work.cases) >= every_case else [a for c in work.cases for a in ("--case", c)]
    if set(work.modes) != set(base.FRAMEWORK_MODES[framework]):
        args += [a for m in work.modes for a in ("--mode", m)]
    if set(work.dtypes) != set(base.DTYPES):
        args += [a for d in work.dtypes for a in ("--dtype", d)]
    return args


def _python_for(framework: str, version: str, running: tuple[int, int] | None = None) -> str:
    """The Python to probe ``framework`` ``version`` with: the running one (``sys.executable``) where the release
    has wheels for it, else the oldest it takes (``min_python``, found by :func:`_find_python`) or
    :data:`FALLBACK_PYTHON` (a release too old for the running Python)."""
    cap = MAX_PYTHON.get(framework, {}).get(version)
    floor = MIN_PYTHON.get(framework, {}).get(version)
    running = running or (sys.version_info[0], sys.version_info[1])
    if floor is not None and running < floor:
        return _find_python(f"{floor[0]}.{floor[1]}")
    return sys.executable if cap is None or running <= cap else FALLBACK_PYTHON


def _find_python(version: str) -> str:
    """An interpreter for Python ``version`` ("3.12"): ``python3.12`` on PATH when it runs (a pyenv shim may
    not), else a pyenv installation of it; else ``version`` itself (uv finds or downloads one)."""
    import glob

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


def _venv_python(location: Path) -> Path:
    """The interpreter of the virtualenv at ``location`` (``Scripts\\python.exe`` on a Windows runner)."""
    return location / "Scripts" / "python.exe" if os.name == "nt" else location / "bin" / "python"


def _make_venv(session: nox.Session, location: Path, python: str) -> str | None:
    """Create the probe's virtualenv at ``location`` (kept as it is when it exists); None, else the reason."""
    if _venv_python(location).exists():
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


def _install(session: nox.Session, location: Path, args: list[str], cache: Path) -> str | None:
    """Install ``args`` into the virtualenv at ``location``; None on success, else the reason (one line)."""
    stamp = location / ".kinkcheck-installed"
    if _stamped(stamp, args):
        session.log(f"already installed: {' '.join(args)}")
        return None
    python = _venv_python(location)
    env = {**os.environ, **_install_env(), "UV_CACHE_DIR": str(cache), "PIP_CACHE_DIR": str(cache)}
    uv = _uv()
    cmd = [uv, "pip", "install", "--python", str(python), *args] if uv else [str(python), "-m", "pip", "install", *args]
    session.log(" ".join(cmd))
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=ROOT, check=False)
    if proc.returncode != 0:
        return f"install failed: {' '.join(args)}: {_first_error(proc)}"
    _stamp(stamp, args)
    return None


def _interrupted(reason: str) -> bool:
    """Whether a failed probe command was stopped from outside rather than failing: killed by a signal
    ("Returned code -9"), or ended by kinkcheck's own handler of SIGINT, SIGHUP or SIGTERM (exit 130, 129, 143:
    128 + the signal, as the README says)."""
    import re

    m = re.search(r"code (-?\d+)", reason)
    return m is not None and (int(m.group(1)) < 0 or int(m.group(1)) in (129, 130, 143))


def _device(session: nox.Session) -> str:
    """The device of a probe session: ``-- --device cuda`` or ``metal`` (the CI workflow's GPU runners), else cpu."""
    args = list(session.posargs)
    for i, a in enumerate(args):
        if a == "--device" and i + 1 < len(args):
            return args[i + 1]
        if a.startswith("--device="):
            return a.split("=", 1)[1]
    return "cpu"


def _not_measured_environment(framework: str, version: str, reason: str, python: str,
                              device: str = "cpu") -> dict[str, Any]:
    """The environment of a record that says why ``framework`` ``version`` was not measured on ``device`` here."""
    plat = _kinkcheck("platforms")
    tag = plat.host_tag()
    return {
        "id": plat.environment_id(framework, version, device, tag), "framework": framework,
        "framework_version": version, "device": device,
        "python": python, "platform": platform.platform(), "platform_tag": tag,
        "runner": _kinkcheck("probe").runner(None, device),  # where the attempt ran; no framework imported
        "measured_at": datetime.now(UTC).replace(microsecond=0).isoformat(),
        "kinkcheck_version": _kinkcheck().__version__,
        "catalog_hash": _catalog().hash, "not_measured": reason,
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


def _record_disk(session: nox.Session, framework: str, version: str, venv: Path, cache: Path) -> None:
    """Log this environment's disk use (virtualenv + installer cache), the matrix's peak while one lives."""
    seen: set[tuple[int, int]] = set()
    venv_bytes, cached = _du(venv, seen), _du(cache, seen)
    session.log(f"disk: virtualenv {venv_bytes / 2**30:.2f} GiB + installer cache {cached / 2**30:.2f} GiB "
                "(hardlinked files counted once)")
    VENVS.mkdir(exist_ok=True)
    with (VENVS / "matrix-disk.jsonl").open("a") as fh:
        fh.write(json.dumps({"environment": f"{framework}-{version}", "venv_bytes": venv_bytes,
                             "cache_bytes": cached}) + "\n")


# --- Sessions: the main ones first (nox -l lists in definition order), the 28 probe sessions last ----------


#: The release that draws the HTML report's plots: SVG layout differs between matplotlib releases, so the
#: committed report is byte-identical to a re-render only when both use this one.
MATPLOTLIB = "matplotlib==3.11.2"
#: The release that writes reports/observations.parquet: the same table gives the same bytes with one release.
PYARROW = "pyarrow==26.0.1"


def _render(session: nox.Session) -> None:
    _install_once(session, "-e", ".", MATPLOTLIB, PYARROW)
    # --strict: an unreadable shard stops the render, so the committed report never drops a release silently
    session.run("kinkcheck", "report", "--shards", str(OBSERVATIONS), "--out", str(ROOT / "reports"), "--strict")


@nox.session(python=PYTHON, requires=[f"probe({fw}-{v})" for fw, versions in MATRIX.items() for v in versions])
def report(session: nox.Session) -> None:
    """Main job: probe what each release's shard lacks (only that), then write reports/conventions.*."""
    _render(session)


@nox.session(python=PYTHON)
def render(session: nox.Session) -> None:
    """Write reports/ (conventions.md, .json.gz, observations.parquet, the case pages) from the shards in
    references/observations/ (no probe)."""
    _render(session)


@nox.session(python=PYTHON)
def site(session: nox.Session) -> None:
    """Build the report's static site (MkDocs, Material theme) from reports/ and docs/ into build/site-src/site:
    one page per operation and per case, search; the CI workflow's Pages job publishes it."""
    session.install("-e", ".[site]", MATPLOTLIB, PYARROW, env=_install_env())
    session.run("python", "-m", "kinkcheck.report.site", *session.posargs)


@nox.session(python=PYTHON)
def tests(session: nox.Session) -> None:
    """Run the test suite (pytest) against each framework's tested release (PyTorch 2.13.0, JAX 0.10.2 …) on CPU.

    pytest-xdist runs the test files in one worker per CPU (at most 4: each worker imports every framework,
    about 3 GB), a file whole in one worker so its module fixtures are built once, in collection order (the
    long files first: tests/conftest.py); ``-- -n 0`` runs them in this process (``-- ARGS`` come after these,
    so they win)."""
    session.install(*_tested_requirements(), env=_install_env())
    session.install("-e", ".[test,site]", MATPLOTLIB, PYARROW, env=_install_env())
    workers = max(1, min(4, os.cpu_count() or 1))
    session.run("pytest", "-n", str(workers), "--dist", "loadfile", "--no-loadscope-reorder", *session.posargs)


@nox.session(python=PYTHON)
def ci_workflow(session: nox.Session) -> None:
    """Write .github/workflows/matrix.yml: one GitHub Actions job per probe session and runner, then the report."""
    _install_once(session, "-e", ".", "pyyaml>=6")
    listing = subprocess.run([sys.executable, "-m", "nox", "-f", str(ROOT / "noxfile.py"), "-l", "--json", "-t", "probe"],
                             check=True, capture_output=True, text=True).stdout
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        f.write(listing)
    try:
        session.run("python", "-m", "kinkcheck.ci", "--sessions", f.name, "--out",
                    str(ROOT / ".github" / "workflows" / "matrix.yml"))
    finally:
        os.unlink(f.name)


@nox.session(python=PYTHON)
def releases(session: nox.Session) -> None:
    """List release lines published on PyPI since the matrix's newest (-- --write appends them to matrix.toml)."""
    _install_once(session, "-e", ".")
    session.run("python", "-m", "kinkcheck.releases", *session.posargs)


@nox.session(python=PYTHON)
def promote(session: nox.Session) -> None:
    """Move the staged cases into the catalog once every shard holds them (-- --check: which shards lack them)."""
    _install_once(session, "-e", ".")
    session.run("python", "-m", "kinkcheck.staging", *session.posargs)


@nox.session(python=PYTHON)
def census(session: nox.Session) -> None:
    """Regenerate references/census/{torch,jax}.toml (the kinked operations) from the tested releases' own
    derivative definitions (PyTorch's derivatives.yaml, JAX's JVP rules), keeping the hand-checked fields."""
    session.install(*_requirements("torch", TESTED["torch"]), *_requirements("jax", TESTED["jax"]),
                    env=_install_env())
    session.install("-e", ".", "pyyaml>=6", env=_install_env())
    session.run("python", "-m", "kinkcheck.census.torch_ops")
    session.run("python", "-m", "kinkcheck.census.jax_ops")


@nox.session(python=PYTHON)
@nox.parametrize("framework", [nox.param(fw, id=fw) for fw in TESTED_ALONE])
def framework_tests(session: nox.Session, framework: str) -> None:
    """One framework's adapter tests in a virtualenv of its own (its pins conflict with the test virtualenv's)."""
    session.install(*_requirements(framework, TESTED_ALONE[framework]), env=_install_env())
    session.install("-e", ".[test]", env=_install_env())
    session.run("pytest", f"tests/test_framework_{framework}.py", *session.posargs)


@nox.session(python=PYTHON)
def bench(session: nox.Session) -> None:
    """Print bare framework import time vs a whole-catalog probe vs a hand-written loop (-- --report: the report's
    warm, rendering-alone and cold times with its hot spots; -- --help: the other benchmarks)."""
    if "--report" in session.posargs:  # the report needs no framework, and the plots their pinned matplotlib
        _install_once(session, "-e", ".", MATPLOTLIB, PYARROW)
        session.run("python", "-m", "kinkcheck.bench", *session.posargs)
        return
    session.install(*_tested_requirements(), env=_install_env())
    session.install("-e", ".[census]", env=_install_env())  # scikit-learn's digits for -- --census
    session.run("python", "-m", "kinkcheck.bench", *session.posargs)


@nox.session(python=PYTHON)
def bench_report(session: nox.Session) -> None:
    """Print a warm `nox -s report` (every shard fresh, reports/ current: nothing to render) beside a full render,
    `kinkcheck report --force` alone into a temporary folder, best of 3 each. Targets: warm report <= 5 s, and
    <= 1.2 x rendering alone; the render itself has the same 5 s target (missed: printed as it is)."""
    import time

    _install_once(session, "-e", ".", MATPLOTLIB, PYARROW)
    out = Path(tempfile.mkdtemp(prefix="kinkcheck-bench-"))
    kinkcheck = Path(session.bin) / "kinkcheck"
    subprocess.run([sys.executable, "-m", "nox", "-f", str(ROOT / "noxfile.py"), "-s", "report"], check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # the report venv exists, markers set
    alone, warm = [], []
    for _ in range(3):
        t0 = time.perf_counter()
        subprocess.run([str(kinkcheck), "report", "--shards", str(OBSERVATIONS), "--out", str(out), "--force"],
                       check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        alone.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        subprocess.run([sys.executable, "-m", "nox", "-f", str(ROOT / "noxfile.py"), "-s", "report"], check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        warm.append(time.perf_counter() - t0)
    shutil.rmtree(out, ignore_errors=True)
    ratio = min(warm) / min(alone)
    session.log(f"warm nox -s report (reports/ current): {min(warm):.2f} s (best of 3; target <= 5 s: "
                f"{'ok' if min(warm) <= 5 else 'MISSED'}); a full render, kinkcheck report --force alone: "
                f"{min(alone):.2f} s (target <= 5 s: {'ok' if min(alone) <= 5 else 'MISSED'}); ratio {ratio:.2f} "
                f"(target <= 1.2: {'ok' if ratio <= 1.2 else 'MISSED'})")


#: The fuzz tests `nox -s fuzz` runs, and how many examples each of their generators draws there (the test run
#: draws a few hundred; issue 11 asks for at least 10,000 generated expressions).
FUZZ_TESTS = ["tests/test_fuzz_expr.py", "tests/test_fuzz_oracle.py"]
FUZZ_EXAMPLES = 10_000


@nox.session(python=PYTHON)
def fuzz(session: nox.Session) -> None:
    """Fuzz the expression language and the oracle: 10,000 generated examples per test file."""
    session.install(*_tested_requirements(), env=_install_env())
    session.install("-e", ".[test]", env=_install_env())
    session.run("pytest", *FUZZ_TESTS, "-q", "--hypothesis-show-statistics", *session.posargs,
                env={"KINKCHECK_FUZZ_EXAMPLES": os.environ.get("KINKCHECK_FUZZ_EXAMPLES", str(FUZZ_EXAMPLES))})


@nox.session(venv_backend="none")
@nox.parametrize(("framework", "version"), PROBES)
def probe(session: nox.Session, framework: str, version: str) -> None:
    """Probe one release into its shard in references/observations/: only what it lacks (fresh: no venv)."""
    device = _device(session)
    plat = _kinkcheck("platforms")  # a macOS or arm64 runner's shard is its own: the platform tag is in its name
    if device not in plat.DEVICES:
        session.error(f"unknown device {device!r} (known: {', '.join(plat.DEVICES)})")
    where = plat.DEVICES[device].platforms
    if where is not None and plat.host_tag() not in where:  # no shard: it would name a place that cannot be
        session.error(f"{plat.device_title(device)} exists on {', '.join(plat.title(t) for t in where)} only; "
                      f"this machine is {plat.title(plat.host_tag())}")
    shard = OBSERVATIONS / f"{plat.environment_id(framework, version, device, plat.host_tag())}.json"
    remeasure = "--remeasure" in session.posargs
    marker = _fresh_marker(shard, framework)
    if marker is not None and marker.exists() and not remeasure:
        session.log(f"{shard.relative_to(ROOT) if shard.is_relative_to(ROOT) else shard} is fresh (found so "
                    "before for these exact bytes and this catalog): nothing to install or probe")
        return
    catalog = _catalog()
    work = _plan(shard, framework, catalog)
    name = shard.relative_to(ROOT) if shard.is_relative_to(ROOT) else shard
    broken = _unreadable(shard)
    if broken is not None:  # before any install: the probe's merge would refuse to write over it anyway
        session.warn(f"{name} is unreadable ({broken}): fix or remove it; not probed")
        return
    if work.fresh and not remeasure:
        dropped = _kinkcheck("shards").drop_removed(shard, catalog)
        marker = _fresh_marker(shard, framework)  # after drop_removed: the bytes it leaves are the fresh ones
        if marker is not None:
            try:
                marker.parent.mkdir(parents=True, exist_ok=True)
                marker.touch()
            except OSError:  # a read-only checkout only costs the check next time
                pass
        session.log(f"{name} is fresh (every case × mode × dtype measured as the catalog defines it): nothing to "
                    "install or probe" + (f"; dropped the cases no longer in the catalog: {', '.join(dropped)}"
                                          if dropped else ""))
        return
    args = _probe_args(work, catalog, framework, remeasure)
    session.log(f"{name}: " + ("full re-measure (--remeasure)" if remeasure else work.summary()))
    python = _python_for(framework, version)
    venv = VENVS / f"probe-{framework}-{version}"
    cache = VENVS / f".cache-{framework}-{version}"
    shards = _kinkcheck("shards")
    # One session per virtualenv: a second `nox -s "probe(torch-2.1.2)"` (another device, another terminal) would
    # recreate and then remove the virtualenv the first one's probe is running from.
    in_use = contextlib.ExitStack()
    try:
        in_use.enter_context(shards.shard_lock(VENVS / f"{venv.name}.json"))
    except shards.ShardBusy:
        session.error(f"another nox session is probing {framework} {version} from {venv}; wait for it (its "
                      "journal keeps what it measured)")
    try:
        reqs = REGISTRY[framework].requirements_for(version, device)
        reason = ((f"no {device} build of {framework} {version} on a package registry" if reqs is None else None)
                  or _make_venv(session, venv, python)
                  or _install(session, venv, reqs or [], cache)
                  or _install(session, venv, ["-e", str(ROOT)], cache))
        if reason is None:
            try:
                if device != "cpu" and not remeasure:  # a GPU runner runs what a lent GPU machine runs
                    session.run(str(_venv_python(venv)), "-m", "kinkcheck.lanes", "--device", device, "--framework",
                                framework, "--catalog", str(CATALOG), "--staged", "--drop-removed", "--out-dir",
                                str(shard.parent), "--deadline", os.environ.get(DEVICE_DEADLINE_ENV, "12600"),
                                external=True)
                else:
                    session.run(str(_venv_python(venv)), "-m", "kinkcheck", "probe", "--framework", framework,
                                "--catalog", str(CATALOG), "--staged", "--device", device, "--out", str(shard),
                                "--drop-removed", *args,
                                external=True)
            except nox.command.CommandFailed as err:
                if _interrupted(err.reason or ""):  # killed by a signal (Ctrl-C, kill): the journal resumes it
                    session.error(f"{framework} {version}: probe interrupted ({err.reason}); shard left as it was, "
                                  "the next run resumes from its journal")
                reason = f"probe failed: {err.reason}"
        if reason is not None:
            session.warn(f"{framework} {version}: not measured: {reason}")
            env = _not_measured_environment(framework, version, reason, python if python != sys.executable
                                            else platform.python_version(), device)
            session.log(_kinkcheck("shards").record_failed_attempt(shard, env))
    finally:
        if venv.exists():
            _record_disk(session, framework, version, venv, cache)
        shutil.rmtree(cache, ignore_errors=True)
        if "--keep" not in session.posargs and venv.exists():
            session.log(f"removing {venv} (pass -- --keep to keep it)")
            shutil.rmtree(venv, ignore_errors=True)
        in_use.close()
