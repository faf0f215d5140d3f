"""The ``kinkcheck probe`` command once its arguments are parsed (:mod:`kinkcheck.faces.probe` parses and calls
:func:`probe_command`): check the request, hold the environment's lock, probe in a bounded worker
(:func:`kinkcheck.probe.isolated.probe_isolated`) or in this process, merge into the shard
(:func:`kinkcheck.probe.plan.write_merged`) and say what was written. :func:`probe_worker` is the worker's half.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from kinkcheck.catalog import CatalogError, load_catalog, with_staged
from kinkcheck.errors import EXIT_BAD_INPUT, UsageError
from kinkcheck.frameworks import FrameworkUnavailable
from kinkcheck.platforms import device_title
from kinkcheck.platforms.isa import IsaError, apply_cap
from kinkcheck.probe.cells import DEFAULT_DTYPES, select_cases
from kinkcheck.probe.compiled import chunk_count, compile_jobs, compiled_chunks
from kinkcheck.probe.isolated import probe_isolated
from kinkcheck.probe.journal import _append, _read_journal, journal_path
from kinkcheck.probe.plan import read_old_shard, write_merged
from kinkcheck.probe.run import ProbeBusy, environment_id, probe, probe_lock
from kinkcheck.probe.worker import (RESTARTED_ENV, START_ENV, ProbeInterrupted, ProbeLimits, die_with_parent,
                                    limit_memory)
from kinkcheck.registry import REGISTRY
from kinkcheck.shards import ShardError
from kinkcheck.shards.validate import one_line
from kinkcheck.vocabulary import DTYPES, FRAMEWORK_MODES, MODES

__all__ = ["ProbeStopped", "probe_command", "probe_worker"]


def probe_command(args: argparse.Namespace) -> int:
    """``kinkcheck probe`` with its parsed arguments: measure, merge into the shard, say what was written.

    Raises
    ------
    UsageError
        Bad input, a framework or device that is not here, a shard that cannot be written (one line, exit 2).
    """
    if getattr(args, "isa", None):  # before anything imports a framework: the libraries read the cap when they load

        try:
            apply_cap(args.isa)
        except IsaError as err:
            raise UsageError(str(err)) from None
    for d in args.dtype:
        if d not in DTYPES:
            raise UsageError(f"unknown dtype {d!r} (known: {', '.join(DTYPES)})")
    for m in args.mode:
        if m not in MODES:
            raise UsageError(f"unknown mode {m!r} (known: {', '.join(MODES)})")
    args.limits = _probe_limits(args)
    try:
        catalog = load_catalog(args.catalog, frameworks=(args.framework,) if args.framework else None)
        if args.staged:

            catalog = with_staged(catalog, frameworks=(args.framework,) if args.framework else None)

        select_cases(catalog, args.case)
    except CatalogError as err:
        raise UsageError(str(err)) from None
    if args.worker:
        return probe_worker(args, catalog)
    if args.replace and (args.case or args.mode or args.dtype):
        raise UsageError("probe: --replace re-measures the full matrix; drop --case, --mode and --dtype "
                         "(a narrowed probe merges into the shard there is)")
    if bool(args.out) == bool(args.out_dir):
        raise UsageError("probe: give exactly one of --out FILE (one framework) or --out-dir DIR")
    if args.out and not args.framework:
        raise UsageError("probe: --out needs --framework NAME (or use --out-dir DIR for every installed framework)")
    if args.framework and args.device == "metal":  # before any progress: bad input, not an absent device

        devices = REGISTRY[args.framework].devices  # (cuda: each adapter says why, TensorFlow's measures it)
        if args.device not in devices:
            raise UsageError(f"probe: kinkcheck measures {args.framework} on {', '.join(map(device_title, devices))}"
                             f" only, not on {device_title(args.device)}")
    if args.out:
        if Path(args.out).is_dir():
            example = Path(args.out) / "torch-2.13.0-cpu.json"
            raise UsageError(f"--out {args.out} is a folder; name a file, e.g. {example}")
        return _probe_one(args, catalog, args.framework, Path(args.out))  # checks the name, then makes the folder
    out_dir = Path(args.out_dir)
    if not out_dir.is_dir():
        raise UsageError(f"--out-dir {out_dir}: {'not a folder' if out_dir.exists() else 'no such folder'}")
    _check_writable(out_dir / "probe.json")
    measured = 0
    for fw in [args.framework] if args.framework else list(FRAMEWORK_MODES):
        try:
            measured += _probe_one(argparse.Namespace(**vars(args)), catalog, fw, None, out_dir) == 0
        except ProbeStopped:  # interrupted, or another probe is writing: stop here, say only that
            raise
        except UsageError as err:  # one framework missing or without the device: say so, go on
            if args.framework:  # the one framework asked for: its reason is the whole answer
                raise
            print(f"{fw}: {err}", file=sys.stderr)
    if not measured:
        raise UsageError(f"nothing measured on {args.device}")
    return 0


class ProbeStopped(UsageError):
    """The probe stops for every framework: its worker was killed from outside, or another probe holds the lock."""


def _probe_one(args: argparse.Namespace, catalog: Any, framework: str, out: Path | None,
               out_dir: Path | None = None) -> int:
    """Probe one framework and merge the result into ``out`` (or ``out_dir/<environment id>.json``).

    The shard file is named after its environment; the journal beside it (``.<id>.<selection>.journal.jsonl``,
    one per selection of modes, dtypes and cases) lets a killed probe resume, and is deleted once the shard is
    written. The whole probe holds the environment's lock (:func:`kinkcheck.probe.run.probe_lock`): a second probe
    of the same environment stops at once.
    """
    modes = [m for m in args.mode if m in FRAMEWORK_MODES[framework]]
    if args.mode and args.framework and len(modes) < len(args.mode):
        bad = [m for m in args.mode if m not in modes]
        raise UsageError(f"unknown mode {bad[0]!r} for {framework} (known: {', '.join(FRAMEWORK_MODES[framework])})")
    if args.mode and not modes:
        raise UsageError(f"none of the modes {', '.join(args.mode)} exists for {framework}")
    expected = environment_id(framework, args.device)  # from the installed metadata, before a long probe
    if out is not None and expected is not None:
        _check_shard_name(out, expected)  # before the lock file is made beside it
    if out is not None:
        _check_writable(out)  # a misnamed shard is refused before its folder is made
    target = out if out is not None else (out_dir / f"{expected}.json" if expected else None)
    with contextlib.ExitStack() as stack:
        if target is not None:  # None: not installed, and the probe says so
            try:
                stack.enter_context(probe_lock(target))
            except ProbeBusy as err:
                raise ProbeStopped(str(err)) from None
            except OSError as err:
                raise UsageError(f"cannot lock {target.parent}: {err.strerror}") from None
        return _probe_locked(args, catalog, framework, out, out_dir)


def _probe_locked(args: argparse.Namespace, catalog: Any, framework: str, out: Path | None,
                  out_dir: Path | None) -> int:
    """:func:`_probe_one` once the environment's lock is held."""
    modes = [m for m in args.mode if m in FRAMEWORK_MODES[framework]]  # checked by _probe_one
    args.framework = framework
    expected = environment_id(framework, args.device)  # from the installed metadata, before a long probe
    if out is not None and expected is not None:
        _check_shard_name(out, expected)
    target = out if out is not None else (out_dir / f"{expected}.json" if expected else None)
    journal = journal_path(target, modes, args.dtype, args.case) if target is not None else None
    ahead: dict[str, Any] = {}

    def read_ahead() -> None:  # the shard merged into, read while the worker measures; unreadable: stop now
        if target is not None and not args.replace:
            try:
                old = read_old_shard(target)
            except ShardError as err:
                raise UsageError(f"cannot write shard {target}: {err}") from None
            ahead["old"] = lambda: old

    try:
        if args.no_isolate:
            shard = _probe_with_progress(args, catalog, journal=str(journal) if journal else None,
                                         modes=modes or None)
        else:
            shard = probe_isolated(framework, args.device, args.dtype or DEFAULT_DTYPES, modes or None, catalog,
                                   quiet=args.quiet, cases=args.case or None, journal=journal, limits=args.limits,
                                   worker=lambda j: _forked_worker(args, catalog, j), on_started=read_ahead)
    except ProbeInterrupted as err:  # the journal stays: the same command resumes
        raise ProbeStopped(str(err)) from None
    except UsageError:  # the shard there cannot be merged into (read while the worker started): nothing measured
        _drop_empty_journal(journal)
        raise
    except (FrameworkUnavailable, CatalogError) as err:
        _drop_empty_journal(journal)
        raise UsageError(str(err)) from None
    eid = shard["environment"]["id"]
    if out is not None:
        _check_shard_name(out, eid)
    out = out if out is not None else out_dir / f"{eid}.json"
    args.out = str(out)
    keep = catalog  # what the shard may hold: the staged cases measured ahead are not "removed" cases
    if not catalog.staged:

        try:
            keep = with_staged(catalog, frameworks=(framework,))
        except CatalogError as err:
            if args.drop_removed:
                raise UsageError(f"--drop-removed: the staged cases cannot be read, so what to keep is unknown: "
                                 f"{err}") from None
    try:
        merged = write_merged(out, shard, keep if args.drop_removed else catalog, replace=args.replace,
                              drop_removed=args.drop_removed, old=ahead.get("old") if out == target else None)
    except ShardError as err:  # nothing written; the journal keeps what was probed
        raise UsageError(f"cannot write shard {out}: {err}") from None
    except OSError as err:
        raise UsageError(f"cannot write shard {out}: {err.strerror}") from None
    if journal is not None:
        journal.unlink(missing_ok=True)
    obs = shard["observations"]
    n_err = sum(o["status"] == "error" for o in obs)
    n_un = sum(o["status"] == "unavailable" for o in obs)
    what = f"{len(shard['environment'].get('case_hashes') or {})} case(s)" if args.case else "every case"
    print(f"{eid}: probed {what}: {len(obs)} observations ({n_err} error, {n_un} unavailable), "
          f"{len(shard['networks'])} network runs -> {out} ({'replaced' if args.replace else 'merged'}: "
          f"{len(merged['observations'])} observations, {len(merged['networks'])} network runs)", file=sys.stderr)
    kept = (merged["environment"].get("history") or [{}])[-1].get("not_remeasured") if not args.replace else None
    if kept and merged is not shard:
        print(f"{eid}: kept {kept['observations']} measured observations and {kept['networks']} network runs that "
              f"could not be re-measured here ({'; '.join(kept['reasons'])[:300]}); recorded in environment.history",
              file=sys.stderr)
    measured = {c.id for c in keep if c.programs_for(framework)}
    outside = list(dict.fromkeys(o["case"] for o in merged["observations"] if o["case"] not in measured))
    if outside:
        print(f"{eid}: kept {len(outside)} case(s) the catalog {catalog.path} does not hold, as they were "
              f"(--drop-removed drops them): {', '.join(outside[:5])}{', …' if len(outside) > 5 else ''}",
              file=sys.stderr)
    return 0


