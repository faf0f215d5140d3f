"""The report's typed model: one set of types that the builder fills and every consumer reads.

:class:`Report` is the ``kinkcheck/conventions/v2`` document (``reports/conventions.json``): environments,
cases with their oracle, observations, network cross-checks and the derived sections (disagreements, mode
disagreements, *Changed in*, conformance, coverage, summary). Types are :class:`msgspec.Struct` classes, so
the JSON is decoded straight into them, type-checked on the way (:func:`load_report`), encoded without an
intermediate dict (:func:`report_json`), and the JSON Schema is generated from them (:func:`json_schema`,
committed as ``schemas/conventions.v2.json``).

:class:`ReportIndex` is built once per report and answers every lookup a consumer needs (an environment or
case by id, the observation of one cell, the measured releases of a framework, a cell's flat value); no
module re-indexes the observation list for itself. :func:`release_ranges` and :func:`value_runs` say a run
of consecutive releases as a range (``1.13.1 – 2.13.0``), the way the report shows them.

Numbers
-------
A gradient component is a JSON number or, when not finite, the string ``"nan"``, ``"inf"`` or ``"-inf"``
(JSON has no non-finite numbers); :func:`kinkcheck.vocabulary.encode` writes them,
:func:`kinkcheck.vocabulary.flat_value` reads them back. A ``value`` maps each input name of the case
to a number (scalar input) or a nested list (vector, matrix), row-major, in the case's input order.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Sequence
from functools import cached_property
from pathlib import Path
from typing import Any, Literal

import msgspec

from kinkcheck.classify import LABELS, same_value
from kinkcheck.vocabulary import DTYPES, MODE_INFO, MODES, flat_value, flatten
from kinkcheck.platforms import DEFAULT as DEFAULT_PLATFORM
from kinkcheck.platforms import title as platform_title

__all__ = [
    "P0",
    "SCHEMA_ID",
    "Across",
    "Brief",
    "Case",
    "ChangedIn",
    "Conformance",
    "ConformanceRow",
    "Coverage",
    "Disagreements",
    "Environment",
    "Exact",
    "Group",
    "ModeDisagreements",
    "ModeRow",
    "NotMeasuredPart",
    "parts_by_reason",
    "Network",
    "NetworkSummary",
    "Newest",
    "Observation",
    "OperationCoverage",
    "Oracle",
    "P0Net",
    "P0Oracle",
    "P0Row",
    "ProgramRef",
    "Provenance",
    "Report",
    "ReportError",
    "ReportIndex",
    "Rule",
    "Summary",
    "VersionSpan",
    "Within",
    "DTYPES",
    "LABELS",
    "MODES",
    "MODE_INFO",
    "differs",
    "flat_value",
    "flatten",
    "json_schema",
    "load_report",
    "release_ranges",
    "release_title",
    "report_json",
    "value_runs",
]

SCHEMA_ID = "kinkcheck/conventions/v2"

#: A gradient component: a float, or "nan" / "inf" / "-inf".
Number = float | str
#: Input name → number or nested list of numbers (see the module docstring).
Value = dict[str, Any]
Status = Literal["ok", "error", "unavailable"]
#: The modes, dtypes and labels a report knows (:data:`kinkcheck.vocabulary.MODES`, ``DTYPES``,
#: :data:`kinkcheck.classify.LABELS`): enums in the decoder and the schema. Re-exported with ``MODE_INFO`` and
#: the value codec's readers, so that rendering (view, markdown, site, plots) imports the model and nothing below.
Mode = Literal[MODES]  # type: ignore[valid-type]
Dtype = Literal[DTYPES]  # type: ignore[valid-type]
Label = Literal[LABELS]  # type: ignore[valid-type]
Verdict = Literal["conforms", "departs", "open"]


class ReportError(ValueError):
    """A report file that cannot be used: missing, unreadable, not JSON, not a ``kinkcheck/conventions/v2``
    document, or one whose parts have the wrong types or refer to what it does not hold. ``str(err)`` is one
    line naming the file and the first problem."""


class _S(msgspec.Struct, kw_only=True, omit_defaults=True):
    """Base: keyword construction; fields equal to their default (None, empty) are left out of the JSON."""


# --------------------------------------------------------------------------- provenance and environments


class Provenance(_S, omit_defaults=False):
    """Where the report comes from. ``generated_at`` is derived, not a wall clock: the newest ``measured_at``
    (ISO 8601) among the environments, or ``"unknown"``, so the same shards render byte-identical files.
    ``observations_sha256`` is the SHA-256 (hex) of the ``observations.parquet`` written beside the JSON."""

    generated_at: str
    kinkcheck_version: str
    catalog_hash: str
    gaps: list[str] = []
    observations_sha256: str | None = None


class NotMeasuredPart(_S):
    """Cells of an environment's matrix that its shard does not hold, and why (``environment.not_measured_parts``
    of the shard: :func:`kinkcheck.probe.plan.withdraw`, :func:`kinkcheck.probe.plan.not_measured_modes`): one program's
    ``modes`` × ``dtypes`` (``case`` and ``program`` given), or whole ``modes`` of every case."""

    modes: list[str]
    reason: str
    case: str | None = None
    program: str | None = None
    dtypes: list[str] | None = None

    def covers(self, case: str, program: str, mode: str, dtype: str) -> bool:
        """Whether the cell (case, program, mode, dtype) is in this part."""
        if mode not in self.modes:
            return False
        return self.case is None or (self.case == case and self.program == program and dtype in (self.dtypes or ()))


def parts_by_reason(parts: Iterable[NotMeasuredPart]) -> list[tuple[str, list[NotMeasuredPart]]]:
    """``parts`` grouped by their reason, first-seen order (how the report, ``migrate`` and ``diff`` list them)."""
    groups: dict[str, list[NotMeasuredPart]] = {}
    for part in parts:
        groups.setdefault(part.reason, []).append(part)
    return list(groups.items())


class Environment(_S):
    """One measured (or not measured) framework release on one device: the shard's ``environment`` record
    without its per-case bookkeeping. ``not_measured`` says why a record holds no observation."""

    id: str
    framework: str
    framework_version: str
    device: str
    python: str
    platform: str
    measured_at: str
    kinkcheck_version: str
    catalog_hash: str
    framework_build: str | None = None
    device_name: str | None = None
    runner: dict[str, str] = {}
    settings: dict[str, str] = {}
    packages: dict[str, str] = {}
    dtypes: list[str] | None = None
    modes: list[str] | None = None
    history: list[dict[str, Any]] | None = None
    last_attempt: dict[str, str] | None = None
    not_measured: str | None = None
    not_measured_parts: list[NotMeasuredPart] = []
    platform_tag: str = DEFAULT_PLATFORM

    def why_not_measured(self, case: str, program: str, mode: str, dtype: str) -> str | None:
        """The reason a cell absent from this environment was not measured, where its shard records one."""
        return next((p.reason for p in self.not_measured_parts if p.covers(case, program, mode, dtype)), None)

    @property
    def place(self) -> str:
        """Where it was measured, as its id ends: the device (``"cpu"``, ``"cuda"``), then ``"-<platform tag>"``
        off Linux x86-64 (``"cpu-macos_arm64"``). Releases of one framework are compared within one place;
        ``"cpu"`` (Linux x86-64) is the reference place the others are compared with."""
        return self.device if self.platform_tag == DEFAULT_PLATFORM else f"{self.device}-{self.platform_tag}"

    @property
    def title(self) -> str:
        """``"2.13.0"`` on CPU, ``"2.13.0 cuda"`` elsewhere: how a column or a release list names it."""
        return release_title(self)

    @property
    def machine(self) -> str:
        """Where it was measured, from ``runner`` in one line, e.g. ``"Linux x86_64; NVIDIA H200 (driver 570.86,
        cuda 12.8); GitHub Actions runner gpu-1"``; "" for a shard that does not record it."""
        r = self.runner
        if not r:
            return ""
        head = " ".join(v for v in (r.get("os"), r.get("arch")) if v)
        if r.get("processor") and r.get("processor") != r.get("arch"):
            head += f", {r['processor']}"
        if r.get("vector_isa"):  # the widest: what BLAS/LAPACK dispatch on
            head += f" ({r['vector_isa'].split()[0]})"
        parts = [head]
        if r.get("accelerator"):
            extra = ", ".join(r[k] if r[k].startswith(f"{k} ") else f"{k} {r[k]}"  # JAX says "cuda 13000" itself
                              for k in ("driver", "cuda", "hip", "metal") if r.get(k))
            parts.append(f"{r['accelerator']} ({extra})" if extra else r["accelerator"])
        if r.get("ci_runner"):
            parts.append(f"GitHub Actions runner {r['ci_runner']}")
        return "; ".join(p for p in parts if p)


