"""x86-64 instruction-set levels (:mod:`kinkcheck.platforms.isa`): the CPU's level from ``/proc/cpuinfo``, the caps a probe sets,
and a probe under the lowest cap, which takes on any CPU the path a CPU without AVX2 or AVX-512 takes (issue 49)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from kinkcheck.platforms import isa
from kinkcheck.platforms import environment_id, host_tag, title

#: /proc/cpuinfo's first processor, trimmed to the flags that matter, of three real machines: an AVX-512 Xeon VM
#: (the reference shards' runner), an AMD EPYC VM with AVX2 only (where issue 49's failure was seen), a
#: Nehalem-class CPU (SSE4.2, no AVX) and an arm64 one.
XEON = ("processor\t: 0\nmodel name\t: Intel(R) Xeon(R) Processor\nflags\t\t: fpu sse4_2 ssse3 popcnt avx avx2 fma "
        "bmi2 f16c avx512f avx512bw avx512cd avx512dq avx512vl avx512_bf16 amx_tile\n")
EPYC = "processor\t: 0\nmodel name\t: AMD EPYC\nflags\t\t: fpu sse4_1 sse4_2 ssse3 popcnt avx avx2 fma bmi1 bmi2 f16c\n"
NEHALEM = "processor\t: 0\nflags\t\t: fpu sse4_1 sse4_2 ssse3 popcnt\n"
ARM = "processor\t: 0\nFeatures\t: fp asimd evtstrm sve\n"


def info(text: str) -> dict[str, str]:
    fields = {}
    for line in text.splitlines():
        key, _, value = line.partition(":")
        fields[key.strip()] = value.strip()
    return fields


@pytest.mark.parametrize("text, level, features", [
    (XEON, "x86-64-v4", "sse4_2 avx avx2 fma f16c avx512f avx512bw avx512cd avx512dq avx512vl avx512_bf16 amx_tile"),
    (EPYC, "x86-64-v3", "sse4_2 avx avx2 fma f16c"),
    (NEHALEM, "x86-64-v2", "sse4_2"),
    (ARM, "", "asimd sve"),
    ("", "", ""),
])
def test_the_cpu_level_is_the_highest_whose_flags_and_every_lower_ones_are_there(text, level, features):
    assert isa.cpu_level(info(text)) == level, f"level of {text!r}"
    assert isa.cpu_features(info(text)) == features, f"features of {text!r}"


def test_a_level_with_a_gap_below_it_is_not_reached():
    """AVX-512 flags without AVX2 (no such CPU, but a VM may hide flags) do not make x86-64-v4."""
    odd = "flags\t: sse4_2 ssse3 popcnt avx512f avx512bw avx512cd avx512dq avx512vl\n"
    assert isa.cpu_level(info(odd)) == "x86-64-v2"


def test_a_cap_is_the_cpus_own_level_or_one_below():
    assert isa.check_cap("x86-64-v2", info(XEON)).caps["ATEN_CPU_CAPABILITY"] == "default"
    assert isa.check_cap("x86-64-v3", info(EPYC)).caps["ONEDNN_MAX_CPU_ISA"] == "AVX2"
    with pytest.raises(isa.IsaError, match=r"--isa x86-64-v4: this CPU is x86-64-v3 \(AVX2\) \(no avx512f avx512bw "
                                           r"avx512cd avx512dq avx512vl\); a cap can only lower the level"):
        isa.check_cap("x86-64-v4", info(EPYC))
    with pytest.raises(isa.IsaError, match="instruction-set levels are x86-64's"):
        isa.check_cap("x86-64-v2", info(ARM))
    with pytest.raises(isa.IsaError, match=r"unknown instruction-set level 'avx2' \(known: x86-64-v2, x86-64-v3, "
                                           r"x86-64-v4\)"):
        isa.check_cap("avx2", info(XEON))


@pytest.fixture
def environ():
    """This process's environment, restored whole after the test (apply_cap writes os.environ itself)."""
    saved = dict(os.environ)
    for key in (*isa.CAP_VARIABLES, isa.CAP_ENV, "TORCHINDUCTOR_CACHE_DIR"):
        os.environ.pop(key, None)
    yield os.environ
    os.environ.clear()
    os.environ.update(saved)


