"""``kinkcheck ask``: any program, measured the way the catalog's programs are, across releases.

A question is a program and a point (``kinkcheck ask "torch.clamp(x, min=0)" --at x=0``). It becomes a one-case
catalog in its own folder (the case's function is the program's sympy form, :func:`kinkcheck.oracles.mapping.
sympy_form`, or the ``--sympy`` text), and every release asked for measures it with ``kinkcheck probe``, as the
catalog is measured: every mode and dtype of the framework, compiled modes in a batch, each cell in the worker
with its limits, the provenance in the shard. The installed release is measured with this interpreter; any other
release in a virtualenv of its own (the environments of :mod:`kinkcheck.probe.environments`: the Python it has
wheels for, its requirements from the registry, kinkcheck's dependencies), kept between questions within a disk
budget, the least recently used removed first. The shards are then judged as the report judges a case
(:func:`kinkcheck.judge.build.build`) and printed as a case page shows a program: the values over releases with
their labels, what changed where, the modes of the newest release, the errors.

A question asked before is answered from its shards: only the cells a release lacks are measured again.

Where things are kept: ``$KINKCHECK_ASK_HOME``, else the user cache folder (``platformdirs``) ``…/kinkcheck/ask``:
``questions/<digest>/`` (the one-case catalog and its shards) and ``envs/<framework>-<version>/`` (virtualenvs).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from kinkcheck import platforms as plat
from kinkcheck.catalog import (DRAFT_REASON, FRAMEWORKS, PROGRAMS_DIR, SYMPY_NAMES, CatalogError, find, forget_loaded,
                               load_catalog, point_key, staged_case_ids, staged_path)
from kinkcheck.errors import EXIT_BAD_INPUT, UsageError
from kinkcheck.language import expr as ex
from kinkcheck.language import points as pt
from kinkcheck.language.anchors import slug
from kinkcheck.language.decimals import decimal_clarke, decimal_exact, decimal_text, decimal_value
from kinkcheck.probe.ondemand import (DEFAULT_DISK_BUDGET_GB, ENV_DISK, ENV_HOME, Log, disk_budget, environment,
                                      environment_path, home, installed_release, make_room, releases_asked)
from kinkcheck.probe.plan import missing_work
from kinkcheck.rules import answer as predicted
from kinkcheck.shards import read_shard, write_text_atomic
from kinkcheck.vocabulary import DTYPES, FRAMEWORK_MODES, NOT_JUDGED, flat_value

__all__ = ["DEFAULT_DISK_BUDGET_GB", "ENV_DISK", "ENV_HOME", "MAX_PAGE_NAME_BYTES", "MAX_STAGE_ID_BYTES",
           "Answer", "Question", "ask", "device_releases", "disk_budget",
           "from_report", "home", "installed_release", "measure", "question", "releases_asked", "render", "stage",
           "stage_id_problem", "write_catalog"]

# --------------------------------------------------------------------------- the question


@dataclass(frozen=True)
class Question:
    """A program at a point: ``expr`` (canonical text), ``at`` (input name → number or nested list), its
    ``framework``, and the function it computes in the catalog's sympy language (``sympy``). ``case``: the catalog
    case whose program ``expr`` is at this very point (its function and tie flag are the question's), else None;
    ``tie``: the kink is a tie between arguments or elements (the tie labels apply)."""

    expr: str
    at: dict[str, Any]
    framework: str
    sympy: str
    case: str | None = None
    tie: bool = False
    #: The program's own function where the catalog gives it one (``(sympy, constants)``: tinygrad's SELU rounds
    #: λ), so the question's catalog judges it as the report does; None elsewhere.
    own: tuple[str, str] | None = None

    @property
    def digest(self) -> str:
        """Names the question's folder: the program, the point (``0`` and ``0.0`` alike, ``-0.0`` apart), the
        framework, the function, the case and the tie flag."""
        raw = json.dumps([self.expr, point_key(self.at), self.framework, self.sympy, self.case, self.tie]
                         + ([list(self.own)] if self.own else []))
        return hashlib.sha256(raw.encode()).hexdigest()[:16]

    @property
    def case_id(self) -> str:
        """The case's id in the question's catalog: the catalog's own for a catalog program at its point."""
        return self.case or f"ask@{self.digest[:8]}"

    @property
    def title(self) -> str:
        return f"{self.expr} at {', '.join(f'{k} = {v}' for k, v in self.at.items())}"

    def write_catalog(self, folder: Path) -> Path:
        """The one-case catalog of this question in ``folder``; its path (:func:`write_catalog`)."""
        return write_catalog([self], folder)

    def case_toml(self, case_id: str) -> str:
        at = ", ".join(f"{k} = {_toml_value(v)}" for k, v in self.at.items())
        return (f"[[case]]\nid = {_toml_str(case_id)}\ntitle = {_toml_str(self.title)}\nsympy = {_toml_str(self.sympy)}\n"
                f"at = {{ {at} }}\n" + ("tie = true\n" if self.tie else ""))


def write_catalog(questions: Sequence[Question], folder: Path) -> Path:
    """A catalog of ``questions`` (``catalog.toml``, and ``programs/<framework>.toml`` for each framework, as the
    shipped catalog is laid out) in ``folder``; its path. Questions of one catalog case are one case with their
    programs."""
    folder.mkdir(parents=True, exist_ok=True)
    grouped: dict[str, list[Question]] = {}
    for q in questions:
        grouped.setdefault(q.case_id, []).append(q)
    cases, files = [], {}
    for case_id, qs in grouped.items():
        case = qs[0].case_toml(case_id)
        programs = ", ".join(_toml_str(e) for e in dict.fromkeys(q.expr for q in qs))
        own = "".join(
            f"own_functions = {{ {_toml_str(q.expr)} = {{ sympy = {_toml_str(q.own[0])}, "
            f"constants = {_toml_str(q.own[1])} }} }}\n" for q in dict((q.expr, q) for q in qs).values() if q.own)
        files.setdefault(qs[0].framework, []).append(f"[{_toml_str(case_id)}]\nprograms = [{programs}]\n{own}")
        cases.append(case)
    for framework, tables in files.items():
        (folder / "programs").mkdir(exist_ok=True)
        (folder / "programs" / f"{framework}.toml").write_text("\n".join(tables))
    path = folder / "catalog.toml"
    path.write_text("\n".join(cases))
    return path


def _toml_str(text: str) -> str:
    return json.dumps(text)  # a JSON string is a TOML basic string (the language has no control characters)


def _toml_value(v: Any) -> str:
    if isinstance(v, list):
        return "[" + ", ".join(_toml_value(x) for x in v) + "]"
    return repr(float(v)) if isinstance(v, float) else str(v)


def question(expr: str, at: str, framework: str | None = None, sympy_text: str | None = None,
             tie: bool | None = None, *, live: bool = False) -> Question:
    """Parse and check a question: one framework's program, a finite point it uses whole, and the function it
    computes. A program of a catalog case at that case's point (the sign of zero included) is that case: its
    function and tie flag are the case's. Otherwise the function is ``sympy_text``, else the mapping's sympy form,
    and ``tie`` says whether the kink is a tie (default no). Raises UsageError (one line) on bad input, and for a
    ``sympy_text`` that is not the catalog case's function (unless ``live``: then it is the user's own question)."""
    try:
        point = pt.parse_point(at)
        ex.check_input_names(point, FRAMEWORKS)
        tree = ex.parse(expr, point, FRAMEWORKS)
        if sympy_text is not None:
            ex.parse(sympy_text, point, SYMPY_NAMES)
        fw = ex.program_framework(tree, point, framework, FRAMEWORKS)
    except ex.ExprError as err:
        raise UsageError(str(err)) from None
    text = ex.unparse(tree)
    found = find(fw, text, point)
    case = found[0] if found is not None else None
    if found is not None and not live:  # the catalog's spelling: its cells answer (--live measures the one typed)
        text = found[1]
    if case is not None and sympy_text is not None and not _same_function(sympy_text, case.sympy, point):
        if not live:
            raise UsageError(f"--sympy {sympy_text!r} is not the function of the catalog's case {case.id} "
                             f"({case.sympy}), whose program {text} is at this point: leave --sympy out, or add "
                             "--live to measure it here and judge it against yours")
        case = None
    if case is not None:
        own = case.own_functions.get((fw, text))
        return Question(text, point, fw, case.sympy, case.id, case.tie,
                        (own.sympy, own.constants) if own is not None else None)
    if sympy_text is None:
        from kinkcheck.oracles.mapping import Unmapped, sympy_form  # slow: numpy, sympy

        try:
            sympy_text = sympy_form(tree, point, fw).text
        except Unmapped as err:

            why = re.sub(r"\s*\(pass one with --sympy [^)]*\)", "", str(err))  # grad's hint: ask's is below
            raise UsageError(f"cannot write {text} in sympy ({why}); give its function with --sympy TEXT (the "
                             "catalog's language: Max, Min, Abs, Piecewise, …)") from None
        try:  # the catalog reads it back: a constant folded past float64 (1e308 * 10.0) is refused there
            ex.parse(sympy_text, point, SYMPY_NAMES)
        except ex.ExprError as err:
            raise UsageError(f"cannot write {text} in the catalog's sympy language: its form {err}; give its function "
                             "with --sympy TEXT") from None

    components = len(flat_value(point))  # a kink of one number against a constant is no tie
    return Question(text, point, fw, sympy_text, None, bool(tie) and components > 1)


def _same_function(a: str, b: str, at: dict[str, Any]) -> bool:
    """Whether two texts of the catalog's sympy language are one function of the point's inputs."""
    from kinkcheck.oracles.translate import to_sympy  # slow: sympy

    try:
        fa = to_sympy(SimpleNamespace(id="--sympy", sympy=a, at=at))[0]  # type: ignore[arg-type]
        fb = to_sympy(SimpleNamespace(id="the case", sympy=b, at=at))[0]  # type: ignore[arg-type]
    except (ex.ExprError, OverflowError, ValueError, TypeError):
        return False
    if fa == fb:
        return True
    import sympy

    try:  # Max, Min and Abs as Piecewise, folded and simplified: zero only where the two are one function
        difference = sympy.piecewise_fold(fa.rewrite(sympy.Piecewise) - fb.rewrite(sympy.Piecewise))
        return bool(sympy.simplify(difference) == 0)
    except Exception:  # noqa: BLE001  sympy could not tell: not the same, as far as kinkcheck knows
        return False


# --------------------------------------------------------------------------- a question into the catalog


#: The longest case id ``--stage`` takes, in UTF-8 bytes, and the longest page name it may give (the report names
#: a case's pages ``cases/<slug>.md`` and ``.html``: :func:`kinkcheck.language.anchors.slug`); file systems stop at 255.
MAX_STAGE_ID_BYTES, MAX_PAGE_NAME_BYTES = 100, 128

#: Names Windows reserves for devices: no file may be called so, with any extension.
_RESERVED = frozenset({"CON", "PRN", "AUX", "NUL", *(f"{port}{i}" for port in ("COM", "LPT") for i in range(1, 10))})


def stage_id_problem(case_id: object) -> str | None:
    """Why ``case_id`` cannot be a staged case's id, in words (None: it can). A case id names files (the report's
    ``cases/<slug>.md`` and ``.html``, a clone's on any system): it is text of at most :data:`MAX_STAGE_ID_BYTES`
    UTF-8 bytes, its page name of at most :data:`MAX_PAGE_NAME_BYTES`; without a path separator, NUL or another control character; not starting
    with a dot or ending with one; not a name Windows reserves (``CON``, ``NUL``, ``COM1``, …); and in the form
    ``<function>@<point>`` without spaces or quotes."""
    if not isinstance(case_id, str) or not case_id:
        return "a case id is <function>@<point>, e.g. relu6@6"
    size = len(case_id.encode("utf-8", "surrogatepass"))
    if size > MAX_STAGE_ID_BYTES:
        return (f"the id is {size} bytes long; a case id names the report's page files, so it is at most "
                f"{MAX_STAGE_ID_BYTES} bytes")
    bad = next((c for c in case_id if c in "/\\" or ord(c) < 0x20 or ord(c) == 0x7F), None)
    if bad is not None:
        what = "a path separator" if bad in "/\\" else ("NUL" if bad == "\0" else "a control character")
        return f"the id holds {what} ({bad!r}); a case id names files, so it holds none"
    if case_id.startswith(".") or case_id.endswith("."):
        return "the id starts or ends with a dot; a case id names files, so it does neither"
    stem = case_id.split("@")[0].split(".")[0]
    if stem.upper() in _RESERVED:
        return f"{stem!r} is a device name on Windows, which no file may take; choose another id"
    if not re.fullmatch(r"[A-Za-z0-9_.+\-]+@[^\s\"'\\]+", case_id):
        return "a case id is <function>@<point>, e.g. relu6@6 (no spaces or quotes)"
    page = len(slug(case_id).encode()) + len(".html")
    if page > MAX_PAGE_NAME_BYTES:
        return f"its report page name would be {page} bytes long (at most {MAX_PAGE_NAME_BYTES}); choose a shorter id"
    return None


def _shown_id(case_id: object) -> str:
    """A case id in a one-line message: ``repr``, cut at 60 characters."""
    text = repr(case_id)
    return text if len(text) <= 60 else text[:59] + "…"


def stage(q: Question, case_id: str, catalog_path: Path, title: str | None = None) -> list[Path]:
    """Write ``q`` as a staged case ``case_id`` beside the catalog at ``catalog_path`` (``staged/catalog.toml`` and
    ``staged/programs/<framework>.toml``): its framework's program, and for every other framework a ``no_equivalent``
    reason that starts with :data:`~kinkcheck.catalog.DRAFT_REASON` (``nox -s report`` measures the case; moving it
    into the catalog waits until each is written). The files written. Raises UsageError (one line, nothing
    written) for a catalog that is not there, an id in use, or a case the catalog's checks refuse."""
    import tempfile  # slow to import

    why = stage_id_problem(case_id)
    if why is not None:
        raise UsageError(f"--stage {_shown_id(case_id)}: {why}")
    if not catalog_path.is_file():
        raise UsageError(f"--stage writes beside a checkout's catalog: no {catalog_path} (run it in the checkout, or "
                         "pass --catalog)")
    try:
        catalog = load_catalog(catalog_path)
    except CatalogError as err:
        raise UsageError(str(err)) from None

    if any(c.id == case_id for c in catalog):
        raise UsageError(f"--stage {case_id}: the catalog has a case {case_id}; choose another id")
    same = next((c.id for c in catalog if slug(c.id) == slug(case_id)), None)
    if same is not None:
        raise UsageError(f"--stage {case_id}: reads as the catalog's {same} in a report page name; choose another id")
    staged = staged_path(catalog_path)

    if case_id in staged_case_ids(catalog_path):
        raise UsageError(f"--stage {case_id}: already staged in {staged}; choose another id, or edit the staged case")
    program_files = sorted(f.stem for f in (catalog_path.parent / PROGRAMS_DIR).glob("*.toml"))
    draft = (f"{DRAFT_REASON}: staged by kinkcheck ask from {q.framework}'s {q.expr}; write this framework's "
             "program, or why it has none")
    case = q.case_toml(case_id)
    if title:
        case = case.replace(f"title = {_toml_str(q.title)}", f"title = {_toml_str(title)}", 1)
    # A framework whose programs the catalog's cases hold themselves (a small catalog; the shipped one keeps every
    # framework's in programs/<framework>.toml) is staged the same way.
    held = {p.framework for c in catalog for p in c.programs} | {fw for c in catalog for fw in c.no_equivalent}
    inline = {fw: (f"{fw} = [{_toml_str(q.expr)}]" if fw == q.framework else None)
              for fw in FRAMEWORKS if fw in held - set(program_files)}
    if q.framework not in inline and q.framework not in program_files:
        program_files.append(q.framework)
    programs = [line for line in inline.values() if line]
    missing = [f"{fw} = {_toml_str(draft)}" for fw, line in inline.items() if line is None]
    case += ("[case.programs]\n" + "\n".join(programs) + "\n" if programs else "")
    case += ("[case.no_equivalent]\n" + "\n".join(missing) + "\n" if missing else "")
    texts = {staged: (staged.read_text() + "\n" if staged.is_file() else
                      "# Staged cases: measured into the shards, reported once moved (python -m kinkcheck.probe.staging).\n\n")
             + case}
    for fw in program_files:
        path = staged.parent / PROGRAMS_DIR / f"{fw}.toml"
        table = (f"[{_toml_str(case_id)}]\n" + (f"programs = [{_toml_str(q.expr)}]\n" if fw == q.framework
                                                else f"no_equivalent = {_toml_str(draft)}\n"))
        texts[path] = (path.read_text() + "\n" if path.is_file() else f"# Staged {fw} programs.\n\n") + table
    with tempfile.TemporaryDirectory() as tmp:  # the staged catalog as it would be, checked before a byte is written
        for path, text in texts.items():
            copy = Path(tmp) / path.relative_to(staged.parent)
            copy.parent.mkdir(parents=True, exist_ok=True)
            copy.write_text(text)
        try:
            forget_loaded()
            load_catalog(Path(tmp) / "catalog.toml")
        except CatalogError as err:
            raise UsageError(f"--stage {case_id}: {err}".replace(tmp, str(staged.parent))) from None
        finally:
            forget_loaded()
    for path, text in texts.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        write_text_atomic(path, text)
    return list(texts)


# --------------------------------------------------------------------------- the report's cells


def _report_exists(path: Path) -> bool:
    return path.exists() or Path(f"{path}.gz").exists()


def device_releases(framework: str, device: str, path: str | Path | None = None) -> list[str]:
    """The releases of ``framework`` the report (``path``, default :func:`kinkcheck.report.query.default_report`) measured
    on ``device`` (an environment's place: ``cuda``), oldest first as the report lists them; read from the report's
    head, no row. Raises UsageError when the report cannot be read."""
    from kinkcheck.report.cells import CellError, load_report_for  # slow: msgspec, numpy
    from kinkcheck.report.query import default_report  # slow: msgspec

    try:
        report = load_report_for(path if path is not None else default_report(), frameworks=())
    except CellError as err:
        raise UsageError(str(err)) from None
    return [e.framework_version for e in report.environments if e.framework == framework and e.place == device
            and e.not_measured is None]


def from_report(q: Question, releases: Sequence[str], modes: Sequence[str] = (), dtypes: Sequence[str] = (),
                path: str | Path | None = None, device: str = "cpu") -> list[dict[str, Any]] | None:
    """The report's cells of ``q``, a catalog program at its case's point, as shards: for each release of
    ``releases`` the report measured on ``device`` (an environment's place: ``cpu``, this platform's CPU on Linux
    x86-64, or ``cuda``), its environment record (the provenance) and the cells of that program in that case, in the
    modes and dtypes asked. None where there are none: ``q`` is
    no catalog case, there is no report, or the report lacks the case or the releases. The report is ``path``,
    default :func:`kinkcheck.report.query.default_report`.

    Raises
    ------
    UsageError
        A report that is there (or named by ``$KINKCHECK_REPORTS``) but cannot be read: one line.
    """
    import msgspec

    from kinkcheck.report.cells import CellError, load_report_for  # slow: msgspec, numpy
    from kinkcheck.report.query import DATA_ENV, default_report  # slow: msgspec

    if q.case is None:
        return None
    named = path is not None
    path = Path(path) if path is not None else default_report()
    try:
        report = load_report_for(path, program=q.expr)
    except CellError as err:
        if named or os.environ.get(DATA_ENV) or _report_exists(path):
            raise UsageError(f"{err} (or --live: measure every release here)") from None
        return None
    case = next((c for c in report.cases if c.id == q.case), None)
    if case is None or (point_key(case.at), case.sympy, case.tie) != (point_key(q.at), q.sympy, q.tie):
        return None  # a report of another catalog, whose case is not this one: its cells do not answer
    wanted = set(releases)
    envs = [e for e in report.environments if e.framework == q.framework and e.place == device
            and e.framework_version in wanted and e.not_measured is None]
    by_env: dict[str, list[dict[str, Any]]] = {e.id: [] for e in envs}
    for o in report.observations:
        if (o.case == q.case and o.program == q.expr and o.environment in by_env and (not modes or o.mode in modes)
                and (not dtypes or o.dtype in dtypes)):
            by_env[o.environment].append({"case": o.case, "program": o.program, "mode": o.mode, "dtype": o.dtype,
                                          "status": o.status, "value": o.value, "error": o.error, "input": o.input})
    # through JSON: a head's environment keeps its history as JSON text (msgspec.Raw), which to_builtins refuses
    shards = [{"environment": msgspec.json.decode(msgspec.json.encode(e)), "observations": by_env[e.id],
               "networks": []} for e in envs if by_env[e.id]]
    return shards or None


# --------------------------------------------------------------------------- measuring and judging


@dataclass
class Answer:
    """A question's cells judged: the one-case report, each release not measured with the reason, and where each
    release's cells come from (``sources``: ``"report"``, the report's cells at ``report_path``; ``"live"``,
    measured here for this question)."""

    question: Question
    releases: list[str]
    report: Any
    not_measured: dict[str, str]
    sources: dict[str, str] = field(default_factory=dict)
    report_path: str | None = None
    #: Where the cells were measured: ``cpu``, or another device whose cells come from the report only
    #: (``ask --device cuda``: from the report; not measured here).
    device: str = "cpu"


def _shard_path(folder: Path, framework: str, version: str) -> Path:
    return folder / "shards" / f"{plat.environment_id(framework, version, 'cpu', plat.host_tag())}.json"


def _fresh(shard: Path, catalog: Any, framework: str, modes: Sequence[str], dtypes: Sequence[str]) -> bool:
    if not shard.exists():
        return False
    try:
        data = read_shard(shard)
    except Exception:  # noqa: BLE001  an unreadable shard is measured again
        return False
    return missing_work(data, catalog, framework, modes or None, dtypes or None).fresh


def ask(q: Question, releases: Sequence[str], *, modes: Sequence[str] = (), dtypes: Sequence[str] = (),
        disk_budget_gb: float | None = None, quiet: bool = False, timeout_s: float | None = None,
        live: bool = False, report: str | Path | None = None, device: str = "cpu") -> Answer:
    """Answer ``q`` in each of ``releases``: from the report's cells (``report``, default
    :func:`kinkcheck.report.query.default_report`) where the catalog holds the program at the point (unless ``live``), the
    other releases measured (only what their shards lack), judged. On a ``device`` other than ``cpu``, the report's
    cells on that device only: a release it lacks there is not measured (ask measures on the CPU)."""
    return measure([q], releases, modes=modes, dtypes=dtypes, disk_budget_gb=disk_budget_gb, quiet=quiet,
                   timeout_s=timeout_s, live=live, report=report, device=device)


def measure(questions: Sequence[Question], releases: Sequence[str], *, modes: Sequence[str] = (),
            dtypes: Sequence[str] = (), disk_budget_gb: float | None = None, quiet: bool = False,
            timeout_s: float | None = None, live: bool = False, report: str | Path | None = None,
            device: str = "cpu") -> Answer:
    """Answer ``questions`` (one framework's) in each of ``releases`` (on ``device``: see :func:`ask`). One question
    that is a catalog program at its case's point takes the report's cells for the releases the report measured (:func:`from_report`; not with
    ``live``); every other release is measured here, one probe of the questions' catalog per release (only what its
    shard lacks). Both are judged together, as the report judges its cases (:func:`kinkcheck.judge.build.build`
    over the questions' catalog)."""
    import tempfile  # slow to import

    from kinkcheck.judge.build import build  # slow: msgspec, numpy

    frameworks = {q.framework for q in questions}
    if len(frameworks) != 1:
        raise ValueError(f"measure: questions of one framework, got {sorted(frameworks)}")
    framework = frameworks.pop()
    budget = disk_budget(disk_budget_gb)
    reported = (from_report(questions[0], releases, modes, dtypes, report, device) if len(questions) == 1
                and not live else None)
    sources = dict.fromkeys((s["environment"]["framework_version"] for s in reported or ()), "report")
    rest = [v for v in releases if v not in sources]
    elsewhere: dict[str, str] = {}
    if device != "cpu":  # never measured here: what the report lacks on that device stays unanswered
        elsewhere = dict.fromkeys(rest, f"the report holds no {device} cell of it (kinkcheck ask measures on the CPU; "
                                        f"--device {device} answers from the report's cells only)")
        rest = []
    with tempfile.TemporaryDirectory(prefix="kinkcheck-ask-") as tmp:
        if rest:
            root = home()
            digest = hashlib.sha256("".join(sorted(q.digest for q in questions)).encode()).hexdigest()[:16]
            folder = root / "questions" / (questions[0].digest if len(questions) == 1 else digest)
        else:  # answered from the report: nothing kept
            folder = Path(tmp)
        catalog_path = write_catalog(questions, folder)
        catalog = load_catalog(catalog_path)
        for s in reported or ():  # measured against the case the report holds, which is this catalog's
            s["environment"]["case_hashes"] = {c.id: c.measurement_hash(framework) for c in catalog}
        shards, not_measured = _live(framework, rest, catalog, catalog_path, folder, modes, dtypes, budget, quiet,
                                     timeout_s, bool(sources))
        sources.update(dict.fromkeys((s["environment"]["framework_version"] for s in shards), "live"))
        not_measured = {**elsewhere, **not_measured}
        every = [*(reported or ()), *shards]
        judged = build(every, catalog) if every else None
    from kinkcheck.report.query import default_report  # slow: msgspec

    return Answer(questions[0], list(releases), judged, not_measured,
                  {v: sources[v] for v in releases if v in sources},
                  str(report if report is not None else default_report()) if reported else None, device)


def _progress(quiet: bool, total: int) -> Any:
    """A progress bar of the releases to measure on stderr, where it is a terminal; else None (lines instead)."""
    if quiet or total == 0 or not sys.stderr.isatty():
        return None
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    return Progress(TextColumn("releases"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                    TextColumn("{task.description}"), console=Console(stderr=True), transient=True)


def _live(framework: str, releases: Sequence[str], catalog: Any, catalog_path: Path, folder: Path,
          modes: Sequence[str], dtypes: Sequence[str], budget: float, quiet: bool, timeout_s: float | None,
          some_from_report: bool) -> tuple[list[dict[str, Any]], dict[str, str]]:
    """Measure the catalog at ``catalog_path`` in ``releases`` here, each release's shard in ``folder`` brought up
    to date by ``kinkcheck probe`` in the release's environment. The next release's environment is made while the
    current one is measured, and the kept environments are brought within the disk budget before each one is made.
    The shards (their cells narrowed to the modes and dtypes asked) and the releases not measured with the reason."""
    from concurrent.futures import ThreadPoolExecutor  # slow to import

    if not releases:
        return [], {}
    root = home()
    not_measured: dict[str, str] = {}
    pending = [v for v in releases if not _fresh(_shard_path(folder, framework, v), catalog, framework, modes, dtypes)]
    here = installed_release(framework)  # first: it needs no environment, so the next one is made while it runs
    pending.sort(key=lambda v: v != here)
    progress = _progress(quiet, len(pending))
    log = Log(quiet, progress.console if progress is not None else None)
    for version in releases:
        if version not in pending:
            log.log(f"{framework} {version}: measured before ({_shard_path(folder, framework, version)})")
    if some_from_report and pending:
        log.log(f"{framework} {', '.join(pending)}: not in the report's cells: measured here")
    with contextlib.ExitStack() as stack:
        task = None
        if progress is not None:
            stack.enter_context(progress)
            task = progress.add_task("", total=len(pending))
        pool = stack.enter_context(ThreadPoolExecutor(max_workers=1, thread_name_prefix="kinkcheck-ask-env"))
        made = pool.submit(environment, framework, pending[0], root, log) if pending else None
        for i, version in enumerate(pending):
            if progress is not None:
                progress.update(task, description=f"{framework} {version}: environment")
            started = time.monotonic()
            got = made.result()
            if i + 1 < len(pending):  # the next release's environment is made while this one is measured
                following = pending[i + 1]
                make_room(root / "envs", budget, {environment_path(root, framework, v) for v in (version, following)},
                          log)
                made = pool.submit(environment, framework, following, root, log)
            if isinstance(got, str):
                not_measured[version] = got
                log.log(f"{framework} {version}: not measured: {got}")
            else:
                if progress is not None:
                    progress.update(task, description=f"{framework} {version}: measuring")
                why = _probe(got, framework, catalog_path, _shard_path(folder, framework, version), modes, dtypes,
                             timeout_s, log, version)
                if why is not None:
                    not_measured[version] = why
                    log.log(f"{framework} {version}: not measured: {why}")
                else:
                    log.log(f"{framework} {version}: measured in {time.monotonic() - started:.0f} s")
            if progress is not None:
                progress.advance(task)
    if pending:
        make_room(root / "envs", budget, {environment_path(root, framework, pending[-1])}, log)
    shards = [read_shard(p) for v in releases if (p := _shard_path(folder, framework, v)).exists()
              and v not in not_measured]
    for s in shards:  # the cells asked for: a shard measured before may hold more
        s["observations"] = [o for o in s["observations"] if (not modes or o["mode"] in modes)
                             and (not dtypes or o["dtype"] in dtypes)]
    return shards, not_measured


def _probe(got: tuple[str, dict[str, str]], framework: str, catalog_path: Path, shard: Path, modes: Sequence[str],
           dtypes: Sequence[str], timeout_s: float | None, log: Log, version: str) -> str | None:
    """``kinkcheck probe`` of the catalog at ``catalog_path`` into ``shard`` with the interpreter and variables
    ``got``; None when the shard was written, else why not (one line)."""
    python, extra = got
    cmd = [python, "-m", "kinkcheck", "probe", "--framework", framework, "--catalog", str(catalog_path),
           "--out", str(shard), "--quiet", *[a for m in modes for a in ("--mode", m)],
           *[a for d in dtypes for a in ("--dtype", d)]]
    log.log(f"{framework} {version}: measuring " + (", ".join([*modes, *dtypes]) or "every mode and dtype"))
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, **extra}, check=False,
                              timeout=timeout_s)
    except subprocess.TimeoutExpired:
        return f"the probe ran past {timeout_s:g} s"
    if proc.returncode != 0 or not shard.exists():
        lines = [ln for ln in (proc.stderr or proc.stdout).splitlines() if ln.strip()]
        return f"the probe failed ({lines[-1][:200] if lines else f'exit {proc.returncode}'})"
    return None


