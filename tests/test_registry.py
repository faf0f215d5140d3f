"""The framework registry: every place that names a framework reads one record, and a framework added through
the registry alone (the fake framework of ``tests/fakefw``) flows from the catalog through the probe and the
shard schema to the report, ``grad`` and ``cite``."""

from __future__ import annotations

import importlib
import json
from pathlib import Path

import pytest
from catalogs import MAXIMUM_TIE_HEAD, RELU_AT_0

from kinkcheck import catalog, cli, registry

from kinkcheck.judge import conformance

from kinkcheck.language import expr
from kinkcheck.answers.cite import FRAMEWORK_NAMES
from kinkcheck.frameworks import KNOWN
from kinkcheck.vocabulary import DTYPES, FRAMEWORK_MODES, MODES
from kinkcheck.probe import DISTRIBUTIONS
from kinkcheck.render import plots
from kinkcheck.shards import shard_schema

ROOT = Path(__file__).resolve().parents[1]


def test_every_consumer_reads_the_registry():
    names = tuple(registry.REGISTRY)
    assert tuple(catalog.FRAMEWORKS) == tuple(registry.FRAMEWORKS) == names, names
    assert names[:3] == ("torch", "jax", "tensorflow") and len(names) >= 9, f"the seven frameworks of issue 13: {names}"
    assert dict(KNOWN) == {n: registry.REGISTRY[n].adapter for n in names}, "adapters"
    assert dict(FRAMEWORK_MODES) == {n: registry.REGISTRY[n].modes for n in names}, "modes"
    assert DISTRIBUTIONS["tensorflow"] == "tensorflow-cpu" and FRAMEWORK_NAMES["jax"] == "JAX"
    assert dict(plots._MARKERS) == {n: registry.REGISTRY[n].marker for n in names}, "plot markers"
    assert expr.ALIASES["tf"] == "tensorflow" and expr.ALIASES["jnp"] == "jax.numpy", dict(expr.ALIASES)
    parser = cli.build_parser()
    sub = next(a for a in parser._actions if a.dest == "command")
    for command in ("grad", "probe", "cite"):
        fw = next(a for a in sub.choices[command]._actions if a.dest == "framework")
        assert tuple(fw.choices) == names, f"{command} --framework choices come from the registry"


def test_the_committed_shard_schema_lists_the_registry():
    """The shard schema's enums are filled from the registry when loaded; the committed file holds the same."""
    committed = json.loads((ROOT / "src/kinkcheck/schemas/shard.v1.json").read_text())
    for schema in (committed, shard_schema()):
        props = schema["properties"]
        assert props["environment"]["properties"]["framework"]["enum"] == list(registry.FRAMEWORKS)
        assert props["observations"]["items"]["properties"]["mode"]["enum"] == list(MODES)
        assert props["networks"]["items"]["properties"]["dtype"]["enum"] == list(DTYPES)


def test_records_are_consistent():
    seen: dict[str, str] = {}
    for rec in registry.REGISTRY.values():
        assert set(rec.modes) <= set(MODES) and rec.modes[0] == "reverse", (rec.name, rec.modes)
        assert set(rec.dtypes) <= set(DTYPES), (rec.name, rec.dtypes)
        assert set(rec.documented.values()) <= set(registry.DOCUMENTED_FAMILIES), rec.name
        assert all(rec.requirements(v) for v in rec.versions), f"{rec.name}: every release has a requirement"
        for alias in rec.aliases:
            assert alias not in seen and alias not in registry.REGISTRY, f"alias {alias!r} of {rec.name} is taken"
            seen[alias] = rec.name
        assert list(rec.versions) == sorted(rec.versions, key=lambda v: tuple(int(p) for p in v.split("."))), \
            f"{rec.name}: the matrix is oldest first"


