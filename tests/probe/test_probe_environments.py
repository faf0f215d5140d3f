"""The probe of one release (``nox -s "probe(…)"``: :func:`kinkcheck.probe.environments.probe_release`): fresh
shards make no virtualenv, stale ones re-probe only what they lack, a failed install keeps the measured shard.
Run with a stand-in session (no nox run, no install)."""

from __future__ import annotations

import shutil
import sys

import pytest
from catalogs import STAGED_RELU
from conftest import ROOT

from kinkcheck.probe import environments
from kinkcheck.probe.plan import missing_work
from kinkcheck.registry import MATRIX
from kinkcheck.shards import read_shard, write_shard

pytest.importorskip("nox", reason="nox is not installed (pip install -e .[test] installs it)")

OBS = ROOT / "references" / "observations"


class Session:
    """What the probe session uses of ``nox.Session``; ``run`` records the command instead of running it."""

    def __init__(self, *posargs):
        self.posargs, self.logs, self.runs = list(posargs), [], []

    def log(self, msg):
        self.logs.append(str(msg))

    warn = log

    def error(self, msg):
        raise AssertionError(f"session.error: {msg}")

    def run(self, *args, **kwargs):
        self.runs.append([str(a) for a in args])


@pytest.fixture
def sandbox(tmp_path, monkeypatch):
    """Places with a copy of the committed shards and a virtualenv folder in tmp_path, the virtualenv maker and
    installer replaced by recorders (a real venv or install never happens here)."""
    obs = tmp_path / "observations"
    shutil.copytree(OBS, obs)
    refs = tmp_path / "references"  # the catalog without its staged cases: the plans below are the catalog's
    refs.mkdir()
    shutil.copy(ROOT / "references" / "catalog.toml", refs / "catalog.toml")
    shutil.copytree(ROOT / "references" / "programs", refs / "programs")
    if (ROOT / "references" / "staged").is_dir():  # the staged cases too: the committed shards hold some
        shutil.copytree(ROOT / "references" / "staged", refs / "staged")
    made = []

    def make_venv(session, location, python):
        made.append(location)
        (location / "bin").mkdir(parents=True)

    places = environments.Places(ROOT, obs, refs / "catalog.toml", tmp_path / "venvs")
    monkeypatch.setattr(environments, "_make_venv", make_venv)
    monkeypatch.setattr(environments, "_install", lambda *a, **k: None)
    return places, obs, made


def _run_probe(places, session, framework, version):
    environments.probe_release(session, framework, version, places)


def test_every_fresh_shard_makes_no_virtualenv(sandbox, catalog):
    """Issue 10: a `nox -s report` with every shard fresh created 28 virtualenvs it never used."""
    places, obs, made = sandbox
    before = {p.name: p.read_bytes() for p in obs.iterdir()}
    probed = 0
    for fw, versions in MATRIX.items():
        for v in versions:
            if not (obs / f"{fw}-{v}-cpu.json").exists():
                continue  # a release without a committed shard yet is measured, not fresh
            session = Session()
            _run_probe(places, session, fw, v)
            if session.runs:  # a shard the staged cases have not reached yet: only they are planned
                from kinkcheck.catalog import staged_case_ids

                staged = staged_case_ids(places.catalog)
                cmd = session.runs[0]
                asked = {cmd[i + 1] for i, a in enumerate(cmd) if a == "--case"}
                assert "--staged" in cmd and asked and asked <= staged, (fw, v, session.logs)
                continue
            assert "is fresh" in session.logs[-1], (fw, v, session.logs)
            probed += 1
    assert probed >= 28, f"the committed shards fresh for catalog and staged cases: {probed}"
    assert {p.name: p.read_bytes() for p in obs.iterdir()} == before, "and no shard is touched"


def test_a_fresh_verdict_is_remembered_for_the_exact_bytes_only(sandbox, monkeypatch):
    """A warm `nox -s report` hashes the shards instead of reading them; a changed shard is read again."""
    places, obs, made = sandbox
    _run_probe(places, Session(), "torch", "2.13.0")
    marker = environments.fresh_marker(places, obs / "torch-2.13.0-cpu.json", "torch")
    assert marker is not None and marker.exists(), "a fresh shard leaves its marker"
    plan = environments._plan
    monkeypatch.setattr(environments, "_plan", lambda *a: pytest.fail("a remembered fresh shard is not read again"))
    session = Session()
    _run_probe(places, session, "torch", "2.13.0")
    monkeypatch.setattr(environments, "_plan", plan)
    assert "found so before" in session.logs[-1] and not session.runs, session.logs
    shard = obs / "torch-2.13.0-cpu.json"
    s = read_shard(shard)
    s["observations"] = s["observations"][1:]  # one cell less: another verdict is due
    write_shard(shard, s)
    assert not environments.fresh_marker(places, shard, "torch").exists(), "other bytes, another marker"
    session = Session()
    _run_probe(places, session, "torch", "2.13.0")
    assert session.runs and len(made) == 1, f"the changed shard is planned and probed: {session.logs}"


