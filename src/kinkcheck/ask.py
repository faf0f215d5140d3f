"""``kinkcheck ask``: any program, measured the way the catalog's programs are, across releases.

A question is a program and a point (``kinkcheck ask "torch.clamp(x, min=0)" --at x=0``). It becomes a one-case
catalog in its own folder (the case's function is the program's sympy form, :func:`kinkcheck.oracles.mapping.
sympy_form`, or the ``--sympy`` text), and every release asked for measures it with ``kinkcheck probe``, as the
catalog is measured: every mode and dtype of the framework, compiled modes in a batch, each cell in the worker
with its limits, the provenance in the shard. The installed release is measured with this interpreter; any other
release in a virtualenv of its own (the environments of :mod:`kinkcheck.probe.environments`: the Python it has
wheels for, its requirements from the registry, kinkcheck's dependencies), kept between questions within a disk
budget, the least recently used removed first. The shards are then judged as the report judges a case
(:func:`kinkcheck.report.build.build`) and printed as a case page shows a program: the values over releases with
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
import shutil
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kinkcheck.errors import UsageError

__all__ = ["DEFAULT_DISK_BUDGET_GB", "ENV_HOME", "Answer", "Question", "ask", "home", "measure", "question",
           "releases_asked", "render", "stage", "write_catalog"]

#: The folder questions and their environments are kept in (default: the user cache folder's ``kinkcheck/ask``).
ENV_HOME = "KINKCHECK_ASK_HOME"
#: Disk the kept virtualenvs may take, in GB (``--disk-budget``; ``$KINKCHECK_ASK_DISK_GB``): a torch release's is
#: about 1.5 GB.
DEFAULT_DISK_BUDGET_GB = 20.0
ENV_DISK = "KINKCHECK_ASK_DISK_GB"
#: Frameworks whose programs the catalog file itself holds; the others' are in ``programs/<name>.toml``.
_INLINE = ("torch", "jax")


def home() -> Path:
    """Where questions and their virtualenvs are kept."""
    env = os.environ.get(ENV_HOME)
    if env is not None:
        if not env.strip():
            raise UsageError(f"{ENV_HOME} is empty: name a folder, or unset it for the user cache folder")
        return Path(env)
    import platformdirs

    return Path(platformdirs.user_cache_dir("kinkcheck")) / "ask"


# --------------------------------------------------------------------------- the question


@dataclass(frozen=True)
class Question:
    """A program at a point: ``expr`` (canonical text), ``at`` (input name → number or nested list), its
    ``framework``, and the function it computes in the catalog's sympy language (``sympy``)."""

    expr: str
    at: dict[str, Any]
    framework: str
    sympy: str

    @property
    def digest(self) -> str:
        """Names the question's folder: the program, the point, the framework and the function."""
        raw = json.dumps([self.expr, self.at, self.framework, self.sympy], sort_keys=True)
        return hashlib.sha256(raw.encode()).hexdigest()[:16]

    @property
    def case_id(self) -> str:
        return f"ask@{self.digest[:8]}"

    @property
    def title(self) -> str:
        return f"{self.expr} at {', '.join(f'{k} = {v}' for k, v in self.at.items())}"

    def write_catalog(self, folder: Path) -> Path:
        """The one-case catalog of this question in ``folder``; its path (:func:`write_catalog`)."""
        return write_catalog([self], folder)

    def case_toml(self, case_id: str) -> str:
        at = ", ".join(f"{k} = {_toml_value(v)}" for k, v in self.at.items())
        return (f"[[case]]\nid = {_toml_str(case_id)}\ntitle = {_toml_str(self.title)}\nsympy = {_toml_str(self.sympy)}\n"
                f"at = {{ {at} }}\n")


