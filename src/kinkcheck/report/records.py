"""The report's measured records: provenance, environments, cases with their oracle, observations, network runs
and P0, as :class:`msgspec.Struct` types (:mod:`kinkcheck.report.model` is the read API that re-exports them).

:class:`~kinkcheck.report.model.Report` holds lists of these; the builder (:mod:`kinkcheck.judge.build`) fills
them, the decoder type-checks them, and the JSON Schema is generated from them. The sections derived from them
(disagreements, *Changed in*, conformance, coverage, summary) are in :mod:`kinkcheck.report.derived`.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Literal

import msgspec

from kinkcheck.oracles.classify import LABELS
from kinkcheck.vocabulary import DTYPES, MODES
from kinkcheck.platforms.isa import level_of_runner, level_title, split_tag
from kinkcheck.platforms import DEFAULT as DEFAULT_PLATFORM
from kinkcheck.platforms import title as platform_title


#: A gradient component: a float, or "nan" / "inf" / "-inf".
Number = float | str


#: Input name → number or nested list of numbers (see the module docstring).
Value = dict[str, Any]


Status = Literal["ok", "error", "unavailable"]


#: The modes, dtypes and labels a report knows (:data:`kinkcheck.vocabulary.MODES`, ``DTYPES``,
#: :data:`kinkcheck.oracles.classify.LABELS`): enums in the decoder and the schema. Re-exported with ``MODE_INFO`` and
#: the value codec's readers, so that rendering (view, markdown, site, plots) imports the model and nothing below.
Mode = Literal[MODES]  # type: ignore[valid-type]


Dtype = Literal[DTYPES]  # type: ignore[valid-type]


Label = Literal[LABELS]  # type: ignore[valid-type]


Verdict = Literal["conforms", "departs", "open"]


class _S(msgspec.Struct, kw_only=True, omit_defaults=True):
    """Base: keyword construction; fields equal to their default (None, empty) are left out of the JSON."""


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
    def isa_level(self) -> str | None:
        """The x86-64 instruction-set level its CPU kernels could use (``"x86-64-v4"``): the level its platform tag
        is capped at (``linux_x86_64_v2``), else the one its runner records (:func:`kinkcheck.platforms.isa.level_of_runner`);
        None off x86-64 or where the shard records neither."""
        return self.isa_cap or level_of_runner(self.runner)

    @property
    def isa_cap(self) -> str | None:
        """The x86-64 level a probe capped this environment at (its platform tag's, ``linux_x86_64_v2``), else None."""
        return split_tag(self.platform_tag)[1]

    @property
    def isa_summary(self) -> str:
        """How ``isa-levels.md`` names its level: ``"x86-64-v4 (AVX-512), the CPU's own"``, or ``"x86-64-v2 (SSE4.2),
        capped (the CPU: x86-64-v3; ONEDNN_MAX_CPU_ISA=SSE41 …)"`` (the cap variables in force,
        :func:`kinkcheck.platforms.isa.cpu_record`)."""
        level = self.isa_level
        if level is None:
            return "level not recorded"
        own, settings = self.runner.get("isa_level"), self.runner.get("isa_settings", "")
        if self.isa_cap is None:
            return f"{level_title(level)}, the CPU's own" + (f" ({settings})" if settings else "")
        where = "the CPU's own level" if self.isa_cap == own else f"the CPU: {own or 'level not recorded'}"
        return f"{level_title(level)}, capped ({where}{'; ' + settings if settings else ''})"

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


class Observation(_S, gc=False):
    """One measured cell: the gradient ``program`` returned for ``case`` in ``environment``, ``mode`` and
    ``dtype``. ``labels`` judge it against the case's oracle (first label shown; precedence
    :data:`kinkcheck.oracles.classify.LABELS`); ``conformance`` is the verdict of the framework's own documented
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


def release_title(env: Environment) -> str:
    """``"2.13.0"`` on CPU (Linux x86-64), ``"2.13.0 cuda"`` on another device, ``"0.32.4 macOS arm64"`` on
    another platform (:func:`kinkcheck.platforms.title`)."""
    parts = [env.framework_version]
    if env.device != "cpu":
        parts.append(env.device)
    if env.platform_tag != DEFAULT_PLATFORM:
        parts.append(platform_title(env.platform_tag))
    return " ".join(parts)
