"""Shared fixtures: the catalog, framework adapters (skipped with a reason when not installed), pins."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from kinkcheck.catalog import load_catalog

ROOT = Path(__file__).resolve().parents[1]

#: Test files that take minutes (2 cores), longest first: they run before the others. ``nox -s tests`` hands
#: whole files to its pytest-xdist workers in collection order (``--dist loadfile --no-loadscope-reorder``;
#: xdist's own order is by number of tests); last, one of them would keep a worker busy minutes after the
#: other ran out of files.
LONG_FILES = ("test_render.py", "test_report.py", "test_properties.py", "test_probe_resume.py", "test_probe.py",
              "test_probe_bounds.py", "test_judge.py", "test_cli.py", "test_mapping.py", "test_validate.py",
              "test_probe_worker.py", "test_markdown.py", "test_explain.py", "test_symbolic.py", "test_cite.py",
              "test_check.py", "test_fuzz.py", "test_html.py", "test_migrate.py")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The long files first (:data:`LONG_FILES`), each file's tests in their own order."""
    rank = {name: i for i, name in enumerate(LONG_FILES)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))


def _import_first() -> None:
    """Import the frameworks that must come before the others in one process (``registry.Framework.import_first``:
    PaddlePaddle segfaults when imported after TensorFlow), so the order test files run in does not matter."""
    from kinkcheck.registry import REGISTRY

    others = [f.name for f in REGISTRY.values() if not f.import_first and importlib.util.find_spec(f.name)]
    for rec in REGISTRY.values():
        if rec.import_first and "tensorflow" in others and importlib.util.find_spec(rec.name) is not None:
            importlib.import_module(rec.name)


_import_first()

#: Framework versions the pinned expectations (public cases P0-P9) hold for; see noxfile.TESTED.
PINNED = {"torch": "2.13.0", "jax": "0.10.2"}

#: A small report: two catalog cases from two committed shards (torch and jax), for the tests that
#: judge and render one quickly (tests/judge/test_judge.py, tests/render/test_render.py).
SMALL_CASES = ("relu@0", "where-sqrt@-1")
SMALL_SHARDS = ("torch-2.13.0-cpu.json", "jax-0.10.2-cpu.json")


@pytest.fixture(scope="session")
def catalog():
    return load_catalog()


def _adapter(name: str):
    if importlib.util.find_spec(name) is None:
        pytest.skip(f"{name} is not installed in this Python (nox -s tests installs it)")
    from kinkcheck.frameworks import get_adapter

    return get_adapter(name)


@pytest.fixture(scope="session")
def torch_adapter():
    return _adapter("torch")


@pytest.fixture(scope="session")
def jax_adapter():
    return _adapter("jax")


def public_version(version: str) -> str:
    from packaging.version import Version

    return Version(version).public


def require_pinned(adapter) -> None:
    """Skip (with the reason) when the installed framework is not the version an expectation is pinned to."""
    have, want = public_version(adapter.version), PINNED[adapter.name]
    if have != want:
        pytest.skip(f"expectation pinned to {adapter.name} {want}; installed {have} (see the report for it)")


@pytest.fixture(scope="session")
def shards_report_path(tmp_path_factory, catalog):
    """``conventions.json`` (``kinkcheck/conventions/v2``) built from the committed shards now, in a temporary
    folder: the report tests of cite, migrate, diff, explain and validate read this one, so they do not depend
    on the committed ``reports/conventions.json`` being re-rendered (tests/report/test_report.py checks that it is)."""
    from kinkcheck.judge.build import build
    from kinkcheck.report.model import report_json
    from kinkcheck.shards import load_shards

    shards, errors = load_shards(ROOT / "references" / "observations", catalog)
    path = tmp_path_factory.mktemp("report") / "conventions.json"
    path.write_bytes(report_json(build(shards, catalog, errors)))
    return path


def write_report_files(report, folder):
    """``observations.parquet`` and ``conventions.json`` (observations in the table, as ``kinkcheck report`` writes
    them) of ``report`` into ``folder``; the JSON's path."""
    import hashlib

    import msgspec

    from kinkcheck.report.dataset import write_parquet
    from kinkcheck.report.model import report_json

    folder.mkdir(parents=True, exist_ok=True)
    parquet = write_parquet(report)
    (folder / "observations.parquet").write_bytes(parquet)
    head = msgspec.structs.replace(report, provenance=msgspec.structs.replace(
        report.provenance, observations_sha256=hashlib.sha256(parquet).hexdigest()))
    path = folder / "conventions.json"
    path.write_bytes(report_json(head, observations_file="observations.parquet"))
    return path