def write_catalog(questions: Sequence[Question], folder: Path) -> Path:
    """A catalog of ``questions``, one case each (``catalog.toml``, and ``programs/<framework>.toml`` for a framework
    the catalog file does not hold), in ``folder``; its path."""
    folder.mkdir(parents=True, exist_ok=True)
    cases, files = [], {}
    for q in questions:
        case = q.case_toml(q.case_id)
        if q.framework in _INLINE:
            case += f"[case.programs]\n{q.framework} = [{_toml_str(q.expr)}]\n"
        else:
            files.setdefault(q.framework, []).append(f"[{_toml_str(q.case_id)}]\nprograms = [{_toml_str(q.expr)}]\n")
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


def question(expr: str, at: str, framework: str | None = None, sympy_text: str | None = None) -> Question:
    """Parse and check a question: one framework's program, a finite point it uses whole, and the function it
    computes (the mapping's sympy form, else ``sympy_text``). Raises UsageError (one line) on bad input."""
    from kinkcheck import expr as ex
    from kinkcheck import points as pt
    from kinkcheck.catalog import FRAMEWORKS, SYMPY_NAMES

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
    if sympy_text is None:
        from kinkcheck.oracles.mapping import Unmapped, sympy_form

        try:
            sympy_text = sympy_form(tree, point, fw).text
        except Unmapped as err:
            raise UsageError(f"kinkcheck cannot write {text} in sympy ({err}); give its function with --sympy "
                             "TEXT (the catalog's language: Max, Min, Abs, Piecewise, …)") from None
    return Question(text, point, fw, sympy_text)


# --------------------------------------------------------------------------- a question into the catalog


