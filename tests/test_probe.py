"""The probe: a whole catalog → a valid shard; one failing program does not lose the others."""

from __future__ import annotations

import pytest

from kinkcheck.catalog import load_catalog
from kinkcheck.probe import probe
from kinkcheck.shards import read_shard, write_shard

SMALL = """
[[case]]
id = "relu@0"
title = "relu at 0"
sympy = "Max(x, 0)"
at = { x = 0 }
activation = "relu"
[case.programs]
torch = ["torch.relu(x)", "torch.relu(x, 1, 2)", "torch.nn.functional.no_such_function(x)", "torch.argmax(x)"]
jax = ["jax.nn.relu(x)", "jax.nn.no_such_function(x)"]

[[case]]
id = "maximum@tie"
title = "maximum at a tie"
sympy = "Max(x, y)"
at = { x = 1, y = 1 }
tie = true
[case.programs]
torch = ["torch.maximum(x, y)"]
jax = ["jax.numpy.maximum(x, y)"]
"""


@pytest.fixture
def small(tmp_path):
    p = tmp_path / "catalog.toml"
    p.write_text(SMALL)
    return load_catalog(p)


def _by_program(shard, dtype="float64", mode="reverse"):
    return {o["program"]: o for o in shard["observations"] if o["dtype"] == dtype and o["mode"] == mode}


def test_torch_probe_isolates_failures(torch_adapter, small, tmp_path):
    steps = []
    shard = probe("torch", catalog=small, on_step=steps.append, modes=("reverse", "forward"))
    write_shard(tmp_path / "s.json", shard)
    assert read_shard(tmp_path / "s.json") == shard, "the probe writes a valid shard"
    obs = _by_program(shard)
    assert obs["torch.relu(x)"]["status"] == "ok" and obs["torch.relu(x)"]["value"] == {"x": 0.0}, obs
    assert obs["torch.relu(x, 1, 2)"]["status"] == "error" and "TypeError" in obs["torch.relu(x, 1, 2)"]["error"]
    missing = obs["torch.nn.functional.no_such_function(x)"]
    assert missing["status"] == "unavailable" and "does not exist" in missing["error"], missing
    assert obs["torch.argmax(x)"]["status"] == "error" and "no gradient" in obs["torch.argmax(x)"]["error"]
    assert obs["torch.maximum(x, y)"]["value"] == {"x": 0.5, "y": 0.5}, "programs after a failure still run"
    assert len(steps) == 5, f"progress is reported once per program: {steps}"
    env = shard["environment"]
    assert env["id"] == f"torch-{env['framework_version']}-cpu" and env["catalog_hash"] == small.hash
    nets = [n for n in shard["networks"] if n["program"] == "torch.relu(x)"]
    assert {(n["mode"], n["dtype"]) for n in nets} == {(m, d) for m in ("reverse", "forward")
                                                       for d in ("float64", "float32")}, nets
    assert all(n["status"] == "ok" for n in nets)
    assert nets[0]["W1"][2][1] == 1260.0, "P0 network with relu'(0)=0 gives W1[2][1] = 1260 (NumPy oracle)"


def test_jax_probe(jax_adapter, small):
    shard = probe("jax", catalog=small, dtypes=("float32",), modes=("reverse", "jit"))
    obs = _by_program(shard, "float32")
    assert obs["jax.nn.relu(x)"]["value"] == {"x": 0.0}, obs["jax.nn.relu(x)"]
    assert obs["jax.nn.no_such_function(x)"]["status"] == "unavailable"
    assert obs["jax.numpy.maximum(x, y)"]["value"] == {"x": 0.5, "y": 0.5}


def test_probe_without_device(torch_adapter, small):
    from kinkcheck.frameworks import FrameworkUnavailable

    if "cuda" in torch_adapter.devices():
        pytest.skip("a CUDA device exists here; the no-device path cannot be exercised")
    with pytest.raises(FrameworkUnavailable, match="not measured: no cuda device"):
        probe("torch", device="cuda", catalog=small)


