"""kinkcheck.shards.validate: JSON files a user hands in, and the semantics of shards and reports beyond the schema.

Each example of issue 10 ("shards that pass the schema but break the code", "a hand-made report with the
right schema id but missing or mistyped parts", deeply nested JSON) is here with its outcome: a one-line
error naming the file and the problem (exit 2), or for ``kinkcheck report`` the shard named and skipped.
"""

from __future__ import annotations

import copy
import json

import pytest
from conftest import ROOT

from kinkcheck import cli
from kinkcheck.catalog import load_catalog
from kinkcheck.answers.cite import CiteError
from kinkcheck.report.cells import load_report_for
from kinkcheck.answers.diff import DiffError, load_side
from kinkcheck.report.model import report_json, report_problem
from kinkcheck.shards import ShardError, load_shards, read_shard
from kinkcheck.shards.validate import read_json, shape_of, shard_problem

OBS = ROOT / "references" / "observations"


def _shard(framework="torch", version="2.13.0"):
    """A small valid shard of the default catalog: relu@0 (x), maximum@tie (x, y), max@[1,1] (v) and a P0 run."""
    prog = {"torch": ("torch.relu(x)", "torch.maximum(x, y)", "torch.max(v)"),
            "jax": ("jax.nn.relu(x)", "jax.numpy.maximum(x, y)", "jax.numpy.max(v)")}[framework]
    obs = [
        {"case": "relu@0", "program": prog[0], "mode": "reverse", "dtype": "float64", "status": "ok",
         "value": {"x": 0.0}, "error": None},
        {"case": "maximum@tie", "program": prog[1], "mode": "reverse", "dtype": "float64", "status": "ok",
         "value": {"x": 0.5, "y": 0.5}, "error": None},
        {"case": "max@[1,1]", "program": prog[2], "mode": "reverse", "dtype": "float64", "status": "ok",
         "value": {"v": [0.5, 0.5]}, "error": None},
        {"case": "relu@0", "program": prog[0], "mode": "reverse", "dtype": "float32", "status": "error",
         "value": None, "error": "RuntimeError: boom"},
    ]
    return {
        "schema": "kinkcheck/shard/v1",
        "environment": {"id": f"{framework}-{version}-cpu", "framework": framework, "framework_version": version,
                        "device": "cpu", "python": "3.11.7", "platform": "test", "measured_at": "2026-01-01",
                        "kinkcheck_version": "0.1.0", "catalog_hash": load_catalog().hash},  # measured as defined now
        "observations": obs,
        "networks": [{"case": "relu@0", "program": prog[0], "dtype": "float64", "status": "ok",
                      "W1": [[0.0, 0.0], [0.0, 0.0], [0.0, -19.0]], "W2": [[1.0, 2.0], [3.0, 4.0]], "error": None}],
    }


def _set(path, value):
    def f(s):
        node = s
        for k in path[:-1]:
            node = node[k]
        node[path[-1]] = value
    return f


