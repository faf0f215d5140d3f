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

import importlib
import os
import sys
from pathlib import Path

import nox

nox.needs_version = ">=2024.3.2"
nox.options.default_venv_backend = "uv|virtualenv"
nox.options.reuse_venv = "yes"
nox.options.sessions = ["tests"]

ROOT = Path(__file__).parent
#: Python of the sessions that install no old framework release (report, render, tests, bench): None is
#: the interpreter running nox, so they run on the Python the user has (README: Python >= 3.11).
PYTHON = None

sys.path.insert(0, str(ROOT / "src"))  # kinkcheck's source, into nox's own Python (standard library modules only)
#: Virtualenvs, interpreters, installs and the probe of one release (``src/kinkcheck/probe/environments.py``).
ENVIRONMENTS = importlib.import_module("kinkcheck.probe.environments")
sys.path.pop(0)
#: Where the shards, the catalog and the virtualenvs of this checkout are.
PLACES = ENVIRONMENTS.Places.of(ROOT)
#: The framework registry (``src/kinkcheck/registry.py``): each framework's version matrix (``matrix.toml``: the
#: newest patch of each minor line; the last entry is the newest release), install requirements, tested release.
REGISTRY = ENVIRONMENTS.REGISTRY
MATRIX: dict[str, list[str]] = {fw.name: list(fw.versions) for fw in REGISTRY.values() if fw.versions}
LATEST = {fw: versions[-1] for fw, versions in MATRIX.items()}
#: Versions the tests pin their expected values to (torch 2.13.0: the release public cases P0-P2 were reported against).
TESTED: dict[str, str] = {fw.name: fw.tested for fw in REGISTRY.values() if fw.tested and not fw.test_alone}
#: Frameworks tested in a virtualenv of their own (``registry.Framework.test_alone`` says why): framework_tests.
TESTED_ALONE: dict[str, str] = {fw.name: fw.tested for fw in REGISTRY.values() if fw.tested and fw.test_alone}

PROBES = [nox.param(fw, v, id=f"{fw}-{v}", tags=["probe", fw] + (["latest"] if v == LATEST[fw] else []))
          for fw, versions in MATRIX.items() for v in versions]


# --- Sessions: the main ones first (nox -l lists in definition order), the probe sessions last -------------


#: The release that draws the HTML report's plots: SVG layout differs between matplotlib releases, so the
#: committed report is byte-identical to a re-render only when both use this one.
MATPLOTLIB = "matplotlib==3.11.2"
#: The release that writes reports/observations.parquet: the same table gives the same bytes with one release.
PYARROW = "pyarrow==26.0.1"


def _install(session: nox.Session, *args: str) -> None:
    session.install(*args, env=ENVIRONMENTS.install_env())


def _render(session: nox.Session) -> None:
    ENVIRONMENTS.install_once(session, ROOT, "-e", ".", MATPLOTLIB, PYARROW)
    # --strict: an unreadable shard stops the render, so the committed report never drops a release silently
    session.run("kinkcheck", "report", "--shards", str(PLACES.observations), "--out", str(ROOT / "reports"), "--strict")


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
    _install(session, "-e", ".[site]", MATPLOTLIB, PYARROW)
    session.run("python", "-m", "kinkcheck.render.site", *session.posargs)


@nox.session(python=PYTHON)
def tests(session: nox.Session) -> None:
    """Run the test suite (pytest) against each framework's tested release (PyTorch 2.13.0, JAX 0.10.2 …) on CPU.

    pytest-xdist runs the test files in one worker per CPU (at most 4: each worker imports every framework,
    about 3 GB), a file whole in one worker so its module fixtures are built once, in collection order (the
    long files first: tests/conftest.py); ``-- -n 0`` runs them in this process (``-- ARGS`` come after these,
    so they win)."""
    _install(session, *ENVIRONMENTS.tested_requirements())
    _install(session, "-e", ".[test,site]", MATPLOTLIB, PYARROW)
    workers = max(1, min(4, os.cpu_count() or 1))
    session.run("pytest", "-n", str(workers), "--dist", "loadfile", "--no-loadscope-reorder", *session.posargs)


@nox.session(python=PYTHON)
def ci_workflow(session: nox.Session) -> None:
    """Write .github/workflows/matrix.yml: one GitHub Actions job per probe session and runner, then the report."""
    ENVIRONMENTS.install_once(session, ROOT, "-e", ".", "pyyaml>=6")
    ENVIRONMENTS.write_ci_workflow(session, PLACES)