# --------------------------------------------------------------------------- cases and their oracle


class Exact(_S, omit_defaults=False, gc=False):
    """An exact oracle number: sympy's text (``"1/2"``, ``"sqrt(2)/2"``, ``"oo"``) and its float."""

    exact: str
    float_: Number = msgspec.field(name="float")


class Oracle(_S, omit_defaults=False):
    """What the sympy oracle says about a case, first order (the gradient) or second order (``H @ 1``):
    the JSON of :class:`kinkcheck.oracles.symbolic.OracleResult` (see there for each field's meaning).
    Vectors have one entry per component (``components``); ``None`` entries in ``sympy_diff`` are values
    sympy left unevaluated."""

    components: list[str]
    kind: Literal["differentiable", "kink", "jump", "undefined", "not-judged"]
    tie: bool = False
    derivative: list[Exact] | None = None
    left: Exact | None = None
    right: Exact | None = None
    limiting_gradients: list[list[Exact]] = []
    clarke: list[list[Exact]] | None = None
    min_norm: list[Exact] | None = None
    midpoint: list[Exact] | None = None
    sympy_diff: list[Exact | None] = []
    notes: list[str] = []
    shape: str | None = None
    reason: str | None = None
    lipschitz: bool | None = None
    left_piece: Exact | None = None
    right_piece: Exact | None = None


class ProgramRef(_S, frozen=True):
    """A program of a case, named by its framework and canonical text."""

    framework: str
    program: str


class Case(_S, kw_only=True):
    """A catalog case (``references/catalog.toml``) with its oracle: ``oracle`` judges the gradient modes,
    ``second_order`` the ``second-order`` mode (None when the case has none)."""

    id: str
    title: str
    sympy: str
    at: Value
    tie: bool
    sources: list[str]
    note: str | None
    programs: list[ProgramRef]
    notes: dict[str, str] = {}
    no_equivalent: dict[str, str] = {}
    oracle: Oracle
    second_order: Oracle | None = None

    def programs_of(self, framework: str) -> list[str]:
        """This case's programs of ``framework``, catalog order."""
        return [p.program for p in self.programs if p.framework == framework]


# --------------------------------------------------------------------------- observations and networks