def _check_shard_name(out: Path, environment_id: str) -> None:
    """A shard file is named after its environment, so one release's shard cannot overwrite another's."""
    if out.name != f"{environment_id}.json":
        raise UsageError(f"--out {out}: this probe measures {environment_id}; its shard file must be named "
                         f"{environment_id}.json")


def _drop_empty_journal(journal: Path | None) -> None:
    """Delete a journal that holds no finished case (e.g. only the worker's 'no cuda device' line)."""
    if journal is None or not journal.exists():
        return
    try:
        _, done, _ = _read_journal(journal)
    except Exception:  # noqa: BLE001 - a fatal line: nothing finished
        done = {}
    if not done:
        journal.unlink(missing_ok=True)


def _probe_with_progress(args: argparse.Namespace, catalog: Any, journal: str | None,
                         modes: Sequence[str] | None = None) -> dict[str, Any]:
    catalog = select_cases(catalog, args.case)
    modes = list(modes or args.mode or FRAMEWORK_MODES[args.framework])
    if args.quiet:  # no progress display: rich is not even imported (a tenth of a light framework's probe)
        def say(line: str) -> None:
            if not os.environ.get(RESTARTED_ENV):
                print(line, file=sys.stderr)

        return probe(args.framework, args.device, args.dtype or DEFAULT_DTYPES, modes, catalog, journal=journal,
                     on_resume=say)
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    programs = sum(1 for _ in catalog.programs(args.framework))
    total = programs + len(compiled_chunks(modes, args.dtype or DEFAULT_DTYPES, compile_jobs(), programs))
    with Progress(
        TextColumn(f"[bold]probe {args.framework} {args.device}[/]"), BarColumn(), MofNCompleteColumn(),
        TimeElapsedColumn(), TextColumn("{task.description}"), console=Console(stderr=True),
    ) as progress:
        task = progress.add_task("", total=total)

        def step(desc: str) -> None:
            progress.update(task, description=desc[:60])
            progress.advance(task)

        def resume(line: str) -> None:
            if not os.environ.get(RESTARTED_ENV):  # a worker restarted after a crash: said once already
                progress.console.print(line, markup=False, highlight=False, soft_wrap=True)

        return probe(args.framework, args.device, args.dtype or DEFAULT_DTYPES, modes, catalog,
                     on_step=step, journal=journal, on_resume=resume)