def test_a_stale_shard_reprobes_only_its_missing_cells(sandbox, catalog):
    places, obs, made = sandbox
    shard = obs / "torch-2.13.0-cpu.json"
    s = read_shard(shard)
    s["observations"] = [o for o in s["observations"] if not (o["case"] == "relu@0" and o["mode"] == "reverse"
                                                              and o["dtype"] == "float64")]
    write_shard(shard, s)
    session = Session()
    _run_probe(places, session, "torch", "2.13.0")
    assert any("1 cells to probe: 1 case(s) × 1 mode(s) × 1 dtype(s)" in line and "relu@0" in line
               for line in session.logs), f"what will be re-probed is printed first: {session.logs}"
    assert len(made) == 1 and len(session.runs) == 1, "one virtualenv, one probe"
    cmd = session.runs[0]
    assert cmd[cmd.index("--out") + 1] == str(shard), cmd
    assert cmd[cmd.index("--catalog") + 1] == str(places.catalog), "the catalog the plan was made from"
    assert cmd[-6:] == ["--case", "relu@0", "--mode", "reverse", "--dtype", "float64"], \
        f"only the missing cells, merged into the shard: {cmd}"
    assert not made[0].exists(), "the virtualenv is removed afterwards"


def test_remeasure_is_a_full_replace(sandbox):
    places, _, made = sandbox
    session = Session("--remeasure", "--keep")
    _run_probe(places, session, "jax", "0.10.2")
    assert session.runs and session.runs[0][-1] == "--replace" and "--case" not in session.runs[0], session.runs
    assert made and made[0].exists(), "--keep keeps the virtualenv"


def test_a_failed_install_never_touches_a_measured_shard(sandbox, monkeypatch, catalog):
    """Issue 10 item 1: a failed install during --remeasure replaced all 28 shards with not-measured records."""
    places, obs, made = sandbox
    monkeypatch.setattr(environments, "_install", lambda *a, **k: "install failed: torch==2.13.0: index unreachable")
    shard = obs / "torch-2.13.0-cpu.json"
    before = read_shard(shard)
    session = Session("--remeasure")
    _run_probe(places, session, "torch", "2.13.0")
    after = read_shard(shard)
    assert after["observations"] == before["observations"] and after["networks"] == before["networks"], \
        "every measurement kept"
    assert after["environment"]["last_attempt"]["not_measured"] == "install failed: torch==2.13.0: index unreachable"
    assert missing_work(after, catalog).fresh, "the complete shard stays fresh: the next plain run probes nothing"
    assert not session.runs and not made[0].exists(), "nothing probed; the virtualenv removed"

    gone = obs / "torch-2.15.0-cpu.json"
    gone.unlink()
    _run_probe(places, Session(), "torch", "2.15.0")
    record = read_shard(gone)
    assert record["environment"]["not_measured"].startswith("install failed") and not record["observations"]
    assert not environments._plan(gone, "torch", catalog).fresh, "a not-measured record is never fresh: retried next run"


def test_probe_args(catalog):
    from kinkcheck.probe.plan import Work

    every = tuple((c.id, "reverse", "float64") for c in catalog if c.programs_for("jax"))
    assert environments.probe_args(Work(cells=every), catalog, "jax", False) == ["--mode", "reverse", "--dtype",
                                                                           "float64"], \
        "every case in one mode and dtype: no --case, narrowed to that mode and dtype"
    assert environments.probe_args(Work(cells=every[:1]), catalog, "jax", True) == ["--replace"]
    modes = ("reverse", "jit", "forward", "jacfwd", "jacrev", "vmap", "second-order")
    dtypes = ("float64", "float32", "float16", "bfloat16")
    full = tuple(("relu@0", m, d) for m in modes for d in dtypes)
    assert environments.probe_args(Work(cells=full), catalog, "jax", False) == ["--case", "relu@0"], \
        "a whole case: no mode or dtype narrowing"
    everything = tuple((c.id, m, d) for c in catalog if c.programs_for("jax") for m in modes for d in dtypes)
    assert environments.probe_args(Work(cells=everything), catalog, "jax", False) == [], "the plain full probe"


