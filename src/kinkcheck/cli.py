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

from kinkcheck.errors import EXIT_BAD_INPUT, UsageError
from kinkcheck.isa import LEVELS
from kinkcheck.platforms import DEVICES
from kinkcheck.query import default_report
from kinkcheck.registry import FRAMEWORKS


#: ``--report``'s help, for every face that reads the report.
REPORT_HELP = ("a report folder or its conventions.json.gz (default: the one in $KINKCHECK_REPORTS if set, else reports/conventions.json[.gz] in "
               "the current folder, else the source tree's or the installed package's)")


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # one line, exit 2, like every other bad input
        command = self.prog.removeprefix("kinkcheck").strip()  # "ask", or "" for kinkcheck itself
        if "required: expr" in message or "required: program" in message:
            # argparse read an expression that starts with "-" as an option
            message += (f' (an expression that starts with "-" goes after --: {command or "grad"} --at x=0 -- '
                        '"-torch.min(-x)")')
        raise UsageError(f"{command}: {message}" if command else message)


def _limits(args: argparse.Namespace) -> Any:
    """``--timeout``/``--memory`` (else the environment, else the defaults) as :class:`kinkcheck.probe.worker.Limits`."""
    from kinkcheck.probe.worker import Limits

    try:
        return Limits.resolve(args.timeout, args.memory)
    except ValueError as err:
        raise UsageError(str(err)) from None


def _evaluate(args: argparse.Namespace, task: str, payload: dict[str, Any]) -> Any:
    """Run a task in a bounded worker (or in this process with ``--no-isolate``); its errors as UsageError."""
    from kinkcheck.probe import worker

    limits = _limits(args)
    try:
        if args.no_isolate:
            return worker.run_inline(task, payload, limits)
        return worker.run(task, payload, limits)
    except worker.NoDevice as err:
        raise _NoDevice(str(err)) from None
    except worker.TaskError as err:
        raise UsageError(str(err)) from None


class _NoDevice(UsageError):
    """The evaluation asked for a device this machine lacks (:class:`kinkcheck.probe.worker.NoDevice`)."""


def _cmd_grad(args: argparse.Namespace) -> int:
    from kinkcheck import expr as ex
    from kinkcheck import points as pt
    from kinkcheck.catalog import FRAMEWORKS
    from kinkcheck.vocabulary import DTYPES, MODES

    if args.dtype not in DTYPES:
        raise UsageError(f"unknown dtype {args.dtype!r} (known: {', '.join(DTYPES)})")
    if args.mode not in MODES:
        raise UsageError(f"unknown mode {args.mode!r} (known: {', '.join(MODES)})")
    try:
        inputs = pt.parse_inputs(args.at, args.wrt)  # inf/nan, int: inputs, --wrt
        at = inputs.at
        ex.check_input_names(at, FRAMEWORKS)
        tree = ex.parse(args.expr, at, FRAMEWORKS)
        framework = ex.program_framework(tree, at, args.framework, FRAMEWORKS)
    except ex.ExprError as err:
        raise UsageError(str(err)) from None
    pending = None if args.no_judge else _start_explain(args, tree, inputs, framework)
    try:
        grad = _evaluate(args, "grad", {"expr": args.expr, "at": at, "framework": framework, "dtype": args.dtype,
                                        "device": args.device, "mode": args.mode, "wrt": list(inputs.wrt),
                                        "ints": list(inputs.ints)})
    except _NoDevice:  # no such device on this machine: the report's cells of it
        return _grad_from_report(args, tree, inputs, framework, pending)
    except UsageError:
        if pending is not None:  # no value, nothing to judge: stop the judgement's worker
            pending.cancel()
        raise
    except BaseException:
        if pending is not None:  # no value, nothing to judge: stop the judgement's worker
            pending.cancel()
        raise
    if pending is None:
        print(json.dumps(grad))
        return 0
    from kinkcheck.explain import ReportUnavailable, render

    try:
        explanation = pending.finish(grad)
    except (ex.ExprError, ReportUnavailable) as err:
        raise UsageError(f"--sympy: {err}" if isinstance(err, ex.ExprError) else str(err)) from None
    forecast = _grad_prediction(args, at, framework, list(inputs.wrt))
    if args.json:
        print(json.dumps({**explanation.to_json(), "predicted": forecast}))
    else:
        print(json.dumps(grad))  # the first line stays the bare value: scripts read it
        sys.stdout.write(render(explanation))
        _print_prediction(forecast, grad)
    return 0


def _grad_from_report(args: argparse.Namespace, tree: Any, inputs: Any, framework: str, pending: Any) -> int:
    """``grad --device D`` on a machine without D (``--device cuda`` without a GPU): the report's cell of the program
    at the point on D (the installed release's where the report measured it there, else the newest), judged and
    shown as grad shows a value, with the rules' prediction for that release, every part marked "from the report;
    not measured here" (:class:`kinkcheck.explain.ReportAnswer`); no such cell: one line, exit 2."""
    from kinkcheck.askhome import installed_release
    from kinkcheck.explain import ReportUnavailable, render
    from kinkcheck.rules import answer as rules_answer

    if pending is None:  # --no-judge: the report's index still answers
        pending = _start_explain(args, tree, inputs, framework)
    try:
        got = pending.from_report(installed_release(framework))
    except ReportUnavailable as err:
        pending.cancel()
        raise UsageError(str(err)) from None
    if args.no_judge or got.value is None:  # nothing to judge: an error or unavailable cell, or not asked
        pending.cancel()
        print(json.dumps({**got.to_json(), "value": got.value}) if args.json else
              f"{got.headline()}\n{json.dumps(got.value)}")
        return 0
    try:
        explanation = pending.finish(got.value)
    except (ReportUnavailable, ValueError) as err:
        raise UsageError(f"--sympy: {err}" if not isinstance(err, ReportUnavailable) else str(err)) from None
    forecast = rules_answer.predictions(args.expr, inputs.at, framework, releases=[got.release], modes=[args.mode],
                                        dtypes=[args.dtype], device=args.device, wrt=list(inputs.wrt) or None,
                                        report=args.report)
    if args.json:
        print(json.dumps({**explanation.to_json(), "source": got.MARK, "measured_here": False,
                          "from_report": got.to_json(), "predicted": forecast}))
    else:
        print(got.headline())  # first, before the value: never read as a value measured here
        print(json.dumps(got.value))
        sys.stdout.write(render(explanation))
        _print_prediction(forecast, got.value)
    return 0


def _grad_prediction(args: argparse.Namespace, at: dict[str, Any], framework: str, wrt: list[str]) -> dict[str, Any]:
    """What the rules of the installed release predict for the program (:mod:`kinkcheck.rules.answer`)."""
    from kinkcheck.askhome import installed_release
    from kinkcheck.rules import answer

    release = installed_release(framework)
    return answer.predictions(args.expr, at, framework, releases=[release] if release else [], modes=[args.mode],
                              dtypes=[args.dtype], device=args.device, wrt=wrt or None, report=args.report)


