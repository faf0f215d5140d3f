"""Programs follow their inputs' device: every tensor a program makes is made on the device probed.

The CUDA probe of 2d3abce ran programs whose own constants (``torch.tensor([0, 0, 1])``, ``-torch.ones(1)``)
were built on the CPU beside CUDA inputs, and PyTorch raised "Expected all tensors to be on the same device":
256 cells that said nothing about PyTorch (issue 30). No test could see it, since every test ran on the CPU.
These run every catalog program of PyTorch with its inputs on the ``meta`` device (PyTorch's device without
data: it needs no hardware) through the adapter's own code paths, with a ``TorchFunctionMode`` that fails any
call mixing devices, and every JAX program with its inputs on a second host device under a transfer guard.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

from kinkcheck.language import expr as ex
from kinkcheck.catalog import load_catalog
from kinkcheck.vocabulary import COMPILED_MODES, FRAMEWORK_MODES

torch = pytest.importorskip("torch", reason="device placement of PyTorch programs needs PyTorch")
from torch.overrides import TorchFunctionMode  # noqa: E402
from torch.utils._pytree import tree_flatten  # noqa: E402

from kinkcheck.frameworks.torch import adapter as torch_adapter  # noqa: E402

#: Calls that move a tensor from one device to another on purpose (the adapter reads its results back on the CPU).
TRANSFERS = frozenset(("to", "cpu", "cuda", "copy_", "_to_copy", "tolist", "item", "__float__", "numpy", "__get__"))
#: The error of reading a meta tensor's data: the adapter got to the end of the program and its derivative.
READ_BACK = ("Cannot copy out of meta tensor", "cannot be called on meta tensors")


class MixedDevices(TorchFunctionMode):
    """Records every torch call whose tensor arguments lie on more than one device, before it runs (so a kernel
    that would fail first cannot hide it); what a call returns is checked where it is used. A zero-dimensional
    CPU tensor mixes with any device in PyTorch (a "CPU scalar"), so it is not counted."""

    def __init__(self) -> None:
        super().__init__()
        self.mixed: list[str] = []

    def _check(self, func: object, tree: object) -> None:
        flat, _ = tree_flatten(tree)
        devices = {t.device.type for t in flat if isinstance(t, torch.Tensor)
                   and not (t.device.type == "cpu" and t.dim() == 0)}
        if len(devices) > 1:
            self.mixed.append(f"{getattr(func, '__name__', func)} on {sorted(devices)}")

    def __torch_function__(self, func, types, args=(), kwargs=None):  # noqa: ANN001, ANN204
        kwargs = kwargs or {}
        if getattr(func, "__name__", "") not in TRANSFERS:
            self._check(func, (args, kwargs))
        return func(*args, **kwargs)


@pytest.fixture(scope="module")
def adapter() -> torch_adapter.TorchAdapter:
    return torch_adapter.load()


def _torch_programs() -> list[tuple[str, str]]:
    return [(case.id, program.id) for case, program in load_catalog().programs("torch")]


def _run_on_meta(adapter: torch_adapter.TorchAdapter, case_id: str, program_id: str, mode: str) -> tuple[list[str], str]:
    """The mixed-device calls of one program in one eager mode with its inputs on ``meta``, and how it ended."""
    case = load_catalog().case(case_id)
    program = case.program("torch", program_id)
    audit = MixedDevices()
    with audit:
        try:
            adapter.gradient(program.tree, case.at, "float32", "meta", mode)
        except Exception as err:  # noqa: BLE001 - meta tensors hold no data: reading one back ends every run
            return audit.mixed, f"{type(err).__name__}: {err}".splitlines()[0]
    return audit.mixed, "finished"


#: The eager modes run on meta. forward and forward-ad are the same placement (:meth:`TorchAdapter.gradient` enters
#: one context for every eager mode) but cannot run there: PyTorch's forward AD fails an internal assertion on
#: meta tensors ("InferenceMode::is_enabled() && primal.is_inference()") before the program runs.
META_MODES = [m for m in FRAMEWORK_MODES["torch"] if m not in COMPILED_MODES and m not in ("forward", "forward-ad")]


@pytest.mark.parametrize("mode", META_MODES)
def test_every_torch_program_keeps_its_tensors_on_the_device_probed(adapter, mode):
    mixed, ended = {}, {}
    for case_id, program_id in _torch_programs():
        found, how = _run_on_meta(adapter, case_id, program_id, mode)
        if found:
            mixed[f"{case_id}  {program_id}"] = found[:3]
        ended[f"{case_id}  {program_id}"] = how
    assert not mixed, f"{mode}: programs that mix devices (inputs on meta): {json.dumps(mixed, indent=1)}"
    # Not vacuous: most programs ran through their derivative on meta and failed only when the adapter read
    # the gradient back (a meta tensor has no data); the others stopped at an operator without a meta kernel,
    # every call before it checked.
    through = sum(any(r in how for r in READ_BACK) for how in ended.values())
    unavailable = sum(how.startswith("Unavailable") for how in ended.values())
    assert through >= 0.85 * (len(ended) - unavailable), (
        f"{mode}: only {through} of {len(ended)} programs ran to the read-back on meta; the others ended: "
        f"{sorted({h[:100] for h in ended.values() if not any(r in h for r in READ_BACK)})}")


def test_a_program_that_builds_its_constant_on_the_cpu_is_caught(adapter):
    """The kind of defect, kept as a case: a constant made on the CPU explicitly (no default-device context can
    move it) and, with the adapter's placement switched off, a constant made without a device."""
    tree = ex.parse("torch.zeros_like(v).scatter_reduce(0, torch.tensor([0, 0, 1], device='cpu'), v, 'amax', "
                    "include_self=False).sum()", {"v"}, {"torch"})
    audit = MixedDevices()
    with audit, pytest.raises(Exception):  # noqa: B017, PT011 - meta's own error, or the device check's
        adapter.gradient(tree, {"v": [1.0, 1.0, 0.0]}, "float32", "meta", "reverse")
    assert any("scatter_reduce" in m and "cpu" in m for m in audit.mixed), (
        f"a constant built on the CPU beside meta inputs must be seen; saw {audit.mixed}")