@nox.session(python=PYTHON)
def releases(session: nox.Session) -> None:
    """List release lines published on PyPI since the matrix's newest (-- --write appends them to matrix.toml)."""
    ENVIRONMENTS.install_once(session, ROOT, "-e", ".")
    session.run("python", "-m", "kinkcheck.dev.releases", *session.posargs)


@nox.session(python=PYTHON)
def promote(session: nox.Session) -> None:
    """Move the staged cases into the catalog once every shard holds them (-- --check: which shards lack them)."""
    ENVIRONMENTS.install_once(session, ROOT, "-e", ".")
    session.run("python", "-m", "kinkcheck.probe.staging", *session.posargs)


@nox.session(python=PYTHON)
def census(session: nox.Session) -> None:
    """Regenerate references/census/{torch,jax}.toml (the kinked operations) from the tested releases' own
    derivative definitions (PyTorch's derivatives.yaml, JAX's JVP rules), keeping the hand-checked fields."""
    _install(session, *ENVIRONMENTS.requirements("torch", TESTED["torch"]), *ENVIRONMENTS.requirements("jax", TESTED["jax"]),
                    env=ENVIRONMENTS.install_env())
    session.install("-e", ".", "pyyaml>=6")
    session.run("python", "-m", "kinkcheck.frameworks.torch.census")
    session.run("python", "-m", "kinkcheck.frameworks.jax.census")


@nox.session(python=PYTHON)
@nox.parametrize("framework", [nox.param(fw, id=fw) for fw in TESTED_ALONE])
def framework_tests(session: nox.Session, framework: str) -> None:
    """One framework's adapter tests in a virtualenv of its own (its pins conflict with the test virtualenv's)."""
    _install(session, *ENVIRONMENTS.requirements(framework, TESTED_ALONE[framework]))
    _install(session, "-e", ".[test]")
    # its own tests, and the framework contract's cells for it (one id per framework)
    session.run("pytest", f"tests/frameworks/test_framework_{framework}.py", "tests/frameworks/test_frameworks.py",
                "-k", framework, *session.posargs)


@nox.session(python=PYTHON)
def bench(session: nox.Session) -> None:
    """Print bare framework import time vs a whole-catalog probe vs a hand-written loop (-- --report: the report's
    warm, rendering-alone and cold times with its hot spots; -- --help: the other benchmarks)."""
    if "--report" in session.posargs:  # the report needs no framework, and the plots their pinned matplotlib
        ENVIRONMENTS.install_once(session, ROOT, "-e", ".", MATPLOTLIB, PYARROW)
        session.run("python", "-m", "kinkcheck.dev.bench", *session.posargs)
        return
    _install(session, *ENVIRONMENTS.tested_requirements())
    _install(session, "-e", ".[census]")  # scikit-learn's digits for -- --census
    session.run("python", "-m", "kinkcheck.dev.bench", *session.posargs)


@nox.session(python=PYTHON)
def bench_report(session: nox.Session) -> None:
    """Print a warm `nox -s report` (every shard fresh, reports/ current: nothing to render) beside a full render,
    `kinkcheck report --force` alone into a temporary folder, best of 3 each. Targets: warm report <= 5 s, and
    <= 1.2 x rendering alone; the render itself has the same 5 s target (missed: printed as it is)."""
    ENVIRONMENTS.install_once(session, ROOT, "-e", ".", MATPLOTLIB, PYARROW)
    ENVIRONMENTS.bench_warm_report(session, PLACES)


#: The fuzz tests `nox -s fuzz` runs, and how many examples each of their generators draws there (the test run
#: draws a few hundred; issue 11 asks for at least 10,000 generated expressions).
FUZZ_TESTS = ["tests/frameworks/test_fuzz_expr.py", "tests/oracles/test_fuzz_oracle.py"]
FUZZ_EXAMPLES = 10_000


@nox.session(python=PYTHON)
def fuzz(session: nox.Session) -> None:
    """Fuzz the expression language and the oracle: 10,000 generated examples per test file."""
    _install(session, *ENVIRONMENTS.tested_requirements())
    _install(session, "-e", ".[test]")
    session.run("pytest", *FUZZ_TESTS, "-q", "--hypothesis-show-statistics", *session.posargs,
                env={"KINKCHECK_FUZZ_EXAMPLES": os.environ.get("KINKCHECK_FUZZ_EXAMPLES", str(FUZZ_EXAMPLES))})


@nox.session(venv_backend="none")
@nox.parametrize(("framework", "version"), PROBES)
def probe(session: nox.Session, framework: str, version: str) -> None:
    """Probe one release into its shard in references/observations/: only what it lacks (fresh: no venv)."""
    ENVIRONMENTS.probe_release(session, framework, version, PLACES)