@pytest.fixture(scope="session")
def shards_report_files(tmp_path_factory, shards_report):
    """The report of the committed shards as ``kinkcheck report`` writes it (:func:`write_report_files`): grad
    reads its rows from the table."""
    return write_report_files(shards_report, tmp_path_factory.mktemp("report-files"))


def torch_2_15_elsewhere(report, **changes):
    """``report`` with a copy of torch 2.15.0's CPU environment changed by ``changes`` (another device or
    platform: ``id``, ``device``, ``platform_tag``), relu@0 only, torch.relu's reverse float64 cell set to 1
    (right); and the two environments. How the tests of the report, grad and cite see a shard from elsewhere
    without one committed."""
    import msgspec

    cpu = report.index.env["torch-2.15.0-cpu"]
    other = msgspec.structs.replace(cpu, **changes)
    envs = list(report.environments)
    envs.insert(envs.index(cpu) + 1, other)
    copied = [msgspec.structs.replace(o, environment=other.id) for o in report.observations
              if o.environment == cpu.id and o.case == "relu@0"]
    copied = [msgspec.structs.replace(o, value={"x": 1.0}, labels=["right"])
              if o.program == "torch.relu(x)" and o.mode == "reverse" and o.dtype == "float64" else o for o in copied]
    changed = msgspec.structs.replace(report, environments=envs, observations=[*report.observations, *copied])
    return changed, cpu, other


@pytest.fixture(scope="session")
def shards_report(shards_report_path):
    """:data:`shards_report_path` decoded (:class:`kinkcheck.report.model.Report`)."""
    from kinkcheck.report.model import load_report

    return load_report(shards_report_path)


#: What the H200 import of stop 29 recorded as not measured (issue 30), before later CUDA runs measured it all;
#: the not-measured paths of the report, cite, migrate and diff are tested on shards made to say so again.
PROBE_FAULT_REASON = (
    "not measured: the probe of kinkcheck 2d3abce built this program's own constants on the CPU beside its inputs "
    "on CUDA, and PyTorch refused the mix (\"Expected all tensors to be on the same device\"): the probe's error, "
    "not the framework's; re-measure on a CUDA device (the probe now makes a program's tensors on the device probed)")
TIME_RAN_OUT_REASON = (
    "not measured: the H200 machine's time ran out (the run of 2026-12-04 at kinkcheck 2d3abce, 480 s in all: "
    "JAX's modes one after another, reverse 328 s, jit 194 s); the next CUDA run measures them "
    "(python -m kinkcheck.lanes)")
#: The cases whose PyTorch programs build their own constants (withdrawn on CUDA in stop 29).
OWN_CONSTANTS = ("multi_margin_loss@hinge", "multilabel_margin_loss@hinge", "cosine_embedding_loss@margin",
                 "scatter_reduce-amax@[1,1,0]", "scatter_max@tie", "embedding_bag@max-tie",
                 "fake_quantize_per_channel_affine@2.5")


@pytest.fixture(scope="session")
def not_measured_shards(tmp_path_factory):
    """A folder with the torch 2.11.0 and jax 0.11.2 shards of the CPU and CUDA, the CUDA ones cut as stop 29 had
    them: the own-constant programs' cells withdrawn (:func:`kinkcheck.probe.plan.withdraw`) and JAX's modes other
    than reverse and jit recorded as not reached (:func:`kinkcheck.probe.plan.not_measured_modes`)."""
    import shutil

    from kinkcheck.probe.plan import not_measured_modes, withdraw
    from kinkcheck.shards import read_shard, write_shard

    obs, out = ROOT / "references" / "observations", tmp_path_factory.mktemp("not-measured")
    for name in ("torch-2.11.0-cpu", "jax-0.11.2-cpu"):
        shutil.copy(obs / f"{name}.json", out / f"{name}.json")
    torch_cuda = withdraw(read_shard(obs / "torch-2.11.0-cuda.json"),
                          lambda o: o["case"] in OWN_CONSTANTS, PROBE_FAULT_REASON)
    write_shard(out / "torch-2.11.0-cuda.json", torch_cuda)
    jax_cuda = read_shard(obs / "jax-0.11.2-cuda.json")
    cut = ["forward", "jacfwd", "jacrev", "vmap", "second-order"]
    jax_cuda = {**jax_cuda, "observations": [o for o in jax_cuda["observations"] if o["mode"] not in cut],
                "networks": [n for n in jax_cuda["networks"] if n.get("mode", "reverse") not in cut],
                "environment": {**jax_cuda["environment"], "modes": ["reverse", "jit"]}}
    write_shard(out / "jax-0.11.2-cuda.json", not_measured_modes(jax_cuda, cut, TIME_RAN_OUT_REASON))
    return out