def test_without_the_default_device_context_the_probe_of_2d3abce_is_caught(adapter, monkeypatch):
    import contextlib

    monkeypatch.setattr(torch_adapter, "_placed", lambda tdev: contextlib.nullcontext())
    case = load_catalog().case("scatter_reduce-amax@[1,1,0]")
    mixed, _ = _run_on_meta(adapter, case.id, case.programs_for("torch")[0].id, "reverse")
    assert any("cpu" in m and "meta" in m for m in mixed), (
        f"{case.programs_for('torch')[0].id}: its index tensor is made on the CPU without the context; saw {mixed}")


def test_compiled_programs_build_their_constants_on_the_device_probed(adapter, monkeypatch):
    """torch.compile traces under the same context: dynamo makes ``torch.tensor([0, 0, 1])`` on meta (it then
    refuses a meta constant for reasons of its own), never a CPU tensor beside meta inputs. (The torch.fx
    shortcut compares values bit for bit, which meta tensors do not have: the interpreter is traced here.)"""
    monkeypatch.setattr(adapter, "_same_eagerly", lambda *a: False)
    cat = load_catalog()
    ran = 0
    for case_id in ("scatter_reduce-amax@[1,1,0]", "embedding_bag@max-tie", "cosine_embedding_loss@margin"):
        case = cat.case(case_id)
        for program in case.programs_for("torch"):
            try:
                (result,) = adapter.compiled_gradients([(program.tree, case.at)], "float32", "meta", "aot_eager")
            except NotImplementedError as err:  # compiled and ran on meta; reading the gradient back is what fails
                assert any(r in str(err) for r in READ_BACK), f"{program.id}: {err}"
                ran += 1
                continue
            text = str(result)
            assert isinstance(result, BaseException), f"{program.id}: a meta run cannot read a gradient back"
            assert "device mismatch" not in text and "same device" not in text and "device='cpu'" not in text, (
                f"{program.id}: compiled on meta, a constant was made on the CPU: {text[:300]}")
    assert ran, "no program with its own constants compiled and ran on meta"