@pytest.mark.parametrize("name", ["torch", "jax"])
def test_a_record_is_consistent_with_its_adapter(name):
    """A framework is a folder: its record, read from ``record.py``, names the folder's package, whose ``load``
    gives the adapter on the base class with the record's name and modes."""
    from kinkcheck.frameworks.base import Adapter

    rec = registry.framework(name)
    assert rec.adapter == f"kinkcheck.frameworks.{name}", rec.adapter
    assert {p.name for p in (registry.FOLDERS / name).glob("*.py")} >= {"__init__.py", "adapter.py", "record.py"}, \
        f"{name}: the folder holds its adapter and its record"
    pytest.importorskip(name, reason=f"{name} is not installed here")
    adapter = importlib.import_module(rec.adapter).load()
    assert isinstance(adapter, Adapter) and adapter.name == name, f"{name}: {type(adapter).__mro__}"
    assert adapter.modes == rec.modes, f"{name}: the adapter implements the registered modes"


def test_the_registry_reads_each_folder_s_record_without_importing_kinkcheck_frameworks(tmp_path):
    """The noxfile imports the registry into nox's own Python: the records are read from their files, in the
    matrix's order, and nothing of the adapters' package (nor a framework) is imported."""
    import subprocess
    import sys

    code = ("import sys; from kinkcheck import registry; "
            "print(list(registry.REGISTRY)); print(sorted(m for m in sys.modules if m.startswith('kinkcheck')))")
    out = subprocess.run([sys.executable, "-I", "-c", f"import sys; sys.path.insert(0, {str(ROOT / 'src')!r}); {code}"],
                         capture_output=True, text=True, check=True).stdout.splitlines()
    assert out[0] == str(list(registry.MATRIX)), f"report order is matrix.toml's: {out[0]}"
    assert out[1] == "['kinkcheck', 'kinkcheck.registry']", f"the registry alone was imported: {out[1]}"


def test_a_record_must_sit_in_its_own_folder(tmp_path):
    folder = tmp_path / "other"
    folder.mkdir()
    (folder / "record.py").write_text("from kinkcheck.registry import Framework\n"
                                      "RECORD = Framework('torch2', 'T', 't', 'x', ('reverse',), ('o', '#000000'))\n")
    with pytest.raises(ValueError, match="the record names 'torch2', its folder 'other'"):
        registry._discover(tmp_path)
    (folder / "record.py").write_text("from kinkcheck.registry import Framework\n"
                                      "RECORD = Framework('other', 'O', 'o', 'x', ('reverse',), ('o', '#000000'))\n")
    found = registry._discover(tmp_path)
    assert list(found) == ["other"] and found["other"].versions == (), found


def test_an_unknown_framework_is_one_line():
    with pytest.raises(KeyError, match=r"unknown framework 'caffe' \(known: torch, jax, tensorflow, "):
        registry.framework("caffe")


def test_register_refuses_a_taken_name_or_alias():
    with pytest.raises(ValueError, match="already registered"):
        registry.register(registry.framework("jax"))
    clash = registry.Framework("other", "Other", "other", "other", ("reverse",), ("o", "#000000"), aliases={"tf": "x"})
    with pytest.raises(ValueError, match="tf already names a framework or alias"):
        registry.register(clash)
    assert "other" not in registry.REGISTRY


#: The fake framework's folder, laid out as a tenth framework's would be in ``src/kinkcheck/frameworks/``.
FAKE_FOLDER = ROOT / "tests" / "fake_frameworks" / "fakefw"


@pytest.fixture
def fake(monkeypatch):
    """The fake framework's record, read from its folder after its matrix line is added (what a tenth framework
    adds besides its folder and its programs file)."""
    monkeypatch.setitem(registry.MATRIX, "fakefw", ("0.3.1",))
    return registry.read_record(FAKE_FOLDER / "record.py")


CATALOG = "\n" + RELU_AT_0 + "\n" + MAXIMUM_TIE_HEAD

PROGRAMS = """
["relu@0"]
programs = ["ffw.relu(x)", "fakefw.maximum(x, 0.0)"]

["maximum@tie"]
programs = ["fakefw.maximum(x, y)"]
note = "the tie goes to the second argument"
"""