class Observation(_S, gc=False):
    """One measured cell: the gradient ``program`` returned for ``case`` in ``environment``, ``mode`` and
    ``dtype``. ``labels`` judge it against the case's oracle (first label shown; precedence
    :data:`kinkcheck.classify.LABELS`); ``conformance`` is the verdict of the framework's own documented
    rule (reverse-like modes, float64/float32 only); ``input`` is the point as the dtype holds it, when
    rounding moved it."""

    case: str
    program: str
    framework: str
    environment: str
    mode: Mode
    dtype: Dtype
    status: Status
    value: Value | None
    labels: list[Label]
    error: str | None
    conformance: Verdict | None = None
    input: Value | None = None


class Network(_S, omit_defaults=False, gc=False):
    """One end-to-end run of the P0 two-layer network with the program as activation, cross-checked
    against the NumPy manual-backprop oracle under the kink derivative the program returned
    (``ok`` None: not checked, ``detail`` says why). ``W1`` (3×2) and ``W2`` (2×2) are the measured weight
    gradients."""

    case: str
    program: str
    framework: str
    environment: str
    mode: str
    dtype: str
    status: Status
    kink_derivative: Number | None
    ok: bool | None
    max_abs_diff: Number | None
    detail: str | None
    W1: list[list[Number]] | None
    W2: list[list[Number]] | None


class P0Net(_S):
    """The P0 network (shared/cases P0): inputs, weights, target and loss."""

    X: list[list[int]]
    W1: list[list[int]]
    W2: list[list[int]]
    target: list[list[int]]
    loss: str


class P0Oracle(_S):
    """The NumPy oracle's exact weight gradients of P0 under relu'(0) = ``kink_derivative``."""

    kink_derivative: str
    W1: list[list[float | int]]
    W2: list[list[float | int]]


class P0Row(_S, omit_defaults=False):
    """One measured P0 program over a run of releases with the same result."""

    framework: str
    program: str
    dtype: str
    status: Status
    kink_derivative: Number | None
    ok: bool | None
    W1: list[list[Number]] | None
    W2: list[list[Number]] | None
    detail: str | None
    environments: list[str]
    W1_minus_oracle0: list[list[Number]] | None
    releases: str


class P0(_S):
    """The worked example of P0."""

    net: P0Net
    oracle: list[P0Oracle]
    measured: list[P0Row]


# --------------------------------------------------------------------------- derived sections


class Group(_S):
    """Programs that return one value (within the dtype's tolerance) for a case; ``only`` names the single
    framework whose programs return it, in a cross-framework disagreement."""

    value: list[Number]
    label: str
    programs: list[ProgramRef]
    only: str | None = None


class Within(_S):
    """Programs of one framework that split into several value groups for a case, in ``environments``
    (releases that split them the same way) and ``dtypes``."""

    framework: str
    case: str
    dtypes: list[str]
    groups: list[Group]
    environments: list[str]
    releases: str


class Across(_S):
    """A case where some value is returned by programs of one framework only (newest CPU release of each)."""

    case: str
    dtypes: list[str]
    environments: list[str]
    groups: list[Group]


class Disagreements(_S):
    within: list[Within] = []
    across: list[Across] = []


class Brief(_S):
    """One side of a mode disagreement: status, value, first label, error and rounded input."""

    status: Status
    value: Value | None
    label: str
    error: str | None = None
    input: Value | None = None


class ModeRow(_S):
    """The same program giving a different value or label by mode, dtype or device (``comparison``)."""

    framework: str
    case: str
    program: str
    comparison: str
    reference_mode: str
    mode: str
    reference_dtype: str
    dtypes: list[str]
    reference: Brief
    observed: Brief
    environments: list[str]
    releases: str


class ModeDisagreements(_S):
    rows: list[ModeRow] = []
    not_measured: list[str] = []


class ChangedIn(_S):
    """One change between consecutive measured releases of a framework on a device: ``program`` returned
    ``change`` (old → new) from ``from_version`` to ``to_version``; its ``cases`` × ``modes`` × ``dtypes``
    are exactly the cells that changed so. ``kind``: ``"convention"`` when the value changed where both
    releases returned one, ``"raises"`` when the program raised in one release and returned a value in the
    other,
    ``"availability"`` when a mode or dtype (or the program in it) appeared or went: ``program`` is then
    ``"(every program in this mode)"`` when all of them did, else one program or ``"N programs"`` with the
    names in ``programs``."""

    framework: str
    device: str
    program: str
    kind: Literal["convention", "raises", "availability"]
    from_version: str
    to_version: str
    from_environment: str
    to_environment: str
    change: str
    cases: list[str]
    modes: list[str]
    dtypes: list[str]
    programs: list[str] = []


class Rule(_S):
    """A framework's documented rule at kinks and where it is written."""

    text: str
    source: str


class Newest(_S, omit_defaults=False):
    """Conformance counts in the newest CPU release of a framework (reverse mode, float64)."""

    environment: str
    conforms: int
    departs: int
    open: int


class ConformanceRow(_S):
    """A program's verdict under its framework's rule over a run of releases with the same verdict and
    value. ``predicted``: the values the rule admits (one flat vector each)."""

    case: str
    framework: str
    program: str
    verdict: Verdict
    step: str
    predicted: list[list[Number]]
    value: Value | None
    label: str
    environments: list[str]
    releases: str


class Conformance(_S):
    rules: dict[str, Rule] = {}
    newest: dict[str, Newest] = {}
    rows: list[ConformanceRow] = []


class VersionSpan(_S, omit_defaults=False):
    """Per framework (CPU), the oldest against the newest measured release, in (case, program) pairs:
    ``programs_changed`` returned another value in a mode and dtype both releases measured;
    ``programs_raises`` raised in one and returned a value in the other (and changed nothing else);
    ``programs_gained`` / ``programs_lost`` only gained or lost a mode or dtype. Each pair counts once."""

    framework: str
    oldest: str
    newest: str
    releases: int
    programs_changed: int
    programs_raises: int
    programs_gained: int
    programs_lost: int