# (mutation of the valid shard, words the one-line error must contain)
SEMANTIC = [
    (_set(("observations", 0, "value"), None), "is ok but has no value"),
    (_set(("observations", 0, "value"), {}), "not a table of the case's inputs"),
    (_set(("observations", 0, "value"), {"z": 0.0}), "names input 'z'"),
    (_set(("observations", 1, "value"), {"x": 0.5}), "lacks input 'y'"),
    (_set(("observations", 0, "value"), {"x": [0.0, 1.0]}), "input 'x' is a list of 2"),
    (_set(("observations", 2, "value"), {"v": [0.5, 0.5, 0.0]}), "input 'v' is a list of 3"),
    (_set(("observations", 2, "value"), {"v": [[0.5], 0.5]}), "not a number or a rectangular list"),
    (_set(("observations", 0, "dtype"), "float32"), "listed twice"),
    (_set(("observations", 3, "dtype"), "float64"), "listed twice"),
    (_set(("observations", 0, "dtype"), "float16"), None),  # valid: a float16 cell
    # measured on macOS: the platform tag ends the id, so a macOS shard cannot pass for (or overwrite) a Linux one
    (_set(("environment", "platform_tag"), "macos_arm64"), "'torch-2.13.0-cpu-macos_arm64'"),
    (lambda s: s["environment"].update(platform_tag="macos_arm64", id=s["environment"]["id"] + "-macos_arm64"),
     None),
    (_set(("environment", "platform_tag"), "linux_x86_64"), None),  # explicit default: the bare id
    # Metal is Apple silicon's: a Metal shard from Linux names a place that cannot be; from macOS it passes
    (lambda s: s["environment"].update(device="metal", id="torch-2.13.0-metal"), "'metal' (Metal) does not exist on "
     "Linux x86-64 (platform_tag 'linux_x86_64'); it exists on macOS arm64"),
    (lambda s: s["environment"].update(device="metal", platform_tag="macos_arm64", id="torch-2.13.0-metal-macos_arm64"),
     None),
    (lambda s: s["environment"].update(device="cuda", platform_tag="macos_arm64", id="torch-2.13.0-cuda-macos_arm64"),
     "'cuda' (CUDA) does not exist on macOS arm64"),
    # a macOS runner's shard without its tag cannot pass for the Linux one
    (_set(("environment", "runner"), {"os": "Darwin", "arch": "arm64"}), "but its runner was Darwin arm64"),
    (lambda s: s["observations"].__setitem__(0, {**s["observations"][0], "dtype": "float16", "value": {"x": 1e308}}),
     "beyond the largest finite float16"),
    (_set(("observations", 0, "input"), {"x": [1, 2]}), "input: input 'x' is a list of 2"),
    (_set(("networks", 0, "W1"), [[1.0, 2.0, 3.0]]), "W1 is a 1x3 array, P0's W1 gradient is a 3x2 array"),
    (_set(("networks", 0, "W2"), [[1.0], [2.0]]), "W2 is a 2x1 array"),
    (_set(("networks", 0, "W1"), None), "W1 is missing"),
    (_set(("networks", 0, "W1"), []), "W1 is not a number or a rectangular list"),
    (_set(("environment", "framework"), "jax"), "does not match its framework, version and device"),
    (_set(("environment", "framework_version"), "2.14.0"), "does not match"),
    (_set(("observations",), []), "no observation, and no environment.not_measured reason"),
    (_set(("environment", "not_measured"), ""), "not_measured must be a sentence"),
]


# Values the quick check of shard_problem (validate._value_fast) must pass to the detailed one, or vouch for
SEMANTIC += [
    (_set(("observations", 2, "value"), {"v": [0.5, "inf"]}), None),  # a non-finite component, as JSON writes it
    (_set(("observations", 2, "value"), {"v": [0.5, 1]}), None),  # an integer component
    (_set(("observations", 0, "value"), {"x": "-inf"}), None),
    (_set(("observations", 0, "value"), {"x": float("nan")}), "input 'x' is not a number"),  # a bare NaN
    (_set(("observations", 2, "value"), {"v": [0.5, float("inf")]}), "input 'v' is not a number"),
    (_set(("observations", 2, "value"), {"v": [0.5, "NaN"]}), "not a kinkcheck shard"),  # the schema refuses it
    (_set(("observations", 0, "value"), {"x": 0.5, "y": 0.5}), "names input 'y'"),
    (_set(("observations", 1, "value"), {"x": 0.5, "z": 0.5}), "names input 'z'"),
    (lambda s: s["observations"].__setitem__(2, {**s["observations"][2], "dtype": "float32",
                                                 "value": {"v": [0.5, -1e39]}}), "beyond the largest finite float32"),
]


