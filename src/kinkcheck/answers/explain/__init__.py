"""``kinkcheck grad`` explains: the sympy form of a program, the oracle's judgement there, the labels of the
measured value, and what the report says other programs, frameworks and releases return at that point.

Three parts, each usable alone:

* :func:`judge` — a program (or a ``--sympy`` text) at a point → :class:`Judgement`: the sympy form
  (:func:`kinkcheck.oracles.mapping.sympy_form`, or the user's text in the catalog's sympy language, parsed
  with :mod:`kinkcheck.language.expr`, never ``eval``-ed) and the oracle's answer
  (:func:`kinkcheck.oracles.symbolic.analyze_expression`: one-sided derivatives, Clarke set, min-norm
  element, local Lipschitz continuity). Cached on disk (:func:`kinkcheck.cache.cache_dir`) at two levels:
  per program and point (a warm ``grad`` imports no sympy) and per sympy form and point (programs that
  map to the same form share one oracle run).
* :func:`labels` — a measured gradient + a judgement → the labels of :func:`kinkcheck.oracles.classify.classify`,
  with the dtype's tolerance, exactly as the report labels its cells.
* :func:`report_rows` — what the report (``reports/conventions.json``) holds at the same point: the
  program's own row first, then the case's other programs, per framework, with each value over the
  ranges of releases that return it, read from ``observations.parquet`` beside the report: the cases and
  releases from its metadata, then the rows of those cases only (the model's dataset; no index of its own).

:class:`Pending` runs the report lookup and the cache lookup in a thread of the ``grad`` process while the
framework evaluates in its worker, so they overlap; on a cache miss :func:`judge` runs in a second worker
process (``python -m kinkcheck.answers.explain``, memory capped like the evaluation's), killed at the bound: a
judgement that takes longer is "not judged: the oracle exceeded N s" and never holds ``grad`` up (sympy can
spend minutes inside one C call, which no thread could interrupt).
"""

from __future__ import annotations

import atexit
import json
import os
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import kinkcheck
from kinkcheck.answers.explain.judgement import Judgement, _components, _same_point, flat_value, judge, labels
from kinkcheck.answers.explain.rows import (RULE_LABELS, ReportDamaged, ReportUnavailable, ReportView, parameter_rule,
                                            report_index, report_rows)
from kinkcheck.language import expr as ex
from kinkcheck.language.decimals import decimal_exact, decimal_text, decimal_value
from kinkcheck.probe.worker import _positive, kill_group, limit_memory
from kinkcheck.report.query import DATA_ENV, default_report
from kinkcheck.vocabulary import JUMP, KINK, NOT_JUDGED

__all__ = [
    "DEFAULT_ORACLE_TIMEOUT_S",
    "DEFAULT_REPORT",
    "Explanation",
    "Judgement",
    "Pending",
    "ReportAnswer",
    "ReportUnavailable",
    "ReportView",
    "catalog_spelling",
    "flat_value",
    "judge",
    "labels",
    "oracle_timeout_from_env",
    "render",
    "report_index",
    "report_rows",
]


#: Seconds the judgement (mapping + sympy oracle) may take before grad answers without it.
DEFAULT_ORACLE_TIMEOUT_S = 60.0


#: The report a face reads when none is named, in the current folder (:func:`kinkcheck.report.query.default_report`
#: falls back to the package's data when it is not there).
DEFAULT_REPORT = "reports/conventions.json"


@dataclass
class Explanation:
    """``grad``'s answer: the value, the judgement, the labels and the report's view (see :func:`render`)."""

    value: dict[str, Any]
    program: str
    framework: str
    dtype: str
    mode: str
    judgement: Judgement
    labels: list[str] | None
    report: ReportView

    def to_json(self) -> dict[str, Any]:
        j = self.judgement
        return {"value": self.value, "program": self.program, "framework": self.framework, "dtype": self.dtype,
                "mode": self.mode,
                "sympy": None if j.sympy is None else {"text": j.sympy, "source": j.source},
                "oracle": j.oracle, "judged": j.reason is None, "reason": j.reason, "labels": self.labels,
                "tie": j.tie, "report": self.report.to_json()}