class OperationCoverage(_S, omit_defaults=False):
    """One framework's census of kinked operations (``references/census/<framework>.toml``,
    :mod:`kinkcheck.census`) against the catalog: ``covered`` maps an operation to the cases whose programs
    call it, ``uncovered`` lists the kinked operations no program calls, ``excluded`` maps a reason to the
    operations it excludes. ``error``: the census could not be read (one line); the rest is then empty."""

    framework: str
    release: str
    source: str
    covered: dict[str, list[str]]
    uncovered: list[str]
    excluded: dict[str, list[str]]
    error: str | None = None


class KinkHitCell(_S, omit_defaults=False):
    """One (dtype, depth) of the kink-hit census (:mod:`kinkcheck.hitcensus`): of ``inits`` initialisations,
    ``differ`` whose first-layer gradient differs between ReLU'(0) = 0 and 1 on some minibatch; the minibatches
    run and those with a pre-activation exactly 0; the hits and elements per hidden layer; per convention the
    minibatches where it differs from ReLU'(0) = 0; the seconds it took."""

    dtype: str
    depth: int
    inits: int
    differ: int
    minibatches: int
    minibatches_with_hits: int
    hits: list[int]
    elements: list[int]
    convention_differs: dict[str, int]
    seconds: float


class TrainingRun(_S, omit_defaults=False):
    """One short training run of the kink-hit census: dtype, ReLU'(0) convention, depth, epochs, the last
    epoch's mean loss, the test accuracy (0–1), the kink hits met, whether every loss was finite."""

    dtype: str
    convention: str
    depth: int
    epochs: int
    final_loss: float
    test_accuracy: float
    kink_hits: int
    finite: bool


class KinkHits(_S, omit_defaults=False):
    """A kink-hit census measurement (``references/kinkhits/<environment>.json``, written by ``kinkcheck
    census --out``): where it ran (``environment``), at what ``scale``, on what ``data``, its cells and training
    runs, the paper's figures it is set beside (``paper``: source and proportions in % by precision and depth,
    None where the paper did not run), and its seconds. ``error``: the file could not be read (one line); the
    rest is then empty."""

    file: str
    environment: dict[str, Any] = {}
    scale: dict[str, Any] = {}
    data: str = ""
    cells: list[KinkHitCell] = []
    training: list[TrainingRun] = []
    paper: dict[str, Any] = {}
    seconds: float = 0.0
    error: str | None = None


class Coverage(_S):
    devices: list[str] = []
    dtypes: list[str] = []
    modes: list[str] = []
    not_measured: list[str] = []
    operations: list[OperationCoverage] = []


class NetworkSummary(_S, omit_defaults=False):
    """Per case and program: how many end-to-end network runs agree with the NumPy oracle."""

    case: str
    framework: str
    program: str
    runs: int
    agree: int
    differ: list[str]
    not_checked: int
    modes: list[str]


class Summary(_S, omit_defaults=False):
    """Headline counts of the report."""

    cases: int
    programs: int
    environments: int
    observations: int
    errors: int
    unavailable: int
    outside_clarke: int
    not_lipschitz: int
    not_judged: int
    cases_not_judged: int
    nan: int
    disagreements_within: int
    disagreements_across: int
    network_mismatches: int
    network_agree: int
    mode_disagreements: int
    network_runs: int
    changed_in: int
    changed_in_conventions: int
    changed_in_raises: int
    changed_in_availability: int
    conformance: dict[str, int]
    not_measured: int


class Report(_S, kw_only=True, omit_defaults=False, dict=True):
    """The whole ``kinkcheck/conventions/v2`` document."""

    schema: Literal["kinkcheck/conventions/v2"] = SCHEMA_ID
    provenance: Provenance
    environments: list[Environment]
    cases: list[Case]
    observations: list[Observation]
    #: Where the observations are when ``observations`` is empty: a file name beside the JSON (the committed
    #: report keeps them only in ``observations.parquet``: :mod:`kinkcheck.report.dataset`); ``None``: inline.
    observations_file: str | None = None
    networks: list[Network]
    p0: P0
    disagreements: Disagreements
    mode_disagreements: ModeDisagreements
    changed_in: list[ChangedIn]
    conformance: Conformance
    version_span: list[VersionSpan]
    coverage: Coverage
    network_summary: list[NetworkSummary]
    summary: Summary
    kink_hits: list[KinkHits] = []

    @cached_property
    def index(self) -> ReportIndex:
        """The lookups over this report (:class:`ReportIndex`), built on first use."""
        return ReportIndex(self)


# --------------------------------------------------------------------------- releases as ranges


def release_title(env: Environment) -> str:
    """``"2.13.0"`` on CPU (Linux x86-64), ``"2.13.0 cuda"`` on another device, ``"0.32.4 macOS arm64"`` on
    another platform (:func:`kinkcheck.platforms.title`)."""
    parts = [env.framework_version]
    if env.device != "cpu":
        parts.append(env.device)
    if env.platform_tag != DEFAULT_PLATFORM:
        parts.append(platform_title(env.platform_tag))
    return " ".join(parts)


