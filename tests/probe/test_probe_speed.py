"""The compiled-batch benchmark's bookkeeping (:mod:`kinkcheck.probe.speed`); the benchmark itself runs under
``nox -s bench -- --compiled-chunks`` (minutes of compiling, not a test)."""

from __future__ import annotations

import subprocess
import sys

from kinkcheck.probe import speed


def test_the_cells_compared_are_the_inductor_cells_and_network_runs():
    shard = {"observations": [
        {"case": "relu@0", "program": "torch.relu(x)", "mode": "inductor", "dtype": "float32", "status": "ok",
         "value": {"x": 0.0}, "error": None},
        {"case": "relu@0", "program": "torch.relu(x)", "mode": "reverse", "dtype": "float32", "status": "ok",
         "value": {"x": 0.0}, "error": None}],
        "networks": [{"case": "relu@0", "program": "torch.relu(x)", "mode": "inductor", "dtype": "float64",
                      "status": "ok", "W1": [[0.0]], "W2": [[1.0]], "error": None},
                     {"case": "relu@0", "program": "torch.relu(x)", "mode": "aot_eager", "dtype": "float64",
                      "status": "ok", "W1": [[0.0]], "W2": [[1.0]], "error": None}]}
    cells = speed._inductor_cells([shard])
    assert cells == {("relu@0", "torch.relu(x)", "float32"): ("ok", '{"x": 0.0}', None),
                     ("net", "relu@0", "torch.relu(x)", "float64"): ("ok", "[[[0.0]], [[1.0]]]", None)}, cells


def test_the_bench_offers_the_chunks_benchmark():
    out = subprocess.run([sys.executable, "-m", "kinkcheck.dev.bench", "--help"], capture_output=True, text=True,
                         check=True).stdout
    assert "--compiled-chunks" in out and "1.25" in out, out
    assert speed.CHUNKS_RATIO_TARGET == 1.25 and speed.COMPILED_TARGET == 120.0, "the issue's targets"
