"""Fuzz (issue 10, "Done when"): malformed shards, reports and catalogs through ``kinkcheck report``, ``diff``,
``cite`` and ``migrate``, called in process. Every run returns 0, 1 or 2, never raises, never prints a
traceback; exit 2 from ``diff``, ``cite`` and ``migrate`` is one line on stderr; ``report`` names and skips a
bad shard and renders the good one beside it.

Half the inputs are schema-valid but semantically odd (hypothesis-jsonschema ``from_schema`` on the committed
schemas' observation, network and environment parts, and hand-written strategies over the same fields that
aim at the checks: wrong input names, shapes, huge numbers, mismatched ids, empty shards); the rest are
mutations of a valid document (deleted keys, wrong types, deep nesting, bare NaN and 1e999, 5,000-digit
integers, truncation, non-UTF-8 bytes). 1,000 examples in all (330 + 40 + 450 + 180), derandomized so CI
is deterministic; a tiny two-case catalog keeps each ``report`` run cheap.
"""

from __future__ import annotations

import contextlib
import copy
import datetime as dt
import functools
import io
import gzip
import json
import tempfile
from pathlib import Path

import pytest
from catalogs import MAXIMUM_AT_TIE, RELU_AT_0
from conftest import ROOT
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from kinkcheck import cli
from kinkcheck.catalog import load_catalog
from kinkcheck.report.model import json_schema, load_report
from kinkcheck.shards import shard_schema, unpack

hypothesis_jsonschema = pytest.importorskip("hypothesis_jsonschema", reason="pip install hypothesis-jsonschema "
                                            "(the test extra) for the schema-driven half of the fuzz")

CATALOG = RELU_AT_0 + """sources = ["P0"]
[case.programs]
torch = ["torch.relu(x)", "torch.nn.functional.relu(x)"]
jax = ["jax.nn.relu(x)", "jax.numpy.maximum(x, 0.0)"]
""" + MAXIMUM_AT_TIE
PROGRAMS = ["torch.relu(x)", "torch.nn.functional.relu(x)", "jax.nn.relu(x)", "jax.numpy.maximum(x, 0.0)",
            "torch.maximum(x, y)", "jax.numpy.maximum(x, y)", "torch.abs(x)"]
MODES = ["reverse", "forward", "jit", "second-order"]
DTYPES = ["float64", "float32", "float16", "bfloat16"]
FUZZ = settings(deadline=None, derandomize=True, database=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much,
                                       HealthCheck.large_base_example])


class World:
    """The tiny catalog, a valid torch and jax shard of it (cut from the committed shards) and its report."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.catalog_path = root / "catalog.toml"
        self.catalog_path.write_text(CATALOG)
        cat = load_catalog(self.catalog_path)
        self.shards = {}
        good = root / "good"
        good.mkdir()
        for fw, version in (("torch", "2.13.0"), ("jax", "0.10.2")):
            s = unpack(json.loads((ROOT / "references" / "observations" / f"{fw}-{version}-cpu.json").read_text()))
            keep = {(c.id, p.id) for c, p in cat.programs(fw)}
            # Two dtypes, two modes, one network run: small shards keep each of the 1,000 runs cheap.
            s["observations"] = [o for o in s["observations"] if (o["case"], o["program"]) in keep
                                 and o["dtype"] in ("float64", "float16") and o["mode"] in ("reverse", "jit", "forward")]
            s["networks"] = [n for n in s["networks"] if (n["case"], n["program"]) in keep][:1]
            s["environment"]["catalog_hash"] = cat.hash
            for k in ("case_hashes", "history", "last_attempt"):  # whatever the probe records beside: not needed
                s["environment"].pop(k, None)
            self.shards[fw] = s
            (good / f"{fw}-{version}-cpu.json").write_text(json.dumps(s))
        rc, _, err = run(["report", "--shards", str(good), "--out", str(root / "report"),
                          "--catalog", str(self.catalog_path)])
        assert rc == 0, err
        self.report_path = root / "report" / "conventions.json.gz"  # the render writes the JSON gzipped only
        self.report = json.loads(gzip.decompress(self.report_path.read_bytes()))
        self.shard_paths = {fw: good / f"{fw}-{v}-cpu.json" for fw, v in (("torch", "2.13.0"), ("jax", "0.10.2"))}


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    return World(tmp_path_factory.mktemp("fuzz"))


def run(argv: list[str]) -> tuple[int, str, str]:
    """``cli.main(argv)`` with stdout and stderr captured; an exception escaping main fails the test."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = cli.main(argv)
    e = err.getvalue()
    from hypothesis.control import currently_in_test_context

    if currently_in_test_context():  # pytest --hypothesis-show-statistics: how many runs ended how
        event(f"{argv[0]} exit {rc}")
    assert rc in (0, 1, 2), f"{argv[0]}: exit {rc}: {e[-500:]}"
    assert "Traceback" not in e, f"{argv[0]}: a traceback: {e[-2000:]}"
    return rc, out.getvalue(), e


