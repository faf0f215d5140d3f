"""Probe every framework a machine has on one device, in parallel lanes, within a deadline: one command for a
lent GPU machine or a CI GPU runner.

    python -m kinkcheck.lanes --device cuda --out-dir references/observations --deadline 480 --archive kc-cuda.tgz

One lane per framework (default: those whose matrix has the device, :mod:`kinkcheck.registry`), run side by
side; within a lane, ``kinkcheck probe`` runs one step after another (:data:`STEPS`: PyTorch's eager modes
first, then each compiled backend), so a step cut off by the deadline loses only itself (its journal keeps what
it measured; the same step resumes from it). A framework of :data:`SIDE_BY_SIDE` (JAX: each mode traces the
whole catalog on one core, 328 s for reverse mode on an H200 machine) runs every step in a lane of its own,
into a scratch folder, and each finished step is merged into the shard (:func:`kinkcheck.probe.plan.write_merged`).
A step measures only what the shard in ``--out-dir`` lacks of its modes (:func:`kinkcheck.probe.plan.missing_work`:
cells never measured, or recorded as not measured, ``environment.not_measured_parts``), and the steps with the
most missing cells go first. Each probe is given the time left less a margin. A side-by-side step cut off keeps
its journal in the archive (``journals/<step>/``), not where the next run resumes from. At the end the shards,
their journals and the lanes' logs go into one ``--archive`` (gzip tar).

Exit status: 0 when every step finished (or had nothing to measure), 1 when a step failed, was cut off or had no
time left (the archive is still written), 2 on bad input (one line, nothing run) or when every lane's probe was
refused (``--device cuda`` on a machine without one: the probe's own line, nothing written).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tarfile
import tempfile
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import NoReturn

from kinkcheck.catalog import CatalogError, load_catalog, with_staged
from kinkcheck.platforms import DEVICES
from kinkcheck.probe.plan import missing_work, write_merged
from kinkcheck.probe.run import environment_id
from kinkcheck.registry import FRAMEWORKS, framework
from kinkcheck.shards import ShardError, read_shard, shard_lock
from kinkcheck.vocabulary import COMPILED_MODES, FRAMEWORK_MODES

__all__ = ["SIDE_BY_SIDE", "STEPS", "Step", "lane_steps", "main"]

#: Seconds a probe is given less than the time left (its worker is killed at the deadline, then it writes).
MARGIN_S = 12
#: A step with less time left than this is not started.
MIN_STEP_S = 20
#: The shortest --deadline taken: one step's time with its margin; the longest: a week.
MIN_DEADLINE_S = MIN_STEP_S + MARGIN_S
MAX_DEADLINE_S = 7 * 24 * 3600


def _steps_torch() -> list[tuple[str, ...]]:
    eager = tuple(m for m in FRAMEWORK_MODES["torch"] if m not in COMPILED_MODES)
    return [eager, *((m,) for m in FRAMEWORK_MODES["torch"] if m in COMPILED_MODES)]


#: How a framework's modes are split into steps (default: all its modes in one step). PyTorch's eager modes are
#: fast, its compiled backends slow (a cold inductor compile of the catalog); each JAX mode traces the catalog
#: anew (reverse took 328 s on an H200 machine), so a cut loses one mode.
STEPS = {"torch": _steps_torch(), "jax": [(m,) for m in FRAMEWORK_MODES["jax"]]}
#: Frameworks whose steps run side by side, each a lane of its own (one probe per environment at a time holds
#: the shard's lock, so each writes a shard of its own in a scratch folder, merged into the shard when done).
SIDE_BY_SIDE = frozenset({"jax"})
#: Defaults for every probe the lanes start (the environment's own values win): JAX allocates GPU memory as it
#: needs it instead of taking 75 % of it at start, so that its side-by-side probes share one device.
PROBE_ENV = {"XLA_PYTHON_CLIENT_PREALLOCATE": "false"}
#: Side-by-side steps merge one after another (:func:`kinkcheck.shards.shard_lock` refuses, it does not wait).
_MERGING = threading.Lock()


@dataclass
class Step:
    """One ``kinkcheck probe`` of a lane: its modes, and the cases it lacks in them (None: every case)."""

    framework: str
    modes: tuple[str, ...]
    cells: int
    cases: tuple[str, ...] | None = None
    outcome: str = "not run"
    ok: bool = False
    args: list[str] = field(default_factory=list)


def lane_steps(framework: str, device: str, out_dir: Path, catalog_path: str | None = None,
               cases: Sequence[str] = ()) -> list[Step]:
    """The steps of one framework's lane, those with the most missing cells first; a step with nothing missing
    is kept with ``outcome`` "fresh" (``ok``).

    Raises
    ------
    ShardError
        The framework's shard in ``out_dir`` cannot be read (no probe could merge into it).
    """
    catalog = load_catalog(catalog_path)
    env_id = environment_id(framework, device)
    shard = None
    if env_id is not None and (out_dir / f"{env_id}.json").exists():
        shard = read_shard(out_dir / f"{env_id}.json")  # ShardError: unreadable, so nothing could merge into it
    wanted = set(cases)
    steps = []
    for modes in STEPS.get(framework, [tuple(FRAMEWORK_MODES[framework])]):
        work = missing_work(shard, catalog, framework, modes=modes)
        cells = [(c, m, d) for c, m, d in work.cells if m in modes and (not wanted or c in wanted)]
        missing = tuple(dict.fromkeys(c for c, _, _ in cells))
        every = {c.id for c in catalog if c.programs_for(framework)}
        step = Step(framework, modes, len(cells), None if set(missing) >= every and not wanted else missing)
        if not cells:
            step.outcome, step.ok = "fresh: nothing missing in these modes", True
        steps.append(step)
    return sorted(steps, key=lambda s: -s.cells)


def _run_apart(step: Step, device: str, out_dir: Path, scratch: Path, log: Path, deadline: float,
               extra: Sequence[str], catalog_path: str | None, staged: bool) -> None:
    """One step of a :data:`SIDE_BY_SIDE` framework: probed into ``scratch`` (a folder of its own), then merged
    into its shard in ``out_dir`` under the shard's lock; a step cut off keeps its journal in ``scratch``."""
    scratch.mkdir(parents=True, exist_ok=True)
    _run_lane([step], device, scratch, log, deadline, extra)
    if not step.ok or step.outcome.startswith("fresh"):
        return
    catalog = load_catalog(catalog_path)
    catalog = with_staged(catalog, frameworks=(step.framework,)) if staged else catalog
    with log.open("a", encoding="utf-8") as fh:
        for part in sorted(scratch.glob(f"{step.framework}-*.json")):
            try:
                with _MERGING, shard_lock(out_dir / part.name):  # one merge at a time: the lock does not wait
                    write_merged(out_dir / part.name, read_shard(part), catalog)
                fh.write(f"merged {part.name} ({', '.join(step.modes)}) into {out_dir / part.name}\n")
            except (ShardError, OSError) as err:
                step.ok, step.outcome = False, f"measured, but not merged: {err}"
                fh.write(f"{step.framework} {', '.join(step.modes)}: {step.outcome}\n")


