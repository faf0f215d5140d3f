"""Platforms a shard is measured on, and their place in the environment id.

An environment is a framework release on a device (``torch-2.13.0-cpu``); measured on another operating system
or architecture than Linux x86-64 it is another environment: its id gains the platform tag
(``mlx-0.32.4-cpu-macos_arm64``), so that a macOS shard never overwrites the Linux one, and the report compares
the two ("Linux x86-64 vs macOS arm64") as it compares CPU with CUDA. Linux x86-64 keeps the bare id: every
shard measured before platforms had a place in the id was measured there, and an id is cited.

The tags follow the wheel platform tags' spelling (PEP 425: ``linux_x86_64``, ``win_amd64``), shortened to the
operating system and architecture a runner class stands for: :data:`PLATFORMS`. A probe capped at an x86-64
instruction-set level below the CPU's own (:mod:`kinkcheck.platforms.isa`) adds the level to the tag (``linux_x86_64_v2``,
"Linux x86-64-v2"): a lower CPU is another environment, compared with the reference machine's like a platform.
"""

from __future__ import annotations

import platform as _platform
import re
from collections.abc import Mapping
from dataclasses import dataclass

from kinkcheck.platforms.isa import active_cap, capped_tag, split_tag

__all__ = ["DEFAULT", "DEVICES", "PLATFORMS", "Device", "Platform", "device_title", "environment_id", "host_tag",
           "place_title", "tag_of", "title"]


@dataclass(frozen=True)
class Platform:
    """One platform: its tag, how a report names it, ``platform.system()`` and the ``platform.machine()``
    spellings it stands for, and the wheel platform tags (``packaging.tags``) of its CI runner image."""

    tag: str
    title: str
    system: str
    machines: tuple[str, ...]


#: Linux x86-64: the platform of every shard committed before platforms entered the id; its ids carry no tag.
DEFAULT = "linux_x86_64"

#: The platforms of the matrix's runner classes (:data:`kinkcheck.dev.ci.RUNNERS`), by tag.
PLATFORMS: Mapping[str, Platform] = {p.tag: p for p in (
    Platform("linux_x86_64", "Linux x86-64", "Linux", ("x86_64", "amd64")),
    Platform("linux_aarch64", "Linux arm64", "Linux", ("aarch64", "arm64")),
    Platform("macos_arm64", "macOS arm64", "Darwin", ("arm64", "aarch64")),
    Platform("windows_amd64", "Windows x86-64", "Windows", ("amd64", "x86_64")),
)}



@dataclass(frozen=True)
class Device:
    """One device kind of an environment id: its name there, how a report names it, the platforms it exists on
    (None: every one), and what each framework calls it."""

    name: str
    title: str
    platforms: tuple[str, ...] | None
    spelled: str


#: The devices of environment ids. ``metal`` is Apple silicon's GPU through Metal: PyTorch's MPS backend
#: (``torch.device("mps")``) and MLX's GPU (``mx.gpu``), one name for both so that a migration between them
#: compares one place; neither has float64 there (MLX docs, "Data Types"; torch's MPS backend refuses the
#: conversion).
DEVICES: Mapping[str, Device] = {d.name: d for d in (
    Device("cpu", "CPU", None, "the CPU"),
    Device("cuda", "CUDA", ("linux_x86_64", "linux_aarch64", "windows_amd64"),
           "torch.device(\"cuda\"), JAX's gpu platform"),
    Device("metal", "Metal", ("macos_arm64",), "torch.device(\"mps\"), MLX's mx.gpu"),
)}


def device_title(device: str) -> str:
    """How a report names a device: ``"CUDA"``, ``"Metal"``; one outside :data:`DEVICES` upper-cased."""
    d = DEVICES.get(device)
    return d.title if d is not None else device.upper()


def place_title(device: str, tag: str = DEFAULT) -> str:
    """How a sentence names where a value was measured: ``"CPU"``, ``"CUDA"`` on Linux x86-64, the platform
    after the device elsewhere (``"Metal macOS arm64"``)."""
    return device_title(device) if tag == DEFAULT else f"{device_title(device)} {title(tag)}"


_SYSTEMS = {"Linux": "linux", "Darwin": "macos", "Windows": "windows"}


def tag_of(system: str | None, machine: str | None) -> str:
    """The platform tag of ``platform.system()`` and ``platform.machine()`` values, e.g. ``("Darwin", "arm64")``
    → ``"macos_arm64"``; one outside :data:`PLATFORMS` is spelled the same way (``"linux_riscv64"``); missing
    values (a shard that does not record them) → :data:`DEFAULT`, where every such shard was measured."""
    if not system or not machine:
        return DEFAULT
    m = machine.lower()
    for p in PLATFORMS.values():
        if p.system == system and m in p.machines:
            return p.tag
    os_name = _SYSTEMS.get(system, system.lower())
    return re.sub(r"[^a-z0-9_]", "_", f"{os_name}_{m}")


def host_tag() -> str:
    """The platform tag a probe on this machine gives its shard: :func:`tag_of` of ``platform.system()`` and
    ``platform.machine()``, followed by the instruction-set level where the probe is capped at one
    (``linux_x86_64_v2``: :func:`kinkcheck.platforms.isa.capped_tag`, :func:`kinkcheck.platforms.isa.active_cap`)."""
    return capped_tag(tag_of(_platform.system(), _platform.machine()), active_cap())


def environment_id(framework: str, version: str, device: str, tag: str = DEFAULT) -> str:
    """``"<framework>-<version>-<device>"``, followed by ``"-<tag>"`` off Linux x86-64
    (``environment_id("mlx", "0.32.4", "cpu", "macos_arm64") == "mlx-0.32.4-cpu-macos_arm64"``)."""
    base = f"{framework}-{version}-{device}"
    return base if tag == DEFAULT else f"{base}-{tag}"


def title(tag: str) -> str:
    """How a report names a platform: ``"macOS arm64"``, ``"Linux x86-64-v2"`` for a tag capped at an
    instruction-set level (:func:`kinkcheck.platforms.isa.split_tag`); a tag outside :data:`PLATFORMS` as it is."""
    base, level = split_tag(tag)
    if level is not None:
        return f"{title(base)}-{level.rsplit('-', 1)[1]}"
    p = PLATFORMS.get(tag)
    return p.title if p is not None else tag