def stage(q: Question, case_id: str, catalog_path: Path, title: str | None = None) -> list[Path]:
    """Write ``q`` as a staged case ``case_id`` beside the catalog at ``catalog_path`` (``staged/catalog.toml`` and
    ``staged/programs/<framework>.toml``): its framework's program, and for every other framework a ``no_equivalent``
    reason that starts with :data:`~kinkcheck.catalog.DRAFT_REASON` (``nox -s report`` measures the case; moving it
    into the catalog waits until each is written). The files written. Raises UsageError (one line, nothing
    written) for a catalog that is not there, an id in use, or a case the catalog's checks refuse."""
    import tempfile

    from kinkcheck.catalog import DRAFT_REASON, PROGRAMS_DIR, CatalogError, forget_loaded, load_catalog, staged_path
    from kinkcheck.shards import write_text_atomic

    if not catalog_path.is_file():
        raise UsageError(f"--stage writes beside a checkout's catalog: no {catalog_path} (run it in the checkout, or "
                         "pass --catalog)")
    try:
        catalog = load_catalog(catalog_path)
    except CatalogError as err:
        raise UsageError(str(err)) from None
    import re

    from kinkcheck.anchors import slug

    if not re.fullmatch(r"[A-Za-z0-9_.+\-]+@[^\s\"'\\]+", case_id):
        raise UsageError(f"--stage {case_id!r}: a case id is <function>@<point>, e.g. relu6@6 (no spaces or quotes)")
    if any(c.id == case_id for c in catalog):
        raise UsageError(f"--stage {case_id}: the catalog has a case {case_id}; choose another id")
    same = next((c.id for c in catalog if slug(c.id) == slug(case_id)), None)
    if same is not None:
        raise UsageError(f"--stage {case_id}: reads as the catalog's {same} in a report page name; choose another id")
    staged = staged_path(catalog_path)
    from kinkcheck.catalog import staged_case_ids

    if case_id in staged_case_ids(catalog_path):
        raise UsageError(f"--stage {case_id}: already staged in {staged}; choose another id, or edit the staged case")
    program_files = sorted(f.stem for f in (catalog_path.parent / PROGRAMS_DIR).glob("*.toml"))
    draft = (f"{DRAFT_REASON}: staged by kinkcheck ask from {q.framework}'s {q.expr}; write this framework's "
             "program, or why it has none")
    case = q.case_toml(case_id)
    if title:
        case = case.replace(f"title = {_toml_str(q.title)}", f"title = {_toml_str(title)}", 1)
    inline = {fw: (f"{fw} = [{_toml_str(q.expr)}]" if fw == q.framework else None) for fw in _INLINE}
    programs = [line for line in inline.values() if line]
    missing = [f"{fw} = {_toml_str(draft)}" for fw, line in inline.items() if line is None]
    case += ("[case.programs]\n" + "\n".join(programs) + "\n" if programs else "")
    case += ("[case.no_equivalent]\n" + "\n".join(missing) + "\n" if missing else "")
    texts = {staged: (staged.read_text() + "\n" if staged.is_file() else
                      "# Staged cases: measured into the shards, reported once moved (python -m kinkcheck.staging).\n\n")
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


# --------------------------------------------------------------------------- which releases


def installed_release(framework: str) -> str | None:
    """The release of ``framework`` installed beside kinkcheck (its public version, as the probe names its
    environment: ``2.13.0`` for ``2.13.0+cpu``), or None."""
    from importlib import metadata

    from packaging.version import InvalidVersion, Version

    from kinkcheck.registry import REGISTRY

    try:
        found = metadata.version(REGISTRY[framework].distribution)
    except metadata.PackageNotFoundError:
        return None
    try:
        return Version(found).public
    except InvalidVersion:
        return found


def releases_asked(framework: str, release: Sequence[str] = (), releases: str | None = None,
                   every: bool = False) -> list[str]:
    """The releases a question is asked of, oldest first: ``release`` (each one of the matrix or the installed
    one), the matrix's releases in the specifier ``releases`` (``">=2.0"``), or ``every`` one of the matrix; by
    default the installed release. Raises UsageError for a release kinkcheck does not know or an empty choice."""
    from packaging.specifiers import InvalidSpecifier, SpecifierSet
    from packaging.version import InvalidVersion, Version

    from kinkcheck.registry import REGISTRY

    matrix = list(REGISTRY[framework].versions)
    installed = installed_release(framework)
    known = matrix + ([installed] if installed and installed not in matrix else [])
    chosen: list[str] = []
    for r in release:
        if r not in known:
            raise UsageError(f"unknown release {r!r} of {framework}: kinkcheck asks the releases of its matrix "
                             f"({', '.join(matrix)}) and the installed one ({installed or 'none'})")
        chosen.append(r)
    if releases is not None:
        if not releases.strip():
            raise UsageError("--releases is empty: give a version specifier (e.g. '>=2.0'), or --all")
        try:
            spec = SpecifierSet(releases)
        except InvalidSpecifier:
            raise UsageError(f"--releases {releases!r} is not a version specifier (e.g. '>=2.0,<2.14')") from None
        inside = [v for v in known if Version(v) in spec]
        if not inside:
            raise UsageError(f"--releases {releases!r} holds none of {framework}'s releases ({', '.join(known)})")
        chosen += inside
    if every:
        chosen += matrix
    if not (release or releases is not None or every):
        if installed is None:
            raise UsageError(f"{framework} is not installed here: name the releases to ask (--release, --releases, "
                             "--all)")
        chosen = [installed]
    try:
        return sorted(dict.fromkeys(chosen), key=Version)
    except InvalidVersion as err:  # an installed development build
        raise UsageError(str(err)) from None


# --------------------------------------------------------------------------- environments


class _Log:
    """What the environment helpers report (they were written for a nox session): progress on stderr."""

    def __init__(self, quiet: bool) -> None:
        self.quiet = quiet

    def log(self, message: str) -> None:
        if not self.quiet:
            print(f"  {message}", file=sys.stderr, flush=True)

    warn = log


def _dependencies() -> list[str]:
    """kinkcheck's own requirements (no extras), installed beside a release so that its probe runs there."""
    from importlib import metadata

    from packaging.requirements import Requirement

    try:
        reqs = metadata.requires("kinkcheck") or []
    except metadata.PackageNotFoundError:
        raise UsageError("kinkcheck is not installed (pip install kinkcheck, or pip install -e . in a checkout): "
                         "its requirements are what a release's environment installs beside it") from None
    return [r for r in reqs if Requirement(r).marker is None]


def _source_copy(root: Path) -> Path:
    """This kinkcheck's package, copied once per content into ``root/src-<digest>/kinkcheck``: a release's
    environment imports it through ``PYTHONPATH`` (nothing of this interpreter's site-packages)."""
    import kinkcheck

    package = Path(kinkcheck.__file__).parent
    files = sorted(p for p in package.rglob("*") if p.is_file() and "__pycache__" not in p.parts)
    h = hashlib.sha256()
    for p in files:
        h.update(p.relative_to(package).as_posix().encode() + b"\0" + p.read_bytes())
    dest = root / f"src-{h.hexdigest()[:16]}"
    if not (dest / "kinkcheck" / "__init__.py").exists():
        tmp = root / f".{dest.name}.{os.getpid()}"
        shutil.rmtree(tmp, ignore_errors=True)
        shutil.copytree(package, tmp / "kinkcheck", ignore=shutil.ignore_patterns("__pycache__"))
        with contextlib.suppress(OSError):  # another ask made it meanwhile
            tmp.rename(dest)
        shutil.rmtree(tmp, ignore_errors=True)
    for old in root.glob("src-*"):  # earlier kinkchecks' copies
        if old != dest:
            shutil.rmtree(old, ignore_errors=True)
    return dest


def _disk(path: Path) -> int:
    total = 0
    for p in path.rglob("*"):
        with contextlib.suppress(OSError):
            if p.is_file() and not p.is_symlink():
                total += p.stat().st_size
    return total


def _evict(envs: Path, budget_bytes: float, keep: set[Path], log: _Log) -> None:
    """Remove the least recently used virtualenvs until those left take at most ``budget_bytes`` (never one in
    ``keep``: this question's)."""
    kept = [p for p in envs.iterdir() if p.is_dir() and not p.name.startswith(".")] if envs.is_dir() else []
    used = {p: (p / ".last-used").stat().st_mtime if (p / ".last-used").exists() else 0.0 for p in kept}
    sizes = {p: _disk(p) for p in kept}
    total = sum(sizes.values())
    for p in sorted(kept, key=lambda q: used[q]):
        if total <= budget_bytes:
            break
        if p in keep:
            continue
        log.log(f"removing {p.name} ({sizes[p] / 1e9:.1f} GB): the kept environments exceed the disk budget of "
                f"{budget_bytes / 1e9:g} GB")
        shutil.rmtree(p, ignore_errors=True)
        total -= sizes[p]


def environment(framework: str, version: str, root: Path, log: _Log) -> tuple[str, dict[str, str]] | str:
    """The interpreter and environment variables that run kinkcheck with ``framework`` ``version``: this one for
    the installed release, else a kept virtualenv (made and installed on first use). A string: why there is none."""
    from kinkcheck.probe import environments as envs

    if version == installed_release(framework):
        return sys.executable, {}
    venv = root / "envs" / f"{framework}-{version}"
    cache = root / "envs" / ".cache"
    reqs = envs.requirements(framework, version)
    if not reqs:
        return f"no build of {framework} {version} for this machine on a package registry"
    log.log(f"{framework} {version}: environment {venv}")
    reason = (envs._make_venv(log, venv, envs.python_for(framework, version))
              or envs._install(log, venv, [*reqs, *_dependencies()], cache, root))
    if reason is not None:
        return reason
    (venv / ".last-used").touch()
    return str(envs.venv_python(venv)), {"PYTHONPATH": str(_source_copy(root / "envs"))}


# --------------------------------------------------------------------------- measuring and judging


@dataclass
class Answer:
    """A question's shards judged: the one-case report, and each release not measured with the reason."""

    question: Question
    releases: list[str]
    report: Any
    not_measured: dict[str, str]


def _shard_path(folder: Path, framework: str, version: str) -> Path:
    from kinkcheck import platforms as plat

    return folder / "shards" / f"{plat.environment_id(framework, version, 'cpu', plat.host_tag())}.json"


def _fresh(shard: Path, catalog: Any, framework: str, modes: Sequence[str], dtypes: Sequence[str]) -> bool:
    from kinkcheck.probe.plan import missing_work
    from kinkcheck.shards import read_shard

    if not shard.exists():
        return False
    try:
        data = read_shard(shard)
    except Exception:  # noqa: BLE001  an unreadable shard is measured again
        return False
    return missing_work(data, catalog, framework, modes or None, dtypes or None).fresh


def ask(q: Question, releases: Sequence[str], *, modes: Sequence[str] = (), dtypes: Sequence[str] = (),
        disk_budget_gb: float | None = None, quiet: bool = False, timeout_s: float | None = None) -> Answer:
    """Measure ``q`` in each of ``releases`` (only what its shard lacks) and judge the shards."""
    return measure([q], releases, modes=modes, dtypes=dtypes, disk_budget_gb=disk_budget_gb, quiet=quiet,
                   timeout_s=timeout_s)


def measure(questions: Sequence[Question], releases: Sequence[str], *, modes: Sequence[str] = (),
            dtypes: Sequence[str] = (), disk_budget_gb: float | None = None, quiet: bool = False,
            timeout_s: float | None = None) -> Answer:
    """Measure ``questions`` (one framework's) in each of ``releases``, one probe of their catalog per release
    (only what its shard lacks), and judge the shards as the report judges its cases."""
    from kinkcheck.catalog import load_catalog
    from kinkcheck.report.build import build
    from kinkcheck.shards import read_shard

    frameworks = {q.framework for q in questions}
    if len(frameworks) != 1:
        raise ValueError(f"measure: questions of one framework, got {sorted(frameworks)}")
    framework = frameworks.pop()
    root = home()
    digest = hashlib.sha256("".join(sorted(q.digest for q in questions)).encode()).hexdigest()[:16]
    folder = root / "questions" / (questions[0].digest if len(questions) == 1 else digest)
    catalog_path = write_catalog(questions, folder)
    catalog = load_catalog(catalog_path)
    log = _Log(quiet)
    budget = disk_budget(disk_budget_gb)
    not_measured: dict[str, str] = {}
    used: set[Path] = set()
    for version in releases:
        shard = _shard_path(folder, framework, version)
        if _fresh(shard, catalog, framework, modes, dtypes):
            log.log(f"{framework} {version}: measured before ({shard})")
            continue
        started = time.monotonic()
        got = environment(framework, version, root, log)
        if isinstance(got, str):
            not_measured[version] = got
            log.log(f"{framework} {version}: not measured: {got}")
            continue
        python, extra = got
        used.add(root / "envs" / f"{framework}-{version}")
        cmd = [python, "-m", "kinkcheck", "probe", "--framework", framework, "--catalog", str(catalog_path),
               "--out", str(shard), "--quiet", *[a for m in modes for a in ("--mode", m)],
               *[a for d in dtypes for a in ("--dtype", d)]]
        log.log(f"{framework} {version}: measuring " + (", ".join([*modes, *dtypes]) or "every mode and dtype"))
        proc = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, **extra}, check=False,
                              timeout=timeout_s)
        if proc.returncode != 0 or not shard.exists():
            lines = [ln for ln in (proc.stderr or proc.stdout).splitlines() if ln.strip()]
            not_measured[version] = f"the probe failed ({lines[-1][:200] if lines else f'exit {proc.returncode}'})"
            log.log(f"{framework} {version}: not measured: {not_measured[version]}")
            continue
        log.log(f"{framework} {version}: measured in {time.monotonic() - started:.0f} s")
    if used:
        _evict(root / "envs", budget, used, log)
    shards = [read_shard(p) for v in releases if (p := _shard_path(folder, framework, v)).exists()
              and v not in not_measured]
    for s in shards:  # the cells asked for: a shard measured before may hold more
        s["observations"] = [o for o in s["observations"] if (not modes or o["mode"] in modes)
                             and (not dtypes or o["dtype"] in dtypes)]
    report = build(shards, catalog) if shards else None
    return Answer(questions[0], list(releases), report, not_measured)


