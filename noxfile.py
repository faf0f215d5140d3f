"""kinkcheck's sessions: ``nox -l`` is the menu.

* ``nox -s report``  — the main job: probe PyTorch and JAX (newest releases), each in its own virtualenv,
  then render ``reports/conventions.{md,json}``. A probe whose shard is fresh (same catalog hash, same
  framework version) is skipped without installing anything.
* ``nox -s tests``   — the test suite (oracles, classifier, catalog, CLI, the public cases P0-P9 on the
  pinned framework versions below).
* ``nox -s bench``   — import time vs probe time vs a hand-written loop, printed side by side.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import nox

nox.needs_version = ">=2024.3.2"
nox.options.default_venv_backend = "uv|virtualenv"
nox.options.reuse_venv = "yes"
nox.options.sessions = ["tests"]

ROOT = Path(__file__).parent
OBSERVATIONS = ROOT / "references" / "observations"
PYTHON = "3.11"

#: Newest releases that install here (checked 2026-11-29 with `pip index versions`).
LATEST = {"torch": "2.15.0", "jax": "0.10.2"}
#: Versions the tests pin their expected values to (torch 2.13.0 has a CPU wheel on the dev machines, and
#: it is the release the public cases P0-P2 were reported against).
TESTED = {"torch": "2.13.0", "jax": "0.10.2"}
#: Environments `nox -s report` probes: the newest release of each framework, plus the pinned torch.
REPORT = [("torch", LATEST["torch"]), ("torch", TESTED["torch"]), ("jax", LATEST["jax"])]


def _requirements(framework: str, version: str) -> list[str]:
    if framework == "torch":
        return [f"torch=={version}"]
    return [f"jax=={version}", f"jaxlib=={version}"]


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


def _catalog_hash() -> str:
    sys.path.insert(0, str(ROOT / "src"))
    try:
        from kinkcheck.catalog import load_catalog
    finally:
        sys.path.pop(0)
    return load_catalog(ROOT / "references" / "catalog.toml").hash


def _fresh(shard: Path) -> bool:
    """A shard is fresh when it parses and was measured against the current catalog."""
    try:
        env = json.loads(shard.read_text())["environment"]
    except (OSError, ValueError, KeyError, TypeError):
        return False
    return env.get("catalog_hash") == _catalog_hash()


@nox.session(python=PYTHON)
@nox.parametrize(("framework", "version"), REPORT, ids=[f"{fw}-{v}" for fw, v in REPORT])
def probe(session: nox.Session, framework: str, version: str) -> None:
    """Probe one framework release (its own virtualenv) into references/observations/ (skipped when fresh)."""
    shard = OBSERVATIONS / f"{framework}-{version}-cpu.json"
    if _fresh(shard) and "--remeasure" not in session.posargs:
        session.log(f"{shard.relative_to(ROOT)} is fresh (catalog unchanged): nothing to install or probe")
        return
    _install_once(session, *_requirements(framework, version), env=_install_env())
    _install_once(session, "-e", ".", env=_install_env())
    session.run("kinkcheck", "probe", "--framework", framework, "--out", str(shard))


@nox.session(python=PYTHON, requires=[f"probe({fw}-{v})" for fw, v in REPORT])
def report(session: nox.Session) -> None:
    """The main job: render reports/conventions.{md,json} from every shard in references/observations/."""
    _install_once(session, "-e", ".")
    session.run("kinkcheck", "report", "--shards", str(OBSERVATIONS), "--out", str(ROOT / "reports"))


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