def _print_prediction(forecast: dict[str, Any], grad: Any) -> None:
    from kinkcheck.classify import same_value
    from kinkcheck.decimals import decimal_value
    from kinkcheck.vocabulary import flat_value

    p = forecast["predicted"][0] if forecast["predicted"] else None
    if p is None or p["value"] is None:
        reason = forecast["reason"] if p is None else p["reason"]
        print(f"predicted from the rules: {reason}")
        return
    used = "; ".join(f"{u['operation']} at {u['kind']}: {'/'.join(u['labels'])}" for u in p["rules"])
    print(f"predicted from the rules of {forecast['framework']} {p['release']} ({p['mode']}, {p['dtype']}; not "
          f"measured): {decimal_value(p['value'])} ({used or 'every call smooth here, or its cotangent 0'})")
    try:
        same = same_value(flat_value(grad), flat_value(p["value"]), p["dtype"])
    except (TypeError, ValueError, AttributeError):
        return
    if not same:
        print("note: the measured value is not what the rules predict: the point may not be exactly a kink in "
              "floating point, or the program does something its operations' rules do not compose to (a fused "
              "kernel, a custom VJP), or a rule depends on more than its kind of kink (docs/rules.md)")


def _start_explain(args: argparse.Namespace, tree: Any, inputs: Any, framework: str) -> Any:
    """Start ``grad``'s judgement and report lookup (:class:`kinkcheck.explain.Pending`) beside the evaluation;
    a ``--sympy`` text that does not parse is bad input before anything runs."""
    from kinkcheck import expr as ex
    from kinkcheck.catalog import SYMPY_NAMES
    from kinkcheck.explain import Pending, oracle_timeout_from_env

    try:
        bound = oracle_timeout_from_env(args.oracle_timeout)
        if args.sympy is not None:
            ex.parse(args.sympy, inputs.at, SYMPY_NAMES)
    except ValueError as err:  # ExprError is a ValueError
        raise UsageError(f"--sympy: {err}" if isinstance(err, ex.ExprError) else str(err)) from None
    return Pending(ex.unparse(tree), inputs.at, framework, tree=tree, wrt=inputs.wrt, sympy_text=args.sympy,
                   report=args.report, mode=args.mode, dtype=args.dtype, device=args.device, bound_s=bound,
                   memory_gib=_limits(args).memory_gib)


def _cmd_ask(args: argparse.Namespace) -> int:
    from kinkcheck.ask import command

    return command(args)


def _cmd_lock(args: argparse.Namespace) -> int:
    from kinkcheck.lock import command

    return command(args)


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


def _render_catalog(args: argparse.Namespace) -> Path:
    """``--catalog``, else the checkout's (:func:`checkout_catalog`), else the package's, with one line on stderr
    saying what a render against a catalog without ``kinkhits/`` beside it leaves out."""
    from kinkcheck.catalog import default_catalog_path

    if args.catalog:  # the user's choice, with whatever lies beside it
        return Path(args.catalog)
    catalog = checkout_catalog(args.shards) or default_catalog_path()
    if not (catalog.parent / "kinkhits").is_dir():
        print(f"kinkcheck report: no references/kinkhits/ beside the catalog {catalog} (outside a checkout, the "
              "installed package's copy): the report's kink-hit census is left out; render in a checkout, or give "
              "--catalog CHECKOUT/references/catalog.toml", file=sys.stderr)
    return catalog


def _cmd_report(args: argparse.Namespace) -> int:
    from kinkcheck.catalog import CatalogError, load_catalog
    from kinkcheck.report import CASES, OutputError, check_output, inputs_digest, is_current, record_render, write_reports
    from kinkcheck.shards import ShardError, load_shards

    try:
        args.catalog = str(_render_catalog(args))
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
    if _EXITS_AFTER:  # the console script exits next (run): the collector stays off, not walking the render again
        import gc

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


def _cmd_probe(args: argparse.Namespace) -> int:
    from kinkcheck.probe.command import probe_command

    return probe_command(args)


def _cmd_diff(args: argparse.Namespace) -> int:
    from kinkcheck.diff import DiffError, compare, group_changes, load_side
    from kinkcheck.vocabulary import DTYPES, MODES

    for what, given, known in (("mode", args.mode, MODES), ("dtype", args.dtype, DTYPES)):
        if given is not None and given not in known:  # before reading either side
            raise UsageError(f"diff: unknown {what} {given!r} (known: {', '.join(known)})")
    try:
        old, new = load_side(args.old, args.report), load_side(args.new, args.report)
        changes = compare(old, new)
    except DiffError as err:
        raise UsageError(str(err)) from None
    wanted: dict[int, Any] = {i: {v} for i, v in enumerate((args.case, args.program, args.mode, args.dtype))
                              if v is not None}
    if args.program is not None:  # any spelling of the catalog's program (min=0.0 is min=0), as on every face
        from kinkcheck.expr import same_program

        wanted[1] = set(same_program(args.program, sorted({k[1] for k in (*old.observations, *new.observations)})))
        wanted[1] = wanted[1] or {args.program}

    def kept(key: tuple[str, ...]) -> bool:  # --case, --program, --mode, --dtype
        return all(key[i] in v for i, v in wanted.items())

    changes = [ch for ch in changes if kept((ch.case, ch.program, ch.mode, ch.dtype))]
    common = sum(1 for k in old.observations if k in new.observations and kept(k))
    if wanted and not common:
        raise UsageError(f"no convention of both sides matches {_filters_text(args)}")
    args.exit_status = 1 if changes else 0  # decided before any output: `kinkcheck diff A B | head -1` keeps it
    summary = f"{len(changes)} of {common} conventions changed from {old.environment.id} to {new.environment.id}"
    try:
        if args.each:
            for ch in changes:
                print(ch.describe())
        else:
            rows = group_changes(changes)
            print(summary + (f" ({_filters_text(args)})" if wanted else "")
                  + (f", in {len(rows)} rows (one change over its modes × dtypes)" if rows else ""))
            if rows:
                _print_table(["case", "program", "old → new", "modes", "dtypes"],
                             [[r.case, r.program, f"{r.old} → {r.new}", ", ".join(r.modes), ", ".join(r.dtypes)]
                              for r in rows])
        sys.stdout.flush()
    finally:  # the count reaches stderr even when the reader of stdout has left
        print(summary, file=sys.stderr)
        sides = (old.environment,) if old.environment.id == new.environment.id else (old.environment, new.environment)
        for env in sides:  # what a side lacks on purpose is not compared: say so
            for part in env.not_measured_parts:
                what = (f"{part.case}  {part.program}  [{', '.join(part.modes)} × {', '.join(part.dtypes or ())}]"
                        if part.case else f"the cells of {', '.join(part.modes)} mode it lacks")
                print(f"not measured in {env.id}: {what}: {part.reason.removeprefix('not measured: ')}",
                      file=sys.stderr)
    return args.exit_status


def _filters_text(args: argparse.Namespace) -> str:
    return ", ".join(f"--{name} {getattr(args, name)}" for name in ("case", "program", "mode", "dtype", "device")
                     if getattr(args, name, None) is not None)