def _one_line_if_bad(rc: int, err: str, what: str) -> None:
    if rc == 2:
        lines = err.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("kinkcheck"), f"{what}: exit 2 is one line, got {lines}"


# --- strategies --------------------------------------------------------------------------------------------

NUMBERS = st.one_of(st.sampled_from([0.0, 0.5, 1.0, -1.0, "nan", "inf", "-inf", 1.7e308, -1e308, 5e-324]),
                    st.floats(allow_nan=False, allow_infinity=False), st.integers(-(2 ** 70), 2 ** 70))
# Few distinct plot marks, so most renders find their plots in the cache: report stays cheap.
SMALL_NUMBERS = st.sampled_from([0.0, 0.5, 1.0, "nan", "-inf", 1.7e308, -1.7e308, 70000.0, 5e-324, 2 ** 70])
JUNK = st.one_of(st.none(), st.booleans(), st.integers(-(2 ** 70), 2 ** 70), st.floats(), st.text(max_size=6),
                 st.lists(st.integers(), max_size=2), st.dictionaries(st.text(max_size=3), st.integers(), max_size=2),
                 st.just([[[[[[[[1]]]]]]]]), st.just({"x": {"x": {"x": []}}}))


def _arrays(numbers):
    return st.recursive(numbers, lambda inner: st.lists(inner, max_size=3), max_leaves=6)


def _flat_arrays(schema: dict) -> dict:
    """A narrower schema hypothesis-jsonschema can draw from quickly; every document it allows the committed
    schema allows. The recursive ``array`` definition becomes up to a list of lists, three items each
    (recursive references cannot be resolved); tables of values (``value``, ``input``) get at most two keys
    among x, y, v, z (arbitrary keys cost 0.25 s a draw); ``$id`` is dropped (a relative id breaks resolution)."""
    s = copy.deepcopy(schema)
    s.pop("$id", None)
    num = {"$ref": "#/$defs/number"}
    s["$defs"]["array"] = {"anyOf": [num, {"type": "array", "items": num, "maxItems": 3},
                                     {"type": "array", "maxItems": 3,
                                      "items": {"type": "array", "items": num, "maxItems": 3}}]}
    stack = [s]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            if node.get("type") == "object" and node.get("additionalProperties") == {"$ref": "#/$defs/array"}:
                node.update(maxProperties=2, propertyNames={"enum": ["x", "y", "v", "z"]})
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)
    return s


def _from_schema(schema: dict, *path: str):
    s = _flat_arrays(schema)
    node = s
    for k in path:
        node = node[k]
    return hypothesis_jsonschema.from_schema({"$defs": s["$defs"], **node})


# Built once: from_schema canonicalises the schema when called, the costly part of a draw otherwise.
SCHEMA_OBSERVATION = _from_schema(shard_schema(), "properties", "observations", "items")
SCHEMA_NETWORK = _from_schema(shard_schema(), "properties", "networks", "items")
SCHEMA_ENVIRONMENT = _from_schema(shard_schema(), "properties", "environment")
SCHEMA_REPORT_OBSERVATION = _from_schema(json_schema(), "$defs", "Observation")