# --------------------------------------------------------------------------- printing


def render(answer: Answer) -> str:
    """The answer as a case page shows a program, in text: the oracle, the values over releases with their
    labels (other dtypes where they differ), what changed where, the modes of the newest release, errors."""
    from kinkcheck.render.view import report_view  # slow: msgspec, numpy
    from kinkcheck.report.text import oracle_finding  # slow: msgspec, numpy

    q = answer.question
    out = [f"{q.expr} at {', '.join(f'{k} = {v}' for k, v in q.at.items())}"]
    by_source: dict[str, list[str]] = {}
    for version, source in answer.sources.items():
        by_source.setdefault(source, []).append(version)
    if q.case is not None:
        from kinkcheck.report.text import case_page  # slow: msgspec, numpy

        out.append(f"the catalog's case {q.case} (the report's {case_page(q.case)})")
    if "report" in by_source and answer.device != "cpu":
        out.append(f"the report's cells on {answer.device}: {q.framework} {_ranges(answer, by_source['report'])} "
                   f"({answer.report_path}): from the report; not measured here")
    elif "report" in by_source:
        out.append(f"the report's cells: {q.framework} {_ranges(answer, by_source['report'])} ({answer.report_path}; "
                   "--live measures them here instead)")
    if "live" in by_source:
        out.append(f"measured here: {q.framework} {_ranges(answer, by_source['live'])}")
    for version, why in answer.not_measured.items():
        out.append(f"{q.framework} {version}: not measured: {why}")
    if answer.report is None:
        out.append("nothing measured")
        return "\n".join(out) + "\n"
    view = report_view(answer.report)
    cv = view.case_view(answer.report.cases[0].id)
    oracle = cv.oracle
    finding = oracle_finding(oracle.kind, oracle.lipschitz)
    out.append(f"f = {decimal_text(q.sympy)}: {finding}")  # --json keeps the function's digits
    if oracle.kind == NOT_JUDGED:
        out.append(f"  not judged: {oracle.reason}")
    elif oracle.left is not None or oracle.clarke is not None:
        sides = (f"one-sided f'(x0-) = {decimal_exact(oracle.left)}, f'(x0+) = {decimal_exact(oracle.right)}; "
                 if oracle.left is not None else "")
        clarke = decimal_clarke(oracle.clarke, len(oracle.components), oracle.lipschitz)
        out.append(f"  {sides}Clarke generalized gradient {clarke}"
                   + (f", min-norm {decimal_exact(oracle.min_norm)}" if oracle.min_norm else ""))

    present = [d for d in DTYPES if any(o.dtype == d for o in answer.report.observations)]
    shown = (f"{present[0]}, other dtypes in parentheses where they differ" if len(present) > 1
             else present[0] if present else "no dtype")
    for table in cv.tables if any(o.mode == "reverse" for o in answer.report.observations) else ():
        for row in table.rows:
            out.append(f"\n{table.framework}, reverse mode, {len(table.columns)} release(s) ({table.span}); {shown}:")
            labels = [sq.cell.label for sq in row.strip]
            out.append("  " + "".join(_mark(label) for label in labels) + f"  ({_key(labels)})")
            for _device, runs in row.runs:
                for run in runs:
                    out.append(f"  {run.releases}: {_cell_text(run.cell)}")
    if any("own-constants" in o.labels for o in answer.report.observations):
        own = f"{q.own[1]}: {decimal_text(q.own[0])}" if q.own else answer.report.cases[0].notes.get(q.framework, "")
        out.append(f"labels judged against {q.framework}'s own function, whose documented constants differ from "
                   f"f's (own-constants){': ' + own if own else ''}")
    if not any(o.mode == "reverse" for o in answer.report.observations):  # --mode without reverse: each cell
        for o in answer.report.observations:
            env = answer.report.index.env[o.environment]
            out.append(f"  {env.title}, {o.mode}, {o.dtype}: {_cell_text(view.cell([o]))}")
    for change in cv.changed_in:
        out.append(f"changed in {change.framework} {change.to_version} (from {change.from_version}): {change.change} "
                   f"[{', '.join(change.modes)}; {', '.join(change.dtypes)}]")
    for mt in cv.mode_tables:
        for mrow in mt.rows:
            cells = [f"{mode} {_cell_text(cell)}" for mode, cell in zip(mt.modes, mrow.cells)]
            out.append(f"\nmodes of {mt.framework} {mt.env.title}: " + " · ".join(cells))
    if cv.problems:
        out.append("\nerrors and unavailable cells:")
        for p in cv.problems:
            where = p.releases or ", ".join(p.environments)
            error = p.error or ""  # the report words an error once for many releases and dtypes: one is named
            if len(p.environments) == 1:
                error = error.replace("<release>", answer.report.index.env[p.environments[0]].framework_version)
            if len(p.dtypes) == 1:
                error = error.replace("<dtype>", p.dtypes[0])
            out.append(f"  {p.mode}, {', '.join(p.dtypes)} ({where}): {p.status}: {error}")
    return "\n".join(out) + "\n"


