"""The catalog: stable ids, every case covered by both frameworks, public cases present, bad files refused."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from catalogs import MAXIMUM_AT_TIE, MAXIMUM_TIE_HEAD, RELU_AT_0, STAGED_RELU

from kinkcheck.catalog import FRAMEWORKS, CatalogError, forget_loaded, load_catalog, staged_case_ids, with_staged

#: Cases the core issue requires by name (ids are stable: reports and citations link to them).
REQUIRED_CASES = [
    "relu@0", "clamp@-1", "clamp@1", "relu6@0", "relu6@6", "leaky_relu@0", "elu@0", "celu@0", "selu@0",
    "hardswish@-3", "hardswish@3", "hardsigmoid@-3", "hardsigmoid@3", "hardshrink@0.5", "hardshrink@-0.5",
    "softshrink@0.5", "softshrink@-0.5", "threshold@1", "abs@0", "abs@-0.0", "sign@0", "floor@1", "round@0.5",
    "maximum@tie", "minimum@tie", "max@[1,0,1,0,1,0]", "min@[1,0,1,0,1,0]", "median@[1,0,1,0,1,0]",
    "maxpool2d@tied-window", "norm1@origin", "norm2@origin", "norminf@origin", "sqrt@0", "sqrt-abs@0",
    "where-sqrt@-1", "softplus@0",
]

RELU_PROGRAMS = {
    "torch": ["torch.relu(x)", "torch.nn.functional.relu(x)", "torch.clamp(x, min=0)", "torch.clamp_min(x, 0)",
              "x.clamp(min=0)", "torch.maximum(x, torch.zeros_like(x))", "torch.where(x > 0, x, 0.0)",
              "torch.nn.functional.threshold(x, 0.0, 0.0)", "torch.relu(-x) + x",
              "(torch.relu(x) + torch.relu(-x) + x) / 2"],
    "jax": ["jax.nn.relu(x)", "jax.numpy.maximum(x, 0.0)", "jax.numpy.clip(x, 0)", "jax.numpy.where(x > 0, x, 0.0)"],
}


def test_required_cases_present(catalog):
    ids = {c.id for c in catalog}
    missing = [c for c in REQUIRED_CASES if c not in ids]
    assert not missing, f"catalog lacks required cases {missing}"


@pytest.mark.parametrize("source", [f"P{i}" for i in range(10)])
def test_every_public_case_is_in_the_catalog(catalog, source):
    cases = [c.id for c in catalog if source in c.sources]
    assert cases, f"public case {source} (shared/cases/public-cases.md) has no catalog case"


def test_relu_programs(catalog):
    case = catalog.case("relu@0")
    for fw, programs in RELU_PROGRAMS.items():
        have = [p.id for p in case.programs_for(fw)]
        missing = [p for p in programs if p not in have]
        assert not missing, f"relu@0 lacks {fw} programs {missing}"


def test_every_case_has_both_frameworks_or_a_reason(catalog):
    for case in catalog:
        for fw in FRAMEWORKS:
            assert case.programs_for(fw) or fw in case.no_equivalent, f"{case.id}: no {fw} program and no reason"


def test_hash_is_stable_and_content_based(tmp_path):
    with open(load_catalog().path) as fh:
        text = fh.read()
    a = tmp_path / "a.toml"
    b = tmp_path / "b.toml"
    a.write_text(text)
    b.write_text("# a comment changes nothing\n" + text)
    assert load_catalog(a).hash == load_catalog(b).hash, "comments must not make shards stale"
    c = tmp_path / "c.toml"
    c.write_text(text.replace('at = { x = 0 }', 'at = { x = 1 }', 1))
    assert load_catalog(c).hash != load_catalog(a).hash, "a changed point must change the hash"
    shutil.copytree(Path(load_catalog().path).parent / "programs", tmp_path / "programs")
    assert load_catalog(tmp_path / "c.toml").hash != load_catalog(tmp_path / "b.toml").hash, \
        "with every framework's programs beside it too"


_INLINE = MAXIMUM_TIE_HEAD + """[case.programs]
torch = ["torch.maximum(x, y)"]
jax = ["jax.numpy.maximum(x, y)"]
[case.notes]
jax = "a note"
"""


def test_the_hash_is_the_same_wherever_a_frameworks_programs_are_written(tmp_path):
    """A case's own [case.programs] table and the framework's program file (programs/<fw>.toml) are two layouts
    of one content: moving torch's programs from one to the other leaves the catalog hash, every case's measurement
    hash and the notes' order alone; changing a program changes the hash."""
    (tmp_path / "inline").mkdir()
    (tmp_path / "inline" / "catalog.toml").write_text(_INLINE)
    (tmp_path / "files" / "programs").mkdir(parents=True)
    (tmp_path / "files" / "catalog.toml").write_text(MAXIMUM_TIE_HEAD + '[case.programs]\njax = ["jax.numpy.maximum(x, y)"]\n'
                                                    '[case.notes]\njax = "a note"\n')
    (tmp_path / "files" / "programs" / "torch.toml").write_text('["maximum@tie"]\nprograms = ["torch.maximum(x, y)"]\n')
    inline, files = load_catalog(tmp_path / "inline" / "catalog.toml"), load_catalog(tmp_path / "files" / "catalog.toml")
    assert inline.hash == files.hash, "where torch's programs are written must not make shards stale"
    (a,), (b,) = inline.cases, files.cases
    assert a.programs == b.programs and a.notes == b.notes, "one parsed case either way"
    assert [a.measurement_hash(fw) for fw in ("torch", "jax")] == [b.measurement_hash(fw) for fw in ("torch", "jax")]
    (tmp_path / "files" / "programs" / "torch.toml").write_text('["maximum@tie"]\nprograms = ["torch.fmax(x, y)"]\n')
    forget_loaded()  # load_catalog keeps what it read by path
    assert load_catalog(tmp_path / "files" / "catalog.toml").hash != inline.hash, "a changed program changes the hash"


