"""The ``kinkcheck`` command: ``grad``, ``probe``, ``report``, ``diff``, ``cite``, ``migrate``, ``check``.

Bad input (an unknown name, a malformed ``--at``, an unknown dtype, a framework that is not installed, a
corrupt shard) prints one line on stderr and exits with status 2; no traceback, nothing executed.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

EXIT_BAD_INPUT = 2


class UsageError(Exception):
    """Bad input: printed as one line, exit status 2."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # one line, exit 2, like every other bad input
        raise UsageError(f"{self.prog}: {message}")


def _cmd_grad(args: argparse.Namespace) -> int:
    from kinkcheck import expr as ex
    from kinkcheck.catalog import FRAMEWORKS
    from kinkcheck.frameworks import DTYPES, MODES, FrameworkUnavailable, Unavailable, encode, get_adapter

    if args.dtype not in DTYPES:
        raise UsageError(f"unknown dtype {args.dtype!r} (known: {', '.join(DTYPES)})")
    if args.mode not in MODES:
        raise UsageError(f"unknown mode {args.mode!r} (known: {', '.join(MODES)})")
    try:
        at = ex.parse_point(args.at)
        shadowing = sorted(set(at) & (set(FRAMEWORKS) | set(ex.ALIASES)))
        if shadowing:
            raise ex.ExprError(f"input name {shadowing[0]!r} is a namespace; call the input x, y, v, …")
        tree = ex.parse(args.expr, at, FRAMEWORKS)
    except ex.ExprError as err:
        raise UsageError(str(err)) from None
    roots = ex.roots_of(tree)
    if len(roots) > 1:
        raise UsageError(f"expression mixes frameworks {sorted(roots)}; use one")
    framework = args.framework or (roots.pop() if roots else None)
    if framework is None:
        raise UsageError("cannot tell the framework from a method chain; add --framework torch|jax")
    if roots and framework not in roots:
        raise UsageError(f"--framework {framework} but the expression uses {sorted(roots)}")
    used = {n.name for n in ex.walk(tree) if isinstance(n, ex.Input)}
    unused = [k for k in at if k not in used]
    if unused:
        raise UsageError(f"--at gives {', '.join(unused)} but the expression does not use it")
    try:
        adapter = get_adapter(framework)
        grad = adapter.gradient(tree, at, args.dtype, args.device, args.mode)
    except (FrameworkUnavailable, Unavailable, ex.ExprError) as err:
        raise UsageError(str(err)) from None
    except Exception as err:  # noqa: BLE001 - the program itself failed: report it, one line
        from kinkcheck.frameworks.base import short_error

        raise UsageError(f"{framework} raised {short_error(err)}") from None
    print(json.dumps({k: encode(v) for k, v in grad.items()}))
    return 0


def _cmd_probe(args: argparse.Namespace) -> int:
    from kinkcheck.catalog import CatalogError, load_catalog
    from kinkcheck.frameworks import DTYPES, MODES
    from kinkcheck.frameworks.base import FRAMEWORK_MODES

    for d in args.dtype:
        if d not in DTYPES:
            raise UsageError(f"unknown dtype {d!r} (known: {', '.join(DTYPES)})")
    for m in args.mode:
        if m not in MODES:
            raise UsageError(f"unknown mode {m!r} (known: {', '.join(MODES)})")
    try:
        catalog = load_catalog(args.catalog)
    except CatalogError as err:
        raise UsageError(str(err)) from None
    if args.worker:
        return _probe_worker(args, catalog)
    if bool(args.out) == bool(args.out_dir):
        raise UsageError("probe: give exactly one of --out FILE (one framework) or --out-dir DIR")
    if args.out and not args.framework:
        raise UsageError("probe: --out needs --framework torch|jax (or use --out-dir DIR for every framework)")
    if args.out:
        _check_writable(Path(args.out))
        return _probe_one(args, catalog, args.framework, Path(args.out))
    out_dir = Path(args.out_dir)
    if not out_dir.is_dir():
        raise UsageError(f"--out-dir {out_dir}: not a folder")
    _check_writable(out_dir / "probe.json")
    measured = 0
    for fw in [args.framework] if args.framework else list(FRAMEWORK_MODES):
        try:
            measured += _probe_one(argparse.Namespace(**vars(args)), catalog, fw, None, out_dir) == 0
        except UsageError as err:  # one framework missing or without the device: say so, go on
            print(f"{fw}: {err}", file=sys.stderr)
    if not measured:
        raise UsageError(f"nothing measured on {args.device}")
    return 0