def test_a_fake_framework_flows_from_catalog_to_report(tmp_path, capsys, fake):
    """Registered alone from its folder (no file of kinkcheck names it), a framework's programs load from its program
    file, its probe writes a shard that the schema accepts, and the report, ``grad`` and ``cite`` show it."""
    from kinkcheck import probe, shards
    from kinkcheck.answers import cite
    from kinkcheck.render import write_reports
    from kinkcheck.report.model import load_report

    (tmp_path / "catalog.toml").write_text(CATALOG)
    (tmp_path / "programs").mkdir()
    (tmp_path / "programs" / "fakefw.toml").write_text(PROGRAMS)
    assert fake.versions == ("0.3.1",), "its releases are its matrix line"
    with registry.registered(fake):
        cat = catalog.load_catalog(tmp_path / "catalog.toml")
        assert [p.id for _, p in cat.programs("fakefw")] == [
            "fakefw.relu(x)", "fakefw.maximum(x, 0.0)", "fakefw.maximum(x, y)"], "aliases expand in program ids"
        assert cat.case("maximum@tie").notes == {"fakefw": "the tie goes to the second argument"}

        shard = probe.probe("fakefw", dtypes=("float64", "float32"), catalog=cat)
        out = tmp_path / "obs" / "fakefw-0.3.1-cpu.json"
        shards.write_shard(out, shard)  # validates against the schema, whose framework enum now has fakefw
        values = {(o["case"], o["program"], o["mode"], o["dtype"]): (o["status"], o.get("value"))
                  for o in shard["observations"]}
        assert values[("relu@0", "fakefw.relu(x)", "reverse", "float64")] == ("ok", {"x": 1.0}), values
        assert values[("maximum@tie", "fakefw.maximum(x, y)", "forward", "float64")] == (
            "ok", {"x": 0.0, "y": 1.0}), "the fake's tie goes to the second argument"
        assert values[("relu@0", "fakefw.relu(x)", "reverse", "float32")][0] == "unavailable", values

        loaded, problems = shards.load_shards(tmp_path / "obs", cat)
        assert not problems, problems
        write_reports(loaded, cat, tmp_path / "report")
        report = load_report(tmp_path / "report" / "conventions.json")
        labels = {(o.case, o.program, o.mode, o.dtype): o.labels[0] for o in report.observations}
        assert labels[("relu@0", "fakefw.relu(x)", "reverse", "float64")] == "right", labels
        assert labels[("maximum@tie", "fakefw.maximum(x, y)", "reverse", "float64")] == "last", labels
        verdicts = {(o.case, o.program): o.conformance for o in report.observations
                    if o.mode == "reverse" and o.dtype == "float64"}
        assert verdicts[("relu@0", "fakefw.relu(x)")] == "departs", "its own documented rule says relu'(0) = 0"
        assert verdicts[("maximum@tie", "fakefw.maximum(x, y)")] == "open", verdicts
        assert report.conformance.rules["fakefw"].source == "tests/fakefw/__init__.py"
        page = (tmp_path / "report" / "cases" / "relu-at-0.md").read_text()
        assert "fakefw.relu(x)" in page and "fakefw" in (tmp_path / "report" / "conventions.md").read_text()

        # in this process: a bounded worker would not see the registration
        assert cli.main(["grad", "ffw.maximum(x, y)", "--at", "x=1,y=1", "--no-isolate"]) == 0
        assert capsys.readouterr().out.startswith('{"x": 0.0, "y": 1.0}'), "grad runs the fake through its adapter"
        text = cite.cite(report, "fakefw.relu(x)", case="relu@0", framework="fakefw").sentence
        assert "FakeFW 0.3.1" in text, text
    assert "fakefw" not in registry.REGISTRY and "ffw" not in expr.ALIASES, "registered() undoes the registration"
    assert conformance.RULES.get("fakefw") is None