def _print_table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> None:
    """Rows as a table aligned by rich (no borders; when stdout is not a terminal one line a row, no wrapping, no
    trailing padding)."""
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    table = Table(box=None, pad_edge=False, header_style="bold", show_edge=False)
    for name in header:
        table.add_column(name, overflow="fold")
    for row in rows:
        table.add_row(*(Text(cell) for cell in row))  # Text: a program's [brackets] are not rich markup
    if sys.stdout.isatty():
        Console(highlight=False, soft_wrap=False).print(table)
        return
    console = Console(width=100_000, highlight=False, soft_wrap=False, color_system=None)
    with console.capture() as captured:
        console.print(table)
    # a pipe or a file: one line a row, without the padding rich gives every cell up to its column's width
    sys.stdout.write("".join(line.rstrip() + "\n" for line in captured.get().splitlines()))


def _cmd_rules(args: argparse.Namespace) -> int:
    from kinkcheck.rules.face import command

    return command(args)


def _print_local_page(args: argparse.Namespace, page: str, anchor: str) -> None:
    """``cite``'s second link, to the page in the reports folder read, when that page is there (a checkout, a render
    of one's own; an installed package holds the report's data, not its pages) and no ``--link-base`` was given."""
    from kinkcheck.report.model import report_path

    folder = report_path(args.report or default_report()).parent
    if args.link_base is None and (folder / page).is_file():
        print(f"Local page: {folder / page}#{anchor}")


def _cmd_cite(args: argparse.Namespace) -> int:
    from kinkcheck.cite import CiteError, bibtex, cff, cite, load_report, site_base

    if args.framework_version and "==" in args.framework_version:  # torch==2.13.0, as lock and migrate take it
        fw, _, version = args.framework_version.partition("==")
        if args.framework is not None and args.framework != fw.strip():
            raise UsageError(f"--framework {args.framework} but --framework-version {args.framework_version}")
        args.framework, args.framework_version = fw.strip(), version.strip()
    if args.rule is not None:
        return _cite_rule(args)
    if args.program is None:
        raise UsageError('cite what? a catalog program ("torch.clamp(x, min=0)") or a rule (--rule torch.clamp@max)')
    try:
        report = load_report(args.report or default_report(), program=args.program, one_cell=True, case=args.case,
                             framework=args.framework, mode=args.mode, dtype=args.dtype)  # the cell it states only
        c = cite(report, args.program, case=args.case, framework_version=args.framework_version, mode=args.mode,
                 dtype=args.dtype, device=args.device, framework=args.framework)
    except CiteError as err:
        raise UsageError(str(err)) from None
    print(c.sentence)
    print(f"Report cell: {c.link(site_base(args.link_base))}")
    _print_local_page(args, c.page, c.anchor)
    if args.case is None and c.others:  # the principal case was chosen: say which others exist
        import shlex

        pick = f" --framework {args.framework}" if args.framework else ""
        print(f"Also measured in: {', '.join(c.others)} (kinkcheck cite {shlex.quote(args.program)}{pick} --case ID)")
    print()
    print(cff(report) if args.cff else bibtex(report))
    return 0


def _cite_rule(args: argparse.Namespace) -> int:
    """``kinkcheck cite --rule OPERATION[@KIND]``: the rule's sentence, its place on the rules page, its history,
    evidence and counter-examples, then the dataset entry (:func:`kinkcheck.cite.cite_rule`)."""
    import shlex

    from kinkcheck.cite import FRAMEWORK_NAMES, CiteError, bibtex, cff, cite_rule, load_report, site_base
    from kinkcheck.rules import PAGE
    from kinkcheck.rules.face import load as load_rules, rules_path

    if args.program is not None or args.case is not None:
        raise UsageError("--rule cites a rule: give no program or --case with it")
    doc = load_rules(args.report)  # a missing or damaged rules file: one line, exit 2
    try:
        r = cite_rule(doc, args.rule, observations=rules_path(args.report).with_name("observations.parquet"),
                      framework=args.framework, framework_version=args.framework_version, mode=args.mode,
                      dtype=args.dtype, device=args.device)
        report = load_report(args.report or default_report(), frameworks=())  # the entry's head, no row
    except CiteError as err:
        raise UsageError(str(err)) from None
    print(r.sentence)
    base = site_base(args.link_base)
    here = rules_path(args.report).with_name(PAGE).is_file() or base != "reports"
    print(f"Rule: {r.link(base)}" + ("" if here else " (in kinkcheck's repository; the installed package "
                                     "holds the rules file, not its page)"))
    _print_local_page(args, PAGE, r.anchor)
    print(f"History ({r.slice}): {r.history}")
    print("Inferred from measurements: the rule summarises the measured cells below and is not itself a "
          "measurement (to cite one cell: kinkcheck cite PROGRAM --case CASE)")
    span = r.releases[0] if r.releases[0] == r.releases[1] else f"{r.releases[0]} to {r.releases[1]}"
    print(f"evidence ({FRAMEWORK_NAMES.get(r.framework, r.framework)} {span}, {r.slice}):")
    for line in r.evidence:
        print(line)
    if r.more:
        print(f"  … and {r.more} more programs (all: kinkcheck rules {shlex.quote(r.operation)} --framework "
              f"{r.framework} --json)")
    if r.counterexamples:
        print(f"counter-examples (every one of its {r.counter_cells} cells, in any mode, dtype and device):")
        for line in r.counterexamples:
            print(line)
    else:
        print("counter-examples: none in any mode, dtype or device")
    print()
    print(cff(report) if args.cff else bibtex(report))
    return 0


def _cmd_migrate(args: argparse.Namespace) -> int:
    from kinkcheck.cite import CiteError, load_report
    from kinkcheck.migrate import MigrateError, migrate, render, side_frameworks

    try:  # only the two sides' frameworks' rows
        report = load_report(args.report or default_report(), frameworks=side_frameworks(args.source, args.target,
                                                                                          args.device))
        m = migrate(report, args.source, args.target, mode=args.mode, dtype=args.dtype, device=args.device,
                    case=args.case, program=args.program)
    except (CiteError, MigrateError) as err:
        raise UsageError(str(err)) from None
    sys.stdout.write(render(m, only_differences=args.only_differences))
    return 0


