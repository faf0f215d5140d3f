"""Instruction-set levels of x86-64 CPUs: which one a CPU has, and how a probe caps the frameworks below it.

A framework's CPU kernels are picked at run time by the CPU's features: oneDNN (PaddlePaddle, TensorFlow, PyTorch's
CPU convolutions) and MKL by their own dispatch, PyTorch's ATen by ``cpuinfo`` (``default``, ``avx2``, ``avx512``),
XLA's CPU backend (JAX, TensorFlow's ``jit_compile``) by the features it compiles for, OpenBLAS by its core type.
The half-precision paths are where they part: PaddlePaddle 3.3.1's static graph runs ``abs`` in bfloat16 through
a oneDNN kernel that exists only with AVX-512 (elsewhere ``dnnl::error``). So a cell depends on the CPU's
instruction set, and a shard records it (:func:`cpu_record`).

The levels are the x86-64 psABI's microarchitecture levels (x86-64-v2: SSE4.2, POPCNT; -v3: AVX2, FMA, BMI2,
F16C; -v4: AVX-512 F/BW/CD/DQ/VL), the names compilers (``-march=x86-64-v3``) and distributions use. kinkcheck
supports x86-64-v2 and up.

One machine measures the levels below its own by capping each dispatching library (:data:`LEVELS`' ``caps``, set
in the probe's environment before any framework is imported; :func:`apply_cap`): a capped shard is a lower CPU
for those libraries. Code compiled for one instruction set and not dispatched at run time (TensorFlow's Eigen
kernels, built with AVX) is not capped; the shard records which variables were in force
(``runner.isa_settings``). A capped environment is another environment: its platform tag gains the level
(``linux_x86_64_v2``, id ``paddle-3.3.1-cpu-linux_x86_64_v2``), and the report compares it with the same release
measured at the reference machine's own level, as it compares CPU with CUDA.

Standard library only (read by the noxfile through :mod:`kinkcheck.platforms`).
"""

from __future__ import annotations

import getpass
import os
import re
import sys
from collections.abc import Mapping
from dataclasses import dataclass

__all__ = ["CAP_ENV", "FEATURES", "LEVELS", "Level", "IsaError", "active_cap", "apply_cap", "capped_tag", "check_cap",
           "cpu_features", "cpu_level", "cpu_record", "level_of_runner", "level_title", "split_tag", "this_cpu"]


class IsaError(ValueError):
    """A cap that cannot be applied here (an unknown level, one above this CPU's, a machine that is not x86-64,
    a framework already imported); one line."""


@dataclass(frozen=True)
class Level:
    """One x86-64 microarchitecture level: its name, the feature a reader knows it by, the ``/proc/cpuinfo`` flags
    that decide it (with every lower level's), and the environment variables that cap each library at it."""

    name: str
    headline: str
    flags: tuple[str, ...]
    caps: Mapping[str, str]

    @property
    def suffix(self) -> str:
        """``"v2"``: the level in a platform tag (``linux_x86_64_v2``)."""
        return self.name.rsplit("-", 1)[1]


#: The levels kinkcheck measures, lowest first. ``caps``: the variable that caps each library, with its value
#: for the level: oneDNN's ``ONEDNN_MAX_CPU_ISA`` (``DNNL_MAX_CPU_ISA`` before oneDNN 2.5; oneDNN docs,
#: "CPU Dispatcher Control"), ATen's ``ATEN_CPU_CAPABILITY`` (``aten/src/ATen/native/DispatchStub.cpp``), MKL's
#: ``MKL_ENABLE_INSTRUCTIONS``, XLA's ``--xla_cpu_max_isa`` (``xla/debug_options_flags.cc``; appended to any
#: ``XLA_FLAGS``), OpenBLAS's ``OPENBLAS_CORETYPE`` (left as it is where the machine sets it).
LEVELS: Mapping[str, Level] = {lv.name: lv for lv in (
    Level("x86-64-v2", "SSE4.2", ("sse4_2", "ssse3", "popcnt"),
          {"ONEDNN_MAX_CPU_ISA": "SSE41", "DNNL_MAX_CPU_ISA": "SSE41", "ATEN_CPU_CAPABILITY": "default",
           "MKL_ENABLE_INSTRUCTIONS": "SSE4_2", "XLA_FLAGS": "--xla_cpu_max_isa=SSE4_2",
           "OPENBLAS_CORETYPE": "Nehalem"}),
    Level("x86-64-v3", "AVX2", ("avx", "avx2", "fma", "bmi2", "f16c"),
          {"ONEDNN_MAX_CPU_ISA": "AVX2", "DNNL_MAX_CPU_ISA": "AVX2", "ATEN_CPU_CAPABILITY": "avx2",
           "MKL_ENABLE_INSTRUCTIONS": "AVX2", "XLA_FLAGS": "--xla_cpu_max_isa=AVX2", "OPENBLAS_CORETYPE": "Haswell"}),
    Level("x86-64-v4", "AVX-512", ("avx512f", "avx512bw", "avx512cd", "avx512dq", "avx512vl"),
          {"ONEDNN_MAX_CPU_ISA": "AVX512_CORE", "DNNL_MAX_CPU_ISA": "AVX512_CORE", "ATEN_CPU_CAPABILITY": "avx512",
           "MKL_ENABLE_INSTRUCTIONS": "AVX512", "XLA_FLAGS": "--xla_cpu_max_isa=AVX512",
           "OPENBLAS_CORETYPE": "SkylakeX"}),
)}