def test_apply_cap_sets_every_librarys_variable_and_keeps_the_machines_own(monkeypatch, environ):
    monkeypatch.setenv("XLA_FLAGS", "--xla_force_host_platform_device_count=2 --xla_cpu_max_isa=AVX512")
    monkeypatch.setenv("OPENBLAS_CORETYPE", "Haswell")  # set by the machine for correct results: kept
    monkeypatch.setattr(sys, "modules", {k: v for k, v in sys.modules.items()
                                         if k not in ("torch", "jax", "jaxlib", "tensorflow", "paddle", "mindspore")})
    got = isa.apply_cap("x86-64-v2", info(XEON))
    assert os.environ["ATEN_CPU_CAPABILITY"] == "default" and os.environ["ONEDNN_MAX_CPU_ISA"] == "SSE41" \
        and os.environ["MKL_ENABLE_INSTRUCTIONS"] == "SSE4_2", got
    assert os.environ["XLA_FLAGS"] == "--xla_force_host_platform_device_count=2 --xla_cpu_max_isa=SSE4_2", \
        "the user's XLA flags are kept, an earlier cap replaced"
    assert os.environ["OPENBLAS_CORETYPE"] == "Haswell" and "OPENBLAS_CORETYPE" not in got
    assert isa.active_cap() == "x86-64-v2" and os.environ[isa.CAP_ENV] == "x86-64-v2"
    record = isa.cpu_record(info(XEON))
    assert record["isa_level"] == "x86-64-v4" and record["isa_cap"] == "x86-64-v2", record
    assert "ATEN_CPU_CAPABILITY=default" in record["isa_settings"].split() and \
        "OPENBLAS_CORETYPE=Haswell" in record["isa_settings"].split(), "every cap variable in force is recorded"
    assert isa.this_cpu(info(XEON)) == "this CPU capped at x86-64-v2 (SSE4.2)"
    assert os.environ["TORCHINDUCTOR_CACHE_DIR"].endswith("_x86-64-v2"), \
        "inductor's cache is the level's own (its key leaves the vector ISA out: an AVX2 build broke the v2 probe)"
    assert host_tag() == "linux_x86_64_v2" or not host_tag().startswith("linux_x86_64"), host_tag()


def test_a_cap_variable_set_by_hand_to_no_level_is_no_cap(environ):
    """KINKCHECK_ISA_CAP is apply_cap's word to its workers; a stray value must not name an environment."""
    environ[isa.CAP_ENV] = "avx2"
    assert isa.active_cap() is None and "isa_cap" not in isa.cpu_record(info(EPYC))
    assert not host_tag().endswith(("_v2", "_v3", "_v4")), host_tag()


def test_a_cap_after_a_framework_loaded_is_refused(monkeypatch, environ):
    monkeypatch.setitem(sys.modules, "torch", object())
    with pytest.raises(isa.IsaError, match="torch already imported in this process; the cap must be set before"):
        isa.apply_cap("x86-64-v2", info(XEON))
    assert isa.active_cap() is None, "nothing set"


def test_this_cpu_names_the_level_and_what_it_lacks(environ):
    assert isa.this_cpu(info(EPYC)) == "this CPU (x86-64-v3: AVX2, no AVX-512)"
    assert isa.this_cpu(info(XEON)) == "this CPU (x86-64-v4: AVX-512)"
    assert isa.this_cpu(info(ARM)) == "this CPU"


def test_a_capped_platform_tag_names_the_level():
    assert isa.capped_tag("linux_x86_64", "x86-64-v2") == "linux_x86_64_v2"
    assert isa.capped_tag("linux_x86_64", None) == "linux_x86_64"
    assert isa.split_tag("linux_x86_64_v3") == ("linux_x86_64", "x86-64-v3")
    assert isa.split_tag("windows_amd64_v4") == ("windows_amd64", "x86-64-v4")
    assert isa.split_tag("linux_x86_64") == ("linux_x86_64", None)
    assert isa.split_tag("linux_aarch64_v2") == ("linux_aarch64_v2", None), "levels are x86-64's"
    assert title("linux_x86_64_v2") == "Linux x86-64-v2" and title("linux_x86_64") == "Linux x86-64"
    assert environment_id("paddle", "3.3.1", "cpu", "linux_x86_64_v2") == "paddle-3.3.1-cpu-linux_x86_64_v2"


def test_the_level_of_a_shard_comes_from_its_runner():
    """A shard from before the level was recorded has vector_isa (widest first): the committed Xeon shards are
    x86-64-v4; a capped shard is at its cap; off x86-64 there is none."""
    assert isa.level_of_runner({"vector_isa": "avx512f avx2 avx sse4_2"}) == "x86-64-v4"
    assert isa.level_of_runner({"vector_isa": "avx2 avx sse4_2", "isa_level": "x86-64-v3"}) == "x86-64-v3"
    assert isa.level_of_runner({"isa_level": "x86-64-v3", "isa_cap": "x86-64-v2"}) == "x86-64-v2"
    assert isa.level_of_runner({"vector_isa": "sve asimd"}) is None and isa.level_of_runner({}) is None


