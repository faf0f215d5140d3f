"""``kinkcheck grad``: the gradient of one call expression at a point, evaluated in a bounded worker and judged
(sympy form, one-sided derivatives, Clarke set, labels, the report's cells and the rules' prediction there)."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from kinkcheck.errors import UsageError
from kinkcheck.faces.shared import (REPORT_HELP, NoDevice, bound_options, dtypes_help, evaluate, framework_name,
                                    modes_help, worker_limits)
from kinkcheck.platforms import DEVICES
from kinkcheck.registry import FRAMEWORKS

#: Where the command stands in ``kinkcheck --help``.
POSITION = 10


def add_parser(sub: Any) -> None:
    """Add the command to ``kinkcheck``'s subcommands."""
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
    g.add_argument("--dtype", default="float64", help=dtypes_help())
    g.add_argument("--device", default="cpu", choices=tuple(DEVICES),
                   help="cpu (default) | cuda | metal (Apple silicon's GPU: torch's MPS backend, MLX's mx.gpu)")
    g.add_argument("--mode", default="reverse", help=modes_help())
    g.add_argument("--framework", choices=FRAMEWORKS, type=framework_name, help="only for a bare method chain like x.abs()")
    g.add_argument("--sympy", metavar="FORM", help="the function in the oracle's sympy language over the inputs, "
                   "e.g. 'Max(x, 0)' or 'Abs(v[0]) + Abs(v[1])' (default: mapped from the program)")
    g.add_argument("--report", help=REPORT_HELP + "; none anywhere: no comparison")
    g.add_argument("--json", action="store_true", help="print one JSON object: value, sympy form, oracle, labels, "
                                                       "report rows")
    g.add_argument("--no-judge", action="store_true", help="print the value only (no sympy, oracle or report)")
    g.add_argument("--oracle-timeout", metavar="SECONDS", help="limit of the judgement (default "
                   "$KINKCHECK_ORACLE_TIMEOUT, else 60); past it: not judged")
    bound_options(g)
    g.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from kinkcheck.language import expr as ex  # on first use: not loaded at start-up
    from kinkcheck.language import points as pt  # on first use: not loaded at start-up
    from kinkcheck.catalog import FRAMEWORKS  # on first use: not loaded at start-up
    from kinkcheck.vocabulary import DTYPES, MODES  # on first use: not loaded at start-up

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
        grad = evaluate(args, "grad", {"expr": args.expr, "at": at, "framework": framework, "dtype": args.dtype,
                                        "device": args.device, "mode": args.mode, "wrt": list(inputs.wrt),
                                        "ints": list(inputs.ints)})
    except NoDevice:  # no such device on this machine: the report's cells of it
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
    from kinkcheck.answers.explain import ReportUnavailable, render  # slow: msgspec

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
    not measured here" (:class:`kinkcheck.answers.explain.ReportAnswer`); no such cell: one line, exit 2."""
    from kinkcheck.probe.ondemand import installed_release  # on first use: not loaded at start-up
    from kinkcheck.answers.explain import ReportUnavailable, render  # slow: msgspec
    from kinkcheck.rules import answer as rules_answer  # on first use: not loaded at start-up

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
    from kinkcheck.probe.ondemand import installed_release  # on first use: not loaded at start-up
    from kinkcheck.rules import answer  # on first use: not loaded at start-up

    release = installed_release(framework)
    return answer.predictions(args.expr, at, framework, releases=[release] if release else [], modes=[args.mode],
                              dtypes=[args.dtype], device=args.device, wrt=wrt or None, report=args.report)


def _print_prediction(forecast: dict[str, Any], grad: Any) -> None:
    from kinkcheck.oracles.classify import same_value  # slow: numpy
    from kinkcheck.language.decimals import decimal_value  # on first use: not loaded at start-up
    from kinkcheck.vocabulary import flat_value  # on first use: not loaded at start-up

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
    """Start ``grad``'s judgement and report lookup (:class:`kinkcheck.answers.explain.Pending`) beside the evaluation;
    a ``--sympy`` text that does not parse is bad input before anything runs."""
    from kinkcheck.language import expr as ex  # on first use: not loaded at start-up
    from kinkcheck.catalog import SYMPY_NAMES  # on first use: not loaded at start-up
    from kinkcheck.answers.explain import Pending, oracle_timeout_from_env  # slow: msgspec

    try:
        bound = oracle_timeout_from_env(args.oracle_timeout)
        if args.sympy is not None:
            ex.parse(args.sympy, inputs.at, SYMPY_NAMES)
    except ValueError as err:  # ExprError is a ValueError
        raise UsageError(f"--sympy: {err}" if isinstance(err, ex.ExprError) else str(err)) from None
    return Pending(ex.unparse(tree), inputs.at, framework, tree=tree, wrt=inputs.wrt, sympy_text=args.sympy,
                   report=args.report, mode=args.mode, dtype=args.dtype, device=args.device, bound_s=bound,
                   memory_gib=worker_limits(args).memory_gib)
