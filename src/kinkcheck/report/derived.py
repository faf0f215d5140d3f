"""The report's derived sections, as :class:`msgspec.Struct` types: disagreements within and across frameworks,
mode disagreements, *Changed in*, conformance to documented rules, version spans, coverage of the census, kink
hits of real models, the network summary and the headline counts. :mod:`kinkcheck.judge.sections` and
:mod:`kinkcheck.judge.build` fill them; :mod:`kinkcheck.report.model` re-exports them.
"""

from __future__ import annotations

from typing import Any, Literal

from kinkcheck.report.records import _S, Number, ProgramRef, Status, Value, Verdict


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
    """One (dtype, depth) of the kink-hit census (:mod:`kinkcheck.answers.hitcensus`): of ``inits`` initialisations,
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