@functools.cache
def _observation(numbers):
    keys = st.sampled_from(["x", "y", "v", "z"])
    hand = st.fixed_dictionaries(
        {"case": st.sampled_from(["relu@0", "maximum@tie", "gone@0"]), "program": st.sampled_from(PROGRAMS),
         "mode": st.sampled_from(MODES), "dtype": st.sampled_from(DTYPES),
         "status": st.sampled_from(["ok", "ok", "error", "unavailable"]),
         "value": st.one_of(st.none(), st.dictionaries(keys, _arrays(numbers), max_size=3)),
         "error": st.one_of(st.none(), st.text(max_size=12))},
        optional={"input": st.dictionaries(keys, _arrays(numbers), max_size=2)})
    return st.one_of(hand, hand, SCHEMA_OBSERVATION)  # a third from the schema: slower to draw


@functools.cache
def _network(numbers):
    matrix = st.lists(st.lists(numbers, min_size=2, max_size=3), min_size=2, max_size=4)
    w1 = st.one_of(st.none(), matrix, st.just([[0.0, 0.0], [0.0, 0.0], [0.0, -19.0]]))
    w2 = st.one_of(st.none(), matrix, st.just([[1.0, 2.0], [3.0, 4.0]]))
    hand = st.fixed_dictionaries(
        {"case": st.sampled_from(["relu@0", "maximum@tie", "gone@0"]), "program": st.sampled_from(PROGRAMS),
         "dtype": st.sampled_from(DTYPES), "status": st.sampled_from(["ok", "ok", "error"]), "W1": w1, "W2": w2,
         "error": st.none()}, optional={"mode": st.sampled_from(MODES)})
    return st.one_of(hand, hand, SCHEMA_NETWORK)


@st.composite
def odd_shards(draw, base: dict, numbers=NUMBERS) -> dict:
    """A schema-valid shard: the valid ``base`` with some observations, networks and environment fields replaced."""
    s = copy.deepcopy(base)
    env = s["environment"]
    how = draw(st.sampled_from(["keep", "fields", "schema", "not_measured"]))
    if how == "fields":
        env["framework"] = draw(st.sampled_from(["torch", "jax"]))
        env["framework_version"] = draw(st.sampled_from(["2.13.0", "0.10.2", "nightly", "2.x"]))
        env["device"] = draw(st.sampled_from(["cpu", "cuda"]))
        if draw(st.booleans()):
            env["id"] = f"{env['framework']}-{env['framework_version']}-{env['device']}"
    elif how == "schema":
        s["environment"] = {**env, **draw(SCHEMA_ENVIRONMENT)}
    elif how == "not_measured":
        env["not_measured"] = draw(st.text(max_size=12))
        s["observations"], s["networks"] = [], []
    keep = draw(st.integers(0, len(s["observations"])))
    s["observations"] = s["observations"][:keep] + draw(st.lists(_observation(numbers), max_size=3))
    if draw(st.booleans()):
        s["networks"] = s["networks"][:draw(st.integers(0, len(s["networks"])))] + \
            draw(st.lists(_network(numbers), max_size=2))
    return s


def _paths(doc, limit: int = 4000) -> list[tuple]:
    out, stack = [], [((), doc)]
    while stack and len(out) < limit:
        path, node = stack.pop()
        if path:
            out.append(path)
        items = node.items() if isinstance(node, dict) else enumerate(node) if isinstance(node, list) else ()
        stack.extend((path + (k,), v) for k, v in items)
    return out


@st.composite
def broken(draw, doc_strategy) -> bytes:
    """A valid or odd document, then one mutation: a key deleted, a value of the wrong type, deep nesting, a
    bare NaN or 1e999, a 5,000-digit integer, truncation, or bytes that are not UTF-8."""
    doc = draw(doc_strategy)
    kind = draw(st.sampled_from(["delete", "replace", "replace", "deep", "truncate", "bytes", "token", "none"]))
    if kind in ("delete", "replace", "deep"):
        paths = _paths(doc)
        if paths:
            path = draw(st.sampled_from(paths))
            parent = doc
            for k in path[:-1]:
                parent = parent[k]
            if kind == "delete":
                del parent[path[-1]]
            elif kind == "replace":
                parent[path[-1]] = draw(JUNK)
            else:
                depth = draw(st.sampled_from([20, 300, 3000, 200_000]))
                parent[path[-1]] = "DEEP"
                text = json.dumps(doc).replace('"DEEP"', "[" * depth + "1" + "]" * depth, 1)
                return text.encode()
    text = json.dumps(doc)  # st.floats() in JUNK may write a bare NaN or Infinity: not JSON, as intended
    if kind == "truncate":
        return text[: draw(st.integers(0, max(len(text) - 1, 0)))].encode()
    if kind == "bytes":
        at = draw(st.integers(0, len(text)))
        return text[:at].encode() + draw(st.sampled_from([b"\xff", b"\xc3\x28", b"\x00", b"\xed\xa0\x80"])) + \
            text[at:].encode()
    if kind == "token":
        token = draw(st.sampled_from(["NaN", "Infinity", "-Infinity", "1e999", "1" * 5000, "true"]))
        return text.replace("0.0", token, 1).replace("1.0", token, 1).encode()
    return text.encode()