def disk_budget(gb: float | None) -> float:
    """The disk budget of the kept virtualenvs in bytes: ``gb``, else ``$KINKCHECK_ASK_DISK_GB``, else the
    default. Raises UsageError for one that is not a positive number."""
    import math

    raw: Any = gb if gb is not None else os.environ.get(ENV_DISK, DEFAULT_DISK_BUDGET_GB)
    try:
        value = float(raw)
    except (TypeError, ValueError):
        value = math.nan
    if not (math.isfinite(value) and value > 0):
        where = "--disk-budget" if gb is not None else ENV_DISK
        raise UsageError(f"{where} must be a number of GB above 0, got {raw!r}")
    return value * 1e9


# --------------------------------------------------------------------------- printing


def render(answer: Answer) -> str:
    """The answer as a case page shows a program, in text: the oracle, the values over releases with their
    labels (other dtypes where they differ), what changed where, the modes of the newest release, errors."""
    from kinkcheck.report.text import clarke_text, fmt_exact, oracle_finding
    from kinkcheck.report.view import report_view

    q = answer.question
    out = [f"{q.expr} at {', '.join(f'{k} = {v}' for k, v in q.at.items())}"]
    for version, why in answer.not_measured.items():
        out.append(f"{q.framework} {version}: not measured: {why}")
    if answer.report is None:
        out.append("nothing measured")
        return "\n".join(out) + "\n"
    view = report_view(answer.report)
    cv = view.case_view(answer.report.cases[0].id)
    oracle = cv.oracle
    finding = oracle_finding(oracle.kind, oracle.lipschitz)
    out.append(f"f = {q.sympy}: {finding}")
    if oracle.kind == "not-judged":
        out.append(f"  not judged: {oracle.reason}")
    elif oracle.left is not None or oracle.clarke is not None:
        sides = (f"one-sided f'(x0-) = {fmt_exact(oracle.left)}, f'(x0+) = {fmt_exact(oracle.right)}; "
                 if oracle.left is not None else "")
        out.append(f"  {sides}Clarke generalized gradient {clarke_text(oracle)}"
                   + (f", min-norm {fmt_exact(oracle.min_norm)}" if oracle.min_norm else ""))
    for table in cv.tables if any(o.mode == "reverse" for o in answer.report.observations) else ():
        for row in table.rows:
            out.append(f"\n{table.framework}, reverse mode, {len(table.columns)} release(s) ({table.span}); float64, "
                       "other dtypes in parentheses where they differ:")
            out.append("  " + "".join(_mark(sq.cell.label) for sq in row.strip))
            for _device, runs in row.runs:
                for run in runs:
                    out.append(f"  {run.releases}: {_cell_text(run.cell)}")
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
            out.append(f"  {p.mode}, {', '.join(p.dtypes)} ({where}): {p.status}: {p.error}")
    return "\n".join(out) + "\n"