def _probe_capped(tmp_path, framework, version, case, mode, dtype, level="x86-64-v2"):
    """``kinkcheck probe --isa LEVEL`` of one case, mode and dtype in a new process (the cap must be set before the
    framework loads); the shard it wrote."""
    out = tmp_path / f"{environment_id(framework, version, 'cpu', isa.capped_tag('linux_x86_64', level))}.json"
    env = {k: v for k, v in os.environ.items() if k not in (*isa.CAP_VARIABLES, isa.CAP_ENV)}
    proc = subprocess.run([sys.executable, "-m", "kinkcheck", "probe", "--framework", framework, "--isa", level,
                           "--case", case, "--mode", mode, "--dtype", dtype, "--quiet", "--no-isolate", "--out",
                           str(out)], capture_output=True, text=True, env=env, timeout=600, check=False)
    assert proc.returncode == 0, f"probe --isa {level} of {framework} {case}: {proc.stderr[-2000:]}"
    from kinkcheck.shards import read_shard

    return read_shard(out)


def _lowest_cap_here():
    if host_tag() != "linux_x86_64" or not isa.cpu_level():
        pytest.skip(f"instruction-set caps are x86-64's; this machine is {host_tag()} (level {isa.cpu_level()!r})")


def test_paddle_under_the_lowest_cap_names_the_cpus_missing_kernel(tmp_path):
    """Issue 49: on an AVX2 EPYC, paddle 3.3.1's static graph raised `std::exception` (oneDNN's bfloat16 `abs` needs
    AVX-512) and failed the test suite; measured on the Xeon the same cell is 0. Capped at x86-64-v2 every CPU takes
    that path: the cell is the framework's error on that CPU, in one line, and the shard says where it was measured."""
    _lowest_cap_here()
    pytest.importorskip("paddle", reason="PaddlePaddle is not installed in this Python")
    shard = _probe_capped(tmp_path, "paddle", "3.3.1", "abs@0", "graph", "bfloat16")
    env = shard["environment"]
    assert env["platform_tag"] == "linux_x86_64_v2" and env["id"].endswith("-cpu-linux_x86_64_v2"), env["id"]
    runner = env["runner"]
    assert runner["isa_cap"] == "x86-64-v2" and runner["isa_level"] == isa.cpu_level(), runner
    assert "ONEDNN_MAX_CPU_ISA=SSE41" in runner["isa_settings"].split(), runner
    cells = {(o["program"], o["mode"], o["dtype"]): o for o in shard["observations"]}
    cell = cells[("paddle.abs(x)", "graph", "bfloat16")]
    version = env["framework_version"]
    assert cell["status"] == "error" and cell["error"] == (
        f"RuntimeError: paddle {version}'s oneDNN has no bfloat16 `abs` kernel for this CPU capped at x86-64-v2 "
        "(SSE4.2): dnnl::error"), cell


def test_torch_under_the_lowest_cap_dispatches_to_atens_default_kernels(tmp_path):
    """ATEN_CPU_CAPABILITY reaches PyTorch: the shard's settings say which kernels ATen ran (DEFAULT under the
    x86-64-v2 cap), and relu at 0 is still measured."""
    _lowest_cap_here()
    pytest.importorskip("torch", reason="PyTorch is not installed in this Python")
    shard = _probe_capped(tmp_path, "torch", "2.13.0", "relu@0", "reverse", "float32")
    assert shard["environment"]["settings"].get("aten_cpu_capability") == "DEFAULT", shard["environment"]["settings"]
    got = {o["program"]: o for o in shard["observations"]}
    assert got["torch.relu(x)"]["status"] == "ok" and got["torch.relu(x)"]["value"] == {"x": 0.0}, got["torch.relu(x)"]


def test_jax_under_the_lowest_cap_compiles_for_it(tmp_path):
    """XLA's --xla_cpu_max_isa reaches JAX (an unknown value only warns, so the shard records the flag it ran with)."""
    _lowest_cap_here()
    pytest.importorskip("jax", reason="JAX is not installed in this Python")
    shard = _probe_capped(tmp_path, "jax", "0.10.2", "relu@0", "jit", "float32")
    assert "XLA_FLAGS=--xla_cpu_max_isa=SSE4_2" in shard["environment"]["runner"]["isa_settings"], \
        shard["environment"]["runner"]
    got = {o["program"]: o for o in shard["observations"]}
    assert got["jax.nn.relu(x)"]["value"] == {"x": 0.0}, got["jax.nn.relu(x)"]


def test_a_level_above_this_cpus_is_one_line_and_exit_2(tmp_path):
    _lowest_cap_here()
    levels = list(isa.LEVELS)
    if isa.cpu_level() == levels[-1]:
        pytest.skip("this CPU has the highest level kinkcheck knows: no level above it to refuse")
    above = levels[levels.index(isa.cpu_level()) + 1]
    out = tmp_path / "torch-2.13.0-cpu.json"
    proc = subprocess.run([sys.executable, "-m", "kinkcheck", "probe", "--framework", "torch", "--isa", above,
                           "--out", str(out)], capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1, proc.stderr
    assert f"--isa {above}: this CPU is {isa.cpu_level()}" in proc.stderr and "Traceback" not in proc.stderr
    assert not out.exists()