def test_python_follows_the_user_where_wheels_allow():
    assert environments.python_for("torch", "2.15.0", (3, 13)) == sys.executable, "a new release: the running Python"
    assert environments.python_for("torch", "1.13.1", (3, 11)) == sys.executable
    assert environments.python_for("torch", "1.13.1", (3, 12)) == "3.11", "torch 1.13.1 has no wheel above cp311"
    assert environments.python_for("jax", "0.4.38", (3, 14)) == "3.11"
    assert environments.python_for("jax", "0.12.0.1", (3, 13)) == sys.executable, "a new release on a new Python"
    py312 = environments.python_for("jax", "0.12.0.1", (3, 11))
    assert py312 == "3.12" or "3.12" in py312, f"JAX 0.12 needs Python >= 3.12 (min_python): {py312}"


@pytest.mark.parametrize("content, why", [
    ('{"schema": "kinkcheck/shard/v1", "environment": {"id": "jax-0.10.2-cpu", ', "JSONDecodeError"),
    ('{"schema": "kinkcheck/shard/v1"}', "not a kinkcheck shard"),
])
def test_an_unreadable_shard_is_named_and_skipped_before_any_install(sandbox, content, why):
    """Issue 10: `nox -s "probe(jax-0.10.2)"` with a truncated shard planned a full probe and installed jax before
    the CLI refused to write over it at the end. It is named in one line before anything is installed."""
    places, obs, made = sandbox
    shard = obs / "jax-0.10.2-cpu.json"
    shard.write_text(content)
    session = Session()
    _run_probe(places, session, "jax", "0.10.2")
    assert not made and not session.runs, "no virtualenv, no install, no probe"
    assert len(session.logs) == 1, session.logs
    line = session.logs[0]
    assert line.startswith(f"{shard} is unreadable (") and why in line and \
        line.endswith("): fix or remove it; not probed"), line
    assert shard.read_text() == content, "the file is left as it is"
    session = Session("--remeasure")
    _run_probe(places, session, "jax", "0.10.2")
    assert not made and not session.runs and shard.read_text() == content, "not with --remeasure either"


def test_the_probe_session_drops_removed_cases(sandbox):
    """The probe session always passes references/catalog.toml, so cases it no longer holds are dropped
    (`kinkcheck probe` keeps them unless --drop-removed)."""
    places, _, _ = sandbox
    session = Session("--remeasure")
    _run_probe(places, session, "jax", "0.10.2")
    assert "--drop-removed" in session.runs[0], session.runs


def test_staged_cases_are_probed_ahead_and_kept(sandbox):
    """With staged cases beside the catalog, `nox -s report` measures them into every shard (--staged, only the
    staged cells), and a shard that holds them is fresh and keeps them (they are not "removed" cases)."""
    from kinkcheck.catalog import load_catalog, with_staged

    places, obs, made = sandbox
    shutil.rmtree(places.catalog.parent / "staged", ignore_errors=True)  # this test's own staged case only
    shard = obs / "torch-2.13.0-cpu.json"
    s = read_shard(shard)
    from kinkcheck.catalog import load_catalog as _load

    ids = {c.id for c in _load(places.catalog)}
    s["observations"] = [o for o in s["observations"] if o["case"] in ids]
    s["environment"]["case_hashes"] = {c: h for c, h in s["environment"]["case_hashes"].items() if c in ids}
    write_shard(shard, s)
    (places.catalog.parent / "staged" / "programs").mkdir(parents=True)
    head, _, inline = STAGED_RELU.partition("[case.programs]\n")  # as the catalog is laid out: programs in files
    (places.catalog.parent / "staged" / "catalog.toml").write_text(head)
    programs = dict(line.split(" = ", 1) for line in inline.splitlines() if line.strip())
    for table in (places.catalog.parent / "programs").glob("*.toml"):  # the same program files as the catalog
        (places.catalog.parent / "staged" / "programs" / table.name).write_text(
            f'["relu-written@0"]\nprograms = {programs[table.stem]}\n' if table.stem in programs else
            '["relu-written@0"]\nno_equivalent = "a test case"\n')
    session = Session()
    _run_probe(places, session, "torch", "2.13.0")
    assert any("(1 new): relu-written@0" in line for line in session.logs), session.logs
    cmd = session.runs[0]
    assert "--staged" in cmd and "--drop-removed" in cmd and cmd[-2:] == ["--case", "relu-written@0"], cmd
    shard = obs / "torch-2.13.0-cpu.json"
    s = read_shard(shard)  # as the probe would leave it: the staged case's rows, measured against its definition
    union = with_staged(load_catalog(places.catalog))
    program = union.case("relu-written@0").programs_for("torch")[0].id
    rows = [{**o, "case": "relu-written@0", "program": program} for o in s["observations"]
            if o["case"] == "relu@0" and o["program"] == "torch.relu(x)"]
    s["observations"] += rows
    s["environment"]["case_hashes"]["relu-written@0"] = union.case("relu-written@0").measurement_hash("torch")
    write_shard(shard, s)
    session = Session()
    _run_probe(places, session, "torch", "2.13.0")
    assert not session.runs and "is fresh" in session.logs[-1] and "dropped" not in session.logs[-1], session.logs
    assert len([o for o in read_shard(shard)["observations"] if o["case"] == "relu-written@0"]) == len(rows), \
        "the staged rows are kept"
    (places.catalog.parent / "staged" / "catalog.toml").unlink()
    session = Session()
    _run_probe(places, session, "torch", "2.13.0")
    assert "dropped the cases no longer in the catalog: relu-written@0" in session.logs[-1], \
        "a case neither in the catalog nor staged is dropped"