def _write(folder: Path, name: str, content: bytes) -> Path:
    p = folder / name
    p.write_bytes(content)
    return p


# --- shards ------------------------------------------------------------------------------------------------

@settings(FUZZ, max_examples=330)
@given(data=st.data())
def test_fuzz_shards_through_diff(world, data):
    fw = data.draw(st.sampled_from(["torch", "jax"]))
    base = world.shards[fw]
    content = data.draw(st.one_of(odd_shards(base).map(lambda s: json.dumps(s).encode()), broken(odd_shards(base))))
    with tempfile.TemporaryDirectory() as d:
        p = _write(Path(d), f"{fw}-fuzz-cpu.json", content)
        argv = data.draw(st.sampled_from([["diff", str(world.shard_paths[fw]), str(p)],
                                          ["diff", str(p), str(world.shard_paths["jax"])],
                                          ["diff", str(p), f"{p}#{fw}-x-cpu"]]))
        rc, _, err = run(argv)
        _one_line_if_bad(rc, err, "diff")


@settings(FUZZ, max_examples=40)
@given(data=st.data())
def test_fuzz_shards_through_report(world, data):
    """A fuzzed torch shard beside the good jax one: the report always renders (exit 0); a bad shard is named."""
    base = world.shards["torch"]
    odd = odd_shards(base, SMALL_NUMBERS)
    content = data.draw(st.one_of(odd.map(lambda s: json.dumps(s).encode()), broken(odd)))
    with tempfile.TemporaryDirectory() as d:
        shards = Path(d) / "shards"
        shards.mkdir()
        _write(shards, "jax-0.10.2-cpu.json", world.shard_paths["jax"].read_bytes())
        p = _write(shards, "torch-fuzz.json", content)
        rc, _, err = run(["report", "--shards", str(shards), "--out", str(Path(d) / "out"),
                          "--catalog", str(world.catalog_path)])
        assert rc == 0, f"the good jax shard renders whatever the other holds: {err[-600:]}"
        skipped = [line for line in err.splitlines() if line.startswith("kinkcheck report: skipped")]
        doc = load_report(Path(d) / "out" / "conventions.json")  # the model's checks pass on what report wrote
        ids = [e.id for e in doc.environments]
        assert "jax-0.10.2-cpu" in ids, ids
        if len(ids) == 1:  # the fuzzed shard did not make it in: it is named, once, and listed as a gap
            assert any(str(p) in line for line in skipped) or "jax-0.10.2-cpu" in err, err
            assert any("torch-fuzz.json" in g or "jax-0.10.2-cpu" in g for g in doc.provenance.gaps), \
                doc.provenance.gaps


# --- reports -----------------------------------------------------------------------------------------------

@st.composite
def odd_reports(draw, base: dict) -> dict:
    """A report with schema-valid but odd parts: an observation from the schema (any object as its value),
    odd environment fields, odd case or oracle fields."""
    doc = copy.deepcopy(base)
    how = draw(st.sampled_from(["observation", "environment", "case", "keep"]))
    if how == "observation":
        ob = draw(SCHEMA_REPORT_OBSERVATION)
        doc["observations"].insert(draw(st.integers(0, len(doc["observations"]))), ob)
    elif how == "environment":
        e = doc["environments"][draw(st.integers(0, len(doc["environments"]) - 1))]
        e[draw(st.sampled_from(["framework_version", "framework", "device", "id", "not_measured"]))] = \
            draw(st.one_of(st.sampled_from(["nightly", "", "cuda", "jax", "2.13"]), JUNK))
    elif how == "case":
        c = doc["cases"][draw(st.integers(0, len(doc["cases"]) - 1))]
        if draw(st.booleans()):
            c[draw(st.sampled_from(["at", "programs", "title", "id", "tie", "oracle"]))] = draw(JUNK)
        else:
            c["oracle"][draw(st.sampled_from(["left", "right", "kind", "components", "derivative"]))] = draw(JUNK)
    return doc