def test_compiled_programs_name_their_device_where_dynamo_ignores_the_context(adapter, monkeypatch):
    """dynamo ignores the default-device context for factory calls (pytorch/pytorch#175953): on an NVIDIA H200
    with torch 2.11.0 compiled programs said "found two different devices cuda:0, cpu" under :func:`_placed` (72
    cells of 9 programs). The compiled path gives every factory the device explicitly (``_made_on``); re-measured
    there, 108 of those cells equal the CPU's and the 4 left are PyTorch's own bfloat16 refusal. Meta cannot show
    the compiled run (dynamo keeps a meta constant as a real tensor and refuses it), so this checks the pieces:
    what ``_made_on`` does, and that the compiled path resolves its names through it, with the device probed."""
    made = torch_adapter._made_on({"torch.tensor": torch.tensor, "torch.ones": torch.ones,
                                   "torch.zeros_like": torch.zeros_like}, torch.device("meta"))
    assert made["torch.tensor"]([0, 1]).device.type == "meta", "a factory is given the device"
    assert made["torch.ones"](1).device.type == "meta", "every factory the default-device context redirects"
    assert made["torch.tensor"]([0, 1], device="cpu").device.type == "cpu", "a device the program names is kept"
    assert made["torch.zeros_like"] is torch.zeros_like, "a function that follows its input is left as it is"
    plain = {"torch.tensor": torch.tensor}
    assert torch_adapter._made_on(plain, torch.device("cpu")) is plain, "on the CPU nothing changes"

    seen: list[tuple[str, ...]] = []
    real = torch_adapter._made_on

    def spy(names, tdev):  # noqa: ANN001, ANN202
        seen.append((tdev.type, *sorted(names)))
        return real(names, tdev)

    monkeypatch.setattr(torch_adapter, "_made_on", spy)
    case = load_catalog().case("scatter_reduce-amax@[1,1,0]")
    program = case.programs_for("torch")[0]
    (result,) = adapter.compiled_gradients([(program.tree, case.at)], "float64", "cpu", "aot_eager")
    assert result == {"v": [0.5, 0.5, 0.5]}, f"{program.id}: compiled on the CPU as before: {result}"
    assert ("cpu", "torch.tensor", "torch.zeros_like") in seen, f"the compiled path resolves through _made_on: {seen}"


def test_old_release_without_the_context_is_not_measured_on_an_accelerator(adapter, monkeypatch):
    """torch < 2.0 has no ``with torch.device(...)``: a CUDA probe there says why it measures nothing."""
    from kinkcheck.frameworks.base import FrameworkUnavailable

    class OldDevice:  # torch.device of 1.13: no __enter__
        type = "meta"

    monkeypatch.setattr(torch_adapter.torch, "device", lambda name: OldDevice())
    with pytest.raises(FrameworkUnavailable, match=r"not measured on meta: .*no default-device context"):
        adapter._device("meta")


JAX_CHECK = textwrap.dedent("""
    import json, jax
    from kinkcheck.catalog import load_catalog
    from kinkcheck.frameworks.jax import adapter as ja
    a = ja.load()
    second = jax.devices("cpu")[1]
    a._device = lambda device: second if device == "cpu" else ja.JaxAdapter._device(a, device)
    moved, ended, wrong = {}, {}, {}
    with jax.transfer_guard_device_to_device("disallow"):
        for case, program in load_catalog().programs("jax"):
            key = case.id + "  " + program.id
            try:
                a.gradient(program.tree, case.at, "float32", "cpu", "MODE")
                ended[key] = "ok"
            except Exception as err:
                text = (type(err).__name__ + ": " + str(err)).splitlines()[0]
                ended[key] = text
                if "transfer" in text.lower() and "disallow" in text.lower():
                    moved[key] = text[:200]
    print(json.dumps({"moved": moved, "ok": sum(v == "ok" for v in ended.values()), "n": len(ended)}))
""")


@pytest.mark.parametrize("mode", ["reverse", "jit"])
def test_every_jax_program_makes_its_arrays_on_the_device_probed(mode):
    """JAX moves an uncommitted constant to its committed inputs' device by itself; the adapter makes it there
    (``jax.default_device``) instead. Two host devices stand in for a CPU and a GPU: inputs on the second, and a
    transfer guard that refuses every implicit move between devices."""
    pytest.importorskip("jax", reason="device placement of JAX programs needs JAX")
    env = {**os.environ, "XLA_FLAGS": "--xla_force_host_platform_device_count=2", "JAX_PLATFORMS": "cpu"}
    proc = subprocess.run([sys.executable, "-c", JAX_CHECK.replace("MODE", mode)], capture_output=True, text=True,
                          env=env, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    assert not got["moved"], f"{mode}: JAX programs whose arrays were made off the device probed: {got['moved']}"
    assert got["ok"] >= 0.85 * got["n"], f"{mode}: only {got['ok']} of {got['n']} programs ran on the second device"
