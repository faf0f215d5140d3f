"""``kinkcheck lock``: the gradient conventions a model relies on, written down and checked on an upgrade.

``kinkcheck lock --model MODULE:FUNCTION --data MODULE:FUNCTION`` runs the model's forward passes under the
kink-hit counter (:func:`kinkcheck.probe.userhits.user_census`, as ``kinkcheck census --model`` does) and writes
``kinkcheck.lock``: for each kinked call the model makes (its operation, the user's call site ``file:line``, the
kind of kink, the hits), the question that asks its convention (the call as spelled, with its scalar arguments, at
its kink: :func:`kinkcheck.frameworks.torch.kinkhits.torch_question`), the catalog case that holds that program at
that point when there is one, and the convention in the installed release on the CPU in the model's dtype, reverse
mode: the report's cell where the report has it, else measured live (:func:`kinkcheck.answers.ask.measure`), with the
convention the rules predict for that release beside it (``predicted``: :func:`kinkcheck.rules.answer.predictions`;
marked, never the site's value).

``kinkcheck lock --check`` reads the lock and asks the same questions of another release (``--release 2.14.1``,
``--framework-version torch==2.14.1``), or of the installed one: exit 0 when no locked convention changed, 1 with
one line per changed site (site, program, old → new value and labels, the case page to read), 2 on bad input. A site
the report has no cell of in a release that is not installed is compared with the rules' prediction for that release
(marked "predicted from the rules, not measured"), not measured in a new environment of it; only a program the rules
do not predict is measured there (``--measure``: every such site is).

The file is TOML, meant to be reviewed and committed beside the model; :class:`Lock` is its schema (msgspec), so
a hand edit into nonsense is one line and exit 2.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Collection, Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

import msgspec

from kinkcheck import __version__
from kinkcheck.answers import ask, lock
from kinkcheck.catalog import find
from kinkcheck.errors import UsageError
from kinkcheck.frameworks import kink_counter
from kinkcheck.language import expr as ex
from kinkcheck.language import points as pt
from kinkcheck.language.decimals import decimal_value
from kinkcheck.platforms import DEFAULT as DEFAULT_PLATFORM
from kinkcheck.platforms.isa import capped_tag, split_tag
from kinkcheck.probe.ondemand import installed_release, releases_asked
from kinkcheck.probe.userhits import CensusError, call_user, load_user_function, user_census
from kinkcheck.registry import REGISTRY
from kinkcheck.report.query import DatasetError, LookupFailed, ReportUnreadable, data_path, lookup, table_metadata
from kinkcheck.rules.answer import predictions
from kinkcheck.shards import write_text_atomic
from kinkcheck.vocabulary import DTYPES, flat_value

__all__ = ["LOCK_FILE", "SCHEMA", "Change", "Lock", "LockedSite", "Predicted", "UnlockedSite", "UsedRule",
           "batch_shift", "check", "check_across", "check_writable", "command", "conventions", "make_lock",
           "nothing_compared", "predicted", "read_lock", "report_table", "rules_text", "write_lock"]

#: The lock's default name.
LOCK_FILE = "kinkcheck.lock"
#: What the lock's ``schema`` says. Still v1 with a site's optional ``predicted`` table: every v1 lock reads as it
#: did and means what it meant (a site's value is still the installed release's measurement or report cell); a
#: version bump would make every new lock unreadable by an older kinkcheck, even one with no prediction in it.
SCHEMA = "kinkcheck/lock/v1"


class LockedSite(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """One kinked call of the model and the convention it got."""

    #: Order among the model's kinked calls (the "layer").
    index: int
    #: The function called (``torch.Tensor.clamp``).
    operation: str
    #: Where the user's code called it (``model.py:12``).
    call: str
    #: The kink it checks (``x at a bound``, ``tie``).
    kink: str
    dtype: str
    #: Elements at the kink, and looked at, over the batches.
    hits: int
    elements: int
    #: The question: a program and a point (``kinkcheck ask PROGRAM --at AT``).
    program: str
    at: str
    #: The catalog case holding this program at this point, if any.
    case: str | None = None
    #: The convention: status, the gradient (input name → value) and its labels.
    status: Literal["ok", "error", "unavailable"]
    value: dict[str, Any] | None = None
    labels: list[str] = []
    #: Where the value comes from: ``report`` (the report's cell) or ``measured`` (live, kinkcheck ask).
    source: Literal["report", "measured"]
    #: A site the report has no cell of: what the rules predict in the lock's release, beside the measured value
    #: (optional, so a lock written before it reads as it did; the schema stays ``kinkcheck/lock/v1``).
    predicted: Predicted | None = None


class UsedRule(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """A rule a prediction used: the operation, its kind of kink, the rule's labels (``kinkcheck rules``)."""

    operation: str
    kind: str
    labels: list[str] = []


class Predicted(msgspec.Struct, kw_only=True, forbid_unknown_fields=True, omit_defaults=True):
    """What the rules predict for a site in the lock's release (:func:`kinkcheck.rules.answer.predictions`): a
    prediction, never a measurement; the site's own value stays the measured one."""

    #: The predicted gradient (input name → value), or None with ``reason``.
    value: dict[str, Any] | None = None
    #: The rules composed by the chain rule (empty: every call smooth there, or its cotangent 0).
    rules: list[UsedRule] = []
    #: Why nothing is predicted (``not predicted: no rule for …``).
    reason: str | None = None