def test_notes_follow_the_registry_order_wherever_they_are_written(catalog):
    order = list(FRAMEWORKS)
    for case in catalog:
        for table in (case.notes, case.no_equivalent):
            assert list(table) == sorted(table, key=order.index), f"{case.id}: {list(table)} not in registry order"


@pytest.mark.parametrize(
    "body, reason",
    [
        ("[[case]]\nid='a'\nsympy='Max(x, 0)'\nat={x=0}\n[case.programs]\ntorch=['torch.relu(x)']\njax=['jax.nn.relu(x)']\n"
         "[[case]]\nid='b'\nsympy='Max(x, 0)'\nat={x=1}\n[case.programs]\ntorch=['torch.relu(x)']\n",
         "case 'b': no jax program and no no_equivalent.jax reason"),
        ("[[case]]\nid='a'\nsympy='Max(x, 0)'\nat={x=0}\n[case.programs]\ntorch=['__import__(1)']\njax=['jax.nn.relu(x)']\n",
         "unknown name '__import__'"),
        ("[[case]]\nid='a'\nsympy='Max(x, 0)'\nat={x=0}\n[case.programs]\ntorch=['jax.nn.relu(x)']\njax=['jax.nn.relu(x)']\n",
         "unknown name 'jax' (inputs: x; namespaces: torch)"),
        ("[[case]]\nid='a'\nsympy='eval(x)'\nat={x=0}\n[case.programs]\ntorch=['torch.relu(x)']\njax=['jax.nn.relu(x)']\n",
         "sympy field: unknown name 'eval'"),
        ("[[case]]\nsympy='Max(x, 0)'\n", "missing field 'id'"),
        ("".join(f"[[case]]\nid='{i}'\nsympy='Max(x, 0)'\nat={{x=0}}\n[case.programs]\ntorch=['torch.relu(x)']\n"
                 "jax=['jax.nn.relu(x)']\n" for i in ("relu@(0)", "relu@[0]")),
         "case ids 'relu@(0)' and 'relu@[0]' read the same in a report page name and anchor ('relu-at-0')"),
        (("[[case]]\nid='a'\nsympy='Max(x, 0)'\nat={x=0}\n[case.programs]\ntorch=['torch.relu(x)']\n"
          "jax=['jax.nn.relu(x * 2)', 'jax.nn.relu(x + 2)']\n"),
         "jax programs 'jax.nn.relu(x * 2)' and 'jax.nn.relu(x + 2)' read the same in a report anchor"),
        ("[[case\n", "not valid TOML"),
    ],
)
def test_bad_catalog_is_refused(tmp_path, body, reason):
    p = tmp_path / "bad.toml"
    p.write_text(body)
    with pytest.raises(CatalogError) as info:
        load_catalog(p)
    assert reason in str(info.value), f"expected {reason!r} in {info.value}"


def test_missing_catalog(tmp_path):
    with pytest.raises(CatalogError, match="cannot read catalog"):
        load_catalog(tmp_path / "nope.toml")