@pytest.mark.parametrize(("mutate", "words"), SEMANTIC)
def test_semantic_problems_of_schema_valid_shards(catalog, tmp_path, mutate, words):
    s = _shard()
    mutate(s)
    p = tmp_path / "torch-2.13.0-cpu.json"
    p.write_text(json.dumps(s))
    if words is None:
        assert read_shard(p, catalog)["observations"], "a valid variant reads back"
        return
    with pytest.raises(ShardError) as info:
        read_shard(p, catalog)
    msg = str(info.value)
    assert str(p) in msg and words in msg and "\n" not in msg, f"one line naming the file and {words!r}: {msg!r}"


def test_huge_finite_float64_is_a_measurement(catalog, tmp_path):
    """1.7e308 is a float64 value a framework can return: kept, and the report renders with it."""
    s = _shard()
    s["observations"][0]["value"] = {"x": 1.7e308}
    s["networks"] = []
    assert shard_problem(s, catalog) is None
    shards = tmp_path / "shards"
    shards.mkdir()
    (shards / "torch-2.13.0-cpu.json").write_text(json.dumps(s))
    assert cli.main(["report", "--shards", str(shards), "--out", str(tmp_path / "out")]) == 0
    doc = load_report_for(tmp_path / "out" / "conventions.json")
    assert {"x": 1.7e308} in [o.value for o in doc.observations], "the huge value is in the report"


def test_unknown_case_is_skipped_with_a_note_not_rejected(catalog, tmp_path):
    s = _shard()
    s["observations"].append({**s["observations"][0], "case": "gone@0", "value": {"q": [1, 2]}})
    assert shard_problem(s, catalog) is None, "observations of a case the catalog dropped do not void the shard"
    shards = tmp_path / "shards"
    shards.mkdir()
    (shards / "torch-2.13.0-cpu.json").write_text(json.dumps(s))
    assert cli.main(["report", "--shards", str(shards), "--out", str(tmp_path / "out")]) == 0
    gaps = load_report_for(tmp_path / "out" / "conventions.json").provenance.gaps
    assert any("gone@0" in g for g in gaps), f"the report names the ignored observation: {gaps}"


def test_without_a_catalog_values_of_one_case_must_agree():
    s = _shard()
    s["observations"].append({**s["observations"][0], "mode": "forward", "value": {"z": 0.0}})
    problem = shard_problem(s)
    assert problem and "names input 'z'" in problem and "observation #1 of relu@0" in problem, problem


def test_not_measured_record_is_valid():
    s = _shard()
    s["observations"], s["networks"] = [], []
    s["environment"]["not_measured"] = "install failed: index unreachable"
    assert shard_problem(s) is None


def test_report_skips_a_semantically_bad_shard_and_renders_the_good(tmp_path, capsys):
    shards = tmp_path / "shards"
    shards.mkdir()
    bad = _shard()
    bad["observations"][0]["value"] = None
    (shards / "torch-2.13.0-cpu.json").write_text(json.dumps(bad))
    (shards / "jax-0.10.2-cpu.json").write_text(json.dumps(_shard("jax", "0.10.2")))
    (shards / "deep.json").write_text("[" * 100_000 + "]" * 100_000)
    assert cli.main(["report", "--shards", str(shards), "--out", str(tmp_path / "out")]) == 0
    err = capsys.readouterr().err
    assert "torch-2.13.0-cpu.json: observation #1" in err and "is ok but has no value" in err, err
    assert "deep.json: cannot read (JSON nested too deeply)" in err, err
    doc = load_report_for(tmp_path / "out" / "conventions.json")
    assert [e.id for e in doc.environments] == ["jax-0.10.2-cpu"], "the good shard is rendered"
    assert sum("torch-2.13.0-cpu.json" in g for g in doc.provenance.gaps) == 1, doc.provenance.gaps


