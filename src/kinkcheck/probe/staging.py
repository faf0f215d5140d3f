"""Moving the staged cases into the catalog once every shard holds them: ``python -m kinkcheck.probe.staging``.

Staged cases (``references/staged/``, :func:`kinkcheck.catalog.staged_path`) are written and checked, and
``nox -s report`` measures them into every environment's shard (``kinkcheck probe --staged``) while the report
leaves them out. When every measured shard holds every staged cell (each case × mode × dtype, against the
case's current definition), :func:`promote` appends the staged cases to the catalog and their program tables to
``programs/<framework>.toml``, unchanged, and removes the staged files: every shard is then fresh for the
larger catalog (freshness is per case, :meth:`kinkcheck.catalog.Case.measurement_hash`), and the next render
reports them. Before that it refuses, naming the shards that lack some, and changes nothing.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from pathlib import Path

from kinkcheck.catalog import DRAFT_REASON, CatalogError, forget_loaded, load_catalog, staged_path, with_staged
from kinkcheck.probe.plan import not_measured_cases, unaccounted
from kinkcheck.shards import ShardError, read_shard, shard_lock, write_shard, write_text_atomic

__all__ = ["Pending", "pending", "promote"]


@dataclass(frozen=True)
class Pending:
    """A measured shard that lacks staged cells: its environment id and the staged cases to (re-)probe."""

    environment: str
    cases: tuple[str, ...]


def _shard_files(shards: Path) -> list[Path]:
    return sorted(p for p in shards.glob("*.json") if not p.name.startswith("."))


def pending(catalog_path: str | Path, shards: str | Path) -> list[Pending]:
    """The measured shards in the folder ``shards`` that lack some staged cell (every mode and dtype), in file
    order; not-measured records (a release that could not be installed) hold no case and count as complete.

    Raises
    ------
    CatalogError
        The catalog or its staged file is malformed, or there is no staged file.
    ShardError
        A shard cannot be read (promotion needs to know what every shard holds), or the folder holds no
        measured shard (a mistyped folder).
    """
    main = load_catalog(catalog_path)
    union = with_staged(main)
    if not union.staged:
        raise CatalogError(f"no staged cases: {staged_path(main.path)} does not exist")
    staged = {c.id for c in union.cases[len(main.cases):]}
    files = _shard_files(Path(shards)) if Path(shards).is_dir() else []
    measured = [s for s in map(read_shard, files) if s["environment"].get("not_measured") is None]
    if not measured:  # a mistyped folder must not read as "every shard holds them"
        raise ShardError(f"no measured shard in {shards}: nothing says the staged cases are measured")
    out = []
    for shard in measured:
        lacking = unaccounted(shard, union, [c.id for c in union.cases if c.id in staged])
        if lacking:
            out.append(Pending(shard["environment"]["id"], lacking))
    return out


def _body(text: str, first: str) -> str:
    """``text`` from its first line starting with ``first`` (the staged files' header comments dropped)."""
    lines = text.splitlines(keepends=True)
    start = next((i for i, line in enumerate(lines) if line.startswith(first)), len(lines))
    return "".join(lines[start:])


def promote(catalog_path: str | Path, shards: str | Path) -> int:
    """Append the staged cases to the catalog (and their program tables to ``programs/<framework>.toml``) and
    remove the staged files; the number of cases moved.

    Each file is written atomically; the result is loaded and every shard checked fresh against it, and on
    any failure the files are put back as they were.

    Raises
    ------
    CatalogError
        No staged file, a malformed one, a shard lacks staged cells (:func:`pending`; the message names the
        environments), or a staged program file has no counterpart in the catalog's ``programs/``.
    ShardError
        A shard cannot be read.
    """
    catalog = Path(catalog_path).resolve()
    forget_loaded()  # the files as they are now, not as this process first read them
    drafts = [(c.id, sorted(fw for fw, why in c.no_equivalent.items() if why.startswith(DRAFT_REASON)))
              for c in load_catalog(staged_path(catalog))] if staged_path(catalog).is_file() else []
    drafts = [(cid, fws) for cid, fws in drafts if fws]
    if drafts:
        cid, fws = drafts[0]
        raise CatalogError(f"staged case {cid} is a draft: write the program of {', '.join(fws)} (or why it has none) "
                           f"in place of {DRAFT_REASON!r}, so nothing moved"
                           + (f" ({len(drafts) - 1} more draft case(s))" if len(drafts) > 1 else ""))
    lacking = pending(catalog, shards)
    if lacking:
        names = ", ".join(f"{p.environment} ({len(p.cases)})" for p in lacking[:5])
        raise CatalogError(f"{len(lacking)} shard(s) lack staged cases, so nothing moved: {names}"
                           f"{', …' if len(lacking) > 5 else ''} (nox -s report probes them)")
    staged = staged_path(catalog)
    moves = [(catalog, staged, "[[case]]")]
    for table in sorted((staged.parent / "programs").glob("*.toml")):
        target = catalog.parent / "programs" / table.name
        if not target.is_file():
            raise CatalogError(f"{table}: no {target} to move its tables into")
        moves.append((target, table, "["))
    before = {target: target.read_text(encoding="utf-8") for target, _, _ in moves}
    sources = {source: source.read_text(encoding="utf-8") for _, source, _ in moves}
    moved = len(with_staged(load_catalog(catalog)).cases) - len(load_catalog(catalog).cases)
    try:
        for target, source, first in moves:
            write_text_atomic(target, before[target].rstrip("\n") + "\n\n" + _body(sources[source], first))
        for _, source, _ in moves:
            source.unlink()
        forget_loaded()
        new = load_catalog(catalog)
        ids = {c.id for c in new.cases[len(new.cases) - moved:]}
        stale = [p.name for p in _shard_files(Path(shards))
                 if not (s := read_shard(p))["environment"].get("not_measured")
                 and unaccounted(s, new, sorted(ids))]
        if stale:  # only the moved cases: another stale case is `nox -s report`'s to re-probe, not a reason here
            raise CatalogError(f"after the move {len(stale)} shard(s) lack moved cases ({', '.join(stale[:3])}); "
                               "put back as it was")
    except BaseException:
        for target, text in before.items():
            write_text_atomic(target, text)
        for source, text in sources.items():
            write_text_atomic(source, text)
        forget_loaded()
        raise
    for folder in (staged.parent / "programs", staged.parent):
        try:
            folder.rmdir()
        except OSError:  # something else lives there: left
            pass
    return moved


def record_not_measured(catalog_path: str | Path, shard_path: str | Path, reason: str) -> tuple[str, ...]:
    """Record in the shard at ``shard_path`` that the staged cases it lacks were not measured, and why (a shard of a
    device that no machine at hand has: the CUDA shards measured on a lent machine). The staged cases it holds stay
    as measured; the recorded ones stay due for its next probe, and the report says "not measured" and the reason.
    Returns the cases recorded.

    Raises
    ------
    CatalogError
        No staged cases.
    ShardError
        The shard cannot be read, is a not-measured record, or the reason is empty.
    """
    main = load_catalog(catalog_path)
    union = with_staged(main)
    if not union.staged:
        raise CatalogError(f"no staged cases: {staged_path(main.path)} does not exist")
    if not Path(shard_path).is_file():  # before the lock, which would make the folders of a mistyped path
        raise ShardError(f"{shard_path}: " + ("a folder, not a shard file" if Path(shard_path).is_dir()
                                              else "no such shard file"))
    with shard_lock(shard_path):  # not beside a probe of the same environment
        shard = read_shard(shard_path)
        held = {o["case"] for o in shard["observations"]}
        fw = shard["environment"].get("framework", "")
        staged = [c.id for c in union.cases[len(main.cases):] if c.programs_for(fw)]
        open_ = unaccounted(shard, union, staged)
        partly = [c for c in open_ if c in held]
        if partly:  # some cells measured, some not: a probe's to finish, not a device's absence
            raise ShardError(f"{shard_path}: {', '.join(partly)} partly measured there; probe the rest "
                             "(nox -s report), nothing recorded")
        cases = tuple(open_)  # a case recorded before is accounted for: left as it is
        if cases:
            write_shard(shard_path, not_measured_cases(shard, union, cases, reason))
    return cases


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m kinkcheck.probe.staging", description=__doc__.splitlines()[0])
    ap.add_argument("--catalog", default="references/catalog.toml")
    ap.add_argument("--shards", default="references/observations")
    ap.add_argument("--check", action="store_true", help="only say which shards lack staged cases (exit 1 if any)")
    ap.add_argument("--not-measured", metavar="SHARD",
                    help="record in SHARD (a file) that the staged cases it lacks were not measured, with --reason: "
                         "a device no machine at hand has; they stay due for its next probe")
    ap.add_argument("--reason", default="", help="why, for --not-measured (shown in the report)")
    args = ap.parse_args(argv)
    try:
        if args.not_measured is None and args.reason:
            raise ShardError("--reason goes with --not-measured SHARD")
        if args.not_measured is not None:
            if args.check:
                raise ShardError("--check and --not-measured are two commands: run one")
            if not args.not_measured.strip() or not args.reason.strip():
                raise ShardError("--not-measured needs a shard file and a non-empty --reason")
            recorded = record_not_measured(args.catalog, args.not_measured, args.reason)
            print(f"{args.not_measured}: {len(recorded)} staged case(s) recorded as not measured"
                  + (f" ({', '.join(recorded)})" if recorded else ""))
            return 0
        if args.check:
            if not staged_path(args.catalog).is_file():
                print("nothing staged: every case is in the catalog")
                return 0
            lacking = pending(args.catalog, args.shards)
            for p in lacking:
                print(f"{p.environment}: {len(p.cases)} staged case(s) to probe")
            print(f"{len(lacking)} shard(s) lack staged cases" if lacking else "every shard holds the staged cases")
            return 1 if lacking else 0
        moved = promote(args.catalog, args.shards)
    except (CatalogError, ShardError, OSError) as err:
        print(f"kinkcheck.probe.staging: {' '.join(str(err).split())}", file=sys.stderr)
        return 2
    print(f"moved {moved} staged case(s) into {args.catalog}; render the report to show them")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