def _probe_limits(args: argparse.Namespace) -> Any:
    """``--case-timeout``/``--batch-timeout``/``--memory`` (else the environment, else the defaults)."""
    start = os.environ.get(START_ENV, "")
    if start not in ("", "fork", "spawn"):
        raise UsageError(f"{START_ENV} must be fork or spawn (or unset: fork where it is safe), got {start!r}")
    try:
        chunk_count(1, compile_jobs())  # KINKCHECK_COMPILE_JOBS and _CHUNKS: bad input, said here, not in the worker
        return ProbeLimits.resolve(args.case_timeout, args.batch_timeout, args.memory)
    except ValueError as err:
        raise UsageError(str(err)) from None


def probe_worker(args: argparse.Namespace, catalog: Any) -> int:
    """The worker half of an isolated probe: results go to the journal, not to --out."""
    die_with_parent()
    limit_memory(int(args.limits.memory_gib * 2 ** 30))  # before the framework is imported
    try:
        _probe_with_progress(args, catalog, journal=args.worker)
    except FrameworkUnavailable as err:
        _append(args.worker, {"fatal": str(err)})
        return EXIT_BAD_INPUT
    return 0


def _forked_worker(args: argparse.Namespace, catalog: Any, journal: Path) -> int:
    """:func:`probe_worker` in a worker forked by :func:`kinkcheck.probe.isolated.probe_isolated` (``--worker JOURNAL``
    without a new interpreter), with :func:`kinkcheck.cli.main`'s handling of bad input and Ctrl-C."""
    ns = argparse.Namespace(**vars(args))
    ns.worker = str(journal)
    try:
        return probe_worker(ns, catalog)
    except UsageError as err:

        print(f"kinkcheck: error: {one_line(str(err), limit=2000)}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except KeyboardInterrupt:
        print("kinkcheck: interrupted", file=sys.stderr)
        return 130


def _check_writable(out: Path) -> None:
    """Fail before a long probe, not after it, when the shard cannot be written."""
    if out.is_dir():
        raise UsageError(f"--out {out} is a folder; name a file, e.g. {out / 'torch-2.13.0-cpu.json'}")
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise UsageError(f"cannot create {out.parent}: {err.strerror}") from None
    if not os.access(out.parent, os.W_OK):
        raise UsageError(f"cannot write in {out.parent}")