ONE = RELU_AT_0 + """sources = ["P0"]
[case.programs]
torch = ["torch.relu(x)"]
jax = ["jax.nn.relu(x)"]
"""


@pytest.mark.parametrize(
    "body, reason",
    [
        ("case = 1\n", "'case' must be an array of tables ([[case]]), not an integer"),
        ("x = " + "[" * 5000 + "]" * 5000 + "\n", "not valid TOML: nested too deeply"),
        ("x = " + "{a = " * 5000 + "1" + "}" * 5000 + "\n", "not valid TOML: nested too deeply"),
        ("case = [1]\n", "case #1: a case must be a table ([[case]]), not an integer"),
        ("", "has no case"),
        ("# only a comment\ntitle = 'x'\n", "has no case"),
        (ONE.replace('sources = ["P0"]', "sources = 5"), "field 'sources' must be a list, not an integer"),
        (ONE.replace('sources = ["P0"]', "sources = [5]"), "field 'sources' must hold strings, not an integer 5"),
        (ONE.replace("at = { x = 0 }", 'at = { x = "a" }'), "input 'x': a string 'a' is not a number"),
        (ONE.replace("at = { x = 0 }", "at = { x = [1, true] }"), "input 'x': a boolean"),
        (ONE.replace("at = { x = 0 }", "at = { x = nan }"), "nan is not a finite float64 number"),
        (ONE.replace("at = { x = 0 }", "at = { x = 1979-05-27 }"), "is not a number"),
        (ONE.replace("at = { x = 0 }", "at = { x = [[1], [2, 3]] }"), "ragged"),
        (ONE.replace("at = { x = 0 }", "at = 3"), "field 'at' must be a table"),
        (ONE.replace("at = { x = 0 }", "at = { torch = 0 }"), "input name 'torch' must be an identifier"),
        (ONE.replace('title = "relu at 0"', "title = 1"), "field 'title' must be a string, not an integer"),
        (ONE.replace("[case.programs]", "notes = 1\n[case.programs]"), "field 'notes' must be a table"),
        (ONE.replace("[case.programs]", "notes = { jax = 1 }\n[case.programs]"), "field 'notes' must hold strings"),
        (ONE.replace('torch = ["torch.relu(x)"]', 'torch = ["torch.relu(x)", 1]'), "'torch' must hold strings"),
        (ONE.replace('torch = ["torch.relu(x)"]', 'torch = "torch.relu(x)"'), "'torch' must be a list"),
        (ONE.replace('activation = "relu"', 'activation = "relu"\ntie = "yes"'), "'tie' must be true or false"),
        (ONE.replace('activation = "relu"', "activation = 1"), "'activation' must be a string"),
        (ONE.replace('activation = "relu"', 'activation = "relu"\nnote = []'), "'note' must be a string"),
        (ONE.replace('activation = "relu"', 'activation = "relu"\nmodes = [1]'), "'modes' must be a list of"),
        (ONE.replace('activation = "relu"', 'activation = "relu"\nno_equivalent = 1'), "'no_equivalent' must be a table"),
    ],
)
def test_mistyped_catalog_is_one_line(tmp_path, body, reason):
    p = tmp_path / "bad.toml"
    p.write_text(body)
    with pytest.raises(CatalogError) as info:
        load_catalog(p)
    assert reason in str(info.value) and "\n" not in str(info.value), f"expected {reason!r} in {info.value}"


@pytest.mark.parametrize("command", ["probe", "report"])
@pytest.mark.parametrize("body", ["", "case = [1]\n", ONE.replace('sources = ["P0"]', "sources = 5")])
def test_cli_refuses_a_bad_catalog(tmp_path, capsys, command, body):
    """`probe --catalog empty.toml` used to probe the default catalog; now every bad catalog is exit 2."""
    from kinkcheck import cli

    cat = tmp_path / "c.toml"
    cat.write_text(body)
    (tmp_path / "shards").mkdir()
    argv = {"probe": ["probe", "--framework", "torch", "--out", str(tmp_path / "torch-9-cpu.json"), "--no-isolate",
                      "--quiet", "--catalog", str(cat)],
            "report": ["report", "--shards", str(tmp_path / "shards"), "--out", str(tmp_path / "out"),
                       "--catalog", str(cat)]}[command]
    assert cli.main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and ("catalog" in err[0] or "case" in err[0]), err
    assert not (tmp_path / "torch-9-cpu.json").exists(), "nothing probed"