@pytest.fixture(scope="session")
def not_measured_report(not_measured_shards, catalog):
    """The report (:class:`kinkcheck.report.model.Report`) of :func:`not_measured_shards`."""
    from kinkcheck.judge.build import build
    from kinkcheck.report.model import load_report, report_json
    from kinkcheck.shards import load_shards

    shards, errors = load_shards(not_measured_shards, catalog)
    path = not_measured_shards / "report" / "conventions.json"
    path.parent.mkdir()
    path.write_bytes(report_json(build(shards, catalog, errors)))
    return load_report(path)


@pytest.fixture(scope="session")
def faulty_report(tmp_path_factory):
    """fault → a report folder whose ``observations.parquet`` has that fault (:data:`damage.FAULTS`: damaged kinds
    and a mixed set, tests/damage.py), each made once a session: the faces' tests of issue 44, item 6."""
    from damage import damaged_report

    made = {}

    def get(fault):
        if fault not in made:
            made[fault] = damaged_report(tmp_path_factory.mktemp(fault), fault)
        return made[fault]
    return get


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--record-figures", action="store_true",
                     help="after a whole run, write what the suite cost (minutes, passed and skipped, the test "
                          "virtualenv's size) into references/figures.json for README (python -m kinkcheck.dev.readme)")


def pytest_sessionstart(session: pytest.Session) -> None:
    import time

    session.config._kinkcheck_started = time.monotonic()  # type: ignore[attr-defined]


def pytest_terminal_summary(terminalreporter: object, exitstatus: int, config: pytest.Config) -> None:
    """With --record-figures, on the controlling process of a run of the whole suite: the figures README quotes
    of what the tests cost (kinkcheck.dev.figures), failures and errors named in the figure where there were any."""
    if not config.getoption("--record-figures") or hasattr(config, "workerinput"):
        return
    import os
    import sys
    import time

    from kinkcheck.dev import figures

    stats = terminalreporter.stats  # type: ignore[attr-defined]
    passed, skipped, failed = (len([r for r in stats.get(k, ()) if getattr(r, "when", "call") == "call"
                                     or k == "skipped"]) for k in ("passed", "skipped", "failed"))
    errors = len(stats.get("error", ()))
    if not passed:
        print("--record-figures: nothing recorded (no test passed)")
        return
    minutes = (time.monotonic() - config._kinkcheck_started) / 60  # type: ignore[attr-defined]
    size = sum(p.stat().st_size for p in Path(sys.prefix).rglob("*") if p.is_file() and not p.is_symlink())
    workers = getattr(config.option, "numprocesses", None) or 1
    command = "nox -s tests -- --record-figures"
    failures = "".join(f", {n} {what}" for n, what in ((failed, "failed"), (errors, "errors")) if n)
    figures.note("tests.cost", f"{minutes:.1f} minutes for {passed:,} tests passed and {skipped} skipped{failures} "
                               f"({workers} workers, {os.cpu_count()} CPUs)", command, data=False)
    figures.note("tests.venv", f"{size / 1e9:.1f} GB", command, data=False)
    print(f"--record-figures: {figures.write_record()}")


@pytest.fixture
def small(tmp_path):
    """The probe tests' small catalog (tests/probing.py's ``SMALL``: relu@0 and a tie of maximum; torch and jax
    programs, some failing on purpose), written into ``tmp_path`` and loaded."""
    from probing import small_catalog

    return small_catalog(tmp_path)


@pytest.fixture()
def models(tmp_path, monkeypatch):
    """The lock tests' user models (tests/locking.py's ``MODELS``, a module ``usermodels``) importable in ``tmp_path``,
    the current folder, with its own ask home."""
    from locking import MODELS, user_module

    user_module(tmp_path, monkeypatch, "usermodels", MODELS)
    return tmp_path

