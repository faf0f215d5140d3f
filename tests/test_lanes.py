"""kinkcheck.lanes: one command probes every framework a machine has on a device, within a deadline, and archives
the shards, journals and logs. Run here on the CPU with HIPS autograd (the fastest probe), one case."""

from __future__ import annotations

import subprocess
import sys
import tarfile

import pytest

from kinkcheck import lanes
from kinkcheck.probe.plan import withdraw
from kinkcheck.shards import read_shard, write_shard

pytest.importorskip("autograd", reason="the lanes run a real probe of HIPS autograd")
pytest.importorskip("torch", reason="torch's lane plan is checked against its modes")

CASE = "relu@0"


def _lanes(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "kinkcheck.lanes", *args], capture_output=True, text=True,
                          timeout=600)


def test_one_command_probes_archives_and_then_finds_nothing_missing(tmp_path):
    out, archive = tmp_path / "obs", tmp_path / "run" / "kc.tgz"
    out.mkdir()
    archive.parent.mkdir()
    proc = _lanes("--device", "cpu", "--framework", "autograd", "--case", CASE, "--out-dir", str(out),
                  "--deadline", "300", "--archive", str(archive))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (shard_path,) = out.glob("autograd-*-cpu.json")
    shard = read_shard(shard_path)
    assert {o["case"] for o in shard["observations"]} == {CASE}
    assert {o["mode"] for o in shard["observations"]} == {"reverse", "forward", "second-order"}, (
        "autograd's one step covers all its modes")
    with tarfile.open(archive) as tar:
        names = tar.getnames()
        log = tar.extractfile("logs/autograd-cpu.log").read().decode()
    assert f"shards/{shard_path.name}" in names, names
    assert sorted(p.name for p in archive.parent.iterdir()) == ["kc.tgz"], "the logs are in the archive, not beside it"
    assert "$ python -m kinkcheck probe --quiet --framework autograd --device cpu" in log and "rc=0" in log, log
    again = _lanes("--device", "cpu", "--framework", "autograd", "--case", CASE, "--out-dir", str(out),
                   "--deadline", "300")
    assert again.returncode == 0 and "fresh: nothing missing" in again.stdout, again.stdout + again.stderr
    assert read_shard(shard_path) == shard, "a run with nothing missing writes nothing"


def test_the_next_run_measures_the_cells_recorded_as_not_measured(tmp_path):
    out = tmp_path / "obs"
    out.mkdir()
    assert _lanes("--device", "cpu", "--framework", "autograd", "--case", CASE, "--out-dir", str(out),
                  "--deadline", "300").returncode == 0
    (shard_path,) = out.glob("autograd-*-cpu.json")
    shard = read_shard(shard_path)
    program = shard["observations"][0]["program"]
    write_shard(shard_path, withdraw(shard, lambda o: o["program"] == program and o["mode"] == "second-order",
                                     "not measured: a fault of the probe's (test)"))
    (step,) = lanes.lane_steps("autograd", "cpu", out, cases=[CASE])
    assert step.cells == 4 and step.cases == (CASE,), (step.cells, step.cases)
    proc = _lanes("--device", "cpu", "--framework", "autograd", "--case", CASE, "--out-dir", str(out),
                  "--deadline", "300")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    after = read_shard(shard_path)
    assert "not_measured_parts" not in after["environment"], after["environment"].get("not_measured_parts")
    assert sum(o["program"] == program and o["mode"] == "second-order" for o in after["observations"]) == 4


def test_torch_steps_eager_first_then_each_compiled_backend():
    first, *compiled = lanes.STEPS["torch"]
    assert {"reverse", "functional", "forward", "vmap", "second-order"} <= set(first), first
    assert not {"inductor", "aot_eager"} & set(first), "a compiled backend in the eager step"
    assert sorted(compiled) == [("aot_eager",), ("inductor",)], compiled
    assert all(len(s) == 1 for s in lanes.STEPS["jax"]), "one JAX mode per step: a cut loses one mode"