def _mark(label: str | None) -> str:
    from kinkcheck.report.text import mark

    return mark(label).emoji if label else "·"


def _cell_text(cell: Any) -> str:
    face = cell.face
    if face is None:
        return cell.why or "no observation"
    text = f"{face.value} {face.label}" if face.status == "ok" else face.status
    others = [f"{dt}: {f.value} {f.label}" if f.status == "ok" else f"{dt}: {f.status}" for dt, f in cell.others]
    return text + (f" ({'; '.join(others)})" if others else "")


# --------------------------------------------------------------------------- the benchmark


#: ``kinkcheck ask`` across every torch release of the matrix (issue 34): cold (no environment, nothing measured),
#: warm (the environments and the answers kept).
ASK_COLD_TARGET_S, ASK_WARM_TARGET_S = 600.0, 60.0


def speed(releases: str, program: str = "torch.clamp(x, min=0)", at: str = "x=0") -> int:
    """``kinkcheck ask PROGRAM --at AT --releases SPEC`` twice in a fresh ``$KINKCHECK_ASK_HOME``: cold (each
    release's virtualenv made and installed, every mode and dtype measured) and warm (the same question again:
    answered from its shards), each with its figure per release, beside the targets for the whole torch matrix.
    The cold figure is only for the releases asked (a torch environment from PyPI takes ~5.5 GB of disk)."""
    import os
    import subprocess
    import sys
    import tempfile
    import time

    try:
        chosen = releases_asked("torch", releases=releases)
    except UsageError as err:
        print(f"bench --ask: {err}", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory(prefix="kinkcheck-ask-bench-") as home:
        env = {**os.environ, "KINKCHECK_ASK_HOME": home}
        cmd = [sys.executable, "-m", "kinkcheck", "ask", program, "--at", at, "--releases", releases]
        runs = []
        for what in ("cold", "warm"):
            started = time.monotonic()
            proc = subprocess.run(cmd, capture_output=True, text=True, env=env, check=False)
            runs.append((what, time.monotonic() - started, proc))
            if proc.returncode != 0:
                print(f"{what} run failed (exit {proc.returncode}): {proc.stderr.strip().splitlines()[-1:]}")
                return 1
        per = [ln.strip() for ln in runs[0][2].stderr.splitlines() if "measured in" in ln]
    n = len(chosen)
    print(f"kinkcheck ask {program!r} --at {at} --releases {releases!r}: {n} torch release(s) ({', '.join(chosen)})")
    for what, seconds, _ in runs:
        target = ASK_COLD_TARGET_S if what == "cold" else ASK_WARM_TARGET_S
        print(f"  {what:<5} {seconds:8.1f} s   {seconds / n:7.1f} s a release   target for the whole matrix "
              f"<= {target:.0f} s")
    for line in per:
        print(f"    {line}")
    print("  (cold: each release's virtualenv made and installed with an empty cache, then every mode and dtype "
          "measured; warm: the same question again, answered from its shards)")
    return 0


# --------------------------------------------------------------------------- the command


def command(args: Any) -> int:
    """``kinkcheck ask`` (:mod:`kinkcheck.cli` parses its arguments)."""
    import sys

    from kinkcheck import ask
    from kinkcheck.errors import EXIT_BAD_INPUT
    from kinkcheck.vocabulary import DTYPES, FRAMEWORK_MODES

    q = ask.question(args.expr, args.at, args.framework, args.sympy)
    known = FRAMEWORK_MODES.get(q.framework, ())
    for mode in args.mode or ():
        if mode not in known:
            raise UsageError(f"{q.framework} has no mode {mode!r} (its modes: {', '.join(known)})")
    for dtype in args.dtype or ():
        if dtype not in DTYPES:
            raise UsageError(f"unknown dtype {dtype!r} (known: {', '.join(DTYPES)})")
    if (args.title or args.catalog) and not args.stage:
        raise UsageError("--title and --catalog go with --stage ID")
    releases = ask.releases_asked(q.framework, args.release or (), args.releases, args.all)
    ask.disk_budget(args.disk_budget)  # bad input before anything is installed
    if args.stage:
        catalog = Path(args.catalog) if args.catalog else Path("references/catalog.toml")
        for path in ask.stage(q, args.stage, catalog, args.title):
            print(f"staged {args.stage}: wrote {path}", file=sys.stderr)
    answer = ask.ask(q, releases, modes=args.mode or (), dtypes=args.dtype or (), disk_budget_gb=args.disk_budget,
                     quiet=args.quiet)
    if args.json:
        from kinkcheck.report.model import report_json

        print(json.dumps({"question": {"expr": q.expr, "at": q.at, "framework": q.framework, "sympy": q.sympy},
                          "releases": answer.releases, "not_measured": answer.not_measured,
                          "report": None if answer.report is None else json.loads(report_json(answer.report))}))
    else:
        sys.stdout.write(ask.render(answer))
    return 0 if answer.report is not None else EXIT_BAD_INPUT