def _ranges(answer: Answer, versions: Sequence[str]) -> str:
    """``versions`` as runs of the answer's releases (``"1.13.1 – 2.15.0"``)."""
    from kinkcheck.report.model import release_ranges  # slow: msgspec, numpy

    envs = answer.report.environments
    return release_ranges([e.id for e in envs if e.framework_version in versions], envs)


def _mark(label: str | None) -> str:
    """A strip's letter for ``label`` (:data:`kinkcheck.report.text.LABEL_LETTER`, as the site draws it): a terminal
    may have no colour-emoji font, and the emoji tell left from right by shape alone."""
    from kinkcheck.report.text import LABEL_LETTER, NO_OBSERVATION_LETTER  # slow: msgspec, numpy

    return LABEL_LETTER.get(label, "?") if label else NO_OBSERVATION_LETTER


def _key(labels: Sequence[str | None]) -> str:
    """The strip's letters spelled out, in the order they first appear: ``L left, R right``."""
    return ", ".join(f"{_mark(label)} {label or 'no observation'}" for label in dict.fromkeys(labels))


def _cell_text(cell: Any) -> str:
    """A cell's value and label (its numbers as :func:`kinkcheck.language.decimals.decimal` prints them), then each other
    dtype that differs."""
    face = cell.face
    if face is None:
        return cell.why or "no observation"
    ob = {o.dtype: o for o in reversed(cell.obs)}  # the first observation of each dtype

    def value(dtype: str | None, shown: str) -> str:
        o = ob.get(dtype) if dtype is not None else (cell.obs[0] if cell.obs else None)
        return decimal_value(o.value) if o is not None and o.value is not None else shown

    text = f"{value(None, face.value)} {face.label}" if face.status == "ok" else face.status
    others = [f"{dt}: {value(dt, f.value)} {f.label}" if f.status == "ok" else f"{dt}: {f.status}"
              for dt, f in cell.others]
    return text + (f" ({'; '.join(others)})" if others else "")