def test_only_not_measured_records_render(tmp_path):
    shards = tmp_path / "shards"
    shards.mkdir()
    for fw, v in (("torch", "2.13.0"), ("jax", "0.10.2")):
        s = _shard(fw, v)
        s["observations"], s["networks"] = [], []
        s["environment"]["not_measured"] = f"install of {fw} {v} failed"
        (shards / f"{fw}-{v}-cpu.json").write_text(json.dumps(s))
    assert cli.main(["report", "--shards", str(shards), "--out", str(tmp_path / "out")]) == 0
    md = (tmp_path / "out" / "conventions.md").read_text()
    assert "**not measured**: install of torch 2.13.0 failed" in md and "install of jax 0.10.2 failed" in md, md[:2000]


@pytest.mark.parametrize(("content", "words"), [
    (b"[" * 100_000 + b"]" * 100_000, "JSON nested too deeply"),
    (b'{"a": "\xff\xfe"}', "not UTF-8"),
    (b'{"a": 1' + b"1" * 5000 + b"}", "invalid JSON"),
    (b'{"a": ', "invalid JSON at line 1"),
])
def test_read_json_one_line(tmp_path, content, words):
    p = tmp_path / "f.json"
    p.write_bytes(content)
    with pytest.raises(ValueError) as info:
        read_json(p, ValueError)
    assert str(p) in str(info.value) and words in str(info.value), info.value


@pytest.mark.parametrize("command", ["diff", "cite", "migrate", "shard"])
def test_deeply_nested_file_is_one_line_exit_2(tmp_path, capsys, command):
    p = tmp_path / "deep.json"
    schema = "kinkcheck/shard/v1" if command in ("diff", "shard") else "kinkcheck/conventions/v2"
    p.write_text('{"schema": "' + schema + '", "x": ' + "[" * 50_000 + "]" * 50_000 + "}")
    good = tmp_path / "good.json"
    good.write_text(json.dumps(_shard()))
    argv = {"diff": ["diff", str(p), str(good)],
            "cite": ["cite", "torch.relu(x)", "--case", "relu@0", "--report", str(p)],
            "migrate": ["migrate", "--from", "torch", "--to", "jax", "--report", str(p)],
            "shard": ["diff", str(good), str(p)]}[command]
    assert cli.main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "nested too deeply" in err[0], err


def test_schema_valid_but_deep_value_is_refused(tmp_path):
    """Parsed fine (depth 300) but past what the value checks walk (the schema validator may walk it or not)."""
    s = _shard()
    s["observations"][0]["value"] = {"x": json.loads("[" * 300 + "1" + "]" * 300)}
    p = tmp_path / "s.json"
    p.write_text(json.dumps(s))
    with pytest.raises(ShardError, match="nested too deeply|not a (number or a|table of numbers or) rectangular list"):
        read_shard(p)


def test_shape_of():
    assert shape_of(0.5) == () and shape_of("nan") == () and shape_of([[1, 2], [3, 4]]) == (2, 2)
    for bad in ([], [[1], 2], True, "NaN!", float("nan"), float("inf"), 10 ** 400, {"a": 1}, None):
        assert shape_of(bad) is None, f"{bad!r} is not a value"


def test_committed_shards_pass_with_the_catalog(catalog):
    shards, errors = load_shards(OBS, catalog)
    assert not errors and len(shards) >= 2, errors


# --- reports ---------------------------------------------------------------------------------------------
# A report is decoded into the typed model (kinkcheck.report.model): the decoder checks every part's types,
# model.report_problem the cross-references; cite, migrate and diff refuse a bad one in one line, exit 2.

@pytest.fixture(scope="module")
def small_report(shards_report):
    """The report of the committed shards cut to its first 50 observations (relu@0 in the oldest release),
    as JSON objects: fast to copy, change and write."""
    import msgspec

    return json.loads(report_json(msgspec.structs.replace(shards_report, observations=shards_report.observations[:50])))


def test_the_report_of_the_committed_shards_passes(shards_report):
    assert report_problem(shards_report) is None