def _cmd_check(args: argparse.Namespace) -> int:
    from kinkcheck import expr as ex
    from kinkcheck import points as pt
    from kinkcheck.check import SHOWN, CheckError, CheckResult, Point, pair_modes, render
    from kinkcheck.vocabulary import DTYPES

    frameworks = tuple(f.strip() for f in args.frameworks.split(","))
    if len(frameworks) != 2 or any(f not in FRAMEWORKS for f in frameworks):
        raise UsageError(f"--frameworks takes two of {', '.join(FRAMEWORKS)} separated by a comma, "
                         f"got {args.frameworks!r}")
    if args.dtype not in DTYPES:
        raise UsageError(f"unknown dtype {args.dtype!r} (known: {', '.join(DTYPES)})")
    try:  # before the worker starts: a mode a framework lacks is bad input, not a failed evaluation
        modes = pair_modes([m.strip() for m in args.mode.split(",")] if "," in args.mode else args.mode, frameworks)
        at = pt.parse_point(args.at)
    except (CheckError, ex.ExprError) as err:
        raise UsageError(f"--mode: {err}" if isinstance(err, CheckError) else str(err)) from None
    done = _evaluate(args, "check", {"first": args.first, "second": args.second, "at": at,
                                     "frameworks": list(frameworks), "dtype": args.dtype, "modes": list(modes)})
    result = CheckResult((frameworks[0], frameworks[1]), done["dtype"], [Point(**p) for p in done["points"]],
                         done["not_tried"], tuple(done["modes"]))
    args.exit_status = 1 if result.differing else 0  # decided before any output: survives `| head -1`
    sys.stdout.write(render(result, [f"{args.first} ({frameworks[0]})", f"{args.second} ({frameworks[1]})"],
                            shown=None if args.all else SHOWN))
    return args.exit_status


def _cmd_census(args: argparse.Namespace) -> int:
    import os

    from kinkcheck import hitcensus as hc

    if (args.model is None) != (args.data is None):
        raise UsageError("census: --model and --data go together (a model factory and its batches)")
    if args.model is not None:
        return _census_of_model(args, hc)
    try:
        depths = tuple(int(d) for d in args.depths.split(","))
        dtypes = tuple(d.strip() for d in args.dtypes.split(","))
    except ValueError:
        raise UsageError(f"census: --depths takes integers separated by commas, got {args.depths!r}") from None
    bad = [d for d in dtypes if d not in hc.DTYPES]
    if bad or not dtypes:
        raise UsageError(f"census: unknown dtype {bad[0] if bad else ''!r} (known: {', '.join(hc.DTYPES)})")
    if any(d < 1 or d > 12 for d in depths) or min(args.inits, args.width, args.batch, args.passes) < 1:
        raise UsageError("census: depths 1-12, and --inits, --width, --batch, --passes at least 1")
    if args.batch > 1797 or args.width > 4096 or args.train_epochs < 0 or args.passes > 1000:
        raise UsageError("census: --batch at most 1797 (the digits there are), --width at most 4096, --passes at "
                         "most 1000, --train-epochs at least 0 (0: no training run)")
    out = Path(args.out) if args.out else None
    if out is not None:  # every way the write could fail is found before minutes of measuring
        if out.is_dir():
            raise UsageError(f"census: --out {out} is a folder; name a file, e.g. {out / 'torch-2.13.0-cpu.json'}")
        if out.exists() and not args.replace:
            raise UsageError(f"census: {out} exists (a measurement); --replace to measure it again")
        parent = next((p for p in (out.parent, *out.parent.parents) if p.exists()), Path("."))
        if not parent.is_dir() or not os.access(parent, os.W_OK | os.X_OK):
            raise UsageError(f"census: --out {out}: {parent} is not a folder this user can write into")
    scale = hc.Scale(depths=depths, dtypes=dtypes, inits=args.inits, width=args.width, batch=args.batch,
                     passes=args.passes, train_epochs=args.train_epochs, seed=args.seed)
    try:
        record = _census_run(hc, scale, args.quiet, args.framework)
    except ImportError as err:
        raise UsageError(f"census needs PyTorch and scikit-learn (pip install torch scikit-learn; jax for --framework "
                         f"jax): {err}") from None
    except (MemoryError, RuntimeError) as err:  # an allocation the machine cannot make: the scale is too large
        raise UsageError(f"census: the scale does not fit this machine: {' '.join(str(err).split())[:200]}") from None
    sys.stdout.write(hc.render_run(record))  # first: a write that fails still leaves the tables shown
    sys.stdout.flush()
    if out is not None:
        from kinkcheck.shards import write_text_atomic

        try:
            out.parent.mkdir(parents=True, exist_ok=True)
            write_text_atomic(out, json.dumps(record, indent=1, sort_keys=True) + "\n")
        except OSError as err:
            raise UsageError(f"census: cannot write {out}: {err.strerror or err} (the tables above are the "
                             "measurement)") from None
    return 0