def test_a_probe_of_one_framework_parses_its_programs_only():
    """``load_catalog(frameworks=...)``: the other frameworks' programs are left out, the hash is the whole
    catalog's (a probe of one framework need not parse the other frameworks' hundreds of programs)."""
    whole, torch_only = load_catalog(), load_catalog(frameworks=("torch",))
    assert torch_only.hash == whole.hash, "the catalog hash covers every framework"
    assert {p.framework for _, p in torch_only.programs()} == {"torch"}
    assert [p.id for _, p in torch_only.programs("torch")] == [p.id for _, p in whole.programs("torch")]
    assert [c.measurement_hash("torch") for c in torch_only] == [c.measurement_hash("torch") for c in whole]


ONE_CASE = ("[[case]]\nid='a'\nsympy='Max(x, 0)'\nat={x=0}\n[case.programs]\ntorch=['torch.relu(x)']\n"
            "jax=['jax.nn.relu(x)']\n")


def test_a_parsed_catalog_is_cached_on_disk_by_content(tmp_path, monkeypatch):
    """The parse is cached (a tenth of a light framework's probe): the same content at another path is one
    entry, given back with its own path; changed content is parsed again; a torn entry is parsed again."""
    from dataclasses import replace

    cache = tmp_path / "cache"
    monkeypatch.setenv("KINKCHECK_CACHE_DIR", str(cache))
    paths = []
    for name in ("a", "b", "c", "d"):
        (tmp_path / name).mkdir()
        paths.append(tmp_path / name / "catalog.toml")
    paths[0].write_text(ONE_CASE)
    paths[1].write_text(ONE_CASE)
    paths[2].write_text(ONE_CASE.replace("at={x=0}", "at={x=1}"))
    first = load_catalog(paths[0])
    entries = sorted((cache / "catalogs").iterdir())
    assert len(entries) == 1, f"one entry for one content: {entries}"
    second = load_catalog(paths[1])
    assert second.path == str(paths[1].resolve()), "a cached catalog carries the path it was loaded from"
    assert replace(second, path=first.path) == first and sorted((cache / "catalogs").iterdir()) == entries
    third = load_catalog(paths[2])
    assert third.cases[0].at == {"x": 1}, "changed content is parsed, not taken from the cache"
    assert len(list((cache / "catalogs").iterdir())) == 2
    entries[0].write_bytes(b"\x80\x04torn")
    paths[3].write_text(ONE_CASE)
    fourth = load_catalog(paths[3])
    assert replace(fourth, path=first.path) == first, "a torn entry is parsed again"
    assert [p.tree for _, p in fourth.programs()] == [p.tree for _, p in first.programs()]


def test_a_registered_framework_changes_the_cache_key(tmp_path, monkeypatch):
    """What the parse reads from the registry (names, aliases, modes) is part of the key: a catalog parsed
    before a framework was registered is not given back after."""
    from kinkcheck.catalog import _cache_key
    from kinkcheck.registry import Framework, registered

    path = tmp_path / "catalog.toml"
    path.write_text(ONE_CASE)
    before = _cache_key(str(path), None)
    fake = Framework("keyfw", "KeyFW", "keyfw", "keyfw_adapter", ("reverse",), ("d", "#000000"))
    with registered(fake):
        assert _cache_key(str(path), None) != before
    assert _cache_key(str(path), None) == before
    assert _cache_key(str(tmp_path / "missing.toml"), None) is None, "an unreadable catalog is parsed (and refused)"


def test_the_catalog_and_its_staged_cases_cover_the_census():
    """Issue 14: the catalog, with the cases staged in references/staged/ if any are still waiting for the
    matrix probe that moves them in (``nox -s promote``), holds at least 150 cases and covers at least 95 % of
    each framework's census of kinked operations; a staged case has a program or a reason in every framework."""
    from kinkcheck.census import coverage, load_census

    main = load_catalog()
    union = with_staged(main)
    waiting = staged_case_ids(main.path)
    assert len(list(union)) >= 150, f"{len(list(union))} cases: issue 14 asks for at least 150"
    for case in (c for c in union if c.id in waiting):
        for fw in FRAMEWORKS:
            assert case.programs_for(fw) or fw in case.no_equivalent, f"staged {case.id}: no {fw} program, no reason"
    for fw, least in (("torch", 0.95), ("jax", 0.95)):
        cov = coverage(load_census(fw), union)
        share = len(cov.covered) / (len(cov.covered) + len(cov.uncovered))
        assert share >= least, f"{fw}: the cases cover {share:.1%} of the census; uncovered {cov.uncovered}"