def _probe_one(args: argparse.Namespace, catalog: Any, framework: str, out: Path | None,
               out_dir: Path | None = None) -> int:
    """Probe one framework into ``out`` (or ``out_dir/<environment id>.json``)."""
    from kinkcheck.frameworks import FrameworkUnavailable
    from kinkcheck.frameworks.base import FRAMEWORK_MODES
    from kinkcheck.probe import DEFAULT_DTYPES, probe_isolated
    from kinkcheck.shards import ShardError, write_shard

    modes = [m for m in args.mode if m in FRAMEWORK_MODES[framework]]
    if args.mode and args.framework and len(modes) < len(args.mode):
        bad = [m for m in args.mode if m not in modes]
        raise UsageError(f"unknown mode {bad[0]!r} for {framework} (known: {', '.join(FRAMEWORK_MODES[framework])})")
    if args.mode and not modes:
        raise UsageError(f"none of the modes {', '.join(args.mode)} exists for {framework}")
    args.framework = framework
    try:
        if args.no_isolate:
            shard = _probe_with_progress(args, catalog, journal=None, modes=modes or None)
        else:
            shard = probe_isolated(framework, args.device, args.dtype or DEFAULT_DTYPES,
                                   modes or None, catalog, quiet=args.quiet)
    except FrameworkUnavailable as err:
        raise UsageError(str(err)) from None
    if out is None:
        out = out_dir / f"{shard['environment']['id']}.json"
    args.out = str(out)
    try:
        write_shard(args.out, shard, validate=False)  # built by the probe itself; readers validate
    except ShardError as err:
        raise UsageError(f"cannot write shard {args.out}: {err}") from None
    except OSError as err:
        raise UsageError(f"cannot write shard {args.out}: {err.strerror}") from None
    obs = shard["observations"]
    n_err = sum(o["status"] == "error" for o in obs)
    n_un = sum(o["status"] == "unavailable" for o in obs)
    print(f"{shard['environment']['id']}: {len(obs)} observations ({n_err} error, {n_un} unavailable), "
          f"{len(shard['networks'])} network runs -> {args.out}", file=sys.stderr)
    return 0


def _probe_with_progress(args: argparse.Namespace, catalog: Any, journal: str | None,
                         modes: Sequence[str] | None = None) -> dict[str, Any]:
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from kinkcheck.frameworks.base import COMPILED_MODES, FRAMEWORK_MODES
    from kinkcheck.probe import DEFAULT_DTYPES, probe

    modes = list(modes or args.mode or FRAMEWORK_MODES[args.framework])
    n_batches = sum(m in COMPILED_MODES for m in modes) * len(args.dtype or DEFAULT_DTYPES)
    total = sum(1 for _ in catalog.programs(args.framework)) + n_batches
    with Progress(
        TextColumn(f"[bold]probe {args.framework} {args.device}[/]"), BarColumn(), MofNCompleteColumn(),
        TimeElapsedColumn(), TextColumn("{task.description}"), console=Console(stderr=True), disable=args.quiet,
    ) as progress:
        task = progress.add_task("", total=total)

        def step(desc: str) -> None:
            progress.update(task, description=desc[:60])
            progress.advance(task)

        return probe(args.framework, args.device, args.dtype or DEFAULT_DTYPES, modes, catalog,
                     on_step=step, journal=journal)


def _probe_worker(args: argparse.Namespace, catalog: Any) -> int:
    """The worker half of an isolated probe: results go to the journal, not to --out."""
    from kinkcheck.frameworks import FrameworkUnavailable
    from kinkcheck.probe import _append

    try:
        _probe_with_progress(args, catalog, journal=args.worker)
    except FrameworkUnavailable as err:
        _append(args.worker, {"fatal": str(err)})
        return EXIT_BAD_INPUT
    return 0


def _check_writable(out: Path) -> None:
    """Fail before a long probe, not after it, when the shard cannot be written."""
    import os

    if out.is_dir():
        raise UsageError(f"--out {out} is a folder; name a file, e.g. {out / 'torch-2.13.0-cpu.json'}")
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise UsageError(f"cannot create {out.parent}: {err.strerror}") from None
    if not os.access(out.parent, os.W_OK):
        raise UsageError(f"cannot write in {out.parent}")


def _cmd_report(args: argparse.Namespace) -> int:
    from kinkcheck.catalog import CatalogError, load_catalog
    from kinkcheck.report import write_reports
    from kinkcheck.shards import ShardError, load_shards

    try:
        catalog = load_catalog(args.catalog)
        shards, errors = load_shards(args.shards)
    except (CatalogError, ShardError) as err:
        raise UsageError(str(err)) from None
    for e in errors:
        print(f"kinkcheck report: skipped {e}", file=sys.stderr)
    if not shards:
        raise UsageError(f"no readable shard in {args.shards}")
    paths = write_reports(shards, catalog, Path(args.out), gaps=errors)
    for p in paths:
        print(f"wrote {p}", file=sys.stderr)
    return EXIT_BAD_INPUT if errors and args.strict else 0