def _report_mutations():
    def obs(i, **kw):
        def f(d):
            d["observations"][i].update(kw)
        return f

    def drop(*path):
        def f(d):
            node = d
            for k in path[:-1]:
                node = node[k]
            del node[path[-1]]
        return f

    return [
        (drop("provenance"), "Object missing required field `provenance`"),
        (drop("provenance", "generated_at"), "Object missing required field `generated_at` - at `$.provenance`"),
        (lambda d: d["provenance"].update(generated_at=5), "Expected `str`, got `int` - at `$.provenance.generated_at`"),
        (drop("environments", 0, "framework"), "Object missing required field `framework` - at `$.environments[0]`"),
        (lambda d: d["environments"][0].update(framework_version=2.1),
         "Expected `str`, got `float` - at `$.environments[0].framework_version`"),
        (lambda d: d.update(environments={}), "Expected `array`, got `object` - at `$.environments`"),
        (lambda d: d["environments"].append(d["environments"][0]), "environment 'torch-1.13.1-cpu' listed twice"),
        (drop("cases", 0, "at"), "Object missing required field `at` - at `$.cases[0]`"),
        (lambda d: d["cases"][0].update(at={"x": True}), "cases[0]: at must give each input a number or a rectangular"),
        (lambda d: d["cases"][0].update(programs=[{"framework": "torch"}]),
         "Object missing required field `program` - at `$.cases[0].programs[0]`"),
        (lambda d: d["cases"][0]["oracle"].update(kind="smooth"), "Invalid enum value 'smooth' - at `$.cases[0].oracle.kind`"),
        (drop("observations", 0, "labels"), "Object missing required field `labels` - at `$.observations[0]`"),
        (obs(0, value={"z": 1.0}), "observations[0]: value names z; case relu@0 has inputs x"),
        (obs(0, value=None), "observations[0]: status ok without a value"),
        (obs(0, value={"x": [0.0, 1.0]}), "observations[0]: value {'x': [0.0, 1.0]} is not numbers of the shape of case relu@0's point"),
        (obs(0, value={"x": {"a": 1}}), "is not numbers of the shape of case relu@0's point"),
        (obs(0, value={"x": "NaN!"}), "is not numbers of the shape of case relu@0's point"),
        (obs(0, input={"x": [1, 2]}), "observations[0]: input {'x': [1, 2]} is not numbers of the shape"),
        (obs(0, environment="torch-0.0.0-cpu"), "environment 'torch-0.0.0-cpu' is not among the report's environments"),
        (obs(0, framework="jax"), "framework 'jax' but environment torch-1.13.1-cpu is torch"),
        (obs(0, case="nope@0"), "case 'nope@0' is not among the report's cases"),
        (obs(0, program="torch.nope(x)"), "program 'torch.nope(x)' is not a torch program of case relu@0"),
        (obs(0, mode=5), "Expected `str`, got `int` - at `$.observations[0].mode`"),
        (obs(0, mode="sideways"), "Invalid enum value 'sideways' - at `$.observations[0].mode`"),
        (obs(0, status="fine"), "Invalid enum value 'fine' - at `$.observations[0].status`"),
        (obs(0, conformance=[1]), "at `$.observations[0].conformance`"),
        (obs(0, conformance="maybe"), "Invalid enum value 'maybe' - at `$.observations[0].conformance`"),
        (obs(0, labels={"a": 1}), "Expected `array`, got `object` - at `$.observations[0].labels`"),
        (obs(0, labels=["sideways"]), "Invalid enum value 'sideways' - at `$.observations[0].labels[0]`"),
        (obs(0, labels=[]), "labels must be a non-empty list of known labels, not []"),
        (lambda d: d["observations"].append(7), "Expected `object`, got `int` - at `$.observations[50]`"),
        (lambda d: d.update(summary="not an object"), "Expected `object`, got `str` - at `$.summary`"),
    ]