#: The variables any cap sets (and that a user may have set by hand): recorded in ``runner.isa_settings``.
CAP_VARIABLES: tuple[str, ...] = tuple(dict.fromkeys(k for lv in LEVELS.values() for k in lv.caps))

#: The CPU features kernels dispatch on, as ``/proc/cpuinfo`` names them: recorded in ``runner.cpu_features``
#: (the half-precision ones decide bfloat16 and float16 paths: AVX512-BF16, AVX512-FP16, AMX, AVX-NE-CONVERT).
FEATURES: tuple[str, ...] = (
    "sse4_2", "avx", "avx2", "fma", "f16c", "avx512f", "avx512bw", "avx512cd", "avx512dq", "avx512vl",
    "avx512_vnni", "avx512_bf16", "avx512_fp16", "avx_vnni", "avx_ne_convert", "amx_tile", "amx_bf16",
    "amx_int8", "amx_fp16", "asimd", "sve", "sve2", "bf16")

#: Set by :func:`apply_cap` for the probe's worker processes: the level the probe is capped at.
CAP_ENV = "KINKCHECK_ISA_CAP"

_TAG_LEVEL = re.compile(r"^(?P<base>\w+?)_(?P<suffix>v[0-9])$")


def cpuinfo() -> dict[str, str]:
    """The first processor's fields of ``/proc/cpuinfo`` (Linux); {} where there is none or it is unreadable."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            text = f.read()
    except OSError:
        return {}
    fields: dict[str, str] = {}
    for line in text.split("\n\n", 1)[0].splitlines():
        key, sep, value = line.partition(":")
        if sep:
            fields.setdefault(key.strip(), value.strip())
    return fields


def _flags(info: Mapping[str, str] | None = None) -> set[str]:
    info = cpuinfo() if info is None else info
    return set((info.get("flags") or info.get("Features") or "").split())


def cpu_level(info: Mapping[str, str] | None = None) -> str:
    """This CPU's x86-64 level (``"x86-64-v3"``): the highest of :data:`LEVELS` whose flags, and every lower
    level's, ``/proc/cpuinfo`` lists; "" below x86-64-v2, off x86-64 or without ``/proc/cpuinfo``."""
    flags, level = _flags(info), ""
    for lv in LEVELS.values():
        if not set(lv.flags) <= flags:
            break
        level = lv.name
    return level


def cpu_features(info: Mapping[str, str] | None = None) -> str:
    """The features of :data:`FEATURES` this CPU has, in that order, space-separated."""
    flags = _flags(info)
    return " ".join(f for f in FEATURES if f in flags)


def level_title(level: str) -> str:
    """``"x86-64-v3 (AVX2)"``; a name outside :data:`LEVELS` as it is."""
    lv = LEVELS.get(level)
    return f"{lv.name} ({lv.headline})" if lv is not None else level


def _rank(level: str) -> int:
    return list(LEVELS).index(level) if level in LEVELS else -1


def active_cap() -> str | None:
    """The level this process's probe is capped at (:data:`CAP_ENV`, set by :func:`apply_cap`), else None; a value
    that names no level of :data:`LEVELS` (set by hand) is no cap: nothing capped the libraries to it."""
    value = os.environ.get(CAP_ENV, "").strip()
    return value if value in LEVELS else None


def check_cap(level: str, info: Mapping[str, str] | None = None) -> Level:
    """The :class:`Level` of ``level`` when this CPU can be capped at it (its own level or one below).

    Raises
    ------
    IsaError
        ``level`` unknown, above this CPU's own level, or not on an x86-64 CPU of level x86-64-v2 or up.
    """
    lv = LEVELS.get(level)
    if lv is None:
        raise IsaError(f"unknown instruction-set level {level!r} (known: {', '.join(LEVELS)})")
    own = cpu_level(info)
    if not own:
        raise IsaError(f"--isa {level}: instruction-set levels are x86-64's; this CPU is not one kinkcheck can cap "
                       "(no x86-64-v2 flags in /proc/cpuinfo)")
    if _rank(level) > _rank(own):
        missing = " ".join(f for f in lv.flags if f not in _flags(info))
        raise IsaError(f"--isa {level}: this CPU is {level_title(own)} (no {missing}); a cap can only lower the "
                       "level, so measure it on a CPU that has it")
    return lv