def test_a_cuda_probe_session_writes_the_cuda_shard(sandbox):
    """The CI workflow's GPU runner runs `nox -s "probe(torch-2.13.0)" -- --device cuda`: `python -m kinkcheck.lanes
    --device cuda` into the observations folder (the lanes plan what the cuda shard lacks); the cpu shard is left
    alone."""
    places, obs, made = sandbox
    cpu = (obs / "torch-2.13.0-cpu.json").read_bytes()
    session = Session("--device", "cuda")
    _run_probe(places, session, "torch", "2.13.0")
    assert len(session.runs) == 1, session.logs
    cmd = session.runs[0]
    assert cmd[cmd.index("--device") + 1] == "cuda" and cmd[cmd.index("--out-dir") + 1] == str(obs)
    assert cmd[1:3] == ["-m", "kinkcheck.lanes"], "the GPU runner runs the lanes a lent GPU machine runs"
    assert cmd[cmd.index("--deadline") + 1] == "12600" and "--staged" in cmd and "--drop-removed" in cmd, cmd
    assert (obs / "torch-2.13.0-cpu.json").read_bytes() == cpu


def test_a_probe_stopped_from_outside_is_not_a_failed_attempt():
    """A probe ended by a signal, or by kinkcheck's own SIGINT/SIGHUP/SIGTERM handler (exit 128 + the signal), is
    interrupted (the journal resumes it), not recorded in the shard as a failed attempt."""
    for reason in ("Returned code -9", "Returned code -15", "Returned code 130", "Returned code 143",
                   "Returned code 129"):
        assert environments.interrupted(reason), reason
    for reason in ("Returned code 2", "Returned code 1", "Returned code 137x", ""):
        assert not environments.interrupted(reason), reason


def test_a_second_session_of_one_release_waits_instead_of_removing_the_first_ones_virtualenv(sandbox):
    """Two `nox -s "probe(torch-2.1.2)"` at once (two terminals, a lane started twice): the second recreated and
    then removed the virtualenv the first one's probe was running from, which lost its final write (stop 25).
    Now the second stops before touching it, and the first's lock goes with its session."""
    from kinkcheck.shards import shard_lock

    places, _, made = sandbox
    lock = places.venvs / "probe-jax-0.10.2.json"
    with shard_lock(lock):
        with pytest.raises(AssertionError, match="another nox session is probing jax 0.10.2 from .*probe-jax-0.10.2"):
            _run_probe(places, Session("--remeasure"), "jax", "0.10.2")
    assert not made, "no virtualenv made or removed while the other session holds it"
    session = Session("--remeasure")
    _run_probe(places, session, "jax", "0.10.2")
    assert made and session.runs, "once free, the session probes"
    assert not (places.venvs / ".probe-jax-0.10.2.lock").exists(), "the session's lock is released with it"


def test_an_unknown_device_or_one_this_platform_lacks_is_refused(sandbox):
    places, _, made = sandbox
    with pytest.raises(AssertionError, match="unknown device 'tpu'"):
        _run_probe(places, Session("--device", "tpu"), "torch", "2.13.0")
    from kinkcheck.platforms import host_tag

    if host_tag() != "macos_arm64":  # on Apple silicon a Metal session is a real one
        with pytest.raises(AssertionError, match="Metal exists on macOS arm64 only"):
            _run_probe(places, Session("--device", "metal"), "torch", "2.13.0")
    assert not made