def _run_lane(steps: list[Step], device: str, out_dir: Path, log: Path, deadline: float,
              extra: Sequence[str]) -> None:
    with log.open("a", encoding="utf-8") as fh:
        for step in steps:
            if step.ok:
                fh.write(f"{step.framework} {', '.join(step.modes)}: {step.outcome}\n")
                continue
            left = deadline - time.monotonic() - MARGIN_S
            step.args = [sys.executable, "-m", "kinkcheck", "probe", "--quiet", "--framework", step.framework,
                         "--device", device, "--out-dir", str(out_dir), *extra,
                         *(a for m in step.modes for a in ("--mode", m)),
                         *(a for c in (step.cases or ()) for a in ("--case", c))]
            if left < MIN_STEP_S:
                step.outcome = f"skipped: {max(0, int(left))} s left"
                fh.write(f"{step.framework} {', '.join(step.modes)}: {step.outcome}\n")
                continue
            fh.write(f"$ python {' '.join(step.args[1:])}\n")
            fh.flush()
            start = time.monotonic()
            try:
                proc = subprocess.run(step.args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=left,
                                      text=True, errors="replace", env=PROBE_ENV | dict(os.environ))
                fh.write(proc.stdout)
                step.ok = proc.returncode == 0
                step.outcome = f"rc={proc.returncode}"
                if proc.returncode == 2:  # refused (no such device here, a bad shard): the next steps would be too
                    step.outcome = "refused: " + (proc.stdout.strip().splitlines() or ["no reason given"])[-1]
                    fh.write(f"{step.framework} {', '.join(step.modes)}: {step.outcome}\n")
                    for rest in steps[steps.index(step) + 1:]:
                        if not rest.ok:
                            rest.outcome = "not run: the lane's probe was refused"
                    return
            except subprocess.TimeoutExpired as err:
                fh.write(err.stdout if isinstance(err.stdout, str) else (err.stdout or b"").decode(errors="replace"))
                step.outcome = f"cut off at the deadline after {int(left)} s (its journal keeps what it measured)"
            fh.write(f"{step.framework} {', '.join(step.modes)}: {step.outcome}, "
                     f"wall {time.monotonic() - start:.0f} s; {step.cells} (case, mode, dtype) missing before\n")


