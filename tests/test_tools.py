"""tools/import_device_shards.py: shards from an accelerator are merged into the committed ones (never a smaller
shard over a larger), with the cells the probe caused withdrawn; bad input is one line and exit 2."""

from __future__ import annotations

import shutil
import subprocess
import sys
import tarfile

import pytest
from conftest import ROOT

from kinkcheck.shards import read_shard, write_shard

TOOL = ROOT / "tools" / "import_device_shards.py"
OBS = ROOT / "references" / "observations"


def _tool(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(TOOL), *args], capture_output=True, text=True, timeout=300)


@pytest.fixture()
def out(tmp_path):
    d = tmp_path / "obs"
    d.mkdir()
    shutil.copy(OBS / "torch-2.11.0-cuda.json", d)
    return d


def _part_of_cuda_shard(tmp_path, case="relu@0", error=None):
    shard = read_shard(OBS / "torch-2.11.0-cuda.json")
    shard["observations"] = [o for o in shard["observations"] if o["case"] == case]
    shard["networks"] = [n for n in shard["networks"] if n["case"] == case]
    if error:
        first = shard["observations"][0]
        for o in shard["observations"]:
            if o["program"] == first["program"] and o["mode"] == "reverse":
                o.update(status="error", value=None, error=error)
    (tmp_path / "in").mkdir(exist_ok=True)
    path = tmp_path / "in" / "torch-2.11.0-cuda.json"
    write_shard(path, shard)
    return path, len(shard["observations"])


def test_a_part_is_merged_into_the_committed_shard_never_over_it(tmp_path, out):
    small, n = _part_of_cuda_shard(tmp_path)
    before = read_shard(out / "torch-2.11.0-cuda.json")
    proc = _tool(str(small), "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    after = read_shard(out / "torch-2.11.0-cuda.json")
    assert len(after["observations"]) == len(before["observations"]) == 12640 and n < 1000, (
        "a shard of one case merged, not written over the 12,640 cells")
    assert after["environment"].get("not_measured_parts") == before["environment"].get("not_measured_parts")


def test_an_archive_of_the_lanes_is_taken_and_its_probe_errors_withdrawn(tmp_path, out):
    small, _ = _part_of_cuda_shard(tmp_path, error="RuntimeError: Expected all tensors to be on the same device, "
                                                   "but found at least two devices, cuda:0 and cpu!")
    archive = tmp_path / "kc-cuda.tgz"
    with tarfile.open(archive, "w:gz") as tar:
        tar.add(small, arcname=f"shards/{small.name}")
    proc = _tool(str(archive), "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    after = read_shard(out / "torch-2.11.0-cuda.json")
    assert not [o for o in after["observations"] if "same device" in (o["error"] or "")], "withdrawn, not merged"
    assert len(after["observations"]) == 12640, "the committed values of the withdrawn cells are kept"
    before = read_shard(OBS / "torch-2.11.0-cuda.json")["environment"].get("not_measured_parts")
    assert after["environment"].get("not_measured_parts") == before, "measured before: no new part"


@pytest.mark.parametrize("make, message", [
    (lambda tmp: tmp / "nope.json", "no such file"),
    (lambda tmp: (tmp / "x.json").write_text('{"schema": "other"}') and tmp / "x.json", "not a kinkcheck shard"),
    (lambda tmp: OBS / "jax-0.11.2-cpu.json", "was measured on the CPU"),
])
def test_bad_input_is_one_line_and_writes_nothing(tmp_path, out, make, message):
    before = (out / "torch-2.11.0-cuda.json").read_bytes()
    proc = _tool(str(make(tmp_path)), "--out", str(out))
    assert proc.returncode == 2 and message in proc.stderr, proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert (out / "torch-2.11.0-cuda.json").read_bytes() == before and len(list(out.iterdir())) == 1


def test_modes_not_reached_needs_a_reason(tmp_path, out):
    proc = _tool(str(OBS / "jax-0.11.2-cuda.json"), "--out", str(out), "--modes-not-reached", "  ")
    assert proc.returncode == 2 and "--modes-not-reached must say why" in proc.stderr, proc.stderr


def test_nothing_is_written_when_a_later_input_is_refused(tmp_path, out):
    """Every input is merged in memory first: a refused merge (a shard with fewer measured values) leaves every
    destination as it was, the ones before it included."""
    shutil.copy(OBS / "jax-0.11.2-cuda.json", out)
    jax = read_shard(OBS / "jax-0.11.2-cuda.json")
    jax["observations"] = [o for o in jax["observations"] if o["case"] == "relu@0"]
    write_shard(tmp_path / "jax-0.11.2-cuda.json", jax)
    worse = read_shard(OBS / "torch-2.11.0-cuda.json")  # every ok value of relu@0 turned into an error: refused
    for o in worse["observations"]:
        if o["case"] == "relu@0":
            o.update(status="error", value=None, error="RuntimeError: a test")
    worse["environment"]["framework_build"] = "another build"  # not the same build: the errors would replace values
    write_shard(tmp_path / "torch-2.11.0-cuda.json", worse)
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    proc = _tool(str(tmp_path / "jax-0.11.2-cuda.json"), str(tmp_path / "torch-2.11.0-cuda.json"), "--out", str(out))
    assert proc.returncode == 2 and "refusing to write a shard with" in proc.stderr, proc.stderr
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before, "the JAX shard before it was not written either"


def test_two_archives_of_one_name_are_both_taken(tmp_path, out):
    a, _ = _part_of_cuda_shard(tmp_path, case="relu@0")
    archives = []
    for folder in ("a", "b"):
        (tmp_path / folder).mkdir()
        archives.append(tmp_path / folder / "kc-cuda.tgz")
        with tarfile.open(archives[-1], "w:gz") as tar:
            tar.add(a, arcname="shards/torch-2.11.0-cuda.json")
    proc = _tool(*map(str, archives), "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    taken = [ln for ln in proc.stdout.splitlines() if "observations of torch-2.11.0-cuda" in ln]
    assert len(taken) == 2 and str(archives[0]) in taken[0] and str(archives[1]) in taken[1], proc.stdout


def test_modes_not_reached_twice_is_recorded_once(tmp_path, out, not_measured_shards):
    """The JAX shard as the first H200 run left it (reverse and jit, the other modes not reached: conftest)."""
    cut = not_measured_shards / "jax-0.11.2-cuda.json"
    shutil.copy(cut, out)
    for reason in ("first reason", "second reason"):
        proc = _tool(str(cut), "--out", str(out), "--modes-not-reached", reason)
        assert proc.returncode == 0, proc.stderr
    parts = [p for p in read_shard(out / "jax-0.11.2-cuda.json")["environment"]["not_measured_parts"]
             if "case" not in p]  # the parts of whole modes (the cases added since have their own)
    assert len(parts) == 1 and "time ran out" in parts[0]["reason"], "each mode once, with its first reason"