def test_a_device_the_framework_is_not_measured_on_is_refused_before_anything_is_written(sandbox):
    """`nox -s "probe(autograd-1.9.1)" -- --device cuda` wrote a not-measured autograd-1.9.1-cuda.json and removed
    the virtualenv a `--keep` run had kept (a newcomer's review, stop 40): autograd's record lists the CPU only."""
    places, obs, made = sandbox
    before = sorted(p.name for p in obs.iterdir())
    with pytest.raises(AssertionError, match="kinkcheck measures autograd on CPU only, not on CUDA"):
        _run_probe(places, Session("--device", "cuda"), "autograd", "1.9.1")
    assert sorted(p.name for p in obs.iterdir()) == before and not made, "nothing written, no virtualenv touched"


@pytest.mark.parametrize("args, message", [
    (("--remesure",), "unknown argument '--remesure'"),
    (("--keep", "--bogus"), "unknown argument '--bogus'"),
    (("--device",), "--device needs a device"),
    (("--device=",), "--device needs a device"),
    (("--device", "--keep"), "--device needs a device"),
    (("--isa",), "--isa needs a level"),
    (("--isa", "--keep"), "--isa needs a level"),
])
def test_a_typo_after_the_double_dash_is_refused(sandbox, args, message):
    """`-- --remesure` used to run as a plain (fresh, nothing to do) session: the user thought it re-measured."""
    places, _, made = sandbox
    with pytest.raises(AssertionError, match=message + ".*takes --device, --isa, --remeasure, --keep after --"):
        _run_probe(places, Session(*args), "torch", "2.13.0")
    assert not made


def test_the_arguments_a_probe_session_takes_pass(sandbox):
    places, _, _ = sandbox
    for args in (("--keep",), ("--remeasure", "--keep"), ("--device=cpu",), ("--device", "cpu", "--keep")):
        session = Session(*args)
        _run_probe(places, session, "torch", "2.13.0")
        assert session.logs, f"{args}: the session ran"


def test_a_capped_probe_session_writes_its_own_shard_and_passes_the_cap(sandbox):
    """Issue 49: `nox -s "probe(paddle-3.3.1)" -- --isa x86-64-v2` probes a shard of its own, named with the level
    (paddle-3.3.1-cpu-linux_x86_64_v2.json), and hands the cap to `kinkcheck probe --isa`; the reference shard is
    left as it is. A level above this CPU's own is refused before anything is made."""
    from kinkcheck.platforms import isa
    from kinkcheck.platforms import host_tag

    if not isa.cpu_level() or host_tag() != "linux_x86_64":
        pytest.skip(f"instruction-set caps are x86-64's; this machine is {host_tag()} (level {isa.cpu_level()!r})")
    places, obs, made = sandbox
    (obs / "paddle-3.3.1-cpu-linux_x86_64_v2.json").unlink(missing_ok=True)  # as before the committed one was measured
    reference = (obs / "paddle-3.3.1-cpu.json").read_bytes()
    session = Session("--isa", "x86-64-v2")
    _run_probe(places, session, "paddle", "3.3.1")
    assert len(session.runs) == 1, session.logs
    cmd = session.runs[0]
    assert cmd[cmd.index("--isa") + 1] == "x86-64-v2", f"the cap reaches the probe: {cmd}"
    assert cmd[cmd.index("--out") + 1] == str(obs / "paddle-3.3.1-cpu-linux_x86_64_v2.json"), cmd
    assert "--replace" not in cmd and "--case" not in cmd, f"a new environment: every case, merged into nothing: {cmd}"
    assert (obs / "paddle-3.3.1-cpu.json").read_bytes() == reference, "the reference level's shard is untouched"
    levels = list(isa.LEVELS)
    above = levels[levels.index(isa.cpu_level()) + 1] if isa.cpu_level() != levels[-1] else None
    if above is not None:
        made.clear()
        with pytest.raises(AssertionError, match=f"--isa {above}: this CPU is {isa.cpu_level()}"):
            _run_probe(places, Session("--isa", above), "paddle", "3.3.1")
        assert not made, "nothing made for a level this CPU lacks"
    with pytest.raises(AssertionError, match="unknown instruction-set level 'avx2'"):
        _run_probe(places, Session("--isa=avx2"), "paddle", "3.3.1")
