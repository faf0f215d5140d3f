"""Benchmark: ``python -m kinkcheck.dev.bench`` (``nox -s bench``) prints, measured side by side in one run,

* the bare import time of each framework (``python -c "import torch"``),
* the time of ``kinkcheck probe`` over the whole catalog (float64 and float32, reverse mode, P0 networks),
* a minimal hand-written loop computing the same gradients: a plain script with one ``lambda`` per catalog
  program calling ``backward``/``jax.vjp`` directly (written to a temporary file from the catalog's
  canonical program text, as a person would type it; kinkcheck's parser is not involved),

and the ratio probe / (import + loop) against the target of 1.5. Every figure is wall time of a fresh
process, the best of ``--repeat`` runs.

``--compiled`` times the whole catalog in compiled mode (``torch.compile``, inductor and aot_eager: every
program of a dtype compiled together in one call) beside eager reverse mode (target: inductor <= 120 s).

``--installs`` times a cold install (new virtualenv, empty cache) of two releases of each framework with
uv and with pip/venv, side by side, with the ratio (target <= 0.35). ``--oracle`` times the sympy oracle cold over the
whole catalog (total, per case median and max), then ``kinkcheck grad`` with its judgement (sympy form,
oracle, labels, report rows) beside ``--no-judge`` on ``--sample`` catalog programs, warm cache (target:
the judgement adds <= 0.5 s at the median). ``--matrix-disk LOG`` prints the peak
disk use of the version matrix from the log the probe sessions write (target < 15 GB).

``--add-case`` times, per installed framework, a full re-measure of its environment (every case, mode and
dtype: ``kinkcheck probe --replace``) beside adding one case to that fully measured shard (the shard with one
case's rows taken out, so that the plan ``nox -s report`` makes is that one case: ``kinkcheck probe --case``),
and a warm-cache reinstall of the framework (what ``nox -s report`` pays per environment unless ``-- --keep``);
target: adding one case costs <= 2 % of a full re-measure (:data:`ADD_CASE_TARGET`).

``--rules`` times the rules (:func:`rules_speed`): predicting one program over every release of one framework, warm
(target <= 0.5 s, :data:`RULES_PREDICT_TARGET`); a full render in a fresh process with the rules' files cached, and
one with them inferred and validated afresh as after a new shard (target: the rules add <= 20 % to the rest of the
render, :data:`RULES_RENDER_TARGET`); and the rules' inference and validation over the observations grown x10
(linear when the time ratio is about 10).

``--report`` times the report (:func:`report_speed`): a warm ``kinkcheck report`` (target <= 5 s) with the
part spent rendering, a render after one new shard beside judging that shard alone (:func:`new_shard_speed`; target
<= 5 s and <= 1.2 x, issue 46), a cold first render with an empty cache (target <= 30 s), and the hot spots of a warm
render; with ``--scale N`` a full render and a render after one new shard at x1 and xN data. The target "warm
``nox -s report`` <= 1.2 x rendering alone" (what nox adds around ``kinkcheck report``: its start and the 28 probe
sessions' freshness checks) is measured by ``nox -s bench_report``.
"""

from __future__ import annotations

import argparse
import gc
import gzip
import hashlib
import importlib
import importlib.util
import io
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from kinkcheck import platforms, rules
from kinkcheck.answers.ask import speed
from kinkcheck.catalog import FRAMEWORKS, load_catalog
from kinkcheck.dev import figures
from kinkcheck.frameworks import get_adapter
from kinkcheck.language import points as pt
from kinkcheck.oracles.backprop import P0
from kinkcheck.probe.plan import is_fresh, missing_work
from kinkcheck.probe.run import environment_id
from kinkcheck.probe.speed import compiled_chunks_speed, compiled_vs_eager
from kinkcheck.registry import REGISTRY
from kinkcheck.registry import framework as framework_record
from kinkcheck.rules import answer
from kinkcheck.shards import _read_loose, read_shard, write_shard
from kinkcheck.vocabulary import FRAMEWORK_MODES

TARGET = 1.5

def _head(framework: str) -> tuple[str, str]:
    """The head of ``framework``'s hand-written loop and the import whose bare time is measured: ``HEAD`` and
    ``IMPORT`` of its folder's ``bench.py`` (``frameworks/<name>/bench.py``). The head begins a plain script that
    computes the catalog's gradients with the framework directly, as a person would type it: the imports,
    ``grad(f, at, dtype)``, ``net(f, dtype)`` (``{net}`` is P0's network) and the loop over float64 and float32, to
    which :func:`hand_written_loop` appends one line per catalog program. Text only: it imports no framework."""
    module = importlib.import_module(f"{framework_record(framework).adapter}.bench")
    return module.HEAD, module.IMPORT


def heads() -> dict[str, tuple[str, str]]:
    """Framework → (head of its hand-written loop, the import timed bare) for every registered framework whose folder
    has a ``bench.py``, report order."""
    out = {}
    for name in FRAMEWORKS:
        try:
            out[name] = _head(name)
        except ModuleNotFoundError:  # no baseline written for it
            continue
    return out


def hand_written_loop(framework: str) -> str:
    """The baseline script for ``framework``: one line per program, as a person would write it."""
    catalog = load_catalog()
    net = repr((P0.X.tolist(), P0.W1.tolist(), P0.W2.tolist(), P0.target.tolist()))
    lines = [_head(framework)[0].format(net=net)]
    for case, program in catalog.programs(framework):
        args = ", ".join(case.inputs)
        at = repr([case.at[k] for k in case.inputs])
        lines.append(f"    grad(lambda {args}: {program.id}, {at}, dtype)\n")
        if case.activation and len(case.inputs) == 1:
            lines.append(f"    net(lambda {args}: {program.id}, dtype)\n")
    return "".join(lines)


