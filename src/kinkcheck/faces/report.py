"""``kinkcheck report``: the report rendered from shards (:func:`kinkcheck.render.write_reports`), against the
catalog of the checkout the shards sit in."""

from __future__ import annotations

import argparse
import gc
import sys
from pathlib import Path
from typing import Any

from kinkcheck.errors import UsageError
from kinkcheck.faces import shared

#: Where the command stands in ``kinkcheck --help``.
POSITION = 50


def add_parser(sub: Any) -> None:
    """Add the command to ``kinkcheck``'s subcommands."""
    r = sub.add_parser("report", help="render reports/conventions.{md,json} from shards (no framework needed)")
    r.add_argument("--shards", required=True, help="folder of shard JSON files")
    r.add_argument("--out", required=True, help="output folder, e.g. reports/")
    r.add_argument("--catalog", help="catalog TOML (default: references/catalog.toml of the checkout the shards or "
                                      "the current folder are in, else the installed package's copy, without the "
                                      "kink-hit census of references/kinkhits/)")
    r.add_argument("--strict", action="store_true",
                   help="exit 2, writing nothing, when a shard could not be read (nox -s report and render use it)")
    r.add_argument("--force", action="store_true",
                   help="render even when OUT is current (the same shards, catalog and kinkcheck rendered it, and its "
                        "files are untouched since)")
    r.set_defaults(func=run)


def checkout_catalog(shards: str | Path, cwd: Path | None = None) -> Path | None:
    """The catalog of the checkout the shards sit in (``references/catalog.toml`` in a folder above ``shards``,
    or ``catalog.toml`` in ``references/`` itself), else of the current folder's checkout; None outside one. A
    ``kinkcheck report`` from an installed package renders a checkout's shards against that checkout's catalog and
    data (``kinkhits/``, ``census/`` beside it), not against the package's copy."""
    start = Path(shards).resolve()
    for folder in (start, *start.parents, *(p for q in [(cwd or Path.cwd()).resolve()] for p in (q, *q.parents))):
        for cand in (folder / "references" / "catalog.toml", folder / "catalog.toml"):
            if cand.is_file() and cand.parent.name == "references":
                return cand
    return None


def _render_catalog(args: argparse.Namespace) -> tuple[Path, str | None]:
    """``--catalog``, else the checkout's (:func:`checkout_catalog`), else the package's; with, for a catalog found
    without ``kinkhits/`` beside it, the line saying what a render against it leaves out (printed by :func:`run`
    once the shards are read: a render that stops on bad input says only why), else None."""
    from kinkcheck.catalog import default_catalog_path  # on first use: not loaded at start-up

    if args.catalog:  # the user's choice, with whatever lies beside it
        return Path(args.catalog), None
    catalog = checkout_catalog(args.shards) or default_catalog_path()
    if (catalog.parent / "kinkhits").is_dir():
        return catalog, None
    return catalog, (f"kinkcheck report: no references/kinkhits/ beside the catalog {catalog} (outside a checkout, "
                     "the installed package's copy): the report's kink-hit census is left out; render in a checkout, "
                     "or give --catalog CHECKOUT/references/catalog.toml")


def run(args: argparse.Namespace) -> int:
    from kinkcheck.catalog import CatalogError, load_catalog  # on first use: not loaded at start-up
    # slow: msgspec, numpy
    from kinkcheck.render import (
        CASES,
        OutputError,
        check_output,
        inputs_digest,
        is_current,
        record_render,
        write_reports,
    )
    from kinkcheck.shards import ShardError, load_shards  # on first use: not loaded at start-up

    try:
        found, left_out = _render_catalog(args)
        args.catalog = str(found)
    except CatalogError as err:
        raise UsageError(str(err)) from None
    try:
        check_output(args.out)  # before a render of minutes, and before anything is written
        digest = inputs_digest(args.shards, args.catalog)
    except OutputError as err:
        raise UsageError(str(err)) from None
    except OSError as err:
        raise UsageError(f"cannot read the render's inputs: {err}") from None
    if not args.force and is_current(args.out, digest):  # a warm `nox -s report` with every shard fresh
        print(f"{args.out}: current (rendered from these shards, catalog and kinkcheck, untouched since); "
              "--force renders again", file=sys.stderr)
        return 0
    try:
        catalog = load_catalog(args.catalog)
        shards, errors = load_shards(args.shards, catalog, lazy=True)  # unpacked only where not judged before
    except (CatalogError, ShardError, OutputError) as err:
        raise UsageError(str(err)) from None
    if errors and args.strict:  # before anything is written: the previous report keeps every release
        raise UsageError(f"{len(errors)} shard(s) could not be read; nothing written (--strict): {errors[0]}")
    for e in errors:
        print(f"kinkcheck report: skipped {e}", file=sys.stderr)
    if not shards:
        raise UsageError(f"no readable shard in {args.shards}")
    if left_out is not None:
        print(left_out, file=sys.stderr)
    if shared.EXITS_AFTER:  # the console script exits next (run): the collector stays off, not walking the render again

        gc.disable()
    try:
        paths = write_reports(shards, catalog, Path(args.out), gaps=errors)
    except (OutputError, ShardError) as err:  # a shard changed or removed while rendering: nothing written
        raise UsageError(str(err) if isinstance(err, OutputError) else f"{err}; nothing written") from None
    if not errors:  # a render with a gap is done again next time (the gap may be gone)
        record_render(args.out, digest)
    pages = [p for p in paths if p.parent.name == CASES]
    for p in paths:
        if p not in pages:
            print(f"wrote {p}", file=sys.stderr)
    if pages:
        print(f"wrote {pages[0].parent}/ ({len(pages)} case pages)", file=sys.stderr)
    return 0