@pytest.mark.parametrize(("mutate", "words"), _report_mutations())
def test_hand_made_report_is_one_line_exit_2(small_report, tmp_path, capsys, mutate, words):
    doc = copy.deepcopy(small_report)
    mutate(doc)
    p = tmp_path / "r.json"
    p.write_text(json.dumps(doc))
    for argv in (["cite", "torch.relu(x)", "--case", "relu@0", "--report", str(p)],
                 ["migrate", "--from", "torch", "--to", "jax", "--report", str(p)],
                 ["diff", f"{p}#torch-1.13.1-cpu", f"{p}#torch-1.13.1-cpu"]):
        assert cli.main(argv) == 2, argv
        out, err = capsys.readouterr()
        err = err.strip().splitlines()
        assert out == "" and len(err) == 1 and words in err[0] and str(p) in err[0] and "malformed" in err[0], \
            f"{argv[0]}: {err}"


def test_the_small_report_itself_is_usable(small_report, tmp_path, capsys):
    """The unchanged small report: the mutations above are what break it."""
    p = tmp_path / "r.json"
    p.write_text(json.dumps(small_report))
    assert cli.main(["cite", "torch.relu(x)", "--case", "relu@0", "--report", str(p)]) == 0
    assert "In PyTorch 1.13.1 (CPU, float64, reverse mode), the derivative of `torch.relu(x)` at x = 0 is 0" in \
        capsys.readouterr().out


def test_load_report_and_side_name_the_file(tmp_path):
    p = tmp_path / "r.json"
    p.write_text(json.dumps({"schema": "kinkcheck/conventions/v1", "environments": []}))
    with pytest.raises(CiteError, match="r.json: not a kinkcheck/conventions/v2 report .*re-render it"):
        load_report_for(p)
    with pytest.raises(DiffError, match="r.json: a kinkcheck/conventions/v1 report; .*re-render it"):
        load_side(f"{p}#torch-2.13.0-cpu")


def test_huge_kink_derivative_leaves_the_network_unchecked_not_crashed(tmp_path):
    """relu'(0) = 1e308 measured: the exact P0 oracle's float64 gradient overflows; the run says so."""
    s = _shard()
    s["observations"][0]["value"] = {"x": 1e308}
    shards = tmp_path / "shards"
    shards.mkdir()
    (shards / "torch-2.13.0-cpu.json").write_text(json.dumps(s))
    assert cli.main(["report", "--shards", str(shards), "--out", str(tmp_path / "out")]) == 0
    nets = load_report_for(tmp_path / "out" / "conventions.json").networks
    assert len(nets) == 1 and nets[0].ok is None and "overflows float64" in nets[0].detail, nets


def test_a_case_measured_against_an_old_definition_is_left_out_not_the_shard(catalog, tmp_path):
    """A catalog edit that changes relu@0's point makes that case stale in every shard: the shard still loads
    (its other cases are current), and the report leaves the stale case out instead of judging an old point's
    value against today's oracle."""
    from kinkcheck.judge.build import build

    s = _shard()
    fw = s["environment"]["framework"]
    hashes = {c.id: c.measurement_hash(fw) for c in catalog}
    s["environment"]["case_hashes"] = {**hashes, "relu@0": "0" * 16}
    for ob in s["observations"]:
        if ob["case"] == "relu@0" and ob["status"] == "ok":
            ob["value"] = {"x": [0.0, 1.0]}  # the old point was a vector: wrong for today's relu@0
    p = tmp_path / "torch-2.13.0-cpu.json"
    p.write_text(json.dumps(s))
    shard = read_shard(p, catalog)
    doc = build([shard], catalog)
    cases = {o.case for o in doc.observations}
    assert "relu@0" not in cases and {"maximum@tie", "max@[1,1]"} <= cases, f"stale case left out: {sorted(cases)}"
    assert not any(n.case == "relu@0" for n in doc.networks), "its network runs are left out too"
    assert any("relu@0" in g and "not shown" in g for g in doc.provenance.gaps), doc.provenance.gaps


