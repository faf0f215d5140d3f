"""Speed of the probe's compiled batches, measured side by side in one run (``nox -s bench -- --compiled`` and
``-- --compiled-chunks``).

* :func:`compiled_vs_eager`: the whole catalog with ``torch.compile`` (inductor, cold and warm; aot_eager) beside
  eager reverse mode.
* :func:`compiled_chunks_speed`: a cold inductor probe of the whole catalog with each batch split into chunks of
  whole programs over every core (:func:`kinkcheck.probe.compiled.compiled_chunks`) beside one batch per dtype,
  each as a ratio to the best a machine can do, its compile CPU-seconds divided among its cores (issue 33:
  <= 1.25), and whether both give the same cells.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from kinkcheck.catalog import load_catalog
from kinkcheck.frameworks import get_adapter
from kinkcheck.probe.compiled import ENV_COMPILE_CHUNKS, ENV_COMPILE_JOBS, chunk_count, compile_jobs
from kinkcheck.probe.run import environment_id
from kinkcheck.shards import load_shards, read_shard

__all__ = ["CHUNKS_RATIO_TARGET", "COMPILED_TARGET", "compiled_chunks_speed", "compiled_vs_eager"]

#: Seconds a cold inductor probe of the whole catalog may take on a 16-core machine (the coverage issue).
COMPILED_TARGET = 120.0


def compiled_vs_eager(repeat: int) -> int:
    """Whole catalog, all four dtypes, P0 networks: ``--mode inductor`` vs ``--mode reverse``, side by side.

    Each compiled run gets an empty inductor cache (``TORCHINDUCTOR_CACHE_DIR`` in a new temporary folder),
    so no kernel compiled by an earlier run is reused: the figure is a cold compile of the catalog. A second
    inductor run in the same cache (``inductor, warm``) is what re-probing a release costs: nox probe sessions
    share the default inductor cache. The CPU column is user + system time of the probe and every process it
    started (inductor's C++ compiler runs in child processes): CPU / 2 is the best a 2-core machine can do.
    With more than one compile job (:func:`kinkcheck.probe.compile_jobs`), the batches compile in parallel
    processes, and ``inductor, 1 job`` is the same cold probe with the batches one after another, for the ratio.
    """
    py = sys.executable
    rows: dict[str, tuple[float, float, int, int]] = {}
    jobs = compile_jobs()

    def counts(cache: Path) -> tuple[int, int]:
        """Graphs inductor compiled (its FX graph cache entries: a forward and a backward per compiled graph)
        and the C++ modules it built (``.so``) into ``cache``."""
        fx = cache / "fxgraph"
        return (sum(1 for p in fx.rglob("*") if p.is_file()) if fx.is_dir() else 0,
                sum(1 for _ in cache.rglob("*.so")) if cache.is_dir() else 0)

    with tempfile.TemporaryDirectory() as tmp:
        runs = [("reverse", "reverse"), ("inductor", "inductor"), ("inductor, warm", "inductor"),
                ("aot_eager", "aot_eager")]
        if jobs > 1:  # the batches one after another in one process, cold, beside them in parallel
            runs.insert(2, ("inductor, 1 job", "inductor"))
        for label, mode in runs:
            best = (float("inf"), float("nan"), 0, 0)
            for i in range(repeat):
                # the warm row reuses the cold row's cache of run i; the one-job row has its own, empty
                cache = Path(tmp) / f"inductor-{mode}-{i}{'-one' if label == 'inductor, 1 job' else ''}"
                before = counts(cache)
                env = {**os.environ, "TORCHINDUCTOR_CACHE_DIR": str(cache),
                       ENV_COMPILE_JOBS: "1" if label == "inductor, 1 job" else str(jobs)}
                t0, c0 = time.perf_counter(), _children_cpu()
                out = Path(tmp) / f"{mode}-{i}-{label.replace(', ', '-')}"  # a fresh shard: the whole catalog
                out.mkdir()
                subprocess.run([py, "-m", "kinkcheck", "probe", "--framework", "torch", "--quiet", "--no-isolate",
                                "--mode", mode, "--out-dir", str(out)], check=True, env=env,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                after = counts(cache)
                best = min(best, (time.perf_counter() - t0, _children_cpu() - c0, after[0] - before[0], after[1] - before[1]))
            rows[label] = best

    print(f"torch {get_adapter('torch').version}, whole catalog ({sum(1 for _ in load_catalog().programs('torch'))} "
          f"programs), float64/float32/float16/bfloat16, with P0 networks; fresh process, best of {repeat}, "
          f"{os.cpu_count()} CPUs, {jobs} compile job{'s' if jobs > 1 else ''} ({ENV_COMPILE_JOBS})")
    print(f"{'':<24}{'wall':>8}  {'CPU':>8}  {'graphs':>6}  {'C++ modules':>11}")
    eager = rows["reverse"][0]
    for label, (wall, cpu_s, graphs, modules) in rows.items():
        ratio = "" if label == "reverse" else f"   {wall / eager:>5.1f} x eager"
        if label == "inductor, 1 job":
            ratio += f", {wall / rows['inductor'][0]:.2f} x {jobs} jobs"
        target = ""
        if label == "inductor":
            target = f"  target <= {COMPILED_TARGET:.0f} s {'ok' if wall <= COMPILED_TARGET else 'MISSED'}"
        name = "eager (reverse)" if label == "reverse" else f"compiled ({label})"
        built = f"{graphs:>6}  {modules:>11}" if label.startswith("inductor") else f"{'':>6}  {'':>11}"
        print(f"{name:<24}{wall:>6.1f} s  {cpu_s:>6.1f} s  {built}{ratio}{target}")
    print("graphs: the forward and backward graphs inductor compiled (FX graph cache entries); C++ modules: the "
          "kernels' shared objects it built (g++ -O3, most of a cold compile)")
    return 0


#: A cold inductor probe of the whole catalog may take at most this times its compile CPU-seconds divided among
#: the machine's cores (issue 33).
CHUNKS_RATIO_TARGET = 1.25


def _children_cpu() -> float:
    """User + system seconds of this process's children that have ended (and theirs, once reaped)."""
    import resource  # optional: not on Windows

    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def _cold_inductor(out: Path, cache: Path, extra: dict[str, str]) -> tuple[float, float, dict[str, Any]]:
    """(wall s, CPU s, cells) of a cold ``kinkcheck probe --mode inductor`` of the whole catalog into ``out``."""
    out.mkdir()
    env = {**os.environ, "TORCHINDUCTOR_CACHE_DIR": str(cache), **extra}
    t0, c0 = time.perf_counter(), _children_cpu()
    subprocess.run([sys.executable, "-m", "kinkcheck", "probe", "--framework", "torch", "--quiet", "--no-isolate",
                    "--mode", "inductor", "--out-dir", str(out)], check=True, env=env,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wall, cpu = time.perf_counter() - t0, _children_cpu() - c0
    shards, _ = load_shards(out)
    return wall, cpu, _inductor_cells(shards)


def _inductor_cells(shards: list[dict[str, Any]]) -> dict[Any, Any]:
    """(case, program, dtype) → (status, value, error) of the inductor cells and network runs of ``shards``."""
    cells: dict[Any, Any] = {(o["case"], o["program"], o["dtype"]): (o["status"], json.dumps(o["value"]), o["error"])
                             for s in shards for o in s["observations"] if o["mode"] == "inductor"}
    cells.update({("net", n["case"], n["program"], n["dtype"]): (n["status"], json.dumps([n["W1"], n["W2"]]),
                                                                  n["error"])
                  for s in shards for n in s["networks"] if n.get("mode") == "inductor"})
    return cells


def compiled_chunks_speed(repeat: int = 1) -> int:
    """Cold inductor, whole catalog, four dtypes: program chunks on every core beside one batch per dtype as before
    (each process with inductor's own pool of compile workers), and one after another (the compile CPU-seconds
    with nothing running beside them: the ratio's base)."""
    jobs = compile_jobs()
    runs = {f"program chunks ({chunk_count(4, jobs)} a dtype, {jobs} jobs)": {ENV_COMPILE_JOBS: str(jobs)},
            # before issue 33: whole batches, each process with inductor's own pool of compile workers
            f"before: one batch per dtype, {jobs} jobs": {ENV_COMPILE_JOBS: str(jobs), ENV_COMPILE_CHUNKS: "1",
                                                          "TORCHINDUCTOR_COMPILE_THREADS": str(jobs)},
            "one batch per dtype, 1 job": {ENV_COMPILE_JOBS: "1"}}
    rows: dict[str, tuple[float, float]] = {}
    cells: list[dict[Any, Any]] = []
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(repeat):
            for label, extra in runs.items():
                n = len(cells)
                wall, cpu, got = _cold_inductor(Path(tmp) / f"run-{n}", Path(tmp) / f"cache-{n}", extra)
                cells.append(got)
                rows[label] = min(rows.get(label, (float("inf"), 0.0)), (wall, cpu))
                print(f"  {label}: {wall:.1f} s wall, {cpu:.1f} CPU-s", file=sys.stderr, flush=True)
    n_programs = sum(1 for _ in load_catalog().programs("torch"))
    serial_cpu = rows["one batch per dtype, 1 job"][1]
    print(f"torch {get_adapter('torch').version}, cold --mode inductor, whole catalog ({n_programs} programs), "
          f"float64/float32/float16/bfloat16 with P0 networks; {jobs} cores ({ENV_COMPILE_JOBS}); best of {repeat}")
    print(f"{'':<40}{'wall':>9}  {'CPU':>9}  {'ratio':>6}")
    for label, (wall, cpu) in rows.items():
        ratio = wall / (serial_cpu / jobs)
        verdict = ""
        if label.startswith("program chunks"):
            verdict = f"  target <= {CHUNKS_RATIO_TARGET} {'ok' if ratio <= CHUNKS_RATIO_TARGET else 'MISSED'}"
            if jobs >= 16:
                verdict += f"; <= {COMPILED_TARGET:.0f} s {'ok' if wall <= COMPILED_TARGET else 'MISSED'}"
        print(f"{label:<40}{wall:>7.1f} s  {cpu:>7.1f} s  {ratio:>6.2f}{verdict}")
    first, *others = cells
    differ = sorted({k for other in others for k in first.keys() | other.keys() if first.get(k) != other.get(k)},
                    key=str)
    print(f"cells: {len(first)} inductor observations and network runs; "
          + ("identical in every run" if not differ else f"{len(differ)} differ, e.g. {differ[:3]}"))

    committed = Path("references") / "observations" / f"{environment_id('torch')}.json"
    if committed.is_file():  # the release's shard in this checkout: the same cells as the chunked probe's?
        kept = _inductor_cells([read_shard(committed)])
        equal = sum(kept.get(k) == v for k, v in first.items())
        print(f"against {committed}: {equal} of {len(first)} cells equal" + (
            "" if equal == len(first) else f" (e.g. {[k for k, v in first.items() if kept.get(k) != v][:3]})"))
    print(f"ratio: wall / (compile CPU-seconds / cores), the CPU-seconds those of one job ({serial_cpu:.0f} s: "
          "nothing beside them); 1.0 is every core busy from start to end. CPU: user + system seconds of the probe "
          "and every process it started")
    return 0 if not differ else 1


if __name__ == "__main__":
    sys.exit(compiled_chunks_speed(int(sys.argv[1]) if len(sys.argv) > 1 else 1))