def release_ranges(ids: Iterable[str], among: Sequence[Environment]) -> str:
    """The environments ``ids`` as ranges of consecutive releases of ``among`` (an ordered list, e.g. the
    measured releases of one framework): ``"1.13.1 – 2.13.0, 2.15.0"``. A run of two reads ``"a, b"``; a run never
    spans two places (``"2.14.1, 2.15.0, 2.11.0 cuda"``, not ``"2.14.1 – 2.11.0 cuda"``); ids not in ``among`` are
    named alone at the end, in their given order."""
    pos = {e.id: i for i, e in enumerate(among)}
    wanted = list(dict.fromkeys(ids))
    inside = sorted(pos[i] for i in wanted if i in pos)
    parts: list[str] = []
    start = prev = None
    for p in [*inside, None]:
        if start is not None and (p is None or p != prev + 1 or among[p].place != among[prev].place):
            a, b = among[start], among[prev]
            if start == prev:
                parts.append(a.title)
            elif prev == start + 1:
                parts.extend((a.title, b.title))
            else:
                parts.append(f"{a.title} – {b.title}")
            start = None
        if p is not None and start is None:
            start = p
        prev = p
    parts.extend(i for i in wanted if i not in pos)
    return ", ".join(parts)


def value_runs(items: Sequence[tuple[Environment, Any]]) -> list[tuple[Environment, Environment, Any]]:
    """Consecutive items with equal keys merged: ``[(env, key), …]`` (release order) → ``[(first, last,
    key), …]``; what the "1.13.1 – 2.13.0: 1 right" / "2.14.1, 2.15.0: 0 left" view is made of."""
    runs: list[tuple[Environment, Environment, Any]] = []
    for env, key in items:
        if runs and runs[-1][2] == key:
            runs[-1] = (runs[-1][0], env, key)
        else:
            runs.append((env, env, key))
    return runs


# --------------------------------------------------------------------------- the index


CellKey = tuple[str, str, str, str, str, str]  # case, framework, program, mode, environment, dtype


class ReportIndex:
    """Lookups over one :class:`Report`, built once (about 0.1 s for 100 000 observations).

    Attributes
    ----------
    env, case : dict
        Environment / case by id.
    env_rank, case_rank : dict[str, int]
        Report order (environments: framework, then version, then device).
    cell : dict[CellKey, Observation]
        ``(case, framework, program, mode, environment, dtype)`` → observation.
    by_environment : dict[str, list[Observation]]
        Observations per environment id, report order.
    measured : list[Environment]
        Environments with at least one observation, report order.
    columns : dict[str, list[Environment]]
        Framework → its measured environments (all devices), report order: a case table's columns.
    env_modes : dict[str, list[str]]
        Environment id → modes it has observations in, first-seen order.
    dtypes, modes : list[str]
        Dtypes and modes with at least one observation, in :data:`DTYPES` / :data:`MODES` order.
    """

    def __init__(self, report: Report) -> None:
        self.report = report
        self.env = {e.id: e for e in report.environments}
        self.env_rank = {e.id: i for i, e in enumerate(report.environments)}
        self.case = {c.id: c for c in report.cases}
        self.case_rank = {c.id: i for i, c in enumerate(report.cases)}
        self.cell: dict[CellKey, Observation] = {}
        self.by_environment: dict[str, list[Observation]] = {}
        self.env_modes: dict[str, list[str]] = {}
        dtypes: set[str] = set()
        modes: set[str] = set()
        for o in report.observations:
            self.cell[(o.case, o.framework, o.program, o.mode, o.environment, o.dtype)] = o
            self.by_environment.setdefault(o.environment, []).append(o)
            ms = self.env_modes.setdefault(o.environment, [])
            if o.mode not in ms:
                ms.append(o.mode)
            dtypes.add(o.dtype)
            modes.add(o.mode)
        self.dtypes = [d for d in DTYPES if d in dtypes] + sorted(dtypes - set(DTYPES))
        self.modes = [m for m in MODES if m in modes] + sorted(modes - set(MODES))
        self.measured = [e for e in report.environments if e.id in self.by_environment]
        self.columns: dict[str, list[Environment]] = {}
        for e in self.measured:
            self.columns.setdefault(e.framework, []).append(e)
        self._flat: dict[int, tuple[float, ...] | None] = {}

    def flat(self, ob: Observation | Brief) -> tuple[float, ...] | None:
        """``ob.value`` as flat floats in the case's component order (non-finite strings decoded); None
        when there is no value. Cached per observation object."""
        key = id(ob)
        try:
            return self._flat[key]
        except KeyError:
            pass
        out = None if ob.value is None else tuple(flat_value(ob.value))
        self._flat[key] = out
        return out

    def releases(self, ids: Iterable[str], framework: str | None = None, device: str | None = None) -> str:
        """:func:`release_ranges` of ``ids`` among the measured releases of their framework (that of the first
        id unless given; and at ``device`` when given: an :attr:`Environment.place`). Raises KeyError for a first id the report lacks."""
        ids = list(ids)
        if not ids:
            return ""
        first = self.env[ids[0]]
        fw = framework or first.framework
        among = [e for e in self.columns.get(fw, []) if device is None or e.place == device]
        return release_ranges(ids, among)

    def newest(self, framework: str, device: str = "cpu") -> Environment | None:
        """The newest measured environment of ``framework`` at ``device`` (a :attr:`Environment.place`: the
        device, then ``-<platform tag>`` off Linux x86-64); None when there is none."""
        envs = [e for e in self.columns.get(framework, []) if e.place == device]
        return envs[-1] if envs else None

    def modes_release(self, framework: str) -> Environment | None:
        """The release whose modes a case page tabulates: the newest CPU release of ``framework`` measured in
        more than one mode (another device when no CPU release is); None when there is none."""
        several = [e for e in self.columns.get(framework, []) if len(self.env_modes.get(e.id, ())) > 1]
        cpu = [e for e in several if e.place == "cpu"]
        return (cpu or several or [None])[-1]

    def frameworks(self) -> list[str]:
        """Frameworks with at least one environment record (measured or not), report order."""
        return list(dict.fromkeys(e.framework for e in self.report.environments))

    def observations(self, *, case: str | None = None, framework: str | None = None, program: str | None = None,
                     mode: str | None = None, dtype: str | None = None, environment: str | None = None
                     ) -> list[Observation]:
        """The observations matching every given field, report order."""
        pool: Iterable[Observation] = (self.by_environment.get(environment, []) if environment is not None
                                       else self.report.observations)
        return [o for o in pool if (case is None or o.case == case) and (framework is None or o.framework == framework)
                and (program is None or o.program == program) and (mode is None or o.mode == mode)
                and (dtype is None or o.dtype == dtype)]