def _census_run(hc: Any, scale: Any, quiet: bool, framework: str) -> dict[str, Any]:
    if quiet:
        return hc.run(scale, framework=framework)
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    total = len(scale.depths) * len(scale.dtypes) * scale.inits
    with Progress(TextColumn("[bold]census[/]"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  TextColumn("{task.description}"), console=Console(stderr=True)) as progress:
        task = progress.add_task("", total=total)

        def tick(label: str, _total: int) -> None:
            progress.update(task, description=label)
            progress.advance(task)

        return hc.run(scale, tick, framework)


def _census_of_model(args: argparse.Namespace, hc: Any) -> int:
    from kinkcheck.report.model import ReportError, load_report

    if args.batches < 1:
        raise UsageError(f"census: --batches at least 1, got {args.batches}")
    report = None
    if args.report != "none":  # before the model runs: a wrong path costs nothing
        args.report = args.report or str(default_report())
        try:
            report = load_report(args.report)
        except (OSError, ReportError) as err:
            raise UsageError(f"census: --report {args.report}: {getattr(err, 'strerror', None) or err}") from None
    try:
        framework, sites, mode = hc.user_census(args.model, args.data, args.batches, args.eval)
    except hc.CensusError as err:
        raise UsageError(f"census: {err}") from None
    from importlib.metadata import PackageNotFoundError, version

    try:
        installed = version(framework).split("+")[0]
    except PackageNotFoundError:
        installed = None
    sys.stdout.write(hc.render_sites(framework, sites, report, installed, mode))
    return 0


def _bound_options(p: argparse.ArgumentParser) -> None:
    from kinkcheck.probe.worker import DEFAULT_MEMORY_GIB, DEFAULT_TIMEOUT_S, ENV_MEMORY, ENV_TIMEOUT

    p.add_argument("--timeout", metavar="SECONDS",
                   help=f"wall-clock limit of the evaluation (default ${ENV_TIMEOUT}, else {DEFAULT_TIMEOUT_S:g})")
    p.add_argument("--memory", metavar="GIB",
                   help=f"memory limit of the evaluation in GiB (default ${ENV_MEMORY}, else {DEFAULT_MEMORY_GIB:g})")
    p.add_argument("--no-isolate", action="store_true",
                   help="evaluate in this process, without the time and memory limits (default: a worker process)")


def _framework_name(text: str) -> str:
    """``--framework``'s value: a framework's name, or an alias that stands for the whole framework (``tf``,
    ``ms``; not ``jnp``, which is a module of one)."""
    from kinkcheck.registry import aliases

    path = aliases().get(text)
    return path if path is not None and path in FRAMEWORKS else text


def build_parser() -> argparse.ArgumentParser:
    from kinkcheck import __version__

    p = _Parser(prog="kinkcheck", description="Gradient conventions at kinks, measured in real frameworks.")
    p.add_argument("--version", action="version", version=f"kinkcheck {__version__}")
    sub = p.add_subparsers(dest="command", required=True, parser_class=_Parser)

    g = sub.add_parser(
        "grad", help="gradient of one call expression at a point (first line: the JSON value), judged: sympy "
                     "form, one-sided derivatives, Clarke set, labels, what the report holds there",
        epilog='An expression that starts with "-" goes after --: kinkcheck grad --at x=0 -- "-torch.min(-x)"',
    )
    g.add_argument("expr", help='call expression, e.g. "torch.clamp(x, min=0)"')
    g.add_argument("--at", required=True, help="point: x=0 | x=1,y=1 | 'v=[1,3,3]' | x=inf | x=nan | "
                   "k=int:0 (an integer input, never differentiated)")
    g.add_argument("--wrt", metavar="NAMES", help="differentiate only these inputs, e.g. x or x,y (default: every "
                   "input not written int:); the others are constants")
    g.add_argument("--dtype", default="float64", help="float64 (default) | float32 | float16 | bfloat16")
    g.add_argument("--device", default="cpu", choices=tuple(DEVICES),
                   help="cpu (default) | cuda | metal (Apple silicon's GPU: torch's MPS backend, MLX's mx.gpu)")
    g.add_argument("--mode", default="reverse",
                   help="reverse (default) | functional | forward | forward-ad | inductor | aot_eager | vmap | "
                        "second-order (torch); reverse | jit | forward | jacfwd | jacrev | vmap | second-order (jax)")
    g.add_argument("--framework", choices=FRAMEWORKS, type=_framework_name, help="only for a bare method chain like x.abs()")
    g.add_argument("--sympy", metavar="FORM", help="the function in the oracle's sympy language over the inputs, "
                   "e.g. 'Max(x, 0)' or 'Abs(v[0]) + Abs(v[1])' (default: mapped from the program)")
    g.add_argument("--report", help=REPORT_HELP + "; none anywhere: no comparison")
    g.add_argument("--json", action="store_true", help="print one JSON object: value, sympy form, oracle, labels, "
                                                       "report rows")
    g.add_argument("--no-judge", action="store_true", help="print the value only (no sympy, oracle or report)")
    g.add_argument("--oracle-timeout", metavar="SECONDS", help="limit of the judgement (default "
                   "$KINKCHECK_ORACLE_TIMEOUT, else 60); past it: not judged")
    _bound_options(g)
    g.set_defaults(func=_cmd_grad)

    a = sub.add_parser(
        "ask", help="any program at a point, measured as the catalog's programs are (every mode and dtype) in the "
                    "releases asked, each in its own environment, judged and printed as a case page shows a program",
        description="Answers a program at a point across releases. A program of a catalog case at that case's point "
                    "is answered from the report's cells (measured by nox -s report, every mode and dtype); any other "
                    "program, point or release is measured here by kinkcheck probe, every mode and dtype, each "
                    "release in a virtualenv of its own. The answer is judged against the sympy oracle and printed as "
                    "a case page shows a program. Read docs/ask.md.",
        epilog="Virtualenvs and answers are kept in $KINKCHECK_ASK_HOME (default: the user cache folder's "
               "kinkcheck/ask); a question asked again measures only what its shards lack.")
    a.add_argument("expr", help='call expression, e.g. "torch.clamp(x, min=0)"')
    a.add_argument("--at", required=True, help="point: x=0 | x=1,y=1 | 'v=[1,3,3]' (finite numbers)")
    a.add_argument("--release", action="append", metavar="VERSION",
                   help="repeatable: a release of the framework's matrix, or the installed one")
    a.add_argument("--releases", metavar="SPEC", help="the matrix's releases in a version specifier, e.g. '>=2.0'")
    a.add_argument("--all", action="store_true", help="every release of the matrix")
    a.add_argument("--mode", action="append", help="repeatable; default every mode of the framework")
    a.add_argument("--dtype", action="append", help="repeatable; default all four dtypes")
    a.add_argument("--framework", choices=FRAMEWORKS, type=_framework_name, help="only for a bare method chain")
    a.add_argument("--sympy", metavar="FORM", help="the function in the oracle's sympy language (default: mapped "
                   "from the program)")
    a.add_argument("--disk-budget", type=float, metavar="GB", help="disk the kept virtualenvs and the installer's "
                   "cache may take (default $KINKCHECK_ASK_DISK_GB, else 20); past it the cache is removed first, then "
                   "the least recently used virtualenvs")
    a.add_argument("--tie", action="store_true", default=None, help="the kink is a tie between arguments or "
                   "elements: the tie labels apply (split-even, first, last, one-index); a catalog program at its "
                   "case's point takes the case's own flag")
    a.add_argument("--stage", metavar="ID", help="also write the question as a staged case ID (references/staged/): "
                   "its program, and for the other frameworks a reason 'not written yet' to replace before it moves "
                   "into the catalog")
    a.add_argument("--title", help="with --stage: the case's title (default: the program at the point)")
    a.add_argument("--catalog", metavar="PATH", help="with --stage: the catalog to stage beside (default "
                   "references/catalog.toml in the current folder: run it in the checkout)")
    a.add_argument("--report", metavar="PATH", help="the report whose cells answer a catalog program: a folder "
                   "(conventions.json.gz, observations.parquet) or its conventions.json.gz (default $KINKCHECK_REPORTS, "
                   "else ./reports, else the installed package's)")
    a.add_argument("--live", action="store_true", help="measure every release here, even those whose cells the "
                   "report holds (default: a catalog program at its case's point is answered from the report's "
                   "cells, measured by nox -s report)")
    a.add_argument("--device", default="cpu", choices=("cpu", "cuda"),
                   help="cpu (default) | cuda: the report's cells of the program on an NVIDIA GPU (the releases the "
                        "report measured there), from the report; not measured here")
    a.add_argument("--json", action="store_true", help="print one JSON object: the question and its one-case report")
    a.add_argument("--quiet", action="store_true", help="no progress on stderr")
    a.set_defaults(func=_cmd_ask)

    lk = sub.add_parser(
        "lock", help="write kinkcheck.lock: the convention of each kinked call a model makes (--model, --data); "
                     "--check: exit 1 when another release changes one",
        description="Runs your model on your batches under kinkcheck's kink-hit counters and writes kinkcheck.lock "
                    "(TOML): for each kinked call it reaches (relu, clamp, maximum, max, pooling, ...), your call site, "
                    "the question that asks its convention, and the convention in the installed release (the "
                    "report's cell, or measured here, with the rules' prediction beside it). --check compares the lock "
                    "with another release (--release: the report's cell, else the rules' prediction, marked "
                    "predicted, else measured in that release's environment), another framework "
                    "(--framework-version jax==R, paired as kinkcheck migrate pairs programs) or the report's CUDA cells (--device cuda --release R). Read docs/lock.md.",
        epilog="Exit status of --check: 0 nothing the model relies on changes, 1 a locked convention changed (one line "
               "per site), 2 bad input.")
    lk.add_argument("--model", metavar="MODULE:FUNCTION", help="returns a torch.nn.Module (its forward pass is run) "
                    "or a JAX (apply, params) pair (apply(params, x) is run)")
    lk.add_argument("--data", metavar="MODULE:FUNCTION", help="returns an iterable of inputs or (input, target)")
    lk.add_argument("--batches", type=int, default=5, help="forward passes run (default 5)")
    lk.add_argument("--eval", action="store_true", help="run the module in eval mode")
    lk.add_argument("--lock", metavar="PATH", help="the lock file (default $KINKCHECK_LOCK, else ./kinkcheck.lock)")
    lk.add_argument("--check", action="store_true", help="compare the lock with --release (default: the installed "
                    "release)")
    lk.add_argument("--release", metavar="VERSION", help="with --check: a release of the framework's matrix")
    lk.add_argument("--framework-version", metavar="FW==VERSION", help="with --check: a release of the lock's "
                    "framework (torch==2.14.1, as --release), or of another framework (jax==0.4.30: each site that is "
                    "a catalog case against that framework's programs of the case, from the report's cells)")
    lk.add_argument("--device", default="cpu", choices=("cpu", "cuda"), help="with --check: compare with the report's "
                    "cells on this device (cuda: the releases the report measured on an NVIDIA GPU; with --release, "
                    "else the lock's release); default cpu")
    lk.add_argument("--isa", metavar="LEVEL", choices=tuple(LEVELS), help="with --check: compare with the report's "
                    "CPU cells at this x86-64 instruction-set level (x86-64-v2: SSE4.2, -v3: AVX2; the releases the "
                    "report measured under that cap, kinkcheck probe --isa): does the model's gradient change on a "
                    "CPU without AVX-512? With --release, else the lock's release")
    lk.add_argument("--report-only", action="store_true", help="with --check: measure nothing: each site is compared "
                    "with the report's cell, else with the rules' prediction; the others are 'not compared' (default: "
                    "measured in that release's environment, made the first time)")
    lk.add_argument("--measure", action="store_true", help="with --check --release R: measure the sites the report "
                    "has no cell for in R's environment (made the first time: about 5.5 GB for torch) instead of "
                    "comparing them with the rules' prediction for R (the default where R is not installed)")
    lk.add_argument("--quiet", action="store_true", help="no progress on stderr")
    lk.set_defaults(func=_cmd_lock)

    from kinkcheck.probe.worker import (DEFAULT_BATCH_TIMEOUT_S, DEFAULT_CASE_TIMEOUT_S, DEFAULT_PROBE_MEMORY_GIB,
                                        ENV_BATCH_TIMEOUT, ENV_CASE_TIMEOUT, ENV_PROBE_MEMORY)

    pr = sub.add_parser("probe", help="probe the catalog in the installed framework and merge it into its shard",
                        description="Measures the catalog (or the --case, --mode, --dtype cells asked for) and merges "
                                    "the result into the environment's shard atomically: the cells probed are "
                                    "replaced, every other cell is kept, and so are cases the --catalog does not hold "
                                    "(unless --drop-removed). A measured (ok) value is never replaced by an error or "
                                    "unavailable cell of the same build (kept, and counted in the shard's history); a "
                                    "write that would lower the shard's count of measured observations is refused "
                                    "(exit 2). A killed probe resumes from its journal (.<id>.<selection>.journal.jsonl "
                                    "beside the shard, one per selection of cases, modes and dtypes); one probe per "
                                    "environment at a time (.<id>.lock).")
    pr.add_argument("--framework", choices=FRAMEWORKS, type=_framework_name, help="default with --out-dir: every installed framework")
    pr.add_argument("--out", help="shard file, for one --framework; must be named <framework>-<version>-<device>[-<platform>].json "
                                  "after the environment probed")
    pr.add_argument("--out-dir", help="folder: one shard per framework, named <framework>-<version>-<device>[-<platform>].json (the platform tag off Linux x86-64, e.g. -macos_arm64)")
    pr.add_argument("--device", default="cpu", choices=tuple(DEVICES),
                   help="cpu (default) | cuda | metal (Apple silicon's GPU: torch's MPS backend, MLX's mx.gpu)")
    pr.add_argument("--isa", metavar="LEVEL", choices=tuple(LEVELS),
                    help="cap the frameworks' CPU kernels at this x86-64 instruction-set level (x86-64-v2, -v3, -v4: "
                         "oneDNN, ATen, MKL, XLA and OpenBLAS dispatch no higher) and measure it as its own "
                         "environment, <framework>-<version>-<device>-linux_x86_64_v2; the CPU's own level or "
                         "one below it")
    pr.add_argument("--dtype", action="append", default=[], help="repeatable; default all four dtypes")
    pr.add_argument("--mode", action="append", default=[], help="repeatable; default every mode of the framework")
    pr.add_argument("--case", action="append", default=[], metavar="ID",
                    help="repeatable; probe only this catalog case (default every case)")
    pr.add_argument("--replace", action="store_true",
                    help="an explicit full re-measure: replace the shard there is instead of merging into it "
                         "(not with --case, --mode or --dtype)")
    pr.add_argument("--drop-removed", action="store_true",
                    help="drop from the shard the cases the --catalog does not hold (default: keep them as they are, "
                         "so a catalog cut to a few cases loses nothing)")
    pr.add_argument("--catalog", help="catalog TOML (default references/catalog.toml)")
    pr.add_argument("--staged", action="store_true",
                    help="the staged cases too (staged/catalog.toml beside the catalog): measured into the shard "
                         "ahead of their move into the catalog, not reported before it; --drop-removed keeps them")
    pr.add_argument("--quiet", action="store_true", help="no progress bar")
    pr.add_argument("--no-isolate", action="store_true",
                    help="probe in this process, without the time and memory limits (default: a worker process, "
                         "restarted after a case that crashes it or runs past a limit)")
    pr.add_argument("--case-timeout", metavar="SECONDS",
                    help=f"seconds one case's eager cells may take before the worker is killed and the case "
                         f"recorded as errors (default ${ENV_CASE_TIMEOUT}, else {DEFAULT_CASE_TIMEOUT_S:g})")
    pr.add_argument("--batch-timeout", metavar="SECONDS",
                    help=f"the same for one compiled batch (the catalog in one mode and dtype) or chunk of one "
                         f"(default ${ENV_BATCH_TIMEOUT}, else {DEFAULT_BATCH_TIMEOUT_S:g})")
    pr.add_argument("--memory", metavar="GIB",
                    help=f"memory limit of the probe worker in GiB; an allocation past it becomes an error cell "
                         f"(default ${ENV_PROBE_MEMORY}, else {DEFAULT_PROBE_MEMORY_GIB:g})")
    pr.add_argument("--worker", metavar="JOURNAL", help=argparse.SUPPRESS)
    pr.set_defaults(func=_cmd_probe)

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
    r.set_defaults(func=_cmd_report)

    d = sub.add_parser(
        "diff", help="conventions that changed between two environments (exit 0: none, 1: some, 2: bad input)",
        description="Each side is a shard file, REPORT.json#ENV for an environment inside a report, or #ENV or ENV "
                    "alone (torch-2.13.0-cpu) for an environment of --report (default: the report grad reads, the "
                    "installed package's outside a checkout).",
    )
    d.add_argument("old", help="e.g. references/observations/torch-2.13.0-cpu.json or torch-2.13.0-cpu")
    d.add_argument("new", help="e.g. reports/conventions.json#torch-2.15.0-cpu or torch-2.15.0-cpu")
    d.add_argument("--report", help=REPORT_HELP + "; the report whose environments #ENV and ENV name")
    d.add_argument("--case", help="one case id only")
    d.add_argument("--program", help="one program only (as the catalog spells it)")
    d.add_argument("--mode", help="one mode only")
    d.add_argument("--dtype", help="one dtype only")
    d.add_argument("--each", action="store_true",
                   help="one line per changed cell (case, program, [mode, dtype]: old -> new) instead of the table "
                        "that groups one change over its modes and dtypes")
    d.set_defaults(func=_cmd_diff)

    ru = sub.add_parser("rules", help="what each operation returns at its kinks, inferred from every measurement: "
                                      "the rules table, or one operation's rules over releases with their evidence",
                        description="The rules inferred from the report's measurements (rules.json.gz beside it): per "
                                    "framework, operation and kind of kink, the label of the value it returns in each "
                                    "release, mode and dtype. Read docs/rules.md.")
    ru.add_argument("operation", nargs="?", help="an operation (torch.clamp, clamp, jax.nn.relu) or a family (relu); "
                                                  "default: every rule")
    ru.add_argument("--framework", help="only this framework's rules")
    ru.add_argument("--json", action="store_true", help="machine-readable: each rule's changes and evidence")
    ru.add_argument("--report", help="a report folder or its conventions.json (default: as grad reads it)")
    ru.set_defaults(func=_cmd_rules)

    c = sub.add_parser("cite", help="one sentence stating a measured convention, with its report anchor and a "
                                    "BibTeX (or CITATION.cff) entry for the report")
    c.add_argument("program", nargs="?",
                   help='a catalog program, e.g. "torch.clamp(x, min=0)" or "jnp.maximum(x, 0.0)" (or --rule)')
    c.add_argument("--rule", metavar="OPERATION[@KIND]",
                   help="cite a rule instead (rules.md): an operation as the census names it (torch.clamp, "
                        "torch.nn.functional.relu; torch.relu and jnp aliases are read too) and its kind of kink, "
                        "spelt out, as its slug or abbreviated unambiguously (torch.clamp@max-at-a-bound, "
                        "torch.clamp@max); @KIND may be left out when the operation has one kind")
    c.add_argument("--case", help="case id (e.g. relu@-0.0); default the program's principal case: the first in "
                                  "catalog order at its kink at ordinary numbers (relu@0 for torch.relu(x)), the "
                                  "others listed after the sentence")
    c.add_argument("--framework", choices=FRAMEWORKS, type=_framework_name,
                   help="only for a program text both frameworks measure in the case (x ** 0.5, v.max())")
    c.add_argument("--framework-version", help="release (default: the newest measured)")
    c.add_argument("--mode", default="reverse", help="default reverse")
    c.add_argument("--dtype", default="float64", help="default float64")
    c.add_argument("--device", default="cpu", help="default cpu; off Linux x86-64 the device, then the platform "
                   "tag: cpu-macos_arm64, metal-macos_arm64")
    c.add_argument("--report", help=REPORT_HELP)
    c.add_argument("--link-base", metavar="URL",
                   help="the reports folder (a path or URL) the link starts from: BASE/cases/CASE.md#ROW; a page of "
                        "the site links the site's case page, e.g. https://USER.github.io/kinkcheck/report/"
                        "conventions.html (default: the published site, the Documentation URL of kinkcheck's "
                        "metadata, and the local page too when the reports folder read holds it)")
    c.add_argument("--cff", action="store_true", help="print a CITATION.cff references item instead of BibTeX")
    c.set_defaults(func=_cmd_cite)

    mg = sub.add_parser("migrate", help="per case, source vs target programs' conventions, with replacements that "
                                        "keep the source value (an equivalent program or generated code)")
    mg.add_argument("--from", dest="source", required=True,
                    help="a framework (torch, jax, tensorflow, paddle, …) or one release of it (torch==2.13.0); "
                         "@DEVICE puts this side on a device of its own (torch==2.11.0@cpu)")
    mg.add_argument("--to", dest="target", required=True,
                    help="jax | torch==2.15.0 | torch==2.11.0@cuda (a CPU → CUDA migration) | …")
    mg.add_argument("--case", help="one case id only")
    mg.add_argument("--program", help="one source program only (aliases accepted: jnp.maximum(x, 0.0))")
    mg.add_argument("--mode", default="reverse", help="default reverse")
    mg.add_argument("--dtype", default="float64", help="default float64")
    mg.add_argument("--device", default="cpu", help="default cpu; off Linux x86-64 the device, then the platform "
                   "tag: cpu-macos_arm64, metal-macos_arm64")
    mg.add_argument("--only-differences", action="store_true", help="leave out the pairs that agree")
    mg.add_argument("--report", help=REPORT_HELP)
    mg.set_defaults(func=_cmd_migrate)

    ck = sub.add_parser("check", help="two implementations of one function: gradients at the input and at "
                                      "kink-hitting variants of it (exit 0: agree, 1: differ, 2: bad input)")
    ck.add_argument("first", help="MODULE:FUNCTION or path/to/file.py:FUNCTION (the first framework's version)")
    ck.add_argument("second", help="MODULE:FUNCTION or path/to/file.py:FUNCTION (the second framework's version)")
    ck.add_argument("--at", required=True, help="the input: x=0.5,y=2 | 'v=[1,2,3]'; passed positionally in this order")
    ck.add_argument("--frameworks", default="torch,jax", help="framework of each function, two of the registered ones (default torch,jax)")
    ck.add_argument("--dtype", default="float64",
                    help="the inputs' dtype and the comparison's tolerance: float64 (default), float32, float16, "
                         "bfloat16")
    ck.add_argument("--mode", default="reverse",
                    help="how both functions are differentiated (default reverse): any mode both frameworks have "
                         "(forward, vmap, second-order), or one per function: inductor,jit (torch: functional, "
                         "forward-ad, inductor, aot_eager; jax: jit, jacfwd, jacrev)")
    ck.add_argument("--all", action="store_true", help="list every differing input (default: the first 20)")
    _bound_options(ck)
    ck.set_defaults(func=_cmd_check)

    cs = sub.add_parser("census", help="kink hits in training: how often an MLP's forward pass lands exactly on "
                                       "ReLU's kink by dtype and depth, and what ReLU'(0) changes (Bertoin et al., "
                                       "NeurIPS 2021); or, with --model and --data, the kink hits of your model")
    cs.add_argument("--model", metavar="MODULE:FUNCTION", help="a factory returning a torch.nn.Module, or "
                    "(apply, params) for JAX (also path/to/file.py:FUNCTION)")
    cs.add_argument("--data", metavar="MODULE:FUNCTION", help="a function returning the batches: inputs x or "
                    "(x, y) pairs")
    cs.add_argument("--batches", type=int, default=5, help="batches of --data to run (default 5)")
    cs.add_argument("--eval", action="store_true", help="run a torch module in eval mode (default: the mode its "
                    "factory left it in, said in the output; in training mode dropout's zeros are hits too)")
    cs.add_argument("--report", help="the report whose conventions the hits are shown with (" +
                    REPORT_HELP.split(" (", 1)[1].rstrip(")") + "; none: without)")
    cs.add_argument("--framework", choices=("torch", "jax"), default="torch",
                    help="the reference MLP's framework (default torch; jax: the same initialisations and "
                         "minibatches under jax.jit, no training run)")
    cs.add_argument("--depths", default="1,2,3,4,5", help="hidden layers of the reference MLP (default 1,2,3,4,5)")
    cs.add_argument("--dtypes", default="float64,float32,float16,bfloat16")
    cs.add_argument("--inits", type=int, default=100, help="random initialisations per dtype and depth (default "
                    "100; the paper ran 1,000)")
    cs.add_argument("--width", type=int, default=128, help="neurons per hidden layer (default 128; the paper 256)")
    cs.add_argument("--batch", type=int, default=256, help="minibatch size (default 256, as the paper)")
    cs.add_argument("--passes", type=int, default=1, help="passes over the digits per initialisation (default 1)")
    cs.add_argument("--train-epochs", type=int, default=30, help="epochs of each training run (default 30; 0: no "
                    "training run)")
    cs.add_argument("--seed", type=int, default=0)
    cs.add_argument("--out", metavar="FILE", help="write the measurement (JSON, with its provenance) here")
    cs.add_argument("--replace", action="store_true", help="with --out: measure again over an existing file")
    cs.add_argument("--quiet", action="store_true", help="no progress bar")
    cs.set_defaults(func=_cmd_census)
    return p


def _check_utf8(argv: Sequence[str]) -> None:
    """Refuse an argument holding non-UTF-8 bytes (Linux hands them over as lone surrogates, which cannot be
    printed, parsed or written to a UTF-8 report)."""
    for i, arg in enumerate(argv, start=1):
        try:
            arg.encode("utf-8")
        except UnicodeEncodeError as err:
            code = ord(arg[err.start])
            byte = f"0x{code - 0xDC00:02x}" if 0xDC80 <= code <= 0xDCFF else f"U+{code:04X}"
            raise UsageError(f"argument {i} is not valid UTF-8 text (byte {byte} at position {err.start + 1}): "
                             f"{arg[:40]!a}") from None


def run() -> None:
    """The ``kinkcheck`` console script: :func:`main`, then exit without the cyclic garbage collector walking
    what the command left alive (a report's 100,000 observations cost half a second at interpreter exit). A
    ``report`` run this way also leaves the collector off after its render (:data:`_EXITS_AFTER`): switched back on,
    its first pass walks the millions of objects the render made (0.6 s), for a process about to exit."""
    import gc

    global _EXITS_AFTER
    _EXITS_AFTER = True
    try:
        rc = main()
    finally:
        _EXITS_AFTER = False  # a caller that catches the exit and calls main again keeps its collector
    gc.freeze()
    raise SystemExit(rc)


#: Set by :func:`run`: the process exits after this command (:func:`main` called from Python keeps the collector).
_EXITS_AFTER = False


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command; the exit status: 0, 1 (``diff``/``check``: a difference), 2 (bad input), 130 (interrupted).

    A command that knows its status before writing its output sets ``args.exit_status``; when the reader of
    stdout leaves early (``| head -1``) that status is returned, not 0.
    """
    args = None
    try:
        _check_utf8(sys.argv[1:] if argv is None else argv)
        args = build_parser().parse_args(argv)
        _refuse_empty_paths(args)
        if sys.stdout is None:  # started with stdout closed (`>&-`): there is nowhere to answer
            raise UsageError("standard output is closed: nowhere to write the answer")
        rc = int(args.func(args))
        sys.stdout.flush()  # a closed pipe shows here, inside the handler below, not at interpreter exit
        return rc
    except UsageError as err:
        from kinkcheck.validate import one_line

        msg = one_line(str(err), limit=2000)  # names read from a user's file may hold line breaks
        print(f"kinkcheck: error: {msg}" if not msg.startswith("kinkcheck") else msg, file=sys.stderr)
        return EXIT_BAD_INPUT
    except KeyboardInterrupt:
        print("kinkcheck: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # `kinkcheck diff … | head -1`: the reader left; the status stays the command's
        _quiet_stdout()
        return int(getattr(args, "exit_status", 0))
    except OSError as err:  # `> /dev/full`: the answer could not be written; neither 0 nor diff's 1 would be true
        if err.filename is not None:  # a file the command read or wrote, not the output
            print(f"kinkcheck: error: {err.strerror or err}: {err.filename}", file=sys.stderr)
            return EXIT_BAD_INPUT
        _quiet_stdout()
        try:
            print(f"kinkcheck: error: cannot write the output: {err.strerror or err}", file=sys.stderr)
        except (OSError, ValueError, AttributeError):
            pass
        return EXIT_BAD_INPUT


#: Arguments that name a file, a folder or a release: an empty one (``--report ""``, ``$(…)`` that printed
#: nothing) would otherwise fall back to a default or to the current folder without a word.
EMPTY_REFUSED = {"report": "--report", "shards": "--shards", "catalog": "--catalog", "out_dir": "--out-dir",
                 "old": "OLD", "new": "NEW", "framework_version": "--framework-version", "model": "--model",
                 "data": "--data", "first": "FIRST", "second": "SECOND", "lock": "--lock"}


def _refuse_empty_paths(args: argparse.Namespace) -> None:
    """One line and exit 2 for an empty path, file or release argument (:data:`EMPTY_REFUSED`)."""
    for dest, name in EMPTY_REFUSED.items():
        value = getattr(args, dest, None)
        if isinstance(value, str) and not value.strip():
            what = "a release, or leave it out for the newest measured" if dest == "framework_version" else \
                "MODULE:FUNCTION" if dest in ("model", "data") else \
                "a shard file, REPORT#ENV, #ENV or ENV (e.g. torch-2.13.0-cpu)" if (
                    args.command == "diff" and dest in ("old", "new")) else \
                "a path" if dest in ("old", "new", "first", "second", "shards") else \
                "a path, or leave it out for the default"
            raise UsageError(f"{args.command}: {name} is empty: name {what}")


def _quiet_stdout() -> None:
    """Send later writes to stdout (and the interpreter's last flush) to /dev/null, so they cannot fail again."""
    import os

    try:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    except (OSError, ValueError, AttributeError):  # a stdout without a file descriptor (embedded, captured)
        pass