def _cmd_diff(args: argparse.Namespace) -> int:
    from kinkcheck.diff import DiffError, compare, load_side

    try:
        old, new = load_side(args.old), load_side(args.new)
        changes = compare(old, new)
    except DiffError as err:
        raise UsageError(str(err)) from None
    for ch in changes:
        print(ch.describe())
    common = sum(1 for k in old.observations if k in new.observations)
    print(f"{len(changes)} of {common} conventions changed from {old.environment['id']} to {new.environment['id']}",
          file=sys.stderr)
    return 1 if changes else 0


def _cmd_cite(args: argparse.Namespace) -> int:
    from kinkcheck.cite import CiteError, bibtex, cff, cite, load_report

    try:
        doc = load_report(args.report)
        c = cite(doc, args.program, case=args.case, framework_version=args.framework_version, mode=args.mode,
                 dtype=args.dtype, device=args.device)
    except CiteError as err:
        raise UsageError(str(err)) from None
    print(c.sentence)
    print(f"Report cell: {args.link_base}#{c.anchor}")
    print()
    print(cff(doc) if args.cff else bibtex(doc))
    return 0


def _cmd_migrate(args: argparse.Namespace) -> int:
    from kinkcheck.cite import CiteError, load_report
    from kinkcheck.migrate import MigrateError, migrate, render

    try:
        doc = load_report(args.report)
        m = migrate(doc, args.source, args.target, mode=args.mode, dtype=args.dtype, device=args.device,
                    case=args.case)
    except (CiteError, MigrateError) as err:
        raise UsageError(str(err)) from None
    sys.stdout.write(render(m, only_differences=args.only_differences))
    return 0