# --------------------------------------------------------------------------- JSON in and out

_ENCODER = msgspec.json.Encoder()


def report_json(report: Report, observations_file: str | None = None) -> bytes:
    """The report as JSON bytes ending in a newline: one line per top-level key and one line per element of
    a top-level list (an observation), so a re-render that changes one observation changes one line in
    version control. Field order is the types' order; the same report gives the same bytes.

    ``observations_file``: write no observations, and name the file beside the JSON that holds them (the
    render writes ``observations.parquet``; :func:`load_report` reads them back from it)."""
    enc = _ENCODER.encode
    parts = []
    for name in report.__struct_fields__:
        v = getattr(report, name)
        if observations_file is not None and name in ("observations", "observations_file"):
            v = [] if name == "observations" else observations_file
        key = enc(name)
        if isinstance(v, list) and v:
            parts.append(key + b":[\n" + b",\n".join(enc(x) for x in v) + b"\n]")
        else:
            parts.append(key + b":" + enc(v))
    return b"{\n" + b",\n".join(parts) + b"\n}\n"


_DECODER = msgspec.json.Decoder(Report)


class _Head(_S, kw_only=True):
    """What a reader of some observations needs of the report: its identity, environments, cases and summary
    (the derived sections are skipped unparsed into types: a sixth of the decoding)."""

    schema: Literal["kinkcheck/conventions/v2"]
    provenance: Provenance
    environments: list[Environment]
    cases: list[Case]
    observations: list[Observation]
    observations_file: str | None = None
    summary: Summary


_HEAD_DECODER = msgspec.json.Decoder(_Head)


def _report_of_head(head: _Head) -> Report:
    """A :class:`Report` with ``head``'s parts and empty derived sections (they describe every observation)."""
    return Report(provenance=head.provenance, environments=head.environments, cases=head.cases,
                  observations=head.observations, observations_file=head.observations_file, networks=[],
                  p0=P0(net=P0Net(X=[], W1=[], W2=[], target=[], loss=""), oracle=[], measured=[]),
                  disagreements=Disagreements(), mode_disagreements=ModeDisagreements(), changed_in=[],
                  conformance=Conformance(), version_span=[], coverage=Coverage(), network_summary=[],
                  summary=head.summary)


def decode_report(data: bytes | str, name: str = "report", head: bool = False) -> Report:
    """Decode and check a report (types, then cross-references: :func:`report_problem`).

    Parameters
    ----------
    data : bytes or str
        The JSON text of ``reports/conventions.json`` (UTF-8).
    name : str
        What error messages call the document (its path).

    Raises
    ------
    ReportError
        Not JSON, not a v2 report, a mistyped part (``"$.observations[12].status: Expected `…`"``), an
        observation naming an environment, case or program the report does not hold.

    ``head``: decode the environments, cases, summary and observations only, the derived sections left empty.
    """
    try:
        report = _report_of_head(_HEAD_DECODER.decode(data)) if head else _DECODER.decode(data)
    except msgspec.ValidationError as err:
        head = data[:4000] if isinstance(data, str) else data[:4000].decode("utf-8", "replace")
        if '"schema"' in head and SCHEMA_ID not in head:
            raise ReportError(f"{name}: not a {SCHEMA_ID} report (an older or foreign document: re-render it "
                              "with `kinkcheck report`)") from None
        raise ReportError(f"{name}: malformed kinkcheck report ({_one_line(err)})") from None
    except RecursionError:
        raise ReportError(f"{name}: cannot read (JSON nested too deeply)") from None
    except (msgspec.DecodeError, UnicodeDecodeError) as err:
        raise ReportError(f"{name}: not JSON ({_one_line(err)})") from None
    problem = report_problem(report)
    if problem:
        raise ReportError(f"{name}: malformed kinkcheck report ({problem})")
    return report


def report_path(path: str | Path) -> Path:
    """``path``, or ``path.gz`` when only that exists: the repository commits the report gzipped
    (``reports/conventions.json.gz``, byte-identical for the same shards) and ignores the plain JSON that
    ``kinkcheck report`` writes beside it, so a fresh clone reads the compressed one. A folder stands for the
    report in it (``reports`` → ``reports/conventions.json.gz``)."""
    p = Path(path)
    if p.is_dir():
        p = p / "conventions.json"
    gz = p.with_name(p.name + ".gz")
    return gz if p.suffix != ".gz" and not os.path.lexists(p) and gz.is_file() else p