def test_no_time_left_skips_every_step_and_still_archives(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(lanes, "MIN_STEP_S", 10_000)
    archive = tmp_path / "kc.tgz"
    (tmp_path / "o").mkdir()
    rc = lanes.main(["--device", "cpu", "--framework", "autograd", "--case", CASE, "--out-dir", str(tmp_path / "o"),
                     "--deadline", "60", "--archive", str(archive)])
    said = capsys.readouterr().out
    assert rc == 1 and "skipped:" in said and archive.exists(), said
    assert not list((tmp_path / "o").glob("*.json")), "nothing measured, nothing written"


@pytest.mark.parametrize("args, message", [
    (["--device", "tpu"], "unknown device 'tpu'"),
    (["--device", "cpu", "--framework", "theano"], "unknown framework 'theano'"),
    (["--device", "cpu", "--deadline", "5"], "--deadline must be more than"),
    (["--device", "cpu", "--deadline", "inf"], "--deadline must be more than"),
    (["--device", "cpu", "--archive", "/nonexistent/kc.tgz"], "does not exist or is not writable"),
    (["--device", "cpu", "--archive", "/tmp"], "--archive /tmp: a folder"),
    (["--device", "cpu", "--case", "no-such@0"], "unknown case 'no-such@0'"),
    (["--device", "cpu", "--catalog", "/nonexistent.toml"], "nonexistent.toml"),
    (["--device", "cpu", "--out-dir", "/nonexistent/kc"], "--out-dir /nonexistent/kc: no such folder"),
    (["--device", "cuda", "--framework", "autograd"], "not measured: no CUDA device for autograd"),
    (["--device", "cuda", "--framework", "jax", "--framework", "autograd"], "not measured: no CUDA device for"),
])
def test_bad_input_is_one_line_and_exit_2(tmp_path, args, message):
    if "cuda" in args:
        torch = pytest.importorskip("torch")
        if torch.cuda.is_available():
            pytest.skip("this machine has a CUDA device")
    out = tmp_path / "o"
    out.mkdir()
    proc = _lanes(*args, *(() if "--out-dir" in args else ("--out-dir", str(out))))
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert message in proc.stderr and "Traceback" not in proc.stderr, proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1 and not proc.stdout, (proc.stdout, proc.stderr)
    assert not list(out.iterdir()), "bad input writes nothing"


def test_jax_modes_run_side_by_side_and_merge_into_one_shard(tmp_path):
    """JAX's modes each trace the whole catalog on one core: each runs in a lane of its own, into a scratch folder,
    and is merged into the one shard when done."""
    pytest.importorskip("jax", reason="the lanes run a real probe of JAX")
    out, archive = tmp_path / "obs", tmp_path / "run" / "kc.tgz"
    out.mkdir()
    archive.parent.mkdir()
    proc = _lanes("--device", "cpu", "--framework", "jax", "--case", CASE, "--out-dir", str(out), "--deadline", "400",
                  "--archive", str(archive))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (shard_path,) = out.glob("jax-*-cpu.json")
    shard = read_shard(shard_path)
    modes = set(lanes.STEPS["jax"][0]).union(*lanes.STEPS["jax"])
    assert {o["mode"] for o in shard["observations"]} == modes == set(shard["environment"]["modes"]), (
        "every mode's probe merged into the shard")
    assert len(shard["environment"]["history"]) == len(modes), "one part per mode, each with its own time"
    with tarfile.open(archive) as tar:
        logs = [n for n in tar.getnames() if n.startswith("logs/jax-")]
    assert len(logs) == len(modes), logs


def test_an_unreadable_shard_stops_the_run_before_any_probe(tmp_path):
    """A side-by-side framework probes into scratch folders and merges at the end: an unreadable shard there
    must stop the run at once, not after every mode was measured and then thrown away."""
    out = tmp_path / "o"
    out.mkdir()
    from kinkcheck.probe import environment_id

    bad = out / f"{environment_id('jax', 'cpu')}.json"
    bad.write_text('{"broken')
    proc = _lanes("--device", "cpu", "--framework", "jax", "--case", CASE, "--out-dir", str(out), "--deadline", "200")
    assert proc.returncode == 2 and "cannot read" in proc.stderr and "left as it is" in proc.stderr, proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1 and not proc.stdout, (proc.stdout, proc.stderr)
    assert bad.read_text() == '{"broken' and [p.name for p in out.iterdir()] == [bad.name]