@dataclass
class _Request:
    program: str
    tree: ex.Node | None
    at: dict[str, Any]
    framework: str
    wrt: tuple[str, ...]
    sympy_text: str | None
    report: str
    report_given: bool
    mode: str
    dtype: str
    device: str


class Pending:
    """The judgement and report lookup of one ``grad`` call, running in a daemon thread from construction.

    The report index is read in the thread; the judgement comes from the cache (no sympy) or, on a miss, from
    :func:`judge` in a worker process (``python -m kinkcheck.answers.explain``, memory capped at ``memory_gib``).
    :meth:`finish` waits for it at most ``bound_s`` seconds after the start; past that the worker is killed
    and the judgement is "not judged: the oracle exceeded N s".
    """

    def __init__(self, program: str, at: Mapping[str, Any], framework: str, *, tree: ex.Node | None = None,
                 wrt: Sequence[str] | None = None, sympy_text: str | None = None, report: str | None = None,
                 mode: str = "reverse", dtype: str = "float64", device: str = "cpu",
                 bound_s: float = DEFAULT_ORACLE_TIMEOUT_S, memory_gib: float = 8.0) -> None:
        self.request = _Request(program, tree, dict(at), framework, tuple(at) if wrt is None else tuple(wrt),
                                sympy_text, report or str(default_report()),
                                report is not None or bool(os.environ.get(DATA_ENV)),  # named: it must be there
                                mode, dtype, device)
        self.bound_s = bound_s
        self.program = self.request.program  # the catalog's spelling of it, once the report's index is read
        self.index: dict[str, Any] | None = None
        self.report_problem: str | None = None
        self.report_damaged = False  # the report's table is there but cannot be used: grad stops (exit 2)
        self.judgement: Judgement | None = None
        self.error: BaseException | None = None
        self.memory_gib = memory_gib
        self._proc: Any = None
        self._lock = threading.Lock()
        self._cancelled = False
        self._start = time.monotonic()
        self._indexed = threading.Event()  # set once the report's index is read (or found missing)
        atexit.register(self.cancel)  # a grad that ends early (bad program, Ctrl-C) leaves no worker behind
        self._thread = threading.Thread(target=self._run, name="kinkcheck-explain", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        r = self.request
        try:
            try:
                self.index = report_index(r.report)
            except ReportUnavailable as err:
                self.report_problem = str(err)
                self.report_damaged = isinstance(err, ReportDamaged)
            finally:
                self._indexed.set()
            cases = self.index["cases"] if self.index else ()
            self.program = catalog_spelling(r.program, r.framework, r.at, cases)
            hit = judge(self.program, r.at, r.framework, wrt=r.wrt, sympy_text=r.sympy_text, cases=cases, compute=False)
            self.judgement = hit if hit is not None else self._in_worker(cases)
        except BaseException as err:  # noqa: BLE001 - handed to the main thread by finish()
            self.error = err

    def _in_worker(self, cases: Sequence[Mapping[str, Any]]) -> Judgement | None:
        """Run :func:`judge` in ``python -m kinkcheck.answers.explain`` within the bound (time, memory): sympy can spend
        minutes in one C call (``10 ** 10 ** 10``) that no thread could interrupt; a process can be killed."""
        import subprocess  # slow to import

        r = self.request
        request = json.dumps({"program": self.program, "at": r.at, "framework": r.framework, "wrt": list(r.wrt),
                              "sympy_text": r.sympy_text, "cases": list(cases),
                              "memory_bytes": int(self.memory_gib * 2 ** 30)}).encode()
        env = dict(os.environ)  # the worker imports this very kinkcheck
        src = str(Path(kinkcheck.__file__).resolve().parents[1])
        env["PYTHONPATH"] = os.pathsep.join(p for p in (src, env.get("PYTHONPATH")) if p)
        with self._lock:
            if self._cancelled:
                return None
            self._proc = subprocess.Popen(_WORKER or [sys.executable, "-m", "kinkcheck.answers.explain"],
                                          stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                          start_new_session=True, env=env)
        try:
            out, err = self._proc.communicate(request, timeout=max(0.1, self._start + self.bound_s - time.monotonic()))
        except subprocess.TimeoutExpired:
            self.cancel()
            return None
        except (OSError, ValueError):  # cancelled from the main thread while waiting
            return None
        try:
            answer = json.loads(out)
        except ValueError:
            answer = None
        if isinstance(answer, dict) and isinstance(answer.get("ok"), dict):
            return Judgement.from_json(answer["ok"])
        if isinstance(answer, dict) and answer.get("bad_input"):
            raise ex.ExprError(str(answer.get("error")))
        code = self._proc.returncode
        said = [ln for ln in err.decode("utf-8", "replace").splitlines() if ln.strip()]
        why = (answer or {}).get("error") if isinstance(answer, dict) else None
        if why is None and code is not None and code < 0:
            why = f"killed by signal {-code}; its memory limit is {self.memory_gib:g} GiB"
        if why is None:
            why = f"exit status {code}{': ' + said[-1][:200] if said else ''}"
        return Judgement(None, "none", _components(r.at, r.wrt), None, f"not judged: the judgement failed ({why})")

    def cancel(self) -> None:
        """Kill the judgement's worker, if one runs (grad is answering without it, or leaving)."""
        with self._lock:
            self._cancelled = True
            proc = self._proc
        if proc is not None and proc.poll() is None:
            kill_group(proc)

    def from_report(self, release: str | None = None) -> ReportAnswer:
        """The report's cell of the program at the point on this request's device, mode and dtype, for a device
        this machine lacks (``grad --device cuda`` without a GPU): ``release``'s cell where the report measured it
        on that device, else the newest release's. Measured elsewhere, never here: :class:`ReportAnswer` says so.

        Raises
        ------
        ReportUnavailable
            No report, or it holds no cell of the program at this point on the device (one line naming the releases
            the report measured on the device, and that this machine has none).
        """
        r = self.request
        self._indexed.wait(self.bound_s)
        no_device = f"this machine has no {r.device.upper() if r.device == 'cuda' else r.device} device"
        index = self.index
        if index is None:
            raise ReportUnavailable(f"{no_device}, and {self.report_problem or 'the report was not read in time'}")
        program = catalog_spelling(r.program, r.framework, r.at, index["cases"])

        cases = [c["id"] for c in index["cases"] if _same_point(c["at"], r.at) and [r.framework, program] in
                 [list(fp) for fp in c["programs"]]]
        view = report_rows(index, program, r.framework, cases, mode=r.mode, dtype=r.dtype, device=r.device)
        ranges = [g for row in view.rows if row["this"] for g in row["ranges"]]
        measured = list(index["releases"].get(r.framework, {}).get(r.device, []))
        if not ranges:
            where = (f"its {r.framework} releases measured on {r.device}: {', '.join(measured)}" if measured
                     else f"it measured no {r.framework} release on {r.device}")
            raise ReportUnavailable(f"not measured: {no_device}, and the report ({index['path']}) holds no {r.device} "
                                    f"cell of {program} at {_point_text(r.at)} in {r.mode} mode, {r.dtype} ({where})")

        def span(g: Mapping[str, Any]) -> list[str]:  # the releases of a range: consecutive in ``measured``
            return measured[measured.index(g["from"]):measured.index(g["to"]) + 1]

        g = next((g for g in ranges if release in span(g)), ranges[-1])
        chosen = release if release in span(g) else g["to"]
        return ReportAnswer(g["value"], g["status"], g.get("label"), r.framework, chosen, r.device, r.mode, r.dtype,
                            tuple(cases), index["path"], tuple(measured), no_device, g.get("error"))

    def finish(self, value: Mapping[str, Any]) -> Explanation:
        """The explanation of the measured ``value`` (grad's answer).

        Any other failure of the judgement becomes "not judged: the judgement failed (…)".

        Raises
        ------
        kinkcheck.language.expr.ExprError
            A ``--sympy`` text that does not evaluate over the inputs.
        ReportUnavailable
            ``--report`` was given and the file is missing or not a report; or, named or not, the report's table
            is damaged or not one render with the report (:class:`ReportDamaged`).
        """
        r = self.request
        self._thread.join(max(0.0, self._start + self.bound_s - time.monotonic()))
        if isinstance(self.error, ex.ExprError) and not self._thread.is_alive():  # a bad --sympy text
            raise self.error
        if self.report_damaged and self.report_problem is not None:  # named or not: never read past it
            raise ReportDamaged(self.report_problem)
        if r.report_given and self.report_problem is not None:
            raise ReportUnavailable(self.report_problem)
        timed_out = self._thread.is_alive()
        if timed_out:
            self.cancel()
        j = None if timed_out else self.judgement
        if self.error is not None and not timed_out:  # a failure of this code, not the user's: said, no traceback
            j = Judgement(None, "none", _components(r.at, r.wrt), None,
                          f"not judged: the judgement failed ({type(self.error).__name__}: {str(self.error)[:200]})")
        elif j is None:  # still running: answer without it
            j = Judgement(None, "none", _components(r.at, r.wrt), None,
                          f"not judged: the oracle exceeded {self.bound_s:g} s (change it with --oracle-timeout)")
        if self.index is None:
            view = ReportView(r.report, self.report_problem or f"the report at {r.report} was not read in time")
        else:
            view = report_rows(self.index, self.program, r.framework, j.cases, mode=r.mode, dtype=r.dtype,
                               device=r.device, at=r.at,
                               kink=j.oracle is not None and j.oracle.get("kind") in (KINK, JUMP))
        value = dict(value)
        return Explanation(value, r.program, r.framework, r.dtype, r.mode, j, labels(value, j, r.dtype, r.mode), view)


@dataclass(frozen=True)
class ReportAnswer:
    """``grad``'s answer on a device this machine lacks: the report's cell (``value``, an input → gradient mapping,
    None for an error or unavailable cell; ``status``; ``label``) of the program at the point in ``release`` on
    ``device``, ``mode``, ``dtype``, from the report at ``path``; measured where the report's shards were, not here
    (``why``: this machine has no such device). ``releases``: every release the report measured on ``device``."""

    value: dict[str, Any] | None
    status: str
    label: str | None
    framework: str
    release: str
    device: str
    mode: str
    dtype: str
    cases: tuple[str, ...]
    path: str
    releases: tuple[str, ...]
    why: str
    error: str | None = None  # an error cell's message, as the report holds it

    #: The words that mark every such answer.
    MARK = "from the report; not measured here"

    def headline(self) -> str:
        """The line ``grad`` prints first: where the value comes from, before the value itself."""
        what = "" if self.status == "ok" else f" ({self.status})"
        if self.status != "ok" and self.error:  # what the framework raised there, as the report's cell says
            what = f" ({self.status}: {self.error.strip().splitlines()[0] if self.error.strip() else self.error})"
        return (f"{self.MARK} ({self.why}): {self.framework} {self.release} on {self.device}, {self.mode}, "
                f"{self.dtype}, case {', '.join(self.cases)}{what}")

    def to_json(self) -> dict[str, Any]:
        return {"source": self.MARK, "measured_here": False, "why": self.why, "framework": self.framework,
                "release": self.release, "device": self.device, "mode": self.mode, "dtype": self.dtype,
                "status": self.status, "label": self.label, "cases": list(self.cases), "report": self.path,
                "releases_on_device": list(self.releases), "error": self.error}


def _point_text(at: Mapping[str, Any]) -> str:
    return ", ".join(f"{k}={v}" for k, v in at.items())


def catalog_spelling(program: str, framework: str, at: Mapping[str, Any], cases: Sequence[Mapping[str, Any]]) -> str:
    """The report's text of ``program`` (:func:`kinkcheck.language.expr.same_program`: ``torch.clamp(x, min=0.0)`` is the
    catalog's ``torch.clamp(x, min=0)``), the closest spelling among the cases at ``at`` first, then among all
    cases; ``program`` itself when the report has none."""
    mine = [(c, p) for c in cases for fw, p in c["programs"] if fw == framework]
    spelled = (ex.same_program(program, [p for c, p in mine if _same_point(c["at"], at)], at.keys())
               or ex.same_program(program, [p for _, p in mine], at.keys()))
    return spelled[0] if spelled else program


def _exact(entry: Any) -> str:
    """An oracle value as a person reads it: its float's shortest decimal (``--json`` keeps the exact text)."""
    if isinstance(entry, list) and len(entry) == 1:
        return "(" + decimal_exact(entry[0]) + ")"
    return decimal_exact(entry)


#: The oracle's field that gives a rule label's value at a point (the labels without one: ties, pieces).
_RULE_VALUE = {"left": "left", "right": "right", "min-norm": "min_norm", "mean": "midpoint"}


def _rule_lines(e: Explanation, oracle: Mapping[str, Any] | None) -> list[str]:
    """``grad``'s lines for :func:`parameter_rule`: the rule, what it gives at this point, and whether this value
    follows it; where the cases carry two rules that differ at this point, that it is ambiguous."""
    found = parameter_rule(e.report)
    if found is None:
        return []
    rules, cases = found
    where = "at other points" if e.report.other_points else "with other arguments"
    head = f"rule: at every kink measured {where} ({', '.join(cases)}), every measured {e.framework} release gives"

    def here(label: str) -> Any:
        v = (oracle or {}).get(_RULE_VALUE.get(label, ""))
        return v[0] if isinstance(v, list) and len(v) == 1 else v

    values = {lab: here(lab) for lab in rules if here(lab) is not None}
    if len({json.dumps(v, sort_keys=True, default=str) for v in values.values()}) > 1:
        lines = [f"{head} {' and '.join(f'{RULE_LABELS[lab]} ({lab})' for lab in values)}, equal there; here they "
                 f"differ ({', '.join(f'{lab} {_exact(v)}' for lab, v in values.items())}), so the measured cases "
                 "do not say which rule holds"]
        if e.labels is not None:
            own = next((lab for lab in values if lab in e.labels), None)
            lines.append(f"  this value is {RULE_LABELS[own]} ({own})" if own is not None else
                         f"  this value is neither (its labels: {', '.join(e.labels)})")
        return lines
    rule = rules[0]
    lines = [f"{head} {RULE_LABELS[rule]} ({rule})"
             + (f"; at this point that is {_exact(values[rule])}" if rule in values else "")]
    if e.labels is not None:
        lines.append("  this value follows it" if rule in e.labels else
                     f"  this value does not follow it (its labels: {', '.join(e.labels)})")
    return lines


def render(e: Explanation) -> str:
    """The text ``grad`` prints after the value line (several lines, ending with a newline)."""
    from kinkcheck.render.view import oracle_finding  # slow: numpy

    j = e.judgement
    lines: list[str] = []
    if j.sympy is not None:
        src = "from --sympy" if j.source == "--sympy" else "mapped from the program; --sympy '…' to pass another"
        if j.source == "catalog":
            src = f"the sympy field of {j.cases[0]}: the mapping lacks this program; --sympy '…' to pass another"
        lines.append(f"sympy form: {decimal_text(j.sympy)}  ({src})")  # --json keeps its digits
    o = j.oracle
    if o is not None and o.get("kind") != NOT_JUDGED:
        lines.append(f"oracle: {oracle_finding(o['kind'], o.get('lipschitz'))}")  # as the case pages say it
        if len(j.components) == 1 and (o.get("left") or o.get("right")):
            lines.append(f"one-sided derivatives: left {_exact(o.get('left'))}, right {_exact(o.get('right'))}")
        if o.get("derivative") is not None:
            lines.append(f"derivative: {_exact(o['derivative'])}")
        elif o.get("clarke") is not None:
            cl = o["clarke"]
            hull = (f"[{_exact(cl[0][0])}, {_exact(cl[-1][0])}]" if len(j.components) == 1
                    else "conv{" + ", ".join(_exact(v) for v in cl) + "}")
            mn = o["min_norm"]
            lines.append(f"Clarke set: {hull}; min-norm element: {_exact(mn[0] if len(mn) == 1 else mn)}")
        for note in o.get("notes") or ():
            if "Lipschitz" in note or "jump" in note or "continuum" in note or "pieces' slopes" in note:
                lines.append(f"  note: {decimal_text(note)}")  # a jump's 31-digit rational as its decimal
    if j.reason is not None:
        lines.append(j.reason)
    if e.labels is not None:
        what = "H @ 1" if e.mode == "second-order" else "value"
        lines.append(f"labels of this {what} ({e.dtype}, {e.framework}): {', '.join(e.labels)}")
    v = e.report
    if v.problem is not None:
        lines.append(f"report: {v.problem}")
    elif not v.rows:
        lines.append(f"report ({v.path}): nothing at this point"
                     + (f"; {e.program} is measured at {', '.join(v.elsewhere)}" if v.elsewhere else ""))
    elif v.same_operation:
        lines.append(f"report ({v.path}): {e.program} is not measured at this point; {', '.join(v.same_operation)} "
                     f"with other arguments is, {'at other points: ' if v.other_points else 'at '}"
                     f"{', '.join(v.cases)} (the closest measured cases), "
                     f"{v.mode} {v.dtype} {v.device}:")
    else:
        lines.append(f"report ({v.path}), case {', '.join(v.cases)}, {v.mode} {v.dtype} {v.device}:")
    if v.rows:
        width = min(max(len(r["program"]) for r in v.rows), 44)  # a long program pushes only its own row right
        fw_width = max(len(r["framework"]) for r in v.rows)  # tensorflow, mindspore: the programs stay aligned
        several = len({r["case"] for r in v.rows}) > 1  # rows of several cases at this point: each names its own
        case_width = max(len(r["case"]) for r in v.rows)
        for r in v.rows:
            ranges = " · ".join(
                (f"{decimal_value(g['value'])} ({g['label']})" if g["status"] == "ok" else g["status"])
                + f" {g['from']}" + (f"–{g['to']}" if g["to"] != g["from"] else "") for g in r["ranges"]) or "not measured"
            mark = "  ← this program" if r["this"] else ""
            case = f"{r['case']:<{case_width}}  " if several else ""
            lines.append(f"  {case}{r['framework']:<{fw_width}} {r['program']:<{width}}  {ranges}{mark}")
        if v.elsewhere:
            lines.append(f"  also measured at: {', '.join(v.elsewhere)}")
        lines += _rule_lines(e, o if isinstance(o, dict) else None)
    return "\n".join(lines) + "\n"


def oracle_timeout_from_env(value: str | float | None) -> float:
    """``--oracle-timeout`` (else ``$KINKCHECK_ORACLE_TIMEOUT``, else the default) as seconds.

    Raises
    ------
    ValueError
        Not a positive finite number (one line).
    """
    return _positive(value, "KINKCHECK_ORACLE_TIMEOUT", "--oracle-timeout", os.environ, DEFAULT_ORACLE_TIMEOUT_S)


#: The judgement worker's command when not the default ``python -m kinkcheck.answers.explain`` (tests point it elsewhere).
_WORKER: list[str] | None = None


def _worker() -> int:
    """``python -m kinkcheck.answers.explain``: one request (JSON on stdin) → ``{"ok": judgement}``, ``{"error": …,
    "bad_input": true}`` for a ``--sympy`` text that does not evaluate, or ``{"error": …}``."""
    request = json.loads(sys.stdin.buffer.read())

    limit_memory(int(request["memory_bytes"]))
    try:
        j = judge(request["program"], request["at"], request["framework"], wrt=request["wrt"],
                  sympy_text=request["sympy_text"], cases=request["cases"])
        answer: dict[str, Any] = {"ok": j.to_json()}  # type: ignore[union-attr]
    except ex.ExprError as err:
        answer = {"error": str(err), "bad_input": True}
    except MemoryError:
        answer = {"error": "the oracle exceeded its memory limit"}
    sys.stdout.write(json.dumps(answer))
    return 0