def load_report(path: str | Path, missing: str | None = None,
                select: Callable[[Report], Iterable[str]] | None = None,
                environments: Sequence[str] | None = None) -> Report:
    """Read ``path`` (``reports/conventions.json``, or its gzipped ``.json.gz``: :func:`report_path`) as a
    :class:`Report` (:func:`decode_report`).

    The last report read is kept (one entry, keyed by path, size, mtime and inode): reading the same
    unchanged file again returns the same object, so callers must not modify it.

    ``select``: given the report without its observations, the programs whose observations to read (the
    Parquet file's row groups of other programs are not read: ``kinkcheck cite`` answers in a fraction of a
    second); the report then holds only those, and none of the derived sections (disagreements, changed in,
    conformance …: they describe every observation). Not kept as the last report. ``environments`` (with
    ``select``): only their observations too (``kinkcheck diff REPORT#ENV`` reads one environment's).

    Raises
    ------
    ReportError
        Missing (``missing`` when given, else "no report at PATH"), not a regular file, unreadable, or
        anything :func:`decode_report` refuses.
    """
    from kinkcheck.validate import read_text

    p = report_path(path)
    try:
        st = p.stat()
        key: Any = (str(p.resolve()), st.st_size, st.st_mtime_ns, st.st_ino) if p.is_file() else None
    except OSError:
        key = None
    if select is None and key is not None and _LAST[0] == key:  # `diff R#a R#b` reads one report twice
        return _LAST[1]  # type: ignore[no-any-return]
    data = read_text(p, ReportError, missing or f"no report at {p}")  # a folder, FIFO, not UTF-8: one line
    report = decode_report(data, str(p), head=select is not None)
    if report.observations_file is not None:
        attach_observations(report, p.parent, str(p), None if select is None else list(select(report)),
                            None if select is None else environments)
    elif select is not None:
        wanted = set(select(report))
        report.observations = [o for o in report.observations if o.program in wanted
                               and (environments is None or o.environment in environments)]
    if select is None:
        _LAST[:] = [key, report]
    return report


def observation_order(report: Report) -> Callable[[Observation], tuple[int, ...]]:
    """The sort key of the report's order of observations: environment (the report's order), case, program
    (the case's order), mode and dtype (:data:`MODES`, :data:`DTYPES`). The builder sorts by it and
    :func:`attach_observations` restores it from the Parquet file (sorted by program)."""
    env = {e.id: i for i, e in enumerate(report.environments)}
    case = {c.id: i for i, c in enumerate(report.cases)}
    program = {(c.id, q.framework, q.program): i for c in report.cases for i, q in enumerate(c.programs)}
    mode = {x: i for i, x in enumerate(MODES)}
    dtype = {x: i for i, x in enumerate(DTYPES)}
    big = 1 << 30  # an unknown name sorts last (report_problem names it)

    def key(o: Observation) -> tuple[int, ...]:
        return (env.get(o.environment, big), case.get(o.case, big), program.get((o.case, o.framework, o.program), big),
                mode.get(o.mode, big), dtype.get(o.dtype, big))

    return key


def _flat(ob: Observation) -> Sequence[float]:
    return flat_value(ob.value or {})


def differs(old: Observation, new: Observation, dtype: str,
            flat: Callable[[Observation], Sequence[float] | None] = _flat) -> bool:
    """Whether two observations of the same key show different conventions: another status, or values that
    differ beyond ``dtype``'s tolerance (:func:`kinkcheck.classify.same_value`; NaN equals NaN): the one
    comparison the builder, the views and ``kinkcheck diff`` share. ``flat``
    gives an observation's flat value (the report's builder passes its cached :meth:`ReportIndex.flat`)."""
    if old.status != new.status:
        return True
    if old.status != "ok":
        return False
    a, b = flat(old), flat(new)
    if a is None or b is None:  # "ok" without a value: only another such one is the same
        return (a is None) != (b is None)
    return a != b and not same_value(a, b, dtype)


def read_observations(path: str | Path, programs: Sequence[str] | None = None,
                      environments: Sequence[str] | None = None) -> list[Observation]:
    """The rows of ``observations.parquet`` (:mod:`kinkcheck.report.dataset`) as :class:`Observation` objects,
    exactly, in the file's order (program, case, environments, modes, dtypes); ``programs``: only theirs (the
    other row groups are not read); ``environments``: only theirs. Equal values are one shared object: treat the observations as read-only, as
    every reader of a report does.

    Raises
    ------
    DatasetError
        As :func:`kinkcheck.query.read_table`.
    """
    from kinkcheck.query import read_table

    filters = [(column, "in", list(names) or [""])  # none: no row (pyarrow refuses an empty "in" list)
               for column, names in (("program", programs), ("environment", environments)) if names is not None]
    table = read_table(path, filters or None)
    col = {name: table.column(name).to_pylist() for name in (
        "case", "program", "framework", "environment", "mode", "dtype", "status", "value", "labels", "error",
        "conformance", "input")}
    decoded: dict[str, Any] = {}  # a few hundred distinct values among 500,000 rows: decode each once

    def values(texts: list[str | None]) -> list[Any]:
        out = []
        for t in texts:
            if t is None:
                out.append(None)
                continue
            v = decoded.get(t)
            if v is None:
                v = decoded[t] = msgspec.json.decode(t)
            out.append(v)
        return out

    return [Observation(case=c, program=p, framework=f, environment=e, mode=m, dtype=d, status=s, value=v,
                        labels=lb, error=er, conformance=co, input=i)
            for c, p, f, e, m, d, s, v, lb, er, co, i in zip(
                col["case"], col["program"], col["framework"], col["environment"], col["mode"], col["dtype"],
                col["status"], values(col["value"]), col["labels"], col["error"], col["conformance"],
                values(col["input"]), strict=True)]