# --------------------------------------------------------------------------- the benchmark


#: ``kinkcheck ask`` across every torch release of the matrix (issue 34): cold (no environment, nothing measured),
#: warm (the environments and the answers kept).
ASK_COLD_TARGET_S, ASK_WARM_TARGET_S = 600.0, 60.0


def _timed(cmd: list[str], env: dict[str, str]) -> tuple[float, Any]:
    started = time.monotonic()
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, check=False)
    return time.monotonic() - started, proc


def speed(releases: str, program: str = "torch.clamp(x, min=0)", at: str = "x=0",
          fresh_program: str = "torch.clamp(x, min=0) * 2") -> int:
    """``kinkcheck ask`` timed in a fresh ``$KINKCHECK_ASK_HOME``, cold (nothing kept) then warm (the same question
    again), for two questions:

    - ``program`` at ``at``, a catalog program, across every torch release of the matrix (``--all``): answered from
      the report's cells;
    - ``fresh_program`` at ``at``, a program the catalog lacks, across the releases in ``releases``: measured here,
      each release's virtualenv made (the installer's cache empty) and every mode and dtype probed. The figure is
      only for the releases asked (a torch environment from PyPI takes ~5.5 GB of disk); a figure for the whole
      matrix at that rate is arithmetic, printed as such.
    """
    import tempfile  # slow to import

    try:
        chosen = releases_asked("torch", releases=releases)
    except UsageError as err:
        print(f"bench --ask: {err}", file=sys.stderr)
        return 2
    matrix = list(releases_asked("torch", every=True))
    rows = []
    with tempfile.TemporaryDirectory(prefix="kinkcheck-ask-bench-") as folder:
        env = {**os.environ, ENV_HOME: folder}
        for expr, spec, n in ((program, ["--all"], len(matrix)), (fresh_program, ["--releases", releases], len(chosen))):
            cmd = [sys.executable, "-m", "kinkcheck", "ask", expr, "--at", at, *spec]
            for what in ("cold", "warm"):
                seconds, proc = _timed(cmd, env)
                if proc.returncode != 0:
                    print(f"{expr} ({what}) failed (exit {proc.returncode}): {proc.stderr.strip().splitlines()[-1:]}")
                    return 1
                per = [ln.strip() for ln in proc.stderr.splitlines() if "measured in" in ln]
                rows.append((expr, what, n, seconds, per))
    print(f"kinkcheck ask --at {at}: the matrix has {len(matrix)} torch releases; {releases!r} holds "
          f"{len(chosen)} ({', '.join(chosen)})")
    for expr, what, n, seconds, per in rows:
        target = ASK_COLD_TARGET_S if what == "cold" else ASK_WARM_TARGET_S
        whole = "" if n == len(matrix) else f"   whole matrix at this rate: {seconds / n * len(matrix):7.1f} s (arithmetic)"
        print(f"  {expr!r:<32} {what:<5} {n:>2} release(s) {seconds:8.1f} s   {seconds / n:6.1f} s a release   "
              f"target for the whole matrix <= {target:.0f} s{whole}")
        for line in per:
            print(f"      {line}")
    print(f"  ({program!r} is a catalog program: answered from the report's cells; {fresh_program!r} is not: cold, "
          "each release's virtualenv made with an empty installer cache while the one before is measured, every mode "
          "and dtype probed; warm: the same question again, answered from its shards)")
    return 0