def test_a_crashing_case_does_not_lose_the_shard(torch_adapter, small, tmp_path):
    """A worker that dies inside a case (here: abort() injected at relu@0) is restarted after it."""
    import os
    import subprocess
    import sys

    out = tmp_path / "s.json"
    env = {**os.environ, "KINKCHECK_CRASH_CASE": "relu@0"}
    res = subprocess.run([sys.executable, "-m", "kinkcheck", "probe", "--framework", "torch", "--catalog",
                          small.path, "--out", str(out), "--quiet", "--mode", "reverse", "--mode", "forward"],
                         env=env, capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, res.stderr
    shard = read_shard(out)
    crashed = [o for o in shard["observations"] if o["case"] == "relu@0"]
    assert crashed and all(o["status"] == "error" and "interpreter crashed: signal 6 (SIGABRT)" in o["error"]
                           for o in crashed), crashed[:2]
    after = _by_program(shard)["torch.maximum(x, y)"]
    assert after["status"] == "ok" and after["value"] == {"x": 0.5, "y": 0.5}, "the cases after the crash are measured"


def test_missing_device_in_worker_is_one_line(torch_adapter, small, tmp_path):
    import subprocess
    import sys

    if "cuda" in torch_adapter.devices():
        pytest.skip("a CUDA device exists here")
    res = subprocess.run([sys.executable, "-m", "kinkcheck", "probe", "--framework", "torch", "--device", "cuda",
                          "--catalog", small.path, "--out", str(tmp_path / "s.json"), "--quiet"],
                         capture_output=True, text=True, timeout=600)
    assert res.returncode == 2 and "no cuda device" in res.stderr, res.stderr
    assert "Traceback" not in res.stderr and len(res.stderr.strip().splitlines()) == 1, res.stderr
    assert not (tmp_path / "s.json").exists(), "nothing is written"


def test_a_crashed_case_keeps_its_compiled_cells(small):
    """Compiled batches run after the eager cases (in a new worker after a crash); the shard takes a crashed
    case's compiled cells from them, its eager cells are errors."""
    from kinkcheck.probe import _assemble, _batch_key, _crashed

    done = {"relu@0": _crashed(small, "relu@0", "torch", ["float32"], ["reverse", "inductor"],
                               "interpreter crashed: signal 11"),
            "batch:inductor/float32": {"results": {
                _batch_key("obs", "relu@0", "torch.relu(x)", "inductor", "float32"):
                    {"status": "ok", "value": {"x": 0.0}, "error": None}}}}
    assert all(o["mode"] == "reverse" for o in done["relu@0"]["observations"]), "crash cells are eager cells only"
    env = {"framework": "torch", "modes": ["reverse", "inductor"], "dtypes": ["float32"]}
    shard = _assemble(env, small, done)
    cells = {(o["program"], o["mode"]): o for o in shard["observations"]}
    assert cells[("torch.relu(x)", "inductor")]["value"] == {"x": 0.0}, "the compiled cell comes from the batch"
    assert cells[("torch.relu(x)", "reverse")]["status"] == "error", "the eager cell of the crashed case is an error"
    assert "signal 11" in cells[("torch.relu(x)", "reverse")]["error"]


def test_eager_cells_run_before_any_compiled_batch(torch_adapter, small, monkeypatch):
    """Loading inductor's kernels can change the process's floating-point state (torch 2.4.1/2.5.1 flushed
    subnormals afterwards), so every eager cell is measured before the first compiled batch."""
    from kinkcheck import probe as pr

    order = []
    monkeypatch.setattr(pr, "_probe_case", lambda *a, **k: order.append("case") or
                        {"observations": [], "networks": [], "rounded": {}})
    monkeypatch.setattr(pr, "_compiled_batch", lambda *a, **k: order.append(f"batch:{a[4]}") or {})
    pr.probe("torch", dtypes=["float32"], modes=["reverse", "inductor", "aot_eager"], catalog=small)
    assert "batch:inductor" in order and order.index("batch:inductor") > max(
        i for i, x in enumerate(order) if x == "case"), order
    assert order.index("batch:aot_eager") < order.index("batch:inductor"), f"inductor last: {order}"