def attach_observations(report: Report, folder: Path, name: str, programs: Sequence[str] | None = None,
                        environments: Sequence[str] | None = None) -> None:
    """Fill ``report.observations`` from ``folder / report.observations_file`` (the Parquet file the render
    wrote beside the JSON), in the report's order (:func:`observation_order`), after checking the file is the
    one the JSON was written with (``provenance.observations_sha256``); ``programs``, ``environments``: only
    theirs.

    Raises
    ------
    ReportError
        The file is missing, unreadable, not kinkcheck's, another render's, or names what the report lacks.
    """
    import hashlib

    from kinkcheck.query import DatasetError

    file = Path(report.observations_file or "")
    if file.name != str(file) or file.name in ("", ".", ".."):
        raise ReportError(f"{name}: observations_file {report.observations_file!r} is not a file name beside it")
    path = folder / file
    try:
        digest = hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError as err:
        raise ReportError(f"{name}: its observations {path} cannot be read ({err.strerror or err}); "
                          "re-render the report with `kinkcheck report`") from None
    if digest != report.provenance.observations_sha256:
        raise ReportError(f"{name}: {path} is not the observations it was rendered with (SHA-256 {digest[:12]}…, "
                          f"expected {(report.provenance.observations_sha256 or 'none')[:12]}…): take both files "
                          "from one render")
    try:
        obs = read_observations(path, programs, environments)
    except DatasetError as err:
        raise ReportError(f"{name}: {err}") from None
    obs.sort(key=observation_order(report))
    report.observations = obs
    problem = report_problem(report)
    if problem:
        raise ReportError(f"{name}: malformed kinkcheck report ({problem})")


#: The last report :func:`load_report` decoded, keyed by (path, size, mtime, inode): one entry, so a
#: long-lived process keeps at most one report alive.
_LAST: list[Any] = [None, None]


def _one_line(err: BaseException) -> str:
    return " ".join(str(err).split())[:240]


_LABELS = frozenset(LABELS)


def report_problem(report: Report) -> str | None:
    """The first cross-reference problem of a report (the decoder checks types and enums; this checks them
    again for a :class:`Report` built in Python, where nothing did): an id
    listed twice, an observation of an unknown environment, case or program, a framework that is not its
    environment's, an unknown mode, dtype or label, a value naming other inputs than its case or not of the
    shape of its point (numbers or ``"nan"``/``"inf"``/``"-inf"``, :func:`kinkcheck.validate.shape_of`);
    None when the report is usable."""
    from kinkcheck.validate import shape_of

    envs: dict[str, str] = {}
    for i, e in enumerate(report.environments):
        if e.id in envs:
            return f"environments[{i}]: environment {e.id!r} listed twice"
        envs[e.id] = e.framework
    inputs: dict[str, tuple[str, ...]] = {}
    shapes: dict[str, dict[str, tuple[int, ...] | None]] = {}
    programs: set[tuple[str, str, str]] = set()
    for i, c in enumerate(report.cases):
        if c.id in inputs:
            return f"cases[{i}]: case {c.id!r} listed twice"
        if not c.at:
            return f"cases[{i}]: at names no input"
        shapes[c.id] = {k: shape_of(v) for k, v in c.at.items()}
        if None in shapes[c.id].values():
            return f"cases[{i}]: at must give each input a number or a rectangular list of numbers"
        inputs[c.id] = tuple(c.at)
        programs.update((c.id, p.framework, p.program) for p in c.programs)
    modes, dtypes = frozenset(MODES), frozenset(DTYPES)
    good: set[tuple[str, ...]] = set()
    for i, o in enumerate(report.observations):
        fw = envs.get(o.environment)
        if fw is None:
            return f"observations[{i}]: environment {o.environment!r} is not among the report's environments"
        if fw != o.framework:
            return f"observations[{i}]: framework {o.framework!r} but environment {o.environment} is {fw}"
        if (o.case, o.framework, o.program) not in programs:
            if o.case not in inputs:
                return f"observations[{i}]: case {o.case!r} is not among the report's cases"
            return f"observations[{i}]: program {o.program!r} is not a {o.framework} program of case {o.case}"
        if o.mode not in modes:  # the decoder refuses these; a Report built in Python is not checked by it
            return f"observations[{i}]: unknown mode {o.mode!r}"
        if o.dtype not in dtypes:
            return f"observations[{i}]: unknown dtype {o.dtype!r}"
        labels = tuple(o.labels)
        if labels not in good:
            if not labels or not _LABELS.issuperset(labels):
                return f"observations[{i}]: labels must be a non-empty list of known labels, not {list(labels)}"
            good.add(labels)
        if o.status == "ok" and o.value is None:
            return f"observations[{i}]: status ok without a value"
        if o.value is not None and tuple(o.value) != inputs[o.case]:
            return (f"observations[{i}]: value names {', '.join(o.value)}; case {o.case} has inputs "
                    f"{', '.join(inputs[o.case])}")
        for what, v in (("value", o.value), ("input", o.input)):
            if v is not None and not _fits(v, shapes[o.case], shape_of):
                return (f"observations[{i}]: {what} {_one_line(repr(v))[:60]} is not numbers of the shape of case "
                        f"{o.case}'s point")
    return None


def _fits(value: Value, shapes: dict[str, tuple[int, ...] | None], shape_of: Any) -> bool:
    """Whether each entry of ``value`` is an input of the point with its shape (a float scalar: at once)."""
    for k, v in value.items():
        want = shapes.get(k)
        if not (type(v) is float and want == ()) and (want is None or shape_of(v) != want):
            return False
    return True


def json_schema() -> dict[str, Any]:
    """The JSON Schema (2020-12) of :class:`Report`, generated from the types (committed as
    ``schemas/conventions.v2.json`` by ``python -m kinkcheck.report.schema``; a test checks it is current)."""
    schema = msgspec.json.schema(Report)
    return {"$schema": "https://json-schema.org/draft/2020-12/schema",
            "$id": "https://kinkcheck.invalid/schemas/conventions.v2.json",
            "title": "kinkcheck report (kinkcheck/conventions/v2)",
            "description": "Generated from kinkcheck.report.model by `python -m kinkcheck.report.schema`; do "
                           "not edit by hand.", **schema}