def _best(cmd: list[str], repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        best = min(best, time.perf_counter() - t0)
    return best


#: Two releases of each framework for the cold-install comparison (none of them lies in a local wheel folder).
INSTALLS = (("torch", "2.12.1"), ("torch", "2.11.0"), ("jax", "0.9.2"), ("jax", "0.8.3"))


def _requirements(framework: str, version: str) -> list[str]:
    return [f"torch=={version}"] if framework == "torch" else [f"jax=={version}", f"jaxlib=={version}"]


def cold_installs() -> int:
    """Cold install (empty cache, new virtualenv) with uv vs pip/venv, side by side, and the ratio."""
    uv = shutil.which("uv")
    if uv is None:
        print("uv is not on PATH: pip install uv")
        return 2
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PIP_FIND_LINKS", "UV_FIND_LINKS"))}
    rows = []
    for fw, version in INSTALLS:
        times = {}
        for backend in ("uv", "pip"):
            with tempfile.TemporaryDirectory(prefix="kinkcheck-install-") as tmp:
                venv, cache = Path(tmp) / "venv", Path(tmp) / "cache"
                if backend == "uv":
                    subprocess.run([uv, "venv", "-q", "-p", sys.executable, str(venv)], check=True)
                    cmd = [uv, "pip", "install", "-q", "--python", str(venv / "bin" / "python"),
                           *_requirements(fw, version)]
                    run_env = {**env, "UV_CACHE_DIR": str(cache)}
                else:
                    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
                    cmd = [str(venv / "bin" / "python"), "-m", "pip", "install", "-q", "--no-cache-dir",
                           *_requirements(fw, version)]
                    run_env = env
                t0 = time.perf_counter()
                ok = subprocess.run(cmd, env=run_env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                    check=False).returncode
                times[backend] = (time.perf_counter() - t0) if ok == 0 else float("nan")
        rows.append((fw, version, times["uv"], times["pip"]))
        print(f"{fw} {version}: uv {times['uv']:.1f} s, pip {times['pip']:.1f} s, "
              f"ratio {times['uv'] / times['pip']:.2f}", flush=True)
    uv_total, pip_total = sum(r[2] for r in rows), sum(r[3] for r in rows)
    print(f"total: uv {uv_total:.1f} s, pip/venv {pip_total:.1f} s, ratio {uv_total / pip_total:.2f} "
          f"(target <= 0.35)")
    return 0


def matrix_disk(log: Path) -> int:
    """Peak disk use of the matrix: the largest virtualenv + installer cache alive at one time."""

    if not log.is_file():
        print(f"{log} not found: run nox -s report (the probes log their disk use there)")
        return 2
    rows = [json.loads(line) for line in log.read_text().splitlines() if line.strip()]
    peak = max(rows, key=lambda r: r["venv_bytes"] + r["cache_bytes"])
    total = (peak["venv_bytes"] + peak["cache_bytes"]) / 2**30
    print(f"matrix disk: peak {total:.2f} GiB ({peak['environment']}: virtualenv "
          f"{peak['venv_bytes'] / 2**30:.2f} GiB + installer cache {peak['cache_bytes'] / 2**30:.2f} GiB) over "
          f"{len(rows)} probed environments, one alive at a time (target < 15 GB)")
    return 0


#: Issue 14: adding one case to a fully measured matrix costs at most this share of a full re-measure.
ADD_CASE_TARGET = 0.02


def _added_cases(catalog: Any, framework: str) -> list[tuple[str, str]]:
    """The cases the ``--add-case`` benchmark adds, as (role, case id): the ``typical`` case (the median number
    of programs for ``framework``, what adding one case costs) and the ``heaviest`` (the most programs; ties:
    the last in file order), whose cost is at least its share of the programs."""
    cases = [c for c in catalog if c.programs_for(framework)]
    heaviest = max(reversed(cases), key=lambda c: len(c.programs_for(framework))).id
    by_size = sorted(cases, key=lambda c: len(c.programs_for(framework)))  # stable: file order within a size
    typical = by_size[(len(by_size) - 1) // 2].id
    return [("typical", typical)] + ([("heaviest", heaviest)] if heaviest != typical else [])


def _reinstall_s(framework: str, version: str, tmp: Path) -> float | None:
    """Seconds to create a virtualenv and install ``framework==version`` from the warm uv cache (None: no uv)."""
    uv = shutil.which("uv")
    if uv is None:
        return None
    venv = tmp / f"venv-{framework}"
    t0 = time.perf_counter()
    subprocess.run([uv, "venv", "--quiet", "--python", sys.executable, str(venv)], check=True)
    subprocess.run([uv, "pip", "install", "--quiet", "--python", str(venv / "bin" / "python"),
                    *REGISTRY[framework].requirements(version)], check=True)
    took = time.perf_counter() - t0
    shutil.rmtree(venv, ignore_errors=True)
    return took


def add_case(frameworks: list[str] | None) -> int:
    """Full re-measure of one environment vs adding one case to it, per installed framework, side by side.

    Both are ``kinkcheck probe`` in a fresh process, every mode and dtype of the framework, inductor's cache
    the user's (as ``nox -s report`` runs them). The one-case run merges into the full shard that the first
    run wrote, after that case's rows (and its ``case_hashes`` entry) are taken out: the state right after the
    case is added to the catalog; :func:`kinkcheck.probe.plan.missing_work` must plan exactly that case.
    """
    catalog = load_catalog()
    names = frameworks or [f for f in FRAMEWORK_MODES if importlib.util.find_spec(f) is not None]
    rows = []
    with tempfile.TemporaryDirectory(prefix="kinkcheck-add-case-") as tmp_name:
        tmp = Path(tmp_name)
        for fw in names:
            version = get_adapter(fw).version
            shard = tmp / f"{environment_id(fw)}.json"  # the name the probe checks (public version, platform)
            cmd = [sys.executable, "-m", "kinkcheck", "probe", "--framework", fw, "--quiet", "--out", str(shard)]
            t0 = time.perf_counter()
            subprocess.run([*cmd, "--replace"], check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            full = time.perf_counter() - t0
            total = sum(len(c.programs_for(fw)) for c in catalog)
            inst = _reinstall_s(fw, version, tmp)
            for role, case in _added_cases(catalog, fw):
                data = read_shard(shard)
                env = {**data["environment"], "case_hashes": {c: h for c, h in
                                                              data["environment"]["case_hashes"].items() if c != case}}
                cut = {**data, "environment": env,
                       "observations": [o for o in data["observations"] if o["case"] != case],
                       "networks": [n for n in data["networks"] if n["case"] != case]}
                write_shard(shard, cut)
                work = missing_work(cut, catalog)
                if work.cases != (case,):
                    print(f"{fw}: the plan after removing {case} is {work.summary()}, not that one case")
                    return 1
                t0 = time.perf_counter()
                subprocess.run([*cmd, "--case", case], check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                one = time.perf_counter() - t0
                share = len(catalog.case(case).programs_for(fw)) / total
                rows.append((fw, version, role, case, len(work.cells), full, one, inst, share))
    print(f"{'framework':<11}{'release':<10}{'full s':>8}{'add 1 s':>9}{'ratio':>8}  target    "
          f"{'+ reinstall s':>14}{'ratio':>8}  {'programs':>8}  case added (cells)")
    for fw, version, role, case, planned, full, one, inst, share in rows:
        ratio = one / full
        verdict = (f"<= {ADD_CASE_TARGET:.0%} {'ok' if ratio <= ADD_CASE_TARGET else 'MISSED':<6}" if role == "typical"
                   else f"{'(heaviest)':<12}")
        with_inst = f"{inst:>14.1f}{(one + inst) / (full + inst):>8.1%}" if inst is not None else f"{'no uv':>14}{'':>8}"
        print(f"{fw:<11}{version:<10}{full:>8.1f}{one:>9.1f}{ratio:>8.1%}  {verdict}{with_inst}{share:>10.1%}  "
              f"{case} ({planned}, {role})")
    typical = [r for r in rows if r[2] == "typical"]
    full_sum, one_sum = sum(r[5] for r in typical), sum(r[6] for r in typical)
    if typical:
        print(f"{'all':<21}{full_sum:>8.1f}{one_sum:>9.1f}{one_sum / full_sum:>8.1%}  <= {ADD_CASE_TARGET:.0%} "
              f"{'ok' if one_sum <= ADD_CASE_TARGET * full_sum else 'MISSED'}  (typical cases)")
    print(f"(full = kinkcheck probe --replace of the whole catalog ({len(catalog)} cases), every mode and dtype; add 1 =\n"
          " the same probe of the one case the plan names, merged into that shard: the typical case (median number\n"
          " of programs) and the heaviest; programs = the case's share of the framework's programs, what a cost in\n"
          " proportion to the change would be; + reinstall = a new virtualenv\n"
          " installed from the warm uv cache, what each environment of `nox -s report` adds unless -- --keep;\n"
          " one fresh process each, inductor's cache as the user has it)")
    return 0


_ORACLE_SCRIPT = """
import json, sys, time
t0 = time.perf_counter()
import sympy
from kinkcheck.dev import figures
from kinkcheck.catalog import FRAMEWORKS, load_catalog
from kinkcheck.registry import framework as framework_record
from kinkcheck.oracles.symbolic import analyze
imported = time.perf_counter() - t0
times = {}
for case in load_catalog():
    t = time.perf_counter()
    analyze(case)
    times[case.id] = time.perf_counter() - t
print(json.dumps({"import": imported, "total": time.perf_counter() - t0, "cases": times}))
"""


def oracle_cold() -> int:
    """The sympy oracle over the whole catalog in a fresh process, no cache: total, and per case median and max."""
    import statistics  # slow to import

    done = subprocess.run([sys.executable, "-c", _ORACLE_SCRIPT], check=True, capture_output=True, text=True)
    r = json.loads(done.stdout.splitlines()[-1])
    per = sorted(r["cases"].items(), key=lambda kv: kv[1])
    slow = ", ".join(f"{cid} {t:.1f} s" for cid, t in reversed(per[-3:]))
    print(f"oracle, cold (fresh process, no cache): whole catalog ({len(per)} cases) {r['total']:.1f} s, of which "
          f"importing sympy and kinkcheck {r['import']:.1f} s; per case median {statistics.median(t for _, t in per):.2f} s, "
          f"max {per[-1][1]:.1f} s (slowest: {slow})")
    return 0


_EXPLAIN_SCRIPT = """
import json, sys, time
t0 = time.perf_counter()
from kinkcheck.language import expr as ex
from kinkcheck.catalog import FRAMEWORKS
from kinkcheck.answers.explain import Pending, render
at = json.loads(sys.argv[2])
tree = ex.parse(sys.argv[1], at, FRAMEWORKS)
fw = next(iter(ex.roots_of(tree)), None) or sys.argv[3]
t1 = time.perf_counter()
e = Pending(ex.unparse(tree), at, fw, tree=tree).finish(json.loads(sys.argv[4]))
render(e)
print(json.dumps({"explain": time.perf_counter() - t1, "sympy": "sympy" in sys.modules}))
"""


def grad_judged_vs_bare(sample: int, repeat: int) -> int:
    """``kinkcheck grad`` with its judgement vs ``--no-judge`` over catalog programs, warm cache.

    Each program runs once judged first (warming the judgement cache and the report index), then ``repeat``
    times each way, alternating, best of each. Beside it, the judgement's own time in the parent (explain's
    thread and rendering, warm) from a fresh process: what the judgement costs when the worker is not there
    to overlap with.
    """
    import statistics  # slow to import

    catalog = load_catalog()
    programs = list(catalog.programs())
    step = max(1, len(programs) // sample) if sample else 1
    chosen = programs[::step][:sample] if sample else programs
    py = sys.executable
    env = _bytecode_env(None)  # timed as installed: the untimed warm run writes the byte code
    rows = []
    for case, program in chosen:
        at = ",".join(f"{k}={json.dumps(v)}" for k, v in case.at.items())
        base = [py, "-m", "kinkcheck", "grad", "--at", at, "--framework", program.framework, "--", program.id]
        warm = subprocess.run(base, capture_output=True, text=True, check=False, env=env)
        if warm.returncode != 0:
            print(f"skipped {program.id} at {case.id}: {warm.stderr.strip()[:120]}")
            continue
        value = warm.stdout.splitlines()[0]
        judged = bare = float("inf")
        for _ in range(repeat):
            t = time.perf_counter()
            subprocess.run([*base[:-2], "--no-judge", *base[-2:]], check=True, capture_output=True, env=env)
            bare = min(bare, time.perf_counter() - t)
            t = time.perf_counter()
            subprocess.run(base, check=True, capture_output=True, env=env)
            judged = min(judged, time.perf_counter() - t)
        alone = json.loads(subprocess.run([py, "-c", _EXPLAIN_SCRIPT, program.id, json.dumps(dict(case.at)),
                                           program.framework, value], check=True, capture_output=True,
                                          text=True).stdout)
        rows.append((case.id, program.id, bare, judged, alone["explain"], alone["sympy"]))
        print(f"{case.id:<24} {program.id:<48} bare {bare:5.2f} s  judged {judged:5.2f} s  "
              f"+{judged - bare:5.2f} s  (judgement alone {alone['explain']:.2f} s"
              f"{', imports sympy' if alone['sympy'] else ''})", flush=True)
    diffs = [j - b for _, _, b, j, _, _ in rows]
    ratios = [j / b for _, _, b, j, _, _ in rows]
    alone_t = [a for *_, a, _ in rows]
    med = statistics.median(diffs)
    print(f"{len(rows)} programs ({'all' if not sample else f'every {step}th of {len(programs)}'}), warm cache, best of "
          f"{repeat}: kinkcheck grad judged vs --no-judge: median +{med:.2f} s (ratio {statistics.median(ratios):.2f}), "
          f"max +{max(diffs):.2f} s; the judgement alone (warm, no worker): median {statistics.median(alone_t):.2f} s, "
          f"max {max(alone_t):.2f} s; {sum(r[5] for r in rows)} of {len(rows)} warm judgements import sympy. "
          f"Target: judged adds <= 0.5 s at the median {'ok' if med <= 0.5 else 'MISSED'}")
    return 0


#: Targets of issue 12: a warm report (every shard fresh, oracle cache warm) in <= 5 s wall, a warm
#: ``nox -s report`` <= 1.2 x ``kinkcheck report`` alone (``nox -s bench_report``), a cold first render (empty
#: cache) in <= 30 s.
REPORT_WARM_TARGET, REPORT_RATIO_TARGET, REPORT_COLD_TARGET = 5.0, 1.2, 30.0

_REPORT_SCRIPT = """
import json, os, sys, time
t0 = time.perf_counter()
import kinkcheck.oracles.table, kinkcheck.render, kinkcheck.judge.build, kinkcheck.render.plots, kinkcheck.shards
from kinkcheck import cli
spent = {}
def timed(module, name):  # wrap module.name, adding the seconds spent in it to spent[name]
    real = getattr(module, name)
    def wrapper(*args, **kwargs):
        t = time.perf_counter()
        try:
            return real(*args, **kwargs)
        finally:
            spent[name] = spent.get(name, 0.0) + time.perf_counter() - t
    for m in list(sys.modules.values()):  # and where it was imported by name already
        if getattr(m, "__name__", "").startswith("kinkcheck") and getattr(m, name, None) is real:
            setattr(m, name, wrapper)
timed(kinkcheck.shards, "load_shards")
timed(kinkcheck.render, "write_reports")
timed(kinkcheck.oracles.table, "oracle_table")
timed(kinkcheck.render.plots, "case_svgs")
timed(kinkcheck.judge.build, "judged_shard")
if os.environ.get("KINKCHECK_BENCH_JUDGE_AFRESH"):  # every shard judged anew: the judged shards' cache not read
    import kinkcheck.cache
    read = kinkcheck.cache.read_cached
    kinkcheck.cache.read_cached = (lambda kind, key, touch=False:  # and nothing kept per shard or framework
                                   None if kind in ("judged", "derived", "case-parts") else read(kind, key, touch))
t1 = time.perf_counter()
sys.argv = ["kinkcheck", "report", "--shards", sys.argv[1], "--out", sys.argv[2], *sys.argv[3:]]
try:  # the console script itself (cli.run), as a user runs it
    cli.run()
except SystemExit as done:
    rc = done.code
import resource
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / (2**20 if sys.platform == "darwin" else 2**10)
print(json.dumps({"rc": rc, "imports": t1 - t0, "main": time.perf_counter() - t1, "peak_mb": peak, **spent}))
"""

_PROFILE_SCRIPT = """
import cProfile, json, pstats, sys
from kinkcheck import cli
prof = cProfile.Profile()
prof.enable()
rc = cli.main(["report", "--shards", sys.argv[1], "--out", sys.argv[2], "--force"])
prof.disable()
stats = pstats.Stats(prof).stats
rows = [{"where": f"{f}:{line}({name})", "calls": cc, "own": tt, "cum": ct}
        for (f, line, name), (cc, nc, tt, ct, callers) in stats.items()]
print(json.dumps({"rc": rc, "rows": rows}))
"""


def _where(row: dict[str, Any], root: str) -> str:
    """A profile row's function, its path cut to the package (``kinkcheck/judge/build.py:75(build)``)."""
    text = str(row["where"])
    for cut in (root + "/", "site-packages/"):
        if cut in text:
            return text.split(cut, 1)[1]
    return text.rsplit("/", 1)[-1]


def _report_run(shards: Path, out: Path, env: dict[str, str], *args: str) -> dict[str, float]:
    """One ``kinkcheck report`` (with ``args``; default ``--force``) in a fresh process (:data:`_REPORT_SCRIPT`):
    its wall time and its parts."""
    args = args or ("--force",)
    t0 = time.perf_counter()
    done = subprocess.run([sys.executable, "-c", _REPORT_SCRIPT, str(shards), str(out), *args], env=env,
                          capture_output=True, text=True, check=False)
    wall = time.perf_counter() - t0
    result = json.loads(done.stdout.splitlines()[-1]) if done.returncode == 0 and done.stdout.strip() else {}
    if result.get("rc") != 0:  # the CLI's own status: a bad folder is exit 2 inside a clean process exit
        print(f"kinkcheck report failed (exit {result.get('rc', done.returncode)}): {done.stderr.strip()[-2000:]}",
              file=sys.stderr)
        raise SystemExit(2)
    return {"wall": wall, **result}


def report_speed(shards: Path, repeat: int, cold: bool = True, top: int = 10) -> int:
    """Time the report and print the figures against issue 12's targets; each figure comes from one run.

    Every run is ``kinkcheck report --shards <shards> --out <temporary folder>`` in a fresh process (the CLI's
    own ``main``, called from ``python -c``), with timers wrapped around :func:`kinkcheck.shards.load_shards`,
    :func:`kinkcheck.render.write_reports`, :func:`kinkcheck.oracles.table.oracle_table` and
    :func:`kinkcheck.render.plots.case_svgs` (a part the code no longer calls shows as 0):

    * **warm report**: the run's wall time (interpreter start, imports, catalog, reading and checking the
      shards, rendering, writing), after one untimed run that warms the cache (oracle results, shard markers,
      plots); the best of ``repeat`` runs.
    * **rendering alone**: in that same run, the time spent inside :func:`kinkcheck.render.write_reports`:
      building the document (oracle table read from the cache, classification, disagreements), rendering
      the files (JSON, Markdown, CSV, HTML with its plots from the cache) and writing them. Not counted:
      interpreter start, imports, the catalog and :func:`kinkcheck.shards.load_shards`. The ratio warm /
      rendering alone (shown, no target) is what the process costs around the render.
    * **cold first render**: one run as a fresh clone sees it: the cache folder (``$KINKCHECK_CACHE_DIR``,
      :mod:`kinkcheck.cache`) an empty temporary folder, so every shard is checked in full, the sympy oracle
      runs on every case and every plot is drawn (matplotlib's own font cache is kept).
    * **hot spots**: cProfile of one more warm run, in-process (profiling slows it about twice): the ``top``
      functions by cumulative time and by own time.

    Every shard in ``shards`` should be fresh (:func:`kinkcheck.probe.plan.is_fresh`, as after ``nox -s report``);
    the count of fresh ones is printed. Returns 0; a failing report exits with its error.
    """
    catalog = load_catalog()
    files = sorted(shards.glob("*.json"))
    fresh = sum(is_fresh(f, catalog) for f in files)
    env = _bytecode_env(None)  # timed as installed: the untimed first run writes the byte code of what it imports

    def parts(r: dict[str, float]) -> str:
        load, render = r.get("load_shards", 0.0), r.get("write_reports", 0.0)
        return (f"load_shards {load:.2f} s, write_reports {render:.2f} s (of which oracle_table "
                f"{r.get('oracle_table', 0.0):.2f} s, plots {r.get('case_svgs', 0.0):.2f} s), the rest (interpreter "
                f"start, imports, catalog, CLI) {r['wall'] - load - render:.2f} s")

    with tempfile.TemporaryDirectory(prefix="kinkcheck-bench-") as tmp:
        out = Path(tmp) / "out"
        _report_run(shards, out, env)  # warms the cache
        warm = min((_report_run(shards, out, env) for _ in range(repeat)), key=lambda r: r["wall"])
        alone = warm.get("write_reports", float("nan"))
        ratio = warm["wall"] / alone
        print(f"kinkcheck report over {len(files)} shards ({fresh} fresh), {os.cpu_count()} CPUs, best of {repeat} "
              "warm runs:")
        print(f"  warm report             {warm['wall']:6.2f} s wall   target <= {REPORT_WARM_TARGET:.0f} s "
              f"{'ok' if warm['wall'] <= REPORT_WARM_TARGET else 'MISSED'}")
        print(f"  rendering alone         {alone:6.2f} s        (write_reports, in the same run)")
        print(f"  process / write_reports {ratio:6.2f}          (interpreter start, imports, shards; no target: "
              f"warm nox -s report <= {REPORT_RATIO_TARGET} x kinkcheck report is `nox -s bench_report`)")
        print(f"    {parts(warm)}")
        afresh = _report_run(shards, out, {**env, "KINKCHECK_BENCH_JUDGE_AFRESH": "1"})
        copy = Path(tmp) / "shards"  # the shards as they are (their judgements cached), and one new release
        shutil.copytree(shards, copy)
        new = new_shard_speed(copy, out, env, repeat)
        print("\n".join(new_shard_lines(1, afresh, new)))
        _note_new_shard(1, afresh, new, "nox -s bench -- --report")
        table_s = table_write_s(out / "observations.parquet", 10)
        print(f"  writing observations.parquet alone (every render writes the one table whole): {table_s[0]:.2f} s, "
              f"x10 {table_s[1]:.2f} s ({'below' if table_s[1] < NEW_SHARD_TARGET else 'above'} the "
              f"{NEW_SHARD_TARGET:.0f} s of a render after one new shard)")
        figures.note("render.table-write", f"{table_s[0]:.1f} s (x10: {table_s[1]:.1f} s)", "nox -s bench -- --report")
        if cold:
            cache = Path(tmp) / "empty-cache"
            cache.mkdir()
            c = _report_run(shards, Path(tmp) / "cold", {**env, "KINKCHECK_CACHE_DIR": str(cache)})
            print(f"  cold first render       {c['wall']:6.2f} s wall   target <= {REPORT_COLD_TARGET:.0f} s "
                  f"{'ok' if c['wall'] <= REPORT_COLD_TARGET else 'MISSED'}  (empty cache folder)")
            print(f"    {parts(c)}")
        done = subprocess.run([sys.executable, "-c", _PROFILE_SCRIPT, str(shards), str(out)], check=True, env=env,
                              capture_output=True, text=True)
    rows = json.loads(done.stdout.splitlines()[-1])["rows"]
    root = str(Path(__file__).resolve().parents[2])
    for key, title in (("cum", "cumulative"), ("own", "own")):
        print(f"  hot spots of a warm report (cProfile, in-process, by {title} time):")
        for row in sorted(rows, key=lambda r: -r[key])[:top]:
            print(f"    {row['cum']:6.2f} s cum {row['own']:6.2f} s own {row['calls']:>9} calls  {_where(row, root)}")
    return 0


def grow_shards(shards: Path, out: Path, scale: int) -> int:
    """Write ``shards`` ``scale`` times into ``out``: each shard as it is, and ``scale - 1`` copies as other
    releases of its framework (``<release>+copy<k>``, a PEP 440 local version, so the copies sort right after the
    release, environment ids to match). The copies keep the observations and case hashes, so they are
    fresh and the render judges, tabulates and writes every one. Returns the number of observations written."""
    out.mkdir(parents=True, exist_ok=True)
    rows = 0
    for path in sorted(shards.glob("*.json")):
        shard = _read_loose(path)
        if shard is None:
            continue
        env = shard["environment"]
        for k in range(scale):
            e = dict(env) if k else env
            if k:
                e["framework_version"] = f"{env['framework_version']}+copy{k}"
                e["id"] = platforms.environment_id(env["framework"], e["framework_version"], env["device"],
                                                   env.get("platform_tag", platforms.DEFAULT))
            (out / f"{e['id']}.json").write_bytes(json.dumps({**shard, "environment": e}).encode())
            rows += len(shard["observations"])
    return rows


def report_scale(shards: Path, scale: int) -> int:
    """A full render (``kinkcheck report --force``, a fresh process, warm cache) of ``shards`` beside one of the
    same shards grown ``scale`` times (:func:`grow_shards`), in one run: the wall time, the time inside
    :func:`kinkcheck.render.write_reports`, the peak memory and their ratios to the growth. Rendering is linear
    in observations when the time ratio is about ``scale`` (a quadratic step would show ``scale ** 2``). Then
    ``kinkcheck report`` again without ``--force`` on each, what a warm ``nox -s report`` runs: the folder is
    current, so it hashes its inputs and renders nothing."""
    env = _bytecode_env(None)  # timed as installed (the warming runs write the byte code)
    with tempfile.TemporaryDirectory(prefix="kinkcheck-bench-") as tmp:
        grown = Path(tmp) / "grown"
        n_grown = grow_shards(shards, grown, scale)
        n = n_grown // scale
        # --strict: a copy the render skipped would make the grown render look cheap
        full = ("--force", "--strict")
        _report_run(shards, Path(tmp) / "warm", env, *full)  # warms the cache (oracle, shard markers, plots)
        small = _report_run(shards, Path(tmp) / "small", env, *full)
        _report_run(grown, Path(tmp) / "warm-grown", env, *full)  # the copies' shard markers
        big = _report_run(grown, Path(tmp) / "big", env, *full)
        afresh = {**env, "KINKCHECK_BENCH_JUDGE_AFRESH": "1"}  # a full render that judges every shard anew
        small_afresh = _report_run(shards, Path(tmp) / "small", afresh, *full)
        big_afresh = _report_run(grown, Path(tmp) / "big", afresh, *full)
        # a warm `nox -s report` with every shard fresh: the folder is current, nothing is rendered
        small_skip = _report_run(shards, Path(tmp) / "small", env, "--strict")
        big_skip = _report_run(grown, Path(tmp) / "big", env, "--strict")
        # one new release probed: a render that judges it alone, beside the full renders above
        shutil.copytree(shards, Path(tmp) / "shards")
        small_new = new_shard_speed(Path(tmp) / "shards", Path(tmp) / "small", env)
        big_new = new_shard_speed(grown, Path(tmp) / "big", env)
        table_s = table_write_s(Path(tmp) / "small" / "observations.parquet", scale)
    print(f"full render, warm cache, {os.cpu_count()} CPUs: {n:,} shard observations vs x{scale} ({n_grown:,})")
    for what, key in (("wall", "wall"), ("write_reports", "write_reports")):
        print(f"  {what:<14} {small[key]:7.2f} s   x{scale}: {big[key]:7.2f} s   ratio {big[key] / small[key]:5.2f} "
              f"(linear: {scale})")
    print(f"  {'peak memory':<14} {small['peak_mb']:7.0f} MB  x{scale}: {big['peak_mb']:7.0f} MB  ratio "
          f"{big['peak_mb'] / small['peak_mb']:5.2f}")
    print(f"  {'current':<14} {small_skip['wall']:7.2f} s   x{scale}: {big_skip['wall']:7.2f} s   (reports/ current: "
          f"the shards, catalog and kinkcheck hashed, nothing rendered; target <= {REPORT_WARM_TARGET:.0f} s "
          f"{'ok' if big_skip['wall'] <= REPORT_WARM_TARGET else 'MISSED'} at x{scale})")
    ratio = big["write_reports"] / small["write_reports"]
    print(f"  rendering {'linear' if ratio <= 1.25 * scale else 'WORSE THAN LINEAR'} in observations "
          f"(time ratio {ratio:.2f} <= 1.25 x {scale})")
    print("\n".join([*new_shard_lines(1, small_afresh, small_new), *new_shard_lines(scale, big_afresh, big_new)]))
    print(f"  writing observations.parquet alone (every render writes the one table whole): {table_s[0]:.2f} s, "
          f"x{scale} {table_s[1]:.2f} s ({'below' if table_s[1] < NEW_SHARD_TARGET else 'above'} the "
          f"{NEW_SHARD_TARGET:.0f} s of a render after one new shard)")
    command = f"nox -s bench -- --report --scale {scale}"
    figures.note(f"render.x{scale}", f"{big['wall']:.0f} s for {small['wall']:.1f} s (peak {big['peak_mb'] / 1e3:.1f} GB "
                                     f"for {small['peak_mb'] / 1e3:.1f} GB)", command)
    _note_new_shard(scale, big_afresh, big_new, command)
    return 0


def table_write_s(parquet: Path, scale: int) -> tuple[float, float]:
    """Seconds to write the observations table of ``parquet`` (a render's) through
    :func:`kinkcheck.report.dataset.write_table` (sort by case and program, row groups and their index, zstd), and
    the same table grown ``scale`` times (:func:`_grown_table`): what any render writes whatever else it keeps,
    since the file holds every observation, sorted for its readers."""
    import pyarrow.parquet as pq

    from kinkcheck.report.dataset import write_table  # slow: msgspec

    table = pq.read_table(parquet)
    small = _timed_s(lambda: write_table(table))
    grown = _grown_table(table, scale)
    gc.collect()
    return small, _timed_s(lambda: write_table(grown))


def _note_new_shard(scale: int, full: dict[str, float], new: dict[str, float], command: str) -> None:
    """The figures README quotes of a render after one new shard (:func:`new_shard_lines`' figures)."""
    x = "" if scale == 1 else f"-x{scale}"
    figures.note(f"render.new-shard{x}", f"{new['wall']:.1f} s (a full render judging every shard afresh "
                                         f"{full['wall']:.1f} s; judging the new shard alone {new['judge']:.2f} s)",
                 command)


#: Target of issue 46: a render after one new shard (every other shard judged before, so read from the cache) in
#: <= 5 s wall and <= 1.2 x the time to judge that shard alone.
NEW_SHARD_TARGET, NEW_SHARD_RATIO = 5.0, 1.2

_JUDGE_SCRIPT = """
import json, sys, time
from kinkcheck.catalog import load_catalog
from kinkcheck.judge import build
from kinkcheck.shards import read_shard
catalog = load_catalog()
shard = read_shard(sys.argv[1], catalog)
t0 = time.perf_counter()
ctx = build.judging_context(catalog)
t1 = time.perf_counter()
judged = build._judge(shard, ctx)
print(json.dumps({"context": t1 - t0, "judge": time.perf_counter() - t1, "observations": len(judged.observations)}))
"""


def add_new_shard(shards: Path, tag: str = "new") -> Path:
    """Write into ``shards`` one more release: a copy of its largest shard (most observations) as release
    ``<release>+<tag>`` (a PEP 440 local version, environment id to match), what probing one new release adds.
    Returns its path."""
    path = max(sorted(shards.glob("*.json")), key=lambda p: p.stat().st_size)
    shard = _read_loose(path)
    if shard is None:
        raise SystemExit(f"{path}: not a shard")
    env = dict(shard["environment"])
    env["framework_version"] = f"{env['framework_version']}+{tag}"
    env["id"] = platforms.environment_id(env["framework"], env["framework_version"], env["device"],
                                         env.get("platform_tag", platforms.DEFAULT))
    new = shards / f"{env['id']}.json"
    new.write_bytes(json.dumps({**shard, "environment": env}).encode())
    return new


def new_release_tag(k: int) -> str:
    """The local version of the ``k``-th new release of a run (``new1.<8 hex digits>``): never one an earlier run
    rendered, whose judgement, rules and page parts this machine's cache would still hold (a fixed ``+new`` timed a
    render of a shard the cache knew)."""
    import secrets  # slow to import

    return f"new{k + 1}.{secrets.token_hex(4)}"


def new_shard_speed(shards: Path, out: Path, env: dict[str, str], repeat: int = 1) -> dict[str, float]:
    """A render after one new shard (:func:`add_new_shard` into ``shards``; ``out`` rendered from ``shards`` with
    this cache before, so every other shard's judgement is in the cache) in a fresh process, beside judging that
    shard alone in another (:data:`_JUDGE_SCRIPT`: ``judge``, the seconds :func:`kinkcheck.judge.build._judge`
    takes; not counted: reading the shard, and ``context``, reading the oracle table from the cache). The best of
    ``repeat`` such renders, each after another new release (``+new``, ``+new2``, …: a render is never after the
    same new shard twice, whose judgement the first one kept; nor after a release this cache has seen in an earlier
    run: :func:`new_release_tag`). Returns the best render's figures
    (:func:`_report_run`) with ``judge``, ``context`` (seconds) and ``observations`` (of its new shard) added."""
    best: dict[str, float] | None = None
    for k in range(max(1, repeat)):
        new = add_new_shard(shards, new_release_tag(k))
        done = subprocess.run([sys.executable, "-c", _JUDGE_SCRIPT, str(new)], env=env, capture_output=True,
                              text=True, check=False)
        if done.returncode != 0:
            print(f"judging {new.name} alone failed: {done.stderr.strip()[-2000:]}", file=sys.stderr)
            raise SystemExit(2)
        alone = json.loads(done.stdout.splitlines()[-1])
        got = {**_report_run(shards, out, env, "--strict"), **alone}
        if best is None or got["wall"] < best["wall"]:
            best = got
    assert best is not None
    return {**best, "renders": float(max(1, repeat))}


def new_shard_lines(scale: int, full: dict[str, float], new: dict[str, float]) -> list[str]:
    """The lines :func:`report_speed` and :func:`report_scale` print for a render after one new shard (``new``)
    beside a full render that judged every shard afresh (``full``; ``$KINKCHECK_BENCH_JUDGE_AFRESH``: the judged
    shards' cache not read, the oracle's and the rest read), with the targets (:data:`NEW_SHARD_TARGET`,
    :data:`NEW_SHARD_RATIO`)."""
    x = f"x{scale}" if scale > 1 else "x1"
    ratio = new["wall"] / new["judge"]
    ok = new["wall"] <= NEW_SHARD_TARGET and ratio <= NEW_SHARD_RATIO
    renders = int(new.get("renders", 1))
    best = f" (best of {renders}, each after another new release)" if renders > 1 else ""
    return [f"  render after one new shard, data {x}: {new['wall']:6.2f} s wall{best} (a full render judging every shard "
            f"afresh {full['wall']:6.2f} s); "
            f"judging that shard ({new['observations']:,} observations) alone {new['judge']:.2f} s (oracle table "
            f"read {new.get('context', 0.0):.2f} s more): ratio {ratio:.1f}; "
            f"target <= {NEW_SHARD_TARGET:.0f} s and <= {NEW_SHARD_RATIO} x {'ok' if ok else 'MISSED'}",
            f"    of which judging every shard {new.get('judged_shard', float('nan')):.2f} s (the new one judged, the "
            f"others read from the cache; judging all afresh: {full.get('judged_shard', float('nan')):.2f} s), the "
            f"rest of write_reports {new.get('write_reports', 0.0) - new.get('judged_shard', 0.0):.2f} s, load_shards "
            f"{new.get('load_shards', 0.0):.2f} s, peak {new.get('peak_mb', 0.0):.0f} MB"]


def census_speed() -> int:
    """``kinkcheck census`` at its default scale, timed (one run: it is minutes long), with the minibatches and
    pre-activations it looks at per second, per dtype and in all."""
    from kinkcheck.answers import hitcensus as hc  # slow: msgspec

    scale = hc.Scale()
    t0 = time.perf_counter()
    record = hc.run(scale)
    total = time.perf_counter() - t0
    cells = record["cells"]
    train_s = total - sum(c["seconds"] for c in cells)
    print(f"{'dtype':<10}{'seconds':>9}{'minibatches':>13}{'per s':>9}{'pre-activations':>17}{'per s':>13}"
          f"{'hits':>7}")
    for dtype in scale.dtypes:
        mine = [c for c in cells if c["dtype"] == dtype]
        sec = sum(c["seconds"] for c in mine)
        mb = sum(c["minibatches"] for c in mine)
        pre = sum(sum(c["elements"]) for c in mine)
        hits = sum(sum(c["hits"]) for c in mine)
        print(f"{dtype:<10}{sec:>9.1f}{mb:>13,}{mb / sec:>9.0f}{pre:>17,}{pre / sec:>13.3g}{hits:>7}")
    print(f"training runs: {train_s:.1f} s; the whole census {total:.1f} s (target <= 600 s: "
          f"{'ok' if total <= 600 else 'MISSED'}) for {len(scale.depths)} depths x {len(scale.dtypes)} dtypes x "
          f"{scale.inits} initialisations, width {scale.width}, batch {scale.batch}")
    return 0


#: A child process that runs ``code`` and prints its own peak RSS (MB) last on stderr.
_RSS_TAIL = ("\nimport resource, sys\n"
             "print(f'rss-mb {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f}', file=sys.stderr)\n")


def _bytecode_env(env: dict[str, str] | None) -> dict[str, str]:
    """``env`` (default: this process's) with Python allowed to write byte code: an installed package has its
    modules compiled (pip compiles them at install), so a cold lookup is timed with them compiled, not compiling
    every module it imports as a process under ``$PYTHONDONTWRITEBYTECODE`` would."""
    out = dict(os.environ if env is None else env)
    out.pop("PYTHONDONTWRITEBYTECODE", None)
    return out


def _cold(code: str, repeat: int, env: dict[str, str] | None = None) -> tuple[float, float]:
    """Best wall time (s) of ``repeat`` fresh processes running ``code``, and their largest peak RSS (MB); one
    process before them, not timed, writes the byte code of what ``code`` imports (:func:`_bytecode_env`)."""
    best, rss = float("inf"), 0.0
    env = _bytecode_env(env)
    subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True, env=env)
    for _ in range(repeat):
        t0 = time.perf_counter()
        proc = subprocess.run([sys.executable, "-c", code + _RSS_TAIL], check=True, capture_output=True, text=True,
                              env=env)
        best = min(best, time.perf_counter() - t0)
        rss = max(rss, float(proc.stderr.strip().splitlines()[-1].split()[-1]))
    return best, rss


#: A cold lookup, cite, and grad's report rows: at most these seconds and MB, at x1 and x10 data (issue 46).
LOOKUP_TARGET_S, LOOKUP_TARGET_MB = 0.5, 200
#: The cases ``kinkcheck grad "torch.clamp(x, min=0)" --at x=0`` shows (its ``--json`` report cases): the same
#: function at the same point.
GRAD_CASES = ("relu@0", "masked_fill@0", "select-relu@0", "cond@0", "select@0", "threshold0@0")


def grow_report(src: Path, out: Path, scale: int) -> int:
    """The report data in folder ``src`` (``observations.parquet``, ``conventions.json.gz`` or ``.json``) grown
    ``scale`` times into folder ``out``: every row copied ``scale - 1`` times as other releases (``2.14.1+copy1``:
    the environment, its release in the index and in the JSON's environments renamed alike), written as a render
    lays the table out (:func:`kinkcheck.report.dataset.write_table`), the JSON (``conventions.json.gz``) recording
    the grown table's digest. Every program and case holds ``scale`` times its rows, as ten times the releases
    would give. Returns the rows written."""
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    from kinkcheck.report.dataset import write_table  # slow: msgspec

    table = pq.read_table(src / "observations.parquet")
    parts = [table]
    for k in range(1, scale):
        part = table
        for column in ("framework_version", "environment"):
            part = part.set_column(part.schema.get_field_index(column), column,
                                   pc.binary_join_element_wise(part[column], pa.scalar(f"+copy{k}"), ""))
        parts.append(part)
    from kinkcheck.report.query import file_metadata  # slow: msgspec

    meta = file_metadata(src / "observations.parquet")  # the index is in the footer alone (dataset.FOOTER_ONLY)
    index = json.loads(meta[b"kinkcheck.index"])
    for places in index["releases"].values():
        for place, versions in places.items():
            places[place] = versions + [f"{v}+copy{k}" for k in range(1, scale) for v in versions]
    modes = index.get("modes", {})
    index["modes"] = {**modes, **{_copy_env(e, k): m for k in range(1, scale) for e, m in modes.items()}}
    meta[b"kinkcheck.index"] = json.dumps(index).encode()
    grown = pa.concat_tables(parts).replace_schema_metadata(meta)
    out.mkdir(parents=True, exist_ok=True)
    parquet = write_table(grown)
    (out / "observations.parquet").write_bytes(parquet)
    report = src / "conventions.json.gz"
    doc = json.loads(gzip.decompress(report.read_bytes()) if report.is_file()
                     else (src / "conventions.json").read_bytes())
    envs = doc["environments"]
    doc["environments"] = envs + [dict(e, id=_copy_env(e["id"], k),
                                       framework_version=e["framework_version"] + f"+copy{k}")
                                  for k in range(1, scale) for e in envs]
    doc["provenance"]["observations_sha256"] = hashlib.sha256(parquet).hexdigest()
    # laid out as a render writes it (report_json; the head in the gzip's first member, head_end), so that the
    # readers of the head (cite) read at x10 what they read at x1
    import msgspec

    from kinkcheck.report.model import Report, gzip_bytes, head_end, report_json  # slow: msgspec

    data = report_json(msgspec.convert(doc, Report))
    (out / "conventions.json.gz").write_bytes(gzip_bytes(data, head_end(data)))
    return grown.num_rows


def _copy_env(env: str, k: int) -> str:
    """The environment id of copy ``k`` of ``env``: what the table's ``environment`` column becomes (``+copy<k>``
    appended to the id, as :func:`grow_report` renames it)."""
    return f"{env}+copy{k}"


def _cold_timed(code: str, repeat: int, env: dict[str, str] | None = None) -> tuple[float, float]:
    """As :func:`_cold`, but the seconds ``code`` prints itself on its last stdout line (``inner-s S``: the part
    timed after the imports that part's caller has already made), best of ``repeat``."""
    best, rss = float("inf"), 0.0
    env = _bytecode_env(env)
    subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True, env=env)
    for _ in range(repeat):
        proc = subprocess.run([sys.executable, "-c", code + _RSS_TAIL], check=True, capture_output=True, text=True,
                              env=env)
        best = min(best, float(proc.stdout.strip().splitlines()[-1].split()[-1]))
        rss = max(rss, float(proc.stderr.strip().splitlines()[-1].split()[-1]))
    return best, rss


def lookup_lines(rows: list[tuple[str, float, float]], repeat: int, src: Path,
                 floor: tuple[float, float] | None = None) -> list[str]:
    """The table :func:`lookup_speed` prints: a header, the floor (``floor``: a process that only imports
    pyarrow and kinkcheck's readers, seconds and peak MB, no target), one line per measurement (name, seconds, peak
    MB, the targets and ``ok`` or ``MISSED``) and a footnote."""
    lines = [f"{'measurement':<44}{'s':>8}{'peak MB':>10}  target"]
    if floor is not None:
        lines.append(f"{'floor: python, pyarrow, kinkcheck imports':<44}{floor[0]:>8.2f}{floor[1]:>10.0f}  (no target)")
    for name, sec, mb in rows:
        ok = "ok" if sec <= LOOKUP_TARGET_S and mb <= LOOKUP_TARGET_MB else "MISSED"
        lines.append(f"{name:<44}{sec:>8.2f}{mb:>10.0f}  <= {LOOKUP_TARGET_S} s, <= {LOOKUP_TARGET_MB} MB {ok}")
    lines.append(f"(best of {repeat} fresh processes each, byte code compiled as an installed package has it; "
                 f"lookup and cite: the whole process; grad's report rows: "
                 f"report_index and report_rows after their imports, which grad makes anyway; peak MB: the whole "
                 f"process; data {src})")
    return lines


def lookup_speed(repeat: int, scale: int = 10) -> int:
    """A cold ``kinkcheck.lookup`` of one program (reads observations.parquet's row groups that hold it), a cold
    ``kinkcheck cite`` of it (the report's JSON, without observations, and the rows of the cell it states) and the report rows
    ``kinkcheck grad`` shows for it at x=0 (:data:`GRAD_CASES`: the row groups of those cases), on the data
    (:func:`kinkcheck.report.query.data_path`: ``$KINKCHECK_REPORTS`` if set) and on it grown ``scale`` times
    (:func:`grow_report`: ten times the releases); targets: each <= 0.5 s and <= 200 MB, at both sizes."""
    from kinkcheck.report.query import data_path  # slow: msgspec

    program = "torch.clamp(x, min=0)"
    look = ("import kinkcheck\n"
            f"rows = kinkcheck.lookup({program!r}, case='relu@0', release='2.14.1')\nassert rows[0].label == 'left'\n")
    cite = ("import sys, runpy\n"
            f"sys.argv = ['kinkcheck', 'cite', {program!r}]\n"
            "try:\n    runpy.run_module('kinkcheck', run_name='__main__')\nexcept SystemExit:\n    pass\n")
    grad = ("import time\n"
            "import pyarrow.compute, pyarrow.parquet, kinkcheck.report.model, kinkcheck.report.dataset\n"
            "from kinkcheck.answers.explain.rows import report_index, report_rows\n"
            "from kinkcheck.report.query import default_report\n"
            "t0 = time.perf_counter()\n"
            f"view = report_rows(report_index(default_report()), {program!r}, 'torch', {list(GRAD_CASES)!r})\n"
            "assert view.rows and view.rows[0]['this'] and view.rows[0]['ranges'], view\n"
            "print(f'inner-s {time.perf_counter() - t0:.4f}')\n")
    src = data_path()
    floor = _cold("import pyarrow.compute, pyarrow.parquet, kinkcheck.report.query, kinkcheck.answers.explain.rows\n", repeat)
    rows = [("lookup", *_cold(look, repeat)), ("cite", *_cold(cite, repeat)),
            ("grad's report rows", *_cold_timed(grad, repeat))]
    with tempfile.TemporaryDirectory() as tmp:  # grown in another process: a child's peak RSS starts at its parent's
        grow = (f"from pathlib import Path\nfrom kinkcheck.dev.bench import grow_report\n"
                f"print(grow_report(Path({str(src.parent)!r}), Path({tmp!r}), {scale}))\n")
        grown = int(subprocess.run([sys.executable, "-c", grow], check=True, capture_output=True, text=True).stdout)
        env = {**os.environ, "KINKCHECK_REPORTS": tmp}
        rows.append((f"lookup, data x{scale} ({grown:,} rows)", *_cold(look, repeat, env)))
        rows.append((f"cite, data x{scale}", *_cold(cite, repeat, env)))
        rows.append((f"grad's report rows, data x{scale}", *_cold_timed(grad, repeat, env)))
    print("\n".join(lookup_lines(rows, repeat, src, floor)))
    command = "nox -s bench -- --lookup"
    figures.note("lookup.floor", f"{floor[0]:.2f} s, {floor[1]:.0f} MB", command)
    for key, (_, sec, mb) in zip(("lookup", "cite", "grad-rows", "lookup-x10", "cite-x10", "grad-rows-x10"), rows):
        figures.note(f"lookup.{key}", f"{sec:.2f} s, {mb:.0f} MB", command)
    return 0


#: Predicting one program over every release of one framework, warm (issue 45).
RULES_PREDICT_TARGET = 0.5
#: The rules' share of a full render (inference and leave-one-case-out validation), at most (issue 45).
RULES_RENDER_TARGET = 0.20


def _grown_table(table: Any, scale: int) -> Any:
    """``table`` with ``scale - 1`` copies of every row as other environments (``<env>+copy<k>``)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    parts = [table]
    for k in range(1, scale):
        parts.append(table.set_column(table.schema.get_field_index("environment"), "environment",
                                      pc.binary_join_element_wise(table["environment"], pa.scalar(f"+copy{k}"), "")))
    return pa.concat_tables(parts)


def rules_speed(repeat: int, program: str = "torch.relu(2.0 * x - 1.0) * torch.clamp(x, 0.0, 1.0)",
                at: str = "x=0.5") -> int:
    """The rules' benchmark (module docstring, ``--rules``): figures side by side in one run."""
    import pyarrow.parquet as pq

    point = pt.parse_point(at)
    answer.predictions(program, point, "torch", report="reports")  # warm: the rules file read, the oracle cached
    best_predict = min(_timed_s(lambda: answer.predictions(program, point, "torch", report="reports"))
                       for _ in range(max(repeat, 3)))
    n_releases = len({p["release"] for p in answer.predictions(program, point, "torch", report="reports")["predicted"]})
    catalog = load_catalog()
    parquet = Path("reports/observations.parquet").read_bytes()
    rules.render(parquet, catalog)  # warm: the program models, local oracles and predictions cached on disk
    cached = [_render_in_child(fresh_rules=False) for _ in range(repeat)]
    fresh = [_render_in_child(fresh_rules=True) for _ in range(repeat)]
    render_s, rule_s = min(cached)
    fresh_s, fresh_rule_s = min(fresh)
    rest = render_s - rule_s
    table = pq.read_table(io.BytesIO(parquet), columns=list(rules.COLUMNS))
    small = min(_timed_s(lambda: rules.from_table(table, catalog)) for _ in range(repeat))
    grown = _grown_table(table, 10)
    big = _timed_s(lambda: rules.from_table(grown, catalog))
    print(f"rules, warm cache, {os.cpu_count()} CPUs (best of {repeat}; each render in a fresh process)")
    print(f"  predict {program} at {at} over {n_releases} torch releases: {best_predict:.3f} s "
          f"(target <= {RULES_PREDICT_TARGET} s {'ok' if best_predict <= RULES_PREDICT_TARGET else 'MISSED'})")
    print(f"  full render {render_s:.2f} s, of which the rules {rule_s:.2f} s (their files cached for these inputs): "
          f"+{100 * rule_s / rest:.0f} % over the rest")
    share = fresh_rule_s / rest
    print(f"  full render with the rules computed afresh (every framework's, as after a change of the catalog; after "
          f"one new shard only its framework's; program models, local oracles and predictions cached on disk) "
          f"{fresh_s:.2f} s, of which the rules {fresh_rule_s:.2f} s (inference, "
          f"leave-one-case-out validation, rules.json.gz and rules.md): +{100 * share:.0f} % over the rest of the "
          f"render (target <= {100 * RULES_RENDER_TARGET:.0f} % {'ok' if share <= RULES_RENDER_TARGET else 'MISSED'})")
    print(f"  inference + validation alone, in this process: {table.num_rows:,} observations {small:.2f} s, x10 "
          f"({grown.num_rows:,}) {big:.2f} s: ratio {big / small:.2f} "
          f"({'linear' if big / small <= 12.5 else 'WORSE THAN LINEAR'}, <= 1.25 x 10)")
    command = "nox -s bench -- --rules"
    figures.note("rules.predict", f"{best_predict:.2f} s over {n_releases} releases", command)
    figures.note("render.full", f"{render_s:.1f} s", command)
    figures.note("render.rules-cached", f"{rule_s:.1f} s", command)
    figures.note("render.rules-fresh", f"{fresh_rule_s:.1f} s (+{100 * share:.0f} % over the rest)", command)
    figures.note("rules.x10", f"{big:.1f} s for {small:.1f} s", command)
    return 0


def _render_in_child(fresh_rules: bool) -> tuple[float, float]:
    """A full render of the committed shards in a fresh Python (nothing of this process's memory helps it): its
    seconds and the rules' share of them, with the rules' files computed afresh when ``fresh_rules`` (their render
    cache and every framework's kept part neither read nor written: every rule inferred again, as after a change
    of the catalog or of the rules' code; after one new shard only its framework's part is)."""
    script = (
        "import json, sys, tempfile, time\n"
        "from pathlib import Path\n"
        "from kinkcheck import rules\n"
        "from kinkcheck.catalog import load_catalog\n"
        "from kinkcheck.render import write_reports\n"
        "from kinkcheck.shards import load_shards\n"
        "if sys.argv[1] == 'fresh':\n"
        "    rules._cached_render, rules._keep_render = (lambda key: None), (lambda key, out, parts: None)\n"
        "    rules._cached_part, rules._keep_part = (lambda key: None), (lambda key, part: None)\n"
        "catalog = load_catalog()\n"
        "shards, _ = load_shards('references/observations', catalog)\n"
        "with tempfile.TemporaryDirectory(prefix='kinkcheck-bench-') as tmp:\n"
        "    t0 = time.perf_counter()\n"
        "    write_reports(shards, catalog, Path(tmp) / 'out')\n"
        "    print(json.dumps([time.perf_counter() - t0, rules.SPENT[-1]]))\n")
    out = subprocess.run([sys.executable, "-c", script, "fresh" if fresh_rules else "cached"], capture_output=True,
                         text=True, check=True, env=_bytecode_env(None))  # as installed: byte code written, read
    render, rule = json.loads(out.stdout.strip().splitlines()[-1])
    return render, rule


def _timed_s(fn: Any) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m kinkcheck.dev.bench",
        description="kinkcheck's benchmarks (nox -s bench): each prints its figures side by side, measured in one "
                    "run, with its target. Without an option: the probe of the whole catalog vs a hand-written loop "
                    "of the same gradients (target <= 1.5 x).",
        epilog="The module's docstring (python -m pydoc kinkcheck.dev.bench) says what each one measures and how.")
    ap.add_argument("--framework", action="append", choices=tuple(heads()),
                    help="default: every framework with a hand-written loop that is installed here")
    ap.add_argument("--repeat", type=int, default=2, help="best of how many runs of each figure (default: 2)")
    ap.add_argument("--installs", action="store_true", help="cold installs, uv vs pip/venv (downloads GBs)")
    ap.add_argument("--matrix-disk", metavar="LOG", help="peak disk of the matrix from nox's .nox/matrix-disk.jsonl")
    ap.add_argument("--compiled", action="store_true",
                    help="the whole catalog with torch.compile (inductor) vs eager reverse mode, all four dtypes")
    ap.add_argument("--compiled-chunks", action="store_true",
                    help="a cold inductor probe of the whole catalog in program chunks on every core vs one batch per "
                         "dtype (target <= 1.25 x compile CPU-seconds / cores)")
    ap.add_argument("--oracle", action="store_true",
                    help="cold sympy oracle over the catalog, and kinkcheck grad judged vs --no-judge (warm cache)")
    ap.add_argument("--sample", type=int, default=20,
                    help="with --oracle: how many catalog programs grad is timed on, spread over the catalog (0: all)")
    ap.add_argument("--rules", action="store_true",
                    help="the rules: one program predicted over every release (target <= 0.5 s), their share of a "
                         "full render (target <= 20 %%) and inference at x10 data")
    ap.add_argument("--report", action="store_true",
                    help="warm kinkcheck report vs rendering alone, a cold first render, and the hot spots")
    ap.add_argument("--add-case", action="store_true",
                    help="per framework: a full re-measure of its environment vs adding one case to it (target <= 2 %%)")
    ap.add_argument("--shards", type=Path, default=Path("references/observations"),
                    help="with --report: the shard folder (default: references/observations)")
    ap.add_argument("--no-cold", action="store_true", help="with --report: skip the cold render (about a minute)")
    ap.add_argument("--scale", type=int, default=0, metavar="N",
                    help="with --report: instead, a full render beside one of the shards grown N times (10: about "
                         "3 minutes and 12 GB of memory), to show the render is linear in observations")
    ap.add_argument("--lookup", action="store_true",
                    help="a cold kinkcheck.lookup vs a cold kinkcheck cite, and the lookup on the data grown x10 "
                         "(targets <= 0.5 s, <= 200 MB)")
    ap.add_argument("--ask", metavar="SPEC", help="kinkcheck ask across the torch releases in SPEC (e.g. '>=2.14'), "
                    "cold then warm (targets for the whole matrix: <= 10 min cold, <= 60 s warm; ~5.5 GB a release)")
    ap.add_argument("--census", action="store_true",
                    help="the reference kink-hit census (kinkcheck census, default scale): its time (target <= 10 "
                         "min) and the forward passes and pre-activations it counts per second")
    ap.add_argument("--record", action="store_true",
                    help="write the figures README and docs/ quote into references/figures.json (then python -m "
                         "kinkcheck.dev.readme puts them in the pages)")
    args = ap.parse_args(argv)
    rc = _run(args)
    if args.record and rc == 0:
        path = figures.write_record()
        print(f"recorded {', '.join(sorted(figures.noted()))} in {path}" if path else
              "--record: this benchmark notes no figure README or docs/ quote", file=sys.stderr)
    return rc


def _run(args: argparse.Namespace) -> int:
    """The benchmark ``args`` ask for; its exit status."""
    if args.rules:
        return rules_speed(args.repeat)
    if args.ask:

        return speed(args.ask)
    if args.lookup:
        return lookup_speed(max(args.repeat, 3))
    if args.census:
        return census_speed()
    if args.add_case:
        return add_case(args.framework)
    if args.report and args.scale > 1:
        return report_scale(args.shards, args.scale)
    if args.report:
        return report_speed(args.shards, args.repeat, cold=not args.no_cold)
    if args.oracle:
        oracle_cold()
        return grad_judged_vs_bare(args.sample, args.repeat)
    if args.installs:
        return cold_installs()
    if args.matrix_disk:
        return matrix_disk(Path(args.matrix_disk))
    if args.compiled_chunks:

        return compiled_chunks_speed(args.repeat)
    if args.compiled:

        return compiled_vs_eager(args.repeat)
    py = sys.executable
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for fw in args.framework or [f for f in heads() if importlib.util.find_spec(f) is not None]:
            script = Path(tmp) / f"loop_{fw}.py"
            script.write_text(hand_written_loop(fw))
            imp = _best([py, "-c", _head(fw)[1]], args.repeat)
            loop = _best([py, str(script)], args.repeat)
            cmd = [py, "-m", "kinkcheck", "probe", "--framework", fw, "--quiet", "--mode", "reverse",
                   "--dtype", "float64", "--dtype", "float32", "--out-dir", tmp]
            probe = _best(cmd, args.repeat)
            inline = _best([*cmd, "--no-isolate"], args.repeat)
            rows.append((fw, imp, loop, probe, inline))
    print(f"{'framework':<12}{'import s':>10}{'hand loop s':>13}{'probe s':>10}{'probe/(import+loop)':>22}  target"
          f"{'in-process probe s':>22}{'ratio':>7}")
    for fw, imp, loop, probe, inline in rows:
        ratio = probe / loop  # the loop script includes its own import
        print(f"{fw:<12}{imp:>10.2f}{loop - imp:>13.2f}{probe:>10.2f}{ratio:>22.2f}  <= {TARGET} "
              f"{'ok' if ratio <= TARGET else 'MISSED':<6}{inline:>16.2f}{inline / loop:>7.2f}")
    print("(hand loop s = loop script wall time minus the bare import; probe s = the default probe, its worker in a\n"
          " second process (forked from the probe on Linux) that a crash or hang cannot take the shard with, merging\n"
          " into the shard the run before wrote; in-process = --no-isolate; each figure is the best of\n"
          f" {args.repeat} fresh processes)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