def _archive(path: Path, out_dir: Path, env_ids: Sequence[str], logs: Sequence[Path], scratch: Path) -> list[str]:
    """``out_dir``'s shards and journals of ``env_ids``, the journals of side-by-side steps cut off (under
    ``journals/<step>/``) and the ``logs``, in one gzip tar; the names stored."""
    names = []
    with tarfile.open(path, "w:gz") as tar:
        for env_id in env_ids:
            for f in sorted([*out_dir.glob(f"{env_id}.json"), *out_dir.glob(f".{env_id}.*.journal.jsonl")]):
                tar.add(f, arcname=f"shards/{f.name}")
                names.append(f"shards/{f.name}")
            for f in sorted(scratch.glob(f"*/.{env_id}.*.journal.jsonl")):
                tar.add(f, arcname=f"journals/{f.parent.name}/{f.name}")
                names.append(f"journals/{f.parent.name}/{f.name}")
        for f in logs:
            if f.exists():
                tar.add(f, arcname=f"logs/{f.name}")
                names.append(f"logs/{f.name}")
    return names


def _writable(folder: Path) -> bool:
    """Whether a file can be made in ``folder`` (tried: ``os.access`` says yes to root anywhere, /proc included)."""
    try:
        with tempfile.NamedTemporaryFile(dir=folder, prefix=".kinkcheck-lanes-", suffix=".tmp"):
            return True
    except OSError:
        return False


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:  # bad input: one line, exit 2, as the kinkcheck commands do
        print(f"{self.prog}: error: {message}", file=sys.stderr)
        raise SystemExit(2)