def test_with_staged_appends_the_staged_cases_and_keeps_the_catalogs_hash(tmp_path):
    """The staged cases (staged/catalog.toml beside the catalog) follow the catalog's; a probe of the union
    records the catalog's hash, each case its own measurement hash."""

    def catalog_with(name, staged=None):  # a folder each: load_catalog memoizes by path within a process
        (tmp_path / name / "staged").mkdir(parents=True)
        (tmp_path / name / "catalog.toml").write_text(MAXIMUM_AT_TIE)
        if staged is not None:
            (tmp_path / name / "staged" / "catalog.toml").write_text(staged)
        return load_catalog(tmp_path / name / "catalog.toml")

    alone = catalog_with("none")
    assert with_staged(alone) is alone and staged_case_ids(alone.path) == frozenset(), "no staged file: the catalog"
    main = catalog_with("one", STAGED_RELU)
    union = with_staged(main)
    assert [c.id for c in union] == ["maximum@tie", "relu-written@0"], "catalog order, then the staged cases"
    assert (union.hash, union.path, union.staged, main.staged) == (main.hash, main.path, True, False)
    assert with_staged(union) is union, "a union is not extended twice"
    assert staged_case_ids(main.path) == {"relu-written@0"}
    assert union.case("relu-written@0").measurement_hash("torch") == load_catalog(
        tmp_path / "one" / "staged" / "catalog.toml").case("relu-written@0").measurement_hash("torch"), \
        "the same measurement hash staged or not: a case measured staged is fresh once it moves"
    with pytest.raises(CatalogError, match="already in the catalog.*maximum@tie"):
        with_staged(catalog_with("twice", MAXIMUM_AT_TIE))
    with pytest.raises(CatalogError, match="'maximum@tie' \\(catalog\\) and 'Maximum@tie' \\(staged\\) read the same"):
        with_staged(catalog_with("slug", MAXIMUM_AT_TIE.replace('"maximum@tie"', '"Maximum@tie"')))
    lacking = catalog_with("lacking", STAGED_RELU)
    (tmp_path / "lacking" / "programs").mkdir()
    (tmp_path / "lacking" / "programs" / "tensorflow.toml").write_text('["maximum@tie"]\nno_equivalent = "t"\n')
    with pytest.raises(CatalogError, match="program files must be the catalog's.*tensorflow.toml on one side only"):
        with_staged(lacking)
    (tmp_path / "nope" / "staged" / "programs").mkdir(parents=True)
    (tmp_path / "nope" / "staged" / "programs" / "tensorflow.toml").write_text('["nope@0"]\nno_equivalent = "t"\n')
    (tmp_path / "nope" / "staged" / "catalog.toml").write_text(STAGED_RELU)
    with pytest.raises(CatalogError, match=r"^staged/programs/tensorflow.toml: 'nope@0' is not a case id"):
        load_catalog(tmp_path / "nope" / "staged" / "catalog.toml")
    broken = catalog_with("broken", "[[case]\n")
    assert staged_case_ids(broken.path) == frozenset(), "unreadable: no staged ids (the report only tells them apart)"
    with pytest.raises(CatalogError, match="not valid TOML"):
        with_staged(broken)


def test_comparisons_of_two_characters_name_their_own_rows():
    """x > 0 and x >= 0 are two programs (the case cond@0 has both): their row anchors differ."""
    from kinkcheck.language.anchors import program_slug

    gt, ge = (program_slug(f"jax.lax.cond(x {op} 0, jax.numpy.positive, jax.numpy.zeros_like, x)") for op in (">", ">="))
    assert gt != ge and ge == "jax-lax-cond-x-ge-0-jax-numpy-positive-jax-numpy-zeros-like-x", (gt, ge)
    assert program_slug("torch.where(x > 0, x, 0.0)") == "torch-where-x-0-x-0-0", "one-character comparisons as before"
    assert program_slug("x <= -1") == "x-le-minus-1" != program_slug("x <= 1"), "the minus after a word comparison"
    assert program_slug("x != -y") == "x-ne-minus-y" and program_slug("x == -0.0") == "x-eq-minus-0-0"