def apply_cap(level: str, info: Mapping[str, str] | None = None) -> dict[str, str]:
    """Cap every dispatching library of this process (and the processes it starts) at ``level``: set
    :data:`LEVELS`' variables in ``os.environ`` (``XLA_FLAGS`` appended to, ``OPENBLAS_CORETYPE`` kept where the
    machine sets it) and :data:`CAP_ENV`, and give PyTorch's inductor a cache folder of the level's own (unless
    ``TORCHINDUCTOR_CACHE_DIR`` is set). Returns the cap variables set. Call it before any framework is imported:
    the libraries read them once, when they load or first dispatch.

    Raises
    ------
    IsaError
        :func:`check_cap`'s refusals, or a framework already imported in this process.
    """
    lv = check_cap(level, info)
    loaded = sorted(m for m in ("torch", "jax", "jaxlib", "tensorflow", "paddle", "mindspore") if m in sys.modules)
    if loaded:
        raise IsaError(f"--isa {level}: {', '.join(loaded)} already imported in this process; the cap must be set "
                       "before a framework loads")
    set_now: dict[str, str] = {}
    for key, value in lv.caps.items():
        if key == "OPENBLAS_CORETYPE" and os.environ.get(key):
            continue  # the machine's own setting (some CPUs need it for correct results): kept, and recorded
        if key == "XLA_FLAGS":
            kept = [f for f in os.environ.get(key, "").split() if not f.startswith("--xla_cpu_max_isa=")]
            value = " ".join([*kept, value])
        os.environ[key] = set_now[key] = value
    if not os.environ.get("TORCHINDUCTOR_CACHE_DIR"):
        # inductor's cache key leaves the vector ISA out: kernels compiled at another level were reused, or failed
        # to build ("C++ compile error", seen under the x86-64-v2 cap after an AVX2 probe); a folder per level
        import tempfile  # slow to import

        user = re.sub(r"[^A-Za-z0-9_.-]", "_", getpass.getuser())
        os.environ["TORCHINDUCTOR_CACHE_DIR"] = os.path.join(tempfile.gettempdir(), f"torchinductor_{user}_{level}")
    os.environ[CAP_ENV] = level
    return set_now


def this_cpu(info: Mapping[str, str] | None = None) -> str:
    """How an error cell names the CPU it was measured on: ``"this CPU (x86-64-v3: AVX2, no AVX-512)"``, ``"this
    CPU capped at x86-64-v2 (SSE4.2)"`` under a probe's cap, ``"this CPU"`` where the level is unknown."""
    cap, own = active_cap(), cpu_level(info)
    if cap in LEVELS and (not own or _rank(cap) <= _rank(own)):
        return f"this CPU capped at {level_title(cap)}"
    if not own:
        return "this CPU"
    names = list(LEVELS)
    higher = names[_rank(own) + 1] if _rank(own) + 1 < len(names) else None
    return f"this CPU ({own}: {LEVELS[own].headline}{f', no {LEVELS[higher].headline}' if higher else ''})"


def cpu_record(info: Mapping[str, str] | None = None) -> dict[str, str]:
    """What a shard's ``runner`` records of the CPU's instruction sets: ``isa_level`` (:func:`cpu_level`),
    ``cpu_features`` (:func:`cpu_features`), ``isa_cap`` (the probe's cap, :func:`active_cap`) and
    ``isa_settings`` (each variable of :data:`CAP_VARIABLES` set in this process, ``NAME=value``, sorted),
    the empty ones left out."""
    settings = " ".join(f"{k}={os.environ[k]}" for k in sorted(CAP_VARIABLES) if os.environ.get(k))
    out = {"isa_level": cpu_level(info), "cpu_features": cpu_features(info), "isa_cap": active_cap() or "",
           "isa_settings": settings}
    return {k: v for k, v in out.items() if v}


def level_of_runner(runner: Mapping[str, str]) -> str | None:
    """The level an environment's kernels could use: its CPU's (``isa_level``; for a shard from before it was
    recorded, the widest of ``vector_isa``: avx512f → v4, avx2 → v3, sse4_2 → v2) lowered to its cap
    (``isa_cap``); None where neither is recorded (off x86-64)."""
    own = runner.get("isa_level")
    if not own:
        widest = (runner.get("vector_isa") or "").split()
        own = {"avx512f": "x86-64-v4", "avx2": "x86-64-v3", "sse4_2": "x86-64-v2"}.get(widest[0] if widest else "")
    cap = runner.get("isa_cap")
    if own and cap in LEVELS and _rank(cap) < _rank(own):
        return cap
    return own or (cap if cap in LEVELS else None)


def capped_tag(tag: str, level: str | None) -> str:
    """The platform tag of a probe capped at ``level``: ``("linux_x86_64", "x86-64-v2")`` →
    ``"linux_x86_64_v2"``; ``tag`` itself for None."""
    return tag if not level else f"{tag}_{LEVELS[level].suffix}"


def split_tag(tag: str) -> tuple[str, str | None]:
    """``"linux_x86_64_v2"`` → ``("linux_x86_64", "x86-64-v2")``; a tag without a level → ``(tag, None)``."""
    m = _TAG_LEVEL.match(tag)
    if m is not None:
        level = f"x86-64-{m.group('suffix')}"
        if level in LEVELS and m.group("base").endswith(("x86_64", "amd64")):
            return m.group("base"), level
    return tag, None
