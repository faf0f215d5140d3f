"""Platforms in environment ids (kinkcheck.platforms): Linux x86-64 keeps the bare id every committed shard has;
another platform's tag ends it, so its shard never overwrites the Linux one."""

from __future__ import annotations

import platform

import pytest

from kinkcheck.platforms import (DEFAULT, DEVICES, PLATFORMS, device_title, environment_id, host_tag, place_title, tag_of,
                                 title)


@pytest.mark.parametrize("system, machine, tag", [
    ("Linux", "x86_64", "linux_x86_64"),
    ("Linux", "aarch64", "linux_aarch64"),
    ("Darwin", "arm64", "macos_arm64"),
    ("Windows", "AMD64", "windows_amd64"),  # platform.machine() on Windows
    ("Linux", "riscv64", "linux_riscv64"),  # outside PLATFORMS: spelled the same way
    ("FreeBSD", "amd64", "freebsd_amd64"),
    ("", "", DEFAULT),  # a shard that does not say: measured where every such shard was
    (None, "x86_64", DEFAULT),
])
def test_tag_of_reads_system_and_machine(system, machine, tag):
    assert tag_of(system, machine) == tag


def test_this_machine_and_the_ids():
    assert host_tag() == tag_of(platform.system(), platform.machine())
    assert environment_id("torch", "2.13.0", "cpu") == "torch-2.13.0-cpu", "Linux x86-64: the id cited until now"
    assert environment_id("torch", "2.13.0", "cuda", "linux_x86_64") == "torch-2.13.0-cuda"
    assert environment_id("mlx", "0.32.4", "cpu", "macos_arm64") == "mlx-0.32.4-cpu-macos_arm64"
    assert title("macos_arm64") == "macOS arm64" and title("linux_riscv64") == "linux_riscv64"
    assert set(PLATFORMS) == {"linux_x86_64", "linux_aarch64", "macos_arm64", "windows_amd64"}
    assert all(p.tag == t for t, p in PLATFORMS.items())


def test_the_id_pattern_of_the_shard_schema_takes_every_platform():
    import json
    import re
    from importlib import resources

    schema = json.loads(resources.files("kinkcheck").joinpath("schemas/shard.v1.json").read_text())
    pattern = schema["properties"]["environment"]["properties"]["id"]["pattern"]
    for tag in PLATFORMS:
        assert re.fullmatch(pattern, environment_id("torch", "2.13.0", "cpu", tag)), tag
    assert not re.fullmatch(pattern, "torch-2.13.0-cpu-macos-arm64"), "one tag, no further dashes"


def test_devices_and_where_they_exist():
    assert list(DEVICES) == ["cpu", "cuda", "metal"]
    assert device_title("metal") == "Metal" and device_title("cuda") == "CUDA" and device_title("rocm") == "ROCM"
    assert DEVICES["cpu"].platforms is None, "every platform has a CPU"
    assert DEVICES["metal"].platforms == ("macos_arm64",), "Metal is Apple silicon's"
    assert "macos_arm64" not in DEVICES["cuda"].platforms, "no CUDA on macOS"
    assert all(t in PLATFORMS for d in DEVICES.values() for t in d.platforms or ())
    assert environment_id("torch", "2.15.0", "metal", "macos_arm64") == "torch-2.15.0-metal-macos_arm64"
    assert [place_title("cpu"), place_title("cuda"), place_title("metal", "macos_arm64")] == [
        "CPU", "CUDA", "Metal macOS arm64"], "how a citation names where it was measured"