def test_the_condition_number_field_is_cond_at_every_matrix(catalog) -> None:
    """cond@identity's sympy field is s1/s2 everywhere, not only near the identity: (P + Q)/|P - Q| (P - Q < 0
    where det < 0, and the field without Abs was -cond there)."""
    import numpy as np
    import sympy

    from kinkcheck.oracles.symbolic import to_sympy

    f, syms, _ = to_sympy(catalog.case("cond@identity"))
    fn = sympy.lambdify(syms, f, "numpy")
    for m in ([[1.0, 0.0], [0.0, 1.0]], [[2.0, 1.0], [0.5, 3.0]], [[0.0, 1.0], [1.0, 0.0]], [[1.0, 2.0], [3.0, -4.0]],
              [[-1.5, 0.25], [0.75, 0.5]]):
        want = np.linalg.cond(np.array(m))
        got = fn(*[v for row in m for v in row])
        assert abs(got - want) <= 1e-12 * want, f"cond({m}) = {want}, the field gives {got} (det {np.linalg.det(m)})"


def test_a_program_s_own_function_is_read_with_its_constants(catalog, tmp_path):
    """tinygrad's and MLX's SELU round λ to 1.0507 (issue 44): their programs carry their own function, which
    the report judges them by; a malformed or misplaced own function is one line."""
    selu = catalog.case("selu@0")
    own = selu.own_functions[("tinygrad", "x.selu()")]
    assert own.sympy.startswith("1.0507 *") and "λ = 1.0507" in own.constants, own
    assert ("tinygrad", "x.selu(1.6732632423543772, 1.0507009873554805)") not in selu.own_functions, \
        "the program with the exact constants is judged by the case's own function"
    before = selu.measurement_hash("tinygrad")
    assert len(before) == 16, "an own function changes how cells are judged, not what is measured"

    def catalog_with(name, entry):
        folder = tmp_path / name
        (folder / "programs").mkdir(parents=True)
        (folder / "catalog.toml").write_text(MAXIMUM_AT_TIE)
        (folder / "programs" / "tensorflow.toml").write_text(
            '["maximum@tie"]\nprograms = ["tensorflow.maximum(x, y)"]\n' + entry)
        return load_catalog(folder / "catalog.toml")

    good = catalog_with("good", 'own_functions = { "tensorflow.maximum(x, y)" = '
                                '{ sympy = "Max(x, 1.5 * y)", constants = "c = 1.5" } }\n')
    assert good.case("maximum@tie").own_functions[("tensorflow", "tensorflow.maximum(x, y)")].constants == "c = 1.5"
    for name, entry, message in [
        ("other", 'own_functions = { "tensorflow.minimum(x, y)" = { sympy = "Max(x, y)", constants = "c" } }\n',
         "not one of the case's tensorflow programs"),
        ("fields", 'own_functions = { "tensorflow.maximum(x, y)" = { sympy = "Max(x, y)" } }\n',
         "must be a table with a 'sympy' and a 'constants' string"),
        ("expr", 'own_functions = { "tensorflow.maximum(x, y)" = { sympy = "eval(x)", constants = "c" } }\n',
         "sympy field"),
        ("flat", 'own_functions = "Max(x, y)"\n', "must be a table of program"),
    ]:
        with pytest.raises(CatalogError, match=message):
            catalog_with(name, entry)


def test_find_is_the_one_lookup_of_a_program_at_a_point() -> None:
    """catalog.find (issue 47): the case holding a framework's program at a point, in any spelling of the program,
    the sign of zero counting; what every face (ask, lock) asks of the catalog."""
    from kinkcheck.catalog import find, point_key

    case, text = find("torch", "torch.clamp(x, min=0.0)", {"x": 0.0})
    assert (case.id, text) == ("relu@0", "torch.clamp(x, min=0)"), "the catalog's text, from another spelling"
    case, _ = find("torch", "torch.relu(x)", {"x": -0.0})
    assert case.id == "relu@-0.0", "-0.0 is its own point, not 0"
    assert find("torch", "torch.relu(x)", {"x": 0.5}) is None, "no case at that point"
    assert find("jax", "torch.relu(x)", {"x": 0.0}) is None, "another framework's program is not jax's"
    assert find("torch", "torch.maximum(x, y)", {"x": 1.0, "y": 1.0})[0].id == "maximum@tie"
    assert point_key({"y": 1, "x": -0.0}) == [["x", "-0.0"], ["y", "1.0"]], "names sorted, 1 is 1.0, -0.0 kept"
    assert point_key({"v": [1, 3, 3]}) == [["v", ["1.0", "3.0", "3.0"]]]
    assert find("torch", "torch.relu(x)", {"x": 0.0}, cases=[]) is None, "cases given: only those searched"