class UnlockedSite(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """A kinked call with no question (a tensor argument, a random slope): listed, not checked."""

    index: int
    operation: str
    call: str
    kink: str
    why: str


class Lock(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """``kinkcheck.lock``."""

    schema: Literal["kinkcheck/lock/v1"]
    framework: str
    release: str
    device: Literal["cpu"]
    model: str
    data: str
    written_by: str
    #: The model ran in eval mode (``lock --eval``): so does the check's batch shift.
    eval: bool = False
    site: list[LockedSite] = []
    unlocked: list[UnlockedSite] = []


# --------------------------------------------------------------------------- reading and writing


def _read_toml(p: Path) -> Any:
    try:
        raw = p.read_bytes()
    except OSError as err:
        raise UsageError(f"cannot read the lock {p} ({err.strerror or err}); write one with kinkcheck lock --model "
                         "MODULE:FUNCTION --data MODULE:FUNCTION") from None
    try:
        return msgspec.toml.decode(raw)
    except msgspec.DecodeError as err:
        raise UsageError(f"the lock {p} is not TOML ({' '.join(str(err).split())})") from None


def read_lock(path: str | Path) -> Lock:
    """The lock at ``path``. Raises UsageError (one line) for a missing or unreadable file, one that is not TOML,
    not a kinkcheck lock, or one a hand edit made into something kinkcheck never writes: fields of the wrong type
    or out of range, an unknown framework or dtype, a program or point that does not parse, a value whose inputs
    are not the point's, labels the classifier does not give."""
    p = Path(path)
    data = _read_toml(p)
    if not isinstance(data, dict) or data.get("schema") != SCHEMA:
        raise UsageError(f"the lock {p} is not a kinkcheck lock (its schema is "
                         f"{data.get('schema') if isinstance(data, dict) else None!r}, not {SCHEMA!r}); write one "
                         "with kinkcheck lock --model MODULE:FUNCTION --data MODULE:FUNCTION")
    try:
        lock = msgspec.convert(data, Lock)
    except msgspec.ValidationError as err:
        raise UsageError(f"the lock {p}: {' '.join(str(err).split())}: edited by hand? write it again with "
                         "kinkcheck lock") from None
    why = _nonsense(lock)
    if why is not None:
        raise UsageError(f"the lock {p}: {why}: edited by hand? write it again with kinkcheck lock")
    return lock


def _nonsense(lock: Lock) -> str | None:
    """What in a lock that decoded kinkcheck would never have written, or None."""
    from packaging.version import InvalidVersion, Version

    from kinkcheck.oracles.classify import LABELS  # slow: numpy

    if lock.framework not in REGISTRY:
        return f"unknown framework {lock.framework!r} (known: {', '.join(REGISTRY)})"
    try:
        Version(lock.release)
    except InvalidVersion:
        return f"release {lock.release!r} is not a version"
    for where, s in [(f"$.site[{i}]", s) for i, s in enumerate(lock.site)] + \
                    [(f"$.unlocked[{i}]", s) for i, s in enumerate(lock.unlocked)]:
        if s.index < 0:
            return f"index {s.index} at {where}"
        root = s.operation.split(".")[0] if "." in s.operation.split(":")[0] else None
        if root is not None and root != lock.framework:
            return f"operation {s.operation!r} is not {lock.framework}'s at {where}"
    for i, s in enumerate(lock.site):
        where = f"$.site[{i}]"
        if s.dtype not in DTYPES:
            return f"unknown dtype {s.dtype!r} at {where}"
        if min(s.hits, s.elements) < 0 or s.hits > s.elements:
            return f"hits {s.hits} of {s.elements} elements at {where}"
        try:
            point = pt.parse_point(s.at)
            tree = ex.parse(s.program, point, list(REGISTRY))
            ex.program_framework(tree, point, None if ex.roots_of(tree) else lock.framework, list(REGISTRY))
        except ex.ExprError as err:
            return f"{s.program!r} at {s.at!r}: {err} at {where}"
        if ex.roots_of(tree) - {lock.framework}:
            return f"{s.program!r} is not a {lock.framework} program at {where}"
        if (s.status == "ok") != (s.value is not None) or (s.value is not None and (
                set(s.value) != set(point) or not all(_shaped_like(s.value[k], point[k]) for k in point))):
            return f"value {s.value!r} is not a gradient of the inputs of {s.at!r} at {where}"
        odd = [label for label in s.labels if label not in LABELS]
        if odd:
            return f"unknown label {odd[0]!r} at {where}"
        f = s.predicted
        if f is not None and ((f.value is None) == (f.reason is None) or (f.value is not None and (
                set(f.value) != set(point) or not all(_shaped_like(f.value[k], point[k]) for k in point)))):
            return (f"predicted {f.value!r} is not a gradient of the inputs of {s.at!r}, nor a reason it is not "
                    f"predicted, at {where}")
        if s.case is not None and s.case != _catalog_case(lock.framework, ex.unparse(tree), point):
            return f"case {s.case!r} is not the catalog's case of {s.program} at {s.at} at {where}"
    indices = [s.index for s in [*lock.site, *lock.unlocked]]
    twice = sorted({i for i in indices if indices.count(i) > 1})
    if twice:
        return f"index {twice[0]} is given to two sites"
    return None


def _shaped_like(value: Any, point: Any) -> bool:
    """Whether ``value`` is numbers (or ``"nan"``, ``"inf"``, ``"-inf"``, as cells write them) shaped as ``point``."""
    if isinstance(point, list):
        return isinstance(value, list) and len(value) == len(point) and all(map(_shaped_like, value, point))
    if isinstance(value, str):
        return value in ("nan", "inf", "-inf")
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _toml(value: Any) -> str:
    if value is None:
        raise ValueError("TOML has no null")
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_toml(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{ " + ", ".join(f"{json.dumps(k)} = {_toml(v)}" for k, v in value.items()) + " }"
    raise TypeError(type(value).__name__)


def lock_text(lock: Lock) -> str:
    """The lock as TOML, one table per site (a field that is None is left out)."""
    head = ["# The gradient conventions this model relies on, at each kinked call it makes. Written by kinkcheck lock;",
            "# check it against another release with kinkcheck lock --check --release VERSION (exit 1 on a change)."]
    for key in ("schema", "framework", "release", "device", "model", "data", "written_by"):
        head.append(f"{key} = {_toml(getattr(lock, key))}")
    if lock.eval:
        head.append("eval = true")
    out = ["\n".join(head)]
    for table, items in (("site", lock.site), ("unlocked", lock.unlocked)):
        for item in items:
            lines = [f"[[{table}]]"]
            sub = None
            for key, value in msgspec.structs.asdict(item).items():
                if key == "predicted" and value is not None:  # its own table, after the site's keys: marked
                    sub = [f"[{table}.predicted]  # predicted from the rules, not measured"]
                    sub += [f"{k} = {_toml(v)}" for k, v in msgspec.to_builtins(value).items()]
                elif value is not None:
                    lines.append(f"{key} = {_toml(value)}")
            out.append("\n".join(lines + (sub or [])))
    return "\n\n".join(out) + "\n"


def check_writable(path: Path) -> None:
    """Raise UsageError unless ``path`` may take a lock: a folder that exists, and no file there or a kinkcheck
    lock (another file is never written over)."""
    if path.is_dir():
        raise UsageError(f"--lock {path} is a folder: name the lock file")
    if not path.parent.is_dir():
        raise UsageError(f"--lock {path}: no folder {path.parent}")
    if path.exists():
        try:
            data = _read_toml(path)
        except UsageError:
            data = None
        if not isinstance(data, dict) or data.get("schema") != SCHEMA:
            raise UsageError(f"--lock {path} exists and is not a kinkcheck lock: not written over (name another file)")


def write_lock(lock: Lock, path: str | Path) -> None:
    """Write ``lock`` atomically (a crash leaves the old file)."""
    write_text_atomic(Path(path), lock_text(lock))


# --------------------------------------------------------------------------- the conventions


def _catalog_case(framework: str, program: str, at: dict[str, Any]) -> str | None:
    """The catalog case holding ``program`` (canonical text) of ``framework`` at the point ``at`` (the sign of zero
    included: ``maximum@-0.0`` is not a tie at +0), if any."""
    found = find(framework, program, at)
    return found[0].id if found is not None else None


def report_table() -> Path:
    """The report's ``observations.parquet`` the lock is compared with (:func:`kinkcheck.report.query.data_path`), checked
    before anything is compared or measured: kinkcheck's, undamaged, one render with the report beside it
    (:func:`kinkcheck.report.query.table_metadata`).

    Raises
    ------
    UsageError
        No report data, or data that cannot be used: one line naming the file (a guard never reads past it, nor
        measures in its place).
    """
    try:
        path = data_path()
        table_metadata(path)
    except (LookupFailed, DatasetError) as err:
        raise UsageError(f"the report cannot be read, so nothing is compared: {err}") from None
    return path


def _report_cell(case: str | None, program: str, release: str, dtype: str) -> Any:
    """The report's reverse-mode CPU cell of ``program`` in ``case`` at ``release`` and ``dtype``, or None (no such
    cell). UsageError for report data that cannot be read (:class:`kinkcheck.report.query.ReportUnreadable`)."""
    if case is None:
        return None

    try:
        rows = lookup(program, case=case, release=release, mode="reverse", dtype=dtype, device="cpu")
    except ReportUnreadable as err:
        raise UsageError(f"the report cannot be read, so nothing is compared: {err}") from None
    except LookupFailed:
        return None
    return rows[0] if rows else None


def conventions(framework: str, release: str, wanted: Sequence[tuple[str, str, str]], *, quiet: bool = False,
                ties: Collection[tuple[str, str]] = (), report_only: bool = False
                ) -> dict[tuple[str, str, str], tuple[str, dict[str, Any] | None, list[str], str, str | None]]:
    """The convention of each (program, at, dtype) in ``release``: (status, value, labels, source, case), from the
    report's cell where the catalog holds the program at that point and the report measured it, else measured live
    (:func:`kinkcheck.answers.ask.measure`, reverse mode, those dtypes; not with ``report_only``: those are left out).
    ``ties``: the (program, at) whose kink is a tie (the tie labels apply; a catalog case's own flag wins)."""
    report_table()  # unreadable: one line before anything is looked up or measured (5.5 GB for a torch release)
    out: dict[tuple[str, str, str], Any] = {}
    live: dict[tuple[str, str], ask.Question] = {}
    for program, at, dtype in wanted:
        point = pt.parse_point(at)
        case = _catalog_case(framework, program, point)
        row = _report_cell(case, program, release, dtype)
        if row is not None:
            out[(program, at, dtype)] = (row.status, row.value, list(row.labels), "report", case)
        else:
            live.setdefault((program, at), ask.question(program, at, framework, tie=(program, at) in ties))
    if live and report_only:
        return out
    if live:
        dtypes = sorted({d for p, a, d in wanted if (p, a) in live})
        if not quiet and release != ask.installed_release(framework):
            print(f"  {framework} {release}: {len(live)} question(s) the report has no cell for (and the rules do "
                  "not predict, or --measure), measured in that release's environment (made the first time: a torch "
                  "release takes about 5.5 GB; --report-only compares without them)", file=sys.stderr, flush=True)
        answer = ask.measure(list(live.values()), [release], modes=["reverse"], dtypes=dtypes, quiet=quiet)
        if answer.report is None:
            why = answer.not_measured.get(release, "nothing measured")
            raise UsageError(f"{framework} {release}: not measured: {why}")
        by_case = {(q.case_id, q.expr): key for key, q in live.items()}
        for ob in answer.report.observations:
            program, at = by_case[(ob.case, ob.program)]
            key = (program, at, ob.dtype)
            if key in wanted and ob.mode == "reverse":
                case = _catalog_case(framework, program, pt.parse_point(at))
                out[key] = (ob.status, ob.value, list(ob.labels), "measured", case)
    missing = [k for k in wanted if k not in out]
    if missing:
        raise UsageError(f"{framework} {release}: no value for {missing[0][0]} at {missing[0][1]} ({missing[0][2]})")
    return out


def predicted(framework: str, release: str, wanted: Sequence[tuple[str, str, str]]
              ) -> dict[tuple[str, str, str], Predicted]:
    """What the rules predict for each (program, at, dtype) in ``release`` on the CPU, reverse mode
    (:func:`kinkcheck.rules.answer.predictions`; nothing is measured or installed): a value with the rules it
    composed, or the reason it is not predicted (no rules file, no rule for an operation there, a release the rules
    file does not hold)."""
    out: dict[tuple[str, str, str], Predicted] = {}
    dtypes: dict[tuple[str, str], list[str]] = {}
    for program, at, dtype in wanted:
        dtypes.setdefault((program, at), []).append(dtype)
    for (program, at), asked in dtypes.items():
        try:
            got = predictions(program, pt.parse_point(at), framework, releases=[release], modes=("reverse",),
                              dtypes=tuple(dict.fromkeys(asked)), device="cpu")
        except UsageError as err:  # a rules file kinkcheck cannot find: not predicted, never a guess
            got = {"reason": f"not predicted: {err}", "predicted": []}
        for dtype in asked:
            row = next((r for r in got["predicted"] if r["release"] == release and r["dtype"] == dtype), None)
            if row is not None and row["value"] is not None:
                out[(program, at, dtype)] = Predicted(value=row["value"], rules=[
                    UsedRule(operation=u["operation"], kind=u["kind"], labels=list(u["labels"])) for u in row["rules"]])
            else:
                why = (row or {}).get("reason") or got.get("reason") or \
                    f"not predicted: the rules hold no {framework} {release} cpu reverse {dtype} cell"
                out[(program, at, dtype)] = Predicted(reason=why)
    return out


def rules_text(rules: Sequence[UsedRule]) -> str:
    """The rules a prediction composed, as ``ask`` prints them (``torch.clamp at max at a bound: left/min-norm``)."""
    return "; ".join(f"{u.operation} at {u.kind}: {'/'.join(u.labels)}" for u in rules) or \
        "every call smooth here, or its cotangent 0"


def make_lock(model: str, data: str, batches: int = 5, eval_mode: bool = False, quiet: bool = False) -> Lock:
    """Run the model under the kink-hit counter and lock the convention of each kinked call it makes."""
    report_table()  # a report that cannot be read: one line before the model runs
    try:
        framework, sites, _ = user_census(model, data, batches=batches, eval_mode=eval_mode)
    except CensusError as err:
        raise UsageError(str(err)) from None
    release = installed_release(framework)
    if release is None:
        raise UsageError(f"{framework} is not installed here")
    asked = [s for s in sites if s.question and s.inspected]
    wanted = list(dict.fromkeys((s.question, s.at, s.dtype) for s in asked))
    ties = {(s.question, s.at) for s in asked if "tie" in s.kink}
    found = conventions(framework, release, wanted, quiet=quiet, ties=ties) if wanted else {}
    measured = [k for k in wanted if found[k][3] != "report"]
    forecast = predicted(framework, release, measured) if measured else {}
    locked = []
    for s in asked:
        key = (s.question, s.at, s.dtype)
        status, value, labels, source, case = found[key]
        locked.append(LockedSite(index=s.index, operation=s.program, call=s.call, kink=s.kink, dtype=s.dtype,
                                 hits=s.hits, elements=s.elements, program=s.question, at=s.at, case=case,
                                 status=status, value=value, labels=labels, source=source, predicted=forecast.get(key)))

    for site in locked:  # a finding: the program is not what its operations' rules compose to (or a rule is wrong)
        f = site.predicted
        if f is not None and f.value is not None and (site.status != "ok" or not _same(site.dtype, site.value,
                                                                                        f.value)):
            print(f"kinkcheck lock: note: {site.call}: {site.operation} ({site.program} at {site.at}, {site.dtype}): "
                  f"measured {_face(site.status, site.value, site.labels)} in {framework} {release}, but the rules "
                  f"predict {decimal_value(f.value)} ({rules_text(f.rules)}): the lock keeps the measurement; "
                  "docs/rules.md says what a composition does not capture", file=sys.stderr, flush=True)
    unlocked = [UnlockedSite(index=s.index, operation=s.program, call=s.call, kink=s.kink,
                             why=s.unasked or s.why or (f"{framework}: no question is written for its sites yet"
                                                        if framework != "torch" else "not asked"))
                for s in sites if not (s.question and s.inspected)]
    return Lock(schema=SCHEMA, framework=framework, release=release, device="cpu", model=model, data=data,
                eval=eval_mode,
                written_by=f"kinkcheck {__version__}", site=locked, unlocked=unlocked)


# --------------------------------------------------------------------------- checking


def case_page(case: str) -> str:
    """Where to read a case: its page in the report folder the data comes from (``reports/cases/relu-at-0.md``,
    relative to here when it is below), else the case and where the repository keeps its page."""
    from kinkcheck.report.text import case_file  # slow: numpy

    try:
        page = data_path().parent / "cases" / case_file(case)
    except (LookupFailed, OSError):
        page = None
    if page is not None and page.is_file():
        try:
            return str(page.resolve().relative_to(Path.cwd().resolve()))
        except ValueError:
            return str(page)
    return f"case {case} (reports/cases/{case_file(case)} in kinkcheck's repository)"


class Change(msgspec.Struct, kw_only=True):
    """A locked site whose convention differs in the release checked."""

    site: LockedSite
    release: str
    status: str
    value: dict[str, Any] | None
    labels: list[str]
    source: str

    def line(self, framework: str) -> str:
        s = self.site
        old = _face(s.status, s.value, s.labels)
        new = _face(self.status, self.value, self.labels)
        note = self.note
        if self.source == "predicted":  # never shown as a measurement

            new = decimal_value(self.value)
            note = f" (predicted from the rules, not measured: {rules_text(self.rules)}){note}"
        read = f"; read {case_page(s.case)}" if s.case else ""
        there = f"{self.release} ({self.program})" if self.program else self.release
        return (f"{s.call}: {s.operation} ({s.program} at {s.at}, {s.dtype}): {old} in {framework} "
                f"{self.site_release} → {new} in {there}{note}{read}")

    site_release: str = ""
    #: Another framework's program of the site's case (``migrate``'s equivalent), when checked across frameworks.
    program: str | None = None
    #: What else the report says of the change (checked on another device: the same release on the CPU).
    note: str = ""
    #: ``source`` "predicted": the rules the prediction composed.
    rules: list[UsedRule] = []


def _same(dtype: str, a: dict[str, Any] | None, b: dict[str, Any] | None) -> bool:
    from kinkcheck.oracles.classify import same_value  # slow: numpy

    if a is None or b is None:
        return a is b
    fa, fb = list(flat_value(a)), list(flat_value(b))
    return len(fa) == len(fb) and same_value(fa, fb, dtype)


def check(lock: Lock, release: str | None = None, quiet: bool = False, report_only: bool = False,
          measure: bool = False, sources: dict[int, str] | None = None) -> tuple[str, list[Change], list[str]]:
    """Ask the lock's questions of ``release`` (default: the installed one); the release, the sites whose
    convention changed (status, or value beyond the dtype's tolerance), and a line for each site not compared.

    Each site is compared with the report's cell in that release where there is one. Else, in a release that is not
    installed (or with ``report_only``), with the rules' prediction for that release (source ``predicted``,
    :func:`predicted`: nothing is installed); a site the rules do not predict, or every site without a cell with
    ``measure``, is measured live (:func:`conventions`: in that release's environment, made the first time), or is
    not compared with ``report_only``. The installed release is measured live (seconds), not predicted.
    ``sources``: filled with each compared site's index → ``report``, ``predicted`` or ``measured``."""
    if report_only and measure:
        raise UsageError("--report-only or --measure, not both (--report-only measures nothing)")
    installed = installed_release(lock.framework)
    target = release or installed
    if target is None:
        raise UsageError(f"{lock.framework} is not installed here: name the release to check against (--release)")
    releases_asked(lock.framework, [target])  # an unknown release: UsageError before anything runs
    wanted = list(dict.fromkeys((s.program, s.at, s.dtype) for s in lock.site))
    ties = {(s.program, s.at) for s in lock.site if "tie" in s.kink}
    found = conventions(lock.framework, target, wanted, quiet=quiet, ties=ties, report_only=True) if wanted else {}
    rest = [k for k in wanted if k not in found]
    forecast = predicted(lock.framework, target, rest) if rest and not measure and (
        report_only or target != installed) else {}
    guess = {k: f for k, f in forecast.items() if f.value is not None}
    distrust = _unconfirmed(lock, guess) if guess else {}
    for k, why in distrust.items():  # the rules do not reproduce what was locked: their R says nothing sure
        forecast[k] = Predicted(reason=why)
        del guess[k]
    left = [k for k in rest if k not in guess]
    if guess and not quiet:
        print(f"  {lock.framework} {target}: {len(guess)} question(s) the report has no cell for, predicted from the "
              "rules (not measured; --measure measures them in that release's environment)", file=sys.stderr,
              flush=True)
    if left and not report_only:
        found.update(conventions(lock.framework, target, left, quiet=quiet, ties=ties))
    changes, unknown = [], []
    for s in lock.site:
        key = (s.program, s.at, s.dtype)
        rules: list[UsedRule] = []
        if key in found:
            status, value, labels, source, _ = found[key]
        elif key in guess:
            status, value, labels, source, rules = "ok", guess[key].value, [], "predicted", guess[key].rules
        else:
            why = f" and the rules do not predict it ({forecast[key].reason})" if key in forecast else ""
            unknown.append(f"{s.call}: {s.operation} ({s.program} at {s.at}, {s.dtype}): not compared: the report has "
                           f"no {lock.framework} {target} cell of it{why} (--report-only; without it, it is measured "
                           "in that release's environment)")
            continue
        if sources is not None:
            sources[s.index] = source
        if status != s.status or not _same(s.dtype, s.value, value):
            changes.append(Change(site=s, release=target, status=status, value=value, labels=labels, source=source,
                                  site_release=lock.release, rules=rules))
    return target, changes, unknown


def _unconfirmed(lock: Lock, guess: Mapping[tuple[str, str, str], Predicted]) -> dict[tuple[str, str, str], str]:
    """The questions whose prediction for another release cannot be trusted, and why: the rules' prediction for the
    lock's own release is not the value the lock holds (the program is not what its operations' rules compose to:
    comparing a measurement with a prediction would report a change that is only the rules' miss), or the rules hold
    no prediction there to check it with."""
    own = predicted(lock.framework, lock.release, list(guess))
    out: dict[tuple[str, str, str], str] = {}
    for s in lock.site:
        key = (s.program, s.at, s.dtype)
        if key not in guess or key in out:
            continue
        mine = own.get(key)
        if mine is None or mine.value is None:
            out[key] = (f"not predicted: the rules' prediction cannot be checked against the locked value, since they "
                        f"do not predict {lock.framework} {lock.release} ({mine.reason if mine else 'no prediction'})")
        elif s.status != "ok" or not _same(s.dtype, s.value, mine.value):
            out[key] = (f"not predicted: the rules predict {decimal_value(mine.value)} in the lock's own release "
                        f"{lock.release}, where {_face(s.status, s.value, s.labels)} was locked, so they do not "
                        "capture this program")
    return out


def nothing_compared(lock: Lock, unknown: Sequence[str], target: str, hint: str = "") -> str | None:
    """Why a check compared nothing, or None when it compared at least one site: a lock with no locked site, or
    every site "not compared" (``unknown``: one line a site, :func:`check`, :func:`check_across`). A guard that
    compared nothing exits 2 with this line (``lock --check``; the pytest plugin stops with it), never 0: a CI job
    must not pass on what was not checked. ``hint``: what would compare them."""
    if not lock.site:
        left = f" ({len(lock.unlocked)} kinked call(s) not locked: each says why)" if lock.unlocked else ""
        return (f"the lock holds no locked site, so nothing was compared with {target}{left}; a model that makes no "
                "kinked call kinkcheck can ask about needs no lock check")
    if len(unknown) >= len(lock.site):
        return (f"none of the {len(lock.site)} locked site(s) was compared with {target} (each line above says why), "
                f"so nothing is known of the conventions the model relies on there{hint}")
    return None


def _face(status: str, value: Any, labels: Sequence[str]) -> str:
    return f"{decimal_value(value)} ({labels[0] if labels else 'not judged'})" if status == "ok" else status


def report_releases(framework: str, device: str) -> list[str]:
    """The releases of ``framework`` the report measured on ``device`` (Linux x86-64), oldest first. UsageError when
    the report cannot be read (:func:`report_table`)."""
    from kinkcheck.report.dataset import DatasetError, table_index  # slow: numpy

    try:
        return list(table_index(report_table()).get("releases", {}).get(framework, {}).get(device, []))
    except DatasetError as err:
        raise UsageError(f"the report cannot be read, so nothing is compared: {err}") from None


def check_across(lock: Lock, framework: str, release: str, device: str = "cpu",
                 tag: str | None = None) -> tuple[list[Change], list[str]]:
    """Compare the lock with the report's cells of ``framework`` ``release`` on ``device`` (reverse mode, the
    site's dtype, on the platform ``tag``: Linux x86-64 by default, ``linux_x86_64_v2`` for a CPU of that x86-64
    level, :mod:`kinkcheck.platforms.isa`): each site whose question is a catalog case. Another framework is paired as
    ``kinkcheck migrate`` pairs programs (every program it has for the case); the lock's own framework on another
    device or level is compared program for program, each change beside the same release's CPU cell at the
    reference level (is it the device's or the level's doing, or the release's?). The changes (one per program
    that returns another value or status), and a line for each site that cannot be compared (no catalog case, no
    cell)."""
    releases_asked(framework, [release])  # an unknown release: UsageError before anything runs
    report_table()  # unreadable: one line before anything is compared
    same = framework == lock.framework
    tag = tag or DEFAULT_PLATFORM
    level = split_tag(tag)[1]
    where = f"{device} at {level}" if level else device
    changes: list[Change] = []
    unknown: list[str] = []

    def cells(program: str | None, case: str, on: str, dtype: str, at: str) -> tuple[list[Any], str]:
        try:
            rows = lookup(program, case=case, framework=framework, release=release, mode="reverse", dtype=dtype,
                          device=on, platform=at)
        except ReportUnreadable as err:  # damaged rows: never "not compared" in their place
            raise UsageError(f"the report cannot be read, so nothing is compared: {err}") from None
        except LookupFailed as err:
            return [], str(err)
        place = f"{on} at {split_tag(at)[1]}" if split_tag(at)[1] else on
        return rows, f"the report has no {framework} {release} {place} cell of {case} in {dtype}"

    for s in lock.site:
        head = f"{s.call}: {s.operation} ({s.program} at {s.at}, {s.dtype})"
        if s.case is None:
            why = (f"the report has no {where} cell of it (kinkcheck measures a lock's own questions on the CPU)"
                   if same else f"kinkcheck knows no {framework} equivalent")
            unknown.append(f"{head}: not compared: no catalog case holds this program at this point, so {why}")
            continue
        rows, why = cells(s.program if same else None, s.case, device, s.dtype, tag)
        if not rows:
            unknown.append(f"{head}: not compared: {why}")
            continue
        for r in rows:
            if r.status == s.status and _same(s.dtype, s.value, r.value):
                continue
            note = ""
            if same and (device != "cpu" or level):  # beside the reference: the CPU at the reference machine's level
                cpu, _ = cells(s.program, s.case, "cpu", s.dtype, DEFAULT_PLATFORM)
                if cpu:
                    c = cpu[0]
                    agrees = c.status == s.status and _same(s.dtype, s.value, c.value)
                    ref = "on the CPU" if device != "cpu" else "at the reference CPU's level"
                    doing = "the device changes it" if device != "cpu" else f"{level} changes it"
                    note = (f" ({ref} {release} gives {_face(c.status, c.value, c.labels)}: "
                            f"{doing if agrees else 'the release changes it too'})")
            changes.append(Change(site=s, release=f"{release} {where}" if same else f"{framework} {release}",
                                  status=r.status, value=r.value, labels=list(r.labels), source="report",
                                  site_release=lock.release, program=None if same else r.program, note=note))
    return changes, unknown


def batch_shift(lock: Lock, changes: Sequence[Change], where: Path | None = None) -> str:
    """What the changes do to the model's gradient on the user's first batch (PyTorch): the model runs twice, each
    changed kink of one input or tie of two taking the lock's value at its kink elements in one pass and the
    checked release's in the other (:func:`kinkcheck.frameworks.torch.kinkhits.first_layer_shift`); the largest
    change of its first weight's gradient beside that gradient's largest entry, or a sentence saying why not.
    ``where``: the lock's folder, where its model's module is looked for first."""
    counter = kink_counter(lock.framework)
    first_layer_shift = getattr(counter, "first_layer_shift", None)  # a counter that can swap conventions: torch's
    if first_layer_shift is None:
        return "its size on your batch is measured for PyTorch models only so far"
    before, after = {}, {}
    for c in changes:
        at = pt.parse_point(c.site.at)
        name = c.site.operation.rsplit(".", 1)[-1]
        tied = set(at) == {"v"} and (name in ("max", "min", "amax", "amin") or name.startswith(("max_pool1d",
                                                                                                  "max_pool2d")))
        if (set(at) in ({"x"}, {"x", "y"}) or tied) and c.status == "ok" == c.site.status:
            before[c.site.index] = (at, c.site.value)
            after[c.site.index] = (at, c.value)
    if not after:
        return "its size on your batch is not measured for these sites (3-d pools, errors)"

    added = str(where.resolve()) if where is not None else None
    if added is not None:
        sys.path.insert(0, added)
    try:
        model = call_user(load_user_function(lock.model, "--model"), f"--model {lock.model}")
        batch = next(iter(call_user(load_user_function(lock.data, "--data"), f"--data {lock.data}")))
        x = batch[0] if isinstance(batch, (tuple, list)) else batch
        if lock.eval:
            model.eval()
        moved, largest, swapped = first_layer_shift(model, x, before, after)
    except CensusError as err:  # the conventions are checked without the model; only this size needs it
        why = " ".join(str(err).split())[:200]
        return f"its size on your batch is not measured: the lock's model or data ({lock.model}, {lock.data}) " \
               f"does not load here ({why})"
    except StopIteration:
        return f"its size on your batch is not measured: the lock's data ({lock.data}) gives no batch"
    except SystemExit as err:  # the user's model or data called sys.exit(): the check's lines stand, not its status
        return f"its size on your batch is not measured: the lock's model or data called sys.exit({err.code!r})"
    except (ValueError, RuntimeError, TypeError) as err:
        return f"its size on your batch is not measured ({type(err).__name__}: {' '.join(str(err).split())[:160]})"
    finally:
        if added is not None and added in sys.path:
            sys.path.remove(added)
    kept = sorted(set(after) - swapped)
    calls = {c.site.index: c.site.call for c in changes}
    why = ("no element of the first batch sits on the kink as the lock's question has it, or kinkcheck does not swap "
           "that form")
    if not swapped:
        return f"on your first batch the first layer's gradient does not move: {why}"
    left = (f" ({len(kept)} changed site(s) not swapped, {', '.join(calls[i] for i in kept)}: {why})" if kept else "")
    if moved == 0.0:
        return f"on your first batch the first layer's gradient does not move (no gradient reaches the kinks){left}"
    return (f"on your first batch the first layer's gradient moves by up to {moved:.3g} (its largest entry: "
            f"{largest:.3g}){left}")


def parse_framework_version(text: str) -> tuple[str, str]:
    """``torch==2.14.1`` → ``("torch", "2.14.1")``; UsageError for another form or an unknown framework."""
    name, sep, version = text.partition("==")
    if not sep or not version.strip() or not name.strip():
        raise UsageError(f"--framework-version {text!r}: write it as FRAMEWORK==VERSION (torch==2.14.1)")
    if name.strip() not in REGISTRY:
        raise UsageError(f"--framework-version {text!r}: unknown framework {name.strip()!r} (known: "
                         f"{', '.join(REGISTRY)})")
    return name.strip(), version.strip()


def default_lock_path() -> Path:
    return Path(os.environ.get("KINKCHECK_LOCK", LOCK_FILE))


# --------------------------------------------------------------------------- the command


def command(args: Any) -> int:
    """``kinkcheck lock`` (:mod:`kinkcheck.faces.lock` parses its arguments)."""
    path = Path(args.lock) if args.lock else lock.default_lock_path()
    if not args.check:
        if (args.release or args.framework_version or args.device != "cpu" or args.isa or args.report_only
                or args.measure):
            raise UsageError("--release, --framework-version, --device, --isa, --report-only and --measure go with "
                             "--check (a lock is written for the installed release on the CPU)")
        if not (args.model and args.data):
            raise UsageError("lock: --model MODULE:FUNCTION and --data MODULE:FUNCTION name the model and its batches "
                             "(or --check an existing lock)")
        if args.batches < 1:
            raise UsageError(f"--batches must be 1 or more, got {args.batches}")
        lock.check_writable(path)
        made = lock.make_lock(args.model, args.data, batches=args.batches, eval_mode=args.eval, quiet=args.quiet)
        lock.write_lock(made, path)
        print(f"wrote {path}: {len(made.site)} locked site(s), {len(made.unlocked)} not locked, "
              f"{made.framework} {made.release} (cpu)")
        for s in made.site:
            f = s.predicted
            guess = "" if f is None else f"; predicted from the rules, not measured: {f.reason}" if f.value is None \
                else f"; predicted from the rules, not measured: {json.dumps(f.value)} ({lock.rules_text(f.rules)})"
            print(f"  {s.call}: {s.operation} ({s.program} at {s.at}, {s.dtype}): {s.status} "
                  f"{json.dumps(s.value) if s.value is not None else ''} {' '.join(s.labels[:1])} [{s.source}]{guess}")
        for u in made.unlocked:
            print(f"  {u.call}: {u.operation}: not locked: {u.why}")
        return 0
    if args.model or args.data:
        raise UsageError("--check reads the lock; --model and --data write one")
    for name, value in (("--release", args.release), ("--framework-version", args.framework_version)):
        if value is not None and not value.strip():
            raise UsageError(f"lock --check: {name} is empty: name a release, or leave it out for the installed one")
    if args.measure and args.report_only:
        raise UsageError("--report-only or --measure, not both (--report-only measures nothing)")
    held = lock.read_lock(path)
    release, framework = args.release, held.framework
    if args.framework_version:
        if release:
            raise UsageError("--release or --framework-version, not both")
        framework, release = lock.parse_framework_version(args.framework_version)
    if args.measure and (args.device != "cpu" or args.isa or framework != held.framework):
        raise UsageError("--measure goes with --check in the lock's framework on the CPU (--device, --isa and another "
                         "framework compare the report's cells only)")
    sources: dict[int, str] = {}
    if args.device != "cpu" or args.isa:
        if args.framework_version:
            raise UsageError("--device or --isa, or --framework-version, not both (a lock is checked on another device "
                             "or CPU level in its own framework)")
        if args.device != "cpu" and args.isa:
            raise UsageError("--device or --isa, not both (--isa names a CPU's instruction-set level)")
        release = release or held.release
        tag = capped_tag(DEFAULT_PLATFORM, args.isa)
        place = f"cpu-{tag}" if args.isa else args.device
        flag = f"--isa {args.isa}" if args.isa else f"--device {args.device}"
        there = lock.report_releases(framework, place)
        if release not in there:
            raise UsageError(f"lock --check {flag}: the report measured {framework} "
                             f"{f'at {args.isa}' if args.isa else f'on {args.device}'} in "
                             f"{', '.join(there) or 'no release'}, not {release}: check against one of those "
                             "(--release R)")
        changes, unknown = lock.check_across(held, framework, release, args.device, tag)
        target = f"{framework} {release} {args.device}" + (f" at {args.isa}" if args.isa else "")
    elif framework != held.framework:
        changes, unknown = lock.check_across(held, framework, release)
        target = f"{framework} {release}"
    else:
        target, changes, unknown = lock.check(held, release, quiet=args.quiet, report_only=args.report_only,
                                              measure=args.measure, sources=sources)
    named = target if target.startswith(f"{framework} ") else f"{framework} {target}"
    why = lock.nothing_compared(held, unknown, named, "; without --report-only they are measured in that release's "
                                "environment" if args.report_only else "")
    args.exit_status = 2 if why else 1 if changes else 0
    for c in changes:
        print(c.line(held.framework))
    for line in unknown:
        print(line)
    if why:  # exit 2: a CI job must not pass on what was not checked
        raise UsageError(f"lock --check: {why}")
    sites = len({c.site.index for c in changes})
    shift = (lock.batch_shift(held, changes, path.parent) if framework == held.framework
             else "its size on your batch is not measured across frameworks")
    if shift.startswith("on your first batch") and any(c.source == "predicted" for c in changes):
        shift += " (the checked release's value at a predicted site is the rules' prediction, not a measurement)"
    by = [v for v in sources.values()] if sources else ["report"] * (len(held.site) - len(unknown))
    counts = (f"compared: {by.count('report')} by report cell, {by.count('predicted')} by prediction, "
              f"{by.count('measured')} by live measurement" + (f"; {len(unknown)} not compared" if unknown else ""))
    guessed = (f" (by the rules' prediction for {by.count('predicted')} of them, not measured)"
               if "predicted" in by else "")
    print(f"{sites} of {len(held.site)} locked convention(s) changed from {held.framework} {held.release} to {target}"
          + f" ({counts})"
          + (f"; {shift}" if changes else ": nothing the model relies on changes" + guessed if not unknown
             else f": none of the {len(held.site) - len(unknown)} compared changes{guessed}; the {len(unknown)} not "
                  "compared are unknown"))
    return args.exit_status