# --------------------------------------------------------------------------- the command


def command(args: Any) -> int:
    """``kinkcheck ask`` (:mod:`kinkcheck.faces.ask` parses its arguments)."""
    q = question(args.expr, args.at, args.framework, args.sympy, tie=args.tie, live=args.live)
    known = FRAMEWORK_MODES.get(q.framework, ())
    for mode in args.mode or ():
        if mode not in known:
            raise UsageError(f"{q.framework} has no mode {mode!r} (its modes: {', '.join(known)})")
    for dtype in args.dtype or ():
        if dtype not in DTYPES:
            raise UsageError(f"unknown dtype {dtype!r} (known: {', '.join(DTYPES)})")
    if args.stage is not None and not args.stage.strip():
        raise UsageError("--stage needs an id (the case id to stage, e.g. relu-written@0)")
    if (args.title or args.catalog) and not args.stage:
        raise UsageError("--title and --catalog go with --stage ID")

    modes, dtypes = list(args.mode or ()), list(args.dtype or ())
    explicit = bool(args.release or args.releases is not None or args.all)
    installed = installed_release(q.framework)
    device = getattr(args, "device", "cpu") or "cpu"
    if device != "cpu":  # the report's cells on that device, never measured here
        on_device = device_releases(q.framework, device, args.report)
        if args.live:
            raise UsageError(f"--live measures here, on the CPU: --device {device} answers from the report's cells")
        if q.case is None or not on_device:
            what = ("measured no release of it there" if not on_device else
                    f"measured {q.framework} there in {', '.join(on_device)}, but only the catalog's programs at their "
                    "cases' points")
            raise UsageError(f"not measured: kinkcheck ask measures on the CPU and answers --device {device} from the "
                             f"report, which {what}; {q.expr} at {args.at} is not among its {device} cells")
        releases = (releases_asked(q.framework, args.release or (), args.releases, args.all) if explicit
                    else on_device)
        chosen = releases
    elif args.live or q.case is not None:  # measured (or the report's cells) in every release asked, as before
        releases = releases_asked(q.framework, args.release or (), args.releases, args.all)
        chosen = releases
    else:  # a program the catalog lacks: predicted in every release asked, measured live in the installed one only
        chosen = releases_asked(q.framework, args.release or (), args.releases, args.all) if explicit else []
        releases = [installed] if installed else []
        modes, dtypes = modes or ["reverse"], dtypes or ["float64"]
    disk_budget(args.disk_budget)  # bad input before anything is installed
    if args.stage:
        catalog = Path(args.catalog) if args.catalog else Path("references/catalog.toml")
        for path in stage(q, args.stage, catalog, args.title):
            print(f"staged {args.stage}: wrote {path}", file=sys.stderr)
    forecast = predicted.predictions(q.expr, q.at, q.framework, releases=chosen or None,
                                     modes=modes or ["reverse"], dtypes=dtypes or ["float64"], device=device,
                                     report=args.report)
    answer = (ask(q, releases, modes=modes, dtypes=dtypes, disk_budget_gb=args.disk_budget, quiet=args.quiet,
                      live=args.live, report=args.report, device=device) if releases else None)
    if device != "cpu" and answer is not None and answer.report is None:  # none of the releases asked is there
        raise UsageError(f"not measured: the report holds no {device} cell of {q.expr} at {args.at} in "
                         f"{', '.join(releases)} (it measured {q.framework} on {device} in "
                         f"{', '.join(device_releases(q.framework, device, args.report))}); kinkcheck ask measures "
                         "on the CPU only")
    differs = _prediction_differs(answer, forecast, installed)
    if args.json:
        from kinkcheck.report.model import report_json  # slow: msgspec, numpy

        print(json.dumps({"question": {"expr": q.expr, "at": q.at, "framework": q.framework, "sympy": q.sympy,
                                       "case": q.case, "tie": q.tie},
                          "releases": answer.releases if answer else [],
                          "not_measured": answer.not_measured if answer else
                          {"installed": f"{q.framework} is not installed here: predicted only"},
                          "sources": answer.sources if answer else {},
                          "device": device, "measured_here": device == "cpu" and bool(answer and "live" in
                                                                                      answer.sources.values()),
                          "report_path": answer.report_path if answer else None,
                          "report": None if answer is None or answer.report is None
                          else json.loads(report_json(answer.report)),
                          "predicted": forecast["predicted"], "predicted_reason": forecast["reason"],
                          "prediction_differs": differs}))
    else:
        if answer is not None:
            sys.stdout.write(render(answer))
        else:
            print(f"{q.framework} is not installed here: nothing measured live (predicted only)")
        sys.stdout.write(predicted.render(forecast))
        for line in differs:
            print(f"note: {line}")
    return 0 if answer is None or answer.report is not None else EXIT_BAD_INPUT


def _prediction_differs(answer: Any, forecast: dict[str, Any], installed: str | None) -> list[str]:
    """Where the installed release was measured and predicted, in the same mode and dtype, with different values:
    one line each (the prediction is wrong there, or the program does something its operations' rules do not)."""
    from kinkcheck.oracles.classify import same_value  # slow: numpy

    if answer is None or answer.report is None or installed is None:
        return []
    out = []
    for p in forecast["predicted"]:
        if p["release"] != installed or p["value"] is None:
            continue
        for o in answer.report.observations:
            env = next((e for e in answer.report.environments if e.id == o.environment), None)
            if (env is None or env.framework_version != installed or o.mode != p["mode"] or o.dtype != p["dtype"]
                    or o.status != "ok" or o.value is None):
                continue
            got, want = flat_value(o.value), flat_value(p["value"])
            if not same_value(got, want, o.dtype):

                out.append(f"{installed} {o.mode} {o.dtype}: measured {decimal_value(o.value)} but the rules predict "
                           f"{decimal_value(p['value'])} (the point may not be a kink in floating point, or the "
                           "program is not the composition of its operations' rules: docs/rules.md)")
    return out