def _cmd_check(args: argparse.Namespace) -> int:
    from kinkcheck import expr as ex
    from kinkcheck.check import CheckError, check_pair, load_function, render
    from kinkcheck.frameworks import DTYPES, FrameworkUnavailable

    frameworks = tuple(f.strip() for f in args.frameworks.split(","))
    if len(frameworks) != 2 or any(f not in ("torch", "jax") for f in frameworks):
        raise UsageError(f"--frameworks takes two of torch, jax separated by a comma, got {args.frameworks!r}")
    if args.dtype not in DTYPES:
        raise UsageError(f"unknown dtype {args.dtype!r} (known: {', '.join(DTYPES)})")
    try:
        at = ex.parse_point(args.at)
        fns = [load_function(args.first), load_function(args.second)]
        result = check_pair(fns[0], fns[1], at, frameworks=frameworks, dtype=args.dtype)
    except (ex.ExprError, CheckError, FrameworkUnavailable) as err:
        raise UsageError(str(err)) from None
    sys.stdout.write(render(result, [f"{args.first} ({frameworks[0]})", f"{args.second} ({frameworks[1]})"]))
    return 1 if result.differing else 0


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="kinkcheck", description="Gradient conventions at kinks, measured in real frameworks.")
    sub = p.add_subparsers(dest="command", required=True, parser_class=_Parser)

    g = sub.add_parser(
        "grad", help="gradient of one call expression at a point (one line of JSON)",
        epilog='An expression that starts with "-" goes after --: kinkcheck grad --at x=0 -- "-torch.min(-x)"',
    )
    g.add_argument("expr", help='call expression, e.g. "torch.clamp(x, min=0)"')
    g.add_argument("--at", required=True, help="point: x=0 | x=1,y=1 | 'v=[1,3,3]' (finite numbers)")
    g.add_argument("--dtype", default="float64", help="float64 (default) | float32 | float16 | bfloat16")
    g.add_argument("--device", default="cpu", help="cpu (default) | cuda")
    g.add_argument("--mode", default="reverse",
                   help="reverse (default) | functional | forward | forward-ad | inductor | aot_eager | vmap | "
                        "second-order (torch); reverse | jit | forward | jacfwd | jacrev | vmap | second-order (jax)")
    g.add_argument("--framework", choices=("torch", "jax"), help="only for a bare method chain like x.abs()")
    g.set_defaults(func=_cmd_grad)

    pr = sub.add_parser("probe", help="probe the whole catalog in the installed framework and write a shard")
    pr.add_argument("--framework", choices=("torch", "jax"), help="default with --out-dir: every installed framework")
    pr.add_argument("--out", help="shard file to write (atomically), for one --framework")
    pr.add_argument("--out-dir", help="folder: one shard per framework, named <framework>-<version>-<device>.json")
    pr.add_argument("--device", default="cpu", help="cpu (default) | cuda")
    pr.add_argument("--dtype", action="append", default=[], help="repeatable; default all four dtypes")
    pr.add_argument("--mode", action="append", default=[], help="repeatable; default every mode of the framework")
    pr.add_argument("--catalog", help="catalog TOML (default references/catalog.toml)")
    pr.add_argument("--quiet", action="store_true", help="no progress bar")
    pr.add_argument("--no-isolate", action="store_true",
                    help="probe in this process (default: a worker process, restarted after a case that crashes it)")
    pr.add_argument("--worker", metavar="JOURNAL", help=argparse.SUPPRESS)
    pr.set_defaults(func=_cmd_probe)

    r = sub.add_parser("report", help="render reports/conventions.{md,json} from shards (no framework needed)")
    r.add_argument("--shards", required=True, help="folder of shard JSON files")
    r.add_argument("--out", required=True, help="output folder, e.g. reports/")
    r.add_argument("--catalog", help="catalog TOML (default references/catalog.toml)")
    r.add_argument("--strict", action="store_true", help="exit 2 when a shard could not be read")
    r.set_defaults(func=_cmd_report)

    d = sub.add_parser(
        "diff", help="conventions that changed between two environments (exit 0: none, 1: some, 2: bad input)",
        description="Each side is a shard file, or REPORT.json#ENV for an environment inside a report.",
    )
    d.add_argument("old", help="e.g. references/observations/torch-2.13.0-cpu.json")
    d.add_argument("new", help="e.g. reports/conventions.json#torch-2.15.0-cpu")
    d.set_defaults(func=_cmd_diff)

    c = sub.add_parser("cite", help="one sentence stating a measured convention, with its report anchor and a "
                                    "BibTeX (or CITATION.cff) entry for the report")
    c.add_argument("program", help='a catalog program, e.g. "torch.clamp(x, min=0)" or "jnp.maximum(x, 0.0)"')
    c.add_argument("--case", help="case id, when the program is measured in several cases (e.g. relu@0)")
    c.add_argument("--framework-version", help="release (default: the newest measured)")
    c.add_argument("--mode", default="reverse", help="default reverse")
    c.add_argument("--dtype", default="float64", help="default float64")
    c.add_argument("--device", default="cpu", help="default cpu")
    c.add_argument("--report", default="reports/conventions.json", help="report JSON (default reports/conventions.json)")
    c.add_argument("--link-base", default="reports/conventions.md",
                   help="what the anchor is appended to (default reports/conventions.md; reports/conventions.html works too)")
    c.add_argument("--cff", action="store_true", help="print a CITATION.cff references item instead of BibTeX")
    c.set_defaults(func=_cmd_cite)

    mg = sub.add_parser("migrate", help="per case, source vs target programs' conventions, with replacements that "
                                        "keep the source value (an equivalent program or generated code)")
    mg.add_argument("--from", dest="source", required=True, help="torch | torch==2.13.0 | jax | jax==0.10.2")
    mg.add_argument("--to", dest="target", required=True, help="jax | torch==2.15.0 | …")
    mg.add_argument("--case", help="one case id only")
    mg.add_argument("--mode", default="reverse", help="default reverse")
    mg.add_argument("--dtype", default="float64", help="default float64")
    mg.add_argument("--device", default="cpu", help="default cpu")
    mg.add_argument("--only-differences", action="store_true", help="leave out the pairs that agree")
    mg.add_argument("--report", default="reports/conventions.json", help="report JSON (default reports/conventions.json)")
    mg.set_defaults(func=_cmd_migrate)

    ck = sub.add_parser("check", help="two implementations of one function: gradients at the input and at "
                                      "kink-hitting variants of it (exit 0: agree, 1: differ, 2: bad input)")
    ck.add_argument("first", help="MODULE:FUNCTION or path/to/file.py:FUNCTION (the first framework's version)")
    ck.add_argument("second", help="MODULE:FUNCTION (the second framework's version)")
    ck.add_argument("--at", required=True, help="the input: x=0.5,y=2 | 'v=[1,2,3]'; passed positionally in this order")
    ck.add_argument("--frameworks", default="torch,jax", help="framework of each function (default torch,jax)")
    ck.add_argument("--dtype", default="float64", help="default float64")
    ck.set_defaults(func=_cmd_check)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    try:
        args = build_parser().parse_args(argv)
        rc = int(args.func(args))
        sys.stdout.flush()  # a closed pipe shows here, inside the handler below, not at interpreter exit
        return rc
    except UsageError as err:
        print(f"kinkcheck: error: {err}" if not str(err).startswith("kinkcheck") else f"{err}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except KeyboardInterrupt:
        print("kinkcheck: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # `kinkcheck cite … | head -1`: the reader left; nothing to report
        import os

        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