def test_a_fake_framework_reaches_migrate_bench_and_the_ci_workflow(tmp_path, fake, monkeypatch):
    """The faces that kept per-framework code find the fake's in its folder: migrate's generated code (run here on
    dual numbers), the bench's hand-written baseline (run in a fresh interpreter) and the CI workflow's jobs."""
    import os
    import subprocess
    import sys

    import fakefw

    from kinkcheck.dev import bench

    from kinkcheck.dev import ci

    from kinkcheck.answers import migrate

    (tmp_path / "catalog.toml").write_text(CATALOG)
    (tmp_path / "programs").mkdir()
    (tmp_path / "programs" / "fakefw.toml").write_text(PROGRAMS)
    with registry.registered(fake):
        code = migrate.snippet("fakefw", "fakefw.relu(x)", "x", 0.0, 0.0, note="the source's left derivative")
        scope: dict = {}
        exec(compile(code, "<fakefw snippet>", "exec"), scope)  # noqa: S102 - the generated code, run as a user would
        at_kink, off = scope["f"](fakefw.Dual(0.0, 1.0)), scope["f"](fakefw.Dual(2.0, 1.0))
        assert (at_kink.tangent, off.tangent) == (0.0, 1.0), f"relu with 0 at the kink, its own slope elsewhere:\n{code}"
        assert "        # the source's left derivative" in code, code
        tie = migrate.tie_snippet("fakefw", "fakefw.maximum(x, y)", ("x", "y"), (0.5, 0.5))
        scope = {}
        exec(compile(tie, "<fakefw tie snippet>", "exec"), scope)  # noqa: S102
        assert scope["f"](fakefw.Dual(1.0, 1.0), fakefw.Dual(1.0, 0.0)).tangent == 0.5, f"half to each at a tie:\n{tie}"

        assert bench.heads()["fakefw"][1] == "import fakefw", "the bench reads the folder's baseline"
        monkeypatch.setattr(bench, "load_catalog", lambda: catalog.load_catalog(tmp_path / "catalog.toml"))
        loop = bench.hand_written_loop("fakefw")
        assert "    grad(lambda x: fakefw.relu(x), [0], dtype)\n" in loop, loop
        script = tmp_path / "loop.py"
        script.write_text(loop + "print(grad(lambda x, y: fakefw.maximum(x, y), [1.0, 1.0], 'float64'))\n")
        run = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, check=False,
                             env={**os.environ, "PYTHONPATH": str(ROOT / "tests")})
        assert run.returncode == 0 and run.stdout.strip() == "[0.0, 1.0]", \
            f"the baseline runs and its tie goes to the second argument: {run.stdout!r} {run.stderr[-500:]}"

        jobs = ci.jobs([{"session": "probe(fakefw-0.3.1)", "call_spec": {"framework": "fakefw", "version": "0.3.1"}}])
        assert [(j["runner"], j["shard"]) for j in jobs] == [("linux-x86_64-cpu", "fakefw-0.3.1-cpu")], \
            f"one CPU job on Linux x86-64 (no wheel listed elsewhere, no device beyond the CPU): {jobs}"
        flow = ci.render(ci.workflow([{"session": "probe(fakefw-0.3.1)",
                                       "call_spec": {"framework": "fakefw", "version": "0.3.1"}}]))
        assert "probe(fakefw-0.3.1)" in flow and "fakefw-0.3.1-cpu" in flow, flow[:2000]


def test_requirements_for_a_device():
    """torch's default Linux wheels are CUDA builds: the same requirements on cuda; jax on cuda installs
    jax[cuda12], which PyPI has from 0.4.26; a framework without the device has none."""
    from kinkcheck.registry import REGISTRY

    torch, jax = REGISTRY["torch"], REGISTRY["jax"]
    assert torch.requirements_for("2.13.0", "cuda") == torch.requirements_for("2.13.0") == torch.requirements("2.13.0")
    assert jax.requirements_for("0.10.2") == ["jax==0.10.2", "jaxlib==0.10.2"]
    assert jax.requirements_for("0.10.2", "cuda") == ["jax[cuda12]==0.10.2", "jaxlib==0.10.2"]
    assert jax.requirements_for("0.4.26", "cuda")[0] == "jax[cuda12]==0.4.26"
    assert jax.requirements_for("0.4.20", "cuda") is None, "no jax[cuda12] before 0.4.26"
    assert REGISTRY["tinygrad"].requirements_for("0.14.0", "cuda") is None, "no cuda device in the adapter"
    assert torch.requirements_for("2.13.0", "metal") == torch.requirements("2.13.0"), "macOS wheels carry MPS"
    assert REGISTRY["mlx"].requirements_for("0.32.4", "metal") == REGISTRY["mlx"].requirements("0.32.4")
    assert jax.requirements_for("0.10.2", "metal") is None, "no Metal device in the JAX adapter"