def test_a_fifo_or_duplicate_keys_are_refused_not_waited_on(tmp_path, capsys):
    """A FIFO among the inputs would block the reader forever; a shard object with a key twice means different
    things to different parsers (the last or the first wins): both are one line, exit 2. (A report, written by
    `kinkcheck report`, is decoded by msgspec, which keeps the last of a repeated key.)"""
    import os

    fifo = tmp_path / "fifo.json"
    os.mkfifo(fifo)
    dup = tmp_path / "dup.json"
    dup.write_text('{"schema": "kinkcheck/shard/v1", "observations": [], "observations": [1]}')
    shard = OBS / "torch-2.13.0-cpu.json"
    for bad, words in ((fifo, "not a regular file"), (dup, "appears twice")):
        for argv in (["diff", str(bad), str(shard)], ["cite", "torch.relu(x)", "--report", str(bad)],
                     ["migrate", "--from", "torch", "--to", "jax", "--report", str(bad)]):
            if bad == dup and argv[0] != "diff":
                words = "not a kinkcheck/conventions/v2 report"  # a shard handed to cite or migrate
            assert cli.main(argv) == 2, argv
            err = capsys.readouterr().err.strip().splitlines()
            assert len(err) == 1 and words in err[0], f"{argv}: {err}"
    folder = tmp_path / "shards"
    folder.mkdir()
    os.mkfifo(folder / "x.json")
    shards, errors = load_shards(folder)
    assert shards == [] and len(errors) == 1 and "not a regular file" in errors[0], errors
    assert cli.main(["report", "--shards", str(OBS), "--out", str(tmp_path / "r"), "--catalog", str(fifo)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "not a regular file" in err[0], err


@pytest.mark.parametrize(("mutate", "words"), SEMANTIC)
def test_the_quick_value_check_vouches_only_for_what_the_detailed_one_passes(catalog, monkeypatch, mutate, words):
    """shard_problem checks the common values quickly and sends the rest to the detailed checks: with the quick
    check switched off, every shard gets the same verdict, with and without a catalog."""
    from kinkcheck.shards import validate

    s = _shard()
    mutate(s)
    s = json.loads(json.dumps(s))  # as read from a file
    quick = [shard_problem(s, catalog), shard_problem(s)]
    monkeypatch.setattr(validate, "_value_fast", lambda *a: False)
    assert [shard_problem(s, catalog), shard_problem(s)] == quick, f"{words}: the quick check changed a verdict"


def test_gunzip_reads_every_member_and_names_a_damaged_one(tmp_path, monkeypatch):
    """A render's report is two gzip members (issue 46: the head alone first): gunzip reads them one after the
    other, as gzip.decompress does; read_first_member reads the first and says more follow; a truncated second
    member, bytes after the members, or a second member that would inflate past the limit are one line each."""
    import gzip

    from kinkcheck.shards import validate
    from kinkcheck.shards.validate import gunzip, read_first_member

    one, two = b'{"a": 1,\n', b'"b": 2}\n'
    blob = gzip.compress(one, mtime=0) + gzip.compress(two, mtime=0)
    assert gunzip(blob, tmp_path / "r.json.gz", ValueError) == one + two == gzip.decompress(blob)
    (tmp_path / "r.json.gz").write_bytes(blob)
    assert read_first_member(tmp_path / "r.json.gz", ValueError) == (one, True)
    (tmp_path / "s.json.gz").write_bytes(gzip.compress(one + two, mtime=0))
    assert read_first_member(tmp_path / "s.json.gz", ValueError) == (one + two, False), "one member: all of it"
    for damaged, says in ((blob[:-5], "truncated gzip file"), (blob + b"junk!", "not a gzip file")):
        with pytest.raises(ValueError, match=says) as err:
            gunzip(damaged, tmp_path / "r.json.gz", ValueError)
        assert "r.json.gz: cannot read" in str(err.value) and "\n" not in str(err.value), err.value
    monkeypatch.setattr(validate, "MAX_INFLATED", len(one) + 3)  # the second member passes the limit
    with pytest.raises(ValueError, match="inflates past"):
        gunzip(blob, tmp_path / "r.json.gz", ValueError)