def main(argv: Sequence[str] | None = None) -> int:
    ap = _Parser(prog="python -m kinkcheck.lanes", description=__doc__.splitlines()[0])
    ap.add_argument("--device", required=True, help=f"one of {', '.join(DEVICES)}")
    ap.add_argument("--framework", action="append", default=[],
                    help="repeatable; default every framework whose matrix has the device")
    ap.add_argument("--out-dir", type=Path, default=Path("references/observations"))
    ap.add_argument("--deadline", type=float, default=480.0, help="seconds for the whole run (default 480)")
    ap.add_argument("--archive", type=Path, help="gzip tar of the shards, journals and logs (default: none)")
    ap.add_argument("--catalog", help="catalog TOML (default references/catalog.toml)")
    ap.add_argument("--case", action="append", default=[], help="repeatable; only these cases (default all)")
    ap.add_argument("--staged", action="store_true", help="the staged cases too (kinkcheck probe --staged)")
    ap.add_argument("--drop-removed", action="store_true", help="kinkcheck probe --drop-removed")
    args = ap.parse_args(argv)
    deadline = time.monotonic() + args.deadline
    if args.device not in DEVICES:
        ap.error(f"unknown device {args.device!r} (known: {', '.join(DEVICES)})")
    unknown = [f for f in args.framework if f not in FRAMEWORKS]
    if unknown:
        ap.error(f"unknown framework {unknown[0]!r} (known: {', '.join(FRAMEWORKS)})")
    if not MIN_DEADLINE_S < args.deadline <= MAX_DEADLINE_S:
        ap.error(f"--deadline must be more than {MIN_DEADLINE_S} s and at most {MAX_DEADLINE_S} s")
    if args.archive is not None and (args.archive.is_dir() or not _writable(args.archive.parent)):
        ap.error(f"--archive {args.archive}: " + ("a folder" if args.archive.is_dir() else
                                                   f"its folder {args.archive.parent} does not exist or is not "
                                                   "writable"))

    try:
        catalog = load_catalog(args.catalog)
    except CatalogError as err:
        ap.error(str(err))
    unknown_cases = [c for c in args.case if c not in {k.id for k in catalog}]
    if unknown_cases:
        ap.error(f"unknown case {unknown_cases[0]!r} (not in {catalog.path})")
    if not args.out_dir.is_dir():
        ap.error(f"--out-dir {args.out_dir}: no such folder")
    names = args.framework or [f for f in FRAMEWORKS if args.device in framework(f).devices]
    present = [f for f in names if environment_id(f, args.device) is not None]
    for f in names:
        if f not in present:
            print(f"{f}: not installed in this Python: no lane", file=sys.stderr)
    if not present:
        print(f"{ap.prog}: error: none of {', '.join(names)} is installed in this Python", file=sys.stderr)
        return 2
    scratch = tempfile.TemporaryDirectory(prefix="kinkcheck-lanes-")  # logs and side-by-side steps; the archive
    logs_dir = Path(scratch.name) / "logs"                                # keeps what is worth keeping
    logs_dir.mkdir()
    extra = [*(["--catalog", args.catalog] if args.catalog else []), *(["--staged"] if args.staged else []),
             *(["--drop-removed"] if args.drop_removed else [])]

    try:
        lanes = {f: lane_steps(f, args.device, args.out_dir, args.catalog, args.case) for f in present}
    except ShardError as err:
        ap.error(f"{err}; it is left as it is (fix or remove it)")
    threads = []
    for f, steps in lanes.items():
        log = logs_dir / f"{f}-{args.device}.log"
        if f in SIDE_BY_SIDE:
            threads += [threading.Thread(target=_run_apart, args=(
                step, args.device, args.out_dir, Path(scratch.name) / f"{f}-{'-'.join(step.modes)}",
                log.with_name(f"{f}-{'-'.join(step.modes)}-{args.device}.log"), deadline, extra, args.catalog,
                args.staged)) for step in steps]
        else:
            threads.append(threading.Thread(target=_run_lane, args=(steps, args.device, args.out_dir, log, deadline,
                                                                    extra)))
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    refused = {f: next(s.outcome for s in steps if s.outcome.startswith("refused: ")) for f, steps in lanes.items()
               if any(s.outcome.startswith("refused: ") for s in steps)
               and not any(s.outcome.startswith(("rc=", "cut off", "measured, but")) for s in steps)}
    if len(refused) == len(lanes):  # every framework's probes refused at once (e.g. no such device here)
        refused = list(refused.values())
        scratch.cleanup()
        print(f"{ap.prog}: error: {refused[0].removeprefix('refused: ').removeprefix('kinkcheck: error: ')}",
              file=sys.stderr)
        return 2
    for f, steps in lanes.items():
        for s in steps:
            print(f"{f} {args.device} {', '.join(s.modes)}: {s.outcome}")
    if args.archive:
        stored = _archive(args.archive, args.out_dir, [environment_id(f, args.device) or f for f in present],
                          sorted(logs_dir.glob(f"*-{args.device}.log")), Path(scratch.name))
        print(f"wrote {args.archive} ({len(stored)} files)")
    scratch.cleanup()
    return 0 if all(s.ok for steps in lanes.values() for s in steps) else 1


if __name__ == "__main__":
    sys.exit(main())