@settings(FUZZ, max_examples=450)
@given(data=st.data())
def test_fuzz_reports_through_cite_migrate_diff(world, data):
    content = data.draw(st.one_of(odd_reports(world.report).map(lambda d: json.dumps(d).encode()),
                                  broken(odd_reports(world.report))))
    with tempfile.TemporaryDirectory() as d:
        p = _write(Path(d), "conventions.json", content)
        cite = data.draw(st.sampled_from([["cite", "torch.relu(x)", "--case", "relu@0"],
                                          ["cite", "jax.numpy.maximum(x, y)", "--cff"]]))
        migrate = data.draw(st.sampled_from([["migrate", "--from", "torch", "--to", "jax"],
                                             ["migrate", "--from", "jax", "--to", "torch==2.13.0", "--only-differences"]]))
        for argv in (cite + ["--report", str(p)], migrate + ["--report", str(p)],
                     ["diff", f"{p}#torch-2.13.0-cpu", str(world.shard_paths["torch"])]):
            rc, _, err = run(argv)
            _one_line_if_bad(rc, err, argv[0])


# --- catalogs ----------------------------------------------------------------------------------------------

def _toml(value) -> str:
    """A TOML value (inline tables and arrays only); enough to write any catalog the fuzz draws."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return {"nan": "nan", "inf": "inf", "-inf": "-inf"}.get(repr(value), repr(value))
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, (dt.date, dt.datetime)):
        return value.isoformat()
    if isinstance(value, list):
        return "[" + ", ".join(_toml(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{json.dumps(str(k))} = {_toml(v)}" for k, v in value.items()) + "}"
    raise TypeError(type(value))


CATALOG_JUNK = st.one_of(JUNK.filter(lambda v: v is not None), st.dates(), st.just([]), st.just({}),
                         st.just("Max(x, 0)"), st.just(["torch.relu(x)"]), st.just({"x": 1}))


@st.composite
def catalogs(draw) -> bytes:
    import tomllib

    doc = tomllib.loads(CATALOG)
    paths = _paths(doc)
    for _ in range(draw(st.integers(1, 2))):
        path = draw(st.sampled_from(paths))
        parent = doc
        try:
            for k in path[:-1]:
                parent = parent[k]
            if draw(st.booleans()):
                del parent[path[-1]]
            else:
                parent[path[-1]] = draw(CATALOG_JUNK)
        except (KeyError, IndexError, TypeError):  # an earlier mutation removed or retyped this path
            pass
    text = "\n".join(f"{json.dumps(k)} = {_toml(v)}" for k, v in doc.items()) + "\n"
    kind = draw(st.sampled_from(["toml", "toml", "toml", "truncate", "bytes", "deep"]))
    if kind == "deep":
        depth = draw(st.sampled_from([30, 3000]))
        text = CATALOG.replace("at = { x = 0 }", "at = { x = " + "[" * depth + "0" + "]" * depth + " }", 1)
    if kind == "truncate":
        text = CATALOG[: draw(st.integers(0, len(CATALOG) - 1))]
    if kind == "bytes":
        at = draw(st.integers(0, len(CATALOG)))
        return CATALOG[:at].encode() + b"\xff\xfe" + CATALOG[at:].encode()
    return text.encode()


@settings(FUZZ, max_examples=180)
@given(content=catalogs())
def test_fuzz_catalogs_through_report(world, content):
    with tempfile.TemporaryDirectory() as d:
        cat = _write(Path(d), "catalog.toml", content)  # a new path each time: load_catalog caches by path
        rc, _, err = run(["report", "--shards", str(world.shard_paths["torch"].parent), "--out", str(Path(d) / "out"),
                          "--catalog", str(cat)])
        assert rc in (0, 2), err
        if rc == 2:
            lines = err.strip().splitlines()
            assert len(lines) == 1 and lines[0].startswith("kinkcheck: error:"), f"one line: {lines}"
