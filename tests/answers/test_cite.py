"""``kinkcheck cite``: the sentence, the link to the program's row on the case page, the entries, bad input.

The report is the one the committed shards build now (the ``shards_report`` fixture of conftest.py), so
these tests do not wait for the committed ``reports/conventions.json`` to be re-rendered.
"""

from __future__ import annotations

import json

import msgspec
import pytest
from packaging.version import Version

from kinkcheck.answers.cite import CiteError, bibtex, cff, cite
from kinkcheck.report.cells import load_report_for, principal_case
from kinkcheck.cli import main
from kinkcheck.language.decimals import decimal_value
from kinkcheck.report.model import Case, Oracle, report_json

#: The published site's root: pyproject.toml's [project.urls] Documentation (issue 46: an installed user has no
#: reports/ folder, so cite links the site's pages).
SITE = "https://kinkcheck.github.io/kinkcheck/"


@pytest.fixture(scope="module")
def report(shards_report):
    return shards_report


@pytest.fixture(scope="module")
def small_doc(report):
    """The report cut to its first 50 observations (relu@0 in the oldest torch release), as JSON objects."""
    return json.loads(report_json(msgspec.structs.replace(report, observations=report.observations[:50])))


def test_sentence_states_value_label_release_and_rule(report):
    c = cite(report, "torch.clamp(x, min=0)", case="relu@0", framework_version="2.13.0")
    assert c.sentence == (
        "In PyTorch 2.13.0 (CPU, float64, reverse mode), the derivative of `torch.clamp(x, min=0)` at x = 0 is 1 "
        "(right: equals the right one-sided derivative f'(x0+)); this departs from PyTorch's documented rule "
        "(kinkcheck, case relu@0)."
    ), c.sentence
    assert c.anchor == "case-relu-at-0--torch-torch-clamp-x-min-0--torch-2-13-0-cpu", \
        f"reverse mode: the release's square in the program's strip: {c.anchor}"
    assert c.link() == "reports/cases/relu-at-0.md#case-relu-at-0--torch-torch-clamp-x-min-0--torch-2-13-0-cpu", \
        c.link()
    assert c.observation.environment == "torch-2.13.0-cpu" and c.observation.value == {"x": 1.0}, c.observation


@pytest.mark.parametrize(("base", "link"), [
    ("reports", "reports/cases/max-at-1-1.md#case-max-at-1-1--torch-torch-amax-v--torch-2-15-0-cpu"),
    ("https://example.org/kinkcheck/blob/main/reports/",
     "https://example.org/kinkcheck/blob/main/reports/cases/max-at-1-1.md#case-max-at-1-1--torch-torch-amax-v--torch-2-15-0-cpu"),
    ("https://example.org/kinkcheck/report/conventions.html",
     "https://example.org/kinkcheck/report/cases/max-at-1-1.html#case-max-at-1-1--torch-torch-amax-v--torch-2-15-0-cpu"),
    ("reports/conventions.md", "reports/cases/max-at-1-1.md#case-max-at-1-1--torch-torch-amax-v--torch-2-15-0-cpu"),
    ("conventions.md", "./cases/max-at-1-1.md#case-max-at-1-1--torch-torch-amax-v--torch-2-15-0-cpu"),
    # a case page of the site (or of the reports folder): its cases/ is the report's, not one more level
    ("https://example.org/kinkcheck/report/cases/relu-at-0.html",
     "https://example.org/kinkcheck/report/cases/max-at-1-1.html#case-max-at-1-1--torch-torch-amax-v--torch-2-15-0-cpu"),
    ("reports/cases/relu-at-0.md", "reports/cases/max-at-1-1.md#case-max-at-1-1--torch-torch-amax-v--torch-2-15-0-cpu"),
])
def test_link_base_is_the_reports_folder_or_a_page_of_the_site(report, base, link):
    assert cite(report, "torch.amax(v)", case="max@[1,1]").link(base) == link


def test_link_base_of_the_site_root_links_the_sites_pages():
    """`--link-base` with the site's own root (the Documentation URL, with or without its slash) links the site's
    report pages, as without --link-base, not a `cases/<case>.md` that the site does not have."""
    from kinkcheck.answers.cite import site_base, site_url

    assert site_url() == SITE
    for given in (SITE, SITE.rstrip("/")):
        assert site_base(given) == SITE + "report/conventions.html", site_base(given)
    assert site_base("https://example.org/kinkcheck/blob/main/reports/") == \
        "https://example.org/kinkcheck/blob/main/reports/", "another base is kept as given"


def test_anchor_is_a_row_of_the_case_page(report, tmp_path_factory, catalog):
    """The rendered per-case page holds the cited row's anchor (the site's copy of it: tests/render/test_site.py)."""
    from conftest import ROOT

    from kinkcheck.render import write_reports
    from kinkcheck.shards import load_shards

    out = tmp_path_factory.mktemp("rendered")
    shards, errors = load_shards(ROOT / "references" / "observations", catalog)
    write_reports(shards, catalog, out, gaps=errors)
    for program, case, mode in [("torch.clamp(x, min=0)", "relu@0", "reverse"),
                                ("jnp.maximum(x, 0.0)", "relu@0", "reverse"), ("torch.amax(v)", "max@[1,1]", "reverse"),
                                ("torch.clamp(x, -1, 1)", "clamp@-1", "reverse"),
                                ("torch.clamp(x, -1, 1)", "clamp@-1", "inductor"),
                                ("jnp.maximum(x, 0.0)", "relu@0", "jit")]:
        c = cite(report, program, case=case, mode=mode)
        page = (out / c.page).read_text()
        assert f'id="{c.anchor}"' in page, f"anchor {c.anchor} missing from {c.page}"


def test_alias_and_spacing_are_canonicalised(report):
    c = cite(report, "jnp.maximum(x,0.0)", case="relu@0")
    assert "`jax.numpy.maximum(x, 0.0)`" in c.sentence and "is 0.5 (mean" in c.sentence, c.sentence
    newest = max((e.framework_version for e in report.environments if e.framework == "jax"), key=Version)
    assert c.environment.framework_version == newest, "the newest measured JAX by default"


def test_other_modes_link_the_modes_table_or_the_program_row(report):
    c = cite(report, "torch.clamp(x, -1, 1)", case="clamp@-1", mode="inductor")
    old = cite(report, "torch.clamp(x, -1, 1)", case="clamp@-1", mode="inductor", framework_version="2.13.0")
    assert c.anchor == "case-clamp-at-minus-1--torch-torch-clamp-x-minus-1-1--modes--inductor", \
        f"the newest release: its cell in the modes table: {c.anchor}"
    assert old.anchor == "case-clamp-at-minus-1--torch-torch-clamp-x-minus-1-1", \
        f"an older release's other mode: the program's row: {old.anchor}"
    assert "inductor mode" in c.sentence and c.observation.mode == "inductor", c.sentence


def test_mode_and_dtype_select_the_cell(report):
    c = cite(report, "torch.minimum(x, torch.full_like(x, 0.7))", case="hardtanh0.7@0.69921875", mode="inductor",
             dtype="bfloat16", framework_version="2.13.0")
    assert "bfloat16, inductor mode" in c.sentence, c.sentence
    assert (c.observation.mode, c.observation.dtype) == ("inductor", "bfloat16"), c.observation
    assert "the input is" not in c.sentence, "0.69921875 is a bfloat16 number: no rounded input to state"
    r = cite(report, "torch.relu(x)", case="relu@1e-45", dtype="float32", framework_version="2.15.0")
    assert r.sentence.startswith("In PyTorch 2.15.0 (CPU, float32, reverse mode), the derivative of `torch.relu(x)` "
                                 "at x = 1e-45 is 1 (derivative: ") and \
        "; in float32 the input is 1.401298464324817e-45" in r.sentence, r.sentence  # the shortest float64 decimal


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"program": "x ** 0.5", "case": "sqrt@0"}, r"x \*\* 0.5 is a program of torch, jax(, \w+)* and \w+ at sqrt@0; pick one with --framework"),
    ({"program": "torch.relu(x)", "framework": "jax"}, "not in the report's catalog for jax"),
    ({"program": "torch.relu(x)", "case": "maximum@tie"}, "case 'maximum@tie' has no program"),
    ({"program": "torch.foo(x)"}, "not in the report's catalog"),
    ({"program": "torch.clamp(x, 0, 5)"}, r"not in the report's catalog; nearest: torch.clamp\(x, 0, 6\); "
                                          r"torch.clamp\(x, -1, 1\)"),
    ({"program": "torch.relu(x)", "case": "nope@0"}, "unknown case"),
    ({"program": "torch.relu(x)", "case": "relu@0", "framework_version": "9.9"},
     r"torch 9.9 on cpu is not in the report \(measured: 1.13.1, 2.0.1, "),
    ({"program": "torch.relu(x)", "case": "relu@0", "device": "metal"},
     r"no torch release measured on metal \(measured on: cpu, cpu-linux_x86_64_v2, cpu-linux_x86_64_v3, cuda;"),
    ({"program": "torch.relu(x)", "case": "relu@0", "mode": "jit"}, "torch has no jit mode"),
    ({"program": "torch.relu(x)", "case": "relu@0", "dtype": "float128"}, "unknown dtype"),
])
def test_bad_requests(report, kwargs, message):
    with pytest.raises(CiteError, match=message):
        cite(report, **kwargs)


def test_entries_name_the_report(report):
    b = bibtex(report)
    prov = report.provenance
    assert b.startswith(f"@misc{{kinkcheck-{prov.generated_at[:10]},") and prov.catalog_hash in b and b.endswith("}"), b
    assert "PyTorch 1.13.1–2.15.0 (17 releases) and JAX 0.4.13–0.12.0.1 (13 releases)" in b, b
    y = cff(report)
    assert "type: data" in y and prov.catalog_hash in y, y
    assert f"{len(report.cases)} cases, {len(report.observations)} observations" in y, y


def test_cli_prints_sentence_link_and_entry(shards_report_path, capsys):
    assert main(["cite", "torch.clamp(x, -1, 1)", "--case", "clamp@-1", "--report", str(shards_report_path)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("In PyTorch ") and "clamp@-1" in out[0], out[0]
    assert out[1] == (f"Report cell: {SITE}report/cases/clamp-at-minus-1.html#case-clamp-at-minus-1--torch-torch-"
                      "clamp-x-minus-1-1--torch-2-15-0-cpu"), f"the published site's case page by default: {out[1]}"
    assert not out[2].startswith("Local page:"), f"the report read has no case pages beside it: {out[2]}"
    assert any(line.startswith("@misc{") for line in out), out
    assert main(["cite", "torch.clamp(x, -1, 1)", "--case", "clamp@-1", "--report", str(shards_report_path),
                 "--link-base", "site/report/conventions.html", "--cff"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[1] == ("Report cell: site/report/cases/clamp-at-minus-1.html#case-clamp-at-minus-1--torch-torch-clamp-x-"
                      "minus-1-1--torch-2-15-0-cpu"), out[1]
    assert "- type: data" in out, out


@pytest.mark.parametrize("argv", [
    ["cite", "torch.foo(x)"],                                      # not in the catalog
    ["cite", "x ** 0.5"],                                          # both frameworks measure this text
    ["cite", "torch.relu(x)", "--case", "relu@0", "--report", "/nonexistent/report.json"],
])
def test_cli_bad_input_is_one_line_exit_2(argv, capsys, shards_report_path):
    if "--report" not in argv:
        argv = argv + ["--report", str(shards_report_path)]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("kinkcheck: error:"), err


@pytest.mark.parametrize(("content", "words"), [
    (json.dumps({"schema": "something/else"}), "not a kinkcheck/conventions/v2 report"),
    (json.dumps({"schema": "kinkcheck/conventions/v1", "provenance": {}, "environments": [], "cases": [],
                 "observations": []}), ("not a kinkcheck/conventions/v2 report (an older or foreign document: "
                                        "re-render it with `kinkcheck report`)")),
    ("[1, 2]", "malformed kinkcheck report"),
    ('{"schema": "kinkcheck/conventions/v2", "provenance": ', "not JSON"),
])
def test_cli_refuses_a_file_that_is_not_a_v2_report(tmp_path, capsys, content, words):
    bad = tmp_path / "r.json"
    bad.write_text(content)
    assert main(["cite", "torch.relu(x)", "--case", "relu@0", "--report", str(bad)]) == 2
    out, err = capsys.readouterr()
    assert out == "" and len(err.strip().splitlines()) == 1 and words in err and str(bad) in err, err


def test_a_truncated_report_is_one_line(shards_report_path, tmp_path, capsys):
    raw = shards_report_path.read_bytes()
    bad = tmp_path / "r.json"
    bad.write_bytes(raw[: len(raw) // 2])
    assert main(["cite", "torch.relu(x)", "--case", "relu@0", "--report", str(bad)]) == 2
    out, err = capsys.readouterr()
    assert out == "" and len(err.strip().splitlines()) == 1 and "not JSON" in err, err


@pytest.mark.parametrize(("part", "value", "words"), [
    ("generated_at", 5, "Expected `str`, got `int` - at `$.provenance.generated_at`"),
    ("catalog_hash", None, "Expected `str`, got `null` - at `$.provenance.catalog_hash`"),
    ("kinkcheck_version", [], "at `$.provenance.kinkcheck_version`"),
])
def test_mistyped_provenance_prints_no_sentence_then_a_traceback(small_doc, tmp_path, capsys, part, value, words):
    """cite used to print its sentence and then fail in the BibTeX entry: now it checks first, prints nothing."""
    bad = tmp_path / "r.json"
    bad.write_text(json.dumps({**small_doc, "provenance": {**small_doc["provenance"], part: value}}))
    assert main(["cite", "torch.relu(x)", "--case", "relu@0", "--report", str(bad)]) == 2
    out, err = capsys.readouterr()
    assert out == "", f"nothing on stdout before the error: {out!r}"
    assert len(err.strip().splitlines()) == 1 and words in err, err


@pytest.mark.parametrize(("program", "principal"), [
    ("torch.relu(x)", "relu@0"),                  # not relu@-0.0 / relu@1e-45: floating-point edges of that kink
    ("torch.maximum(x, y)", "maximum@tie"),       # maximum@-0.0 comes first in the catalog but is a signed-zero edge
    ("jax.lax.max(x, 0.0)", "relu@0"),
    ("torch.abs(x)", "abs@0"),
    ("torch.clamp(x, -1, 1)", "clamp@-1"),        # two ordinary kinks: the first in catalog order
    ("torch.nn.functional.softplus(x)", "softplus@0"),  # only a differentiable control: that one
])
def test_without_a_case_the_principal_kink_is_cited(report, program, principal):
    measured = [c.id for c in report.cases if program in c.programs_of(program.split(".")[0])]
    assert principal in measured, f"catalog changed: {program} is measured in {measured}"
    c = cite(report, program)
    assert c.case == principal and f"(kinkcheck, case {principal})." in c.sentence, (c.case, c.sentence)
    assert set(c.others) == set(measured) - {principal}, c.others
    assert c.sentence == cite(report, program, case=principal).sentence, "the same cell as naming the case"


def test_principal_case_rule_on_hand_made_cases():
    def case(cid, kind, **at):
        return Case(id=cid, title=cid, sympy="x", at=at, tie=False, sources=[], note=None, programs=[],
                    oracle=Oracle(components=list(at), kind=kind))

    cases = [case("a", "differentiable", x=0), case("b", "kink", x=-0.0), case("c", "kink", v=[0, 1e-45]),
             case("d", "jump", x=0.5), case("e", "kink", x=0)]
    assert principal_case(cases).id == "d", "skip differentiable, signed-zero and subnormal points"
    assert principal_case(cases[:3]).id == "a", "none qualifies: the first in catalog order"
    with pytest.raises(ValueError):
        principal_case([])


def test_framework_picks_a_text_both_frameworks_measure(report):
    t = cite(report, "x ** 0.5", case="sqrt@0", framework="torch")
    j = cite(report, "x ** 0.5", framework="jax")
    assert (t.environment.framework, j.environment.framework) == ("torch", "jax"), (t.environment, j.environment)
    assert j.sentence.startswith("In JAX ") and j.anchor.startswith("case-sqrt-at-0--jax-x-0-5--jax-"), j.anchor


def test_cli_without_case_lists_the_other_cases(shards_report_path, capsys):
    assert main(["cite", "torch.relu(x)", "--report", str(shards_report_path)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("In PyTorch ") and out[0].endswith("(kinkcheck, case relu@0)."), out[0]
    assert out[1] == (f"Report cell: {SITE}report/cases/relu-at-0.html#case-relu-at-0--torch-torch-relu-x--"
                      "torch-2-15-0-cpu"), out[1]
    assert out[2] == ("Also measured in: relu@1e-45, relu@-1e-45, relu@-0.0 "
                      "(kinkcheck cite 'torch.relu(x)' --case ID)"), out[2]
    assert main(["cite", "torch.relu(x)", "--case", "relu@-0.0", "--report", str(shards_report_path)]) == 0
    out = capsys.readouterr().out
    assert "case relu@-0.0)." in out and "Also measured in" not in out, out


def test_load_report_wraps_the_model_error(tmp_path):
    with pytest.raises(CiteError, match=r"no report at .*nope.json \(--report takes a report folder or its "
                                        r"conventions.json.gz; a clone renders one with `nox -s render`\)"):
        load_report_for(tmp_path / "nope.json")
    (tmp_path / "dir.json").mkdir()
    with pytest.raises(CiteError, match=r"no report at .*dir\.json/conventions\.json "):
        load_report_for(tmp_path / "dir.json")  # a folder stands for the report in it: none there


def test_a_cell_recorded_as_not_measured_says_why(report, not_measured_report):
    """Issue 30: a program whose CUDA cells were withdrawn (the probe's own error) is cited with that reason; once
    measured (the committed shards), with its value."""
    from kinkcheck.answers.cite import CiteError, cite

    program = "torch.nn.functional.multi_margin_loss(v.reshape(1, 3), torch.tensor([0]))"
    with pytest.raises(CiteError, match=r"on cuda \(not measured: the probe of kinkcheck 2d3abce built"):
        cite(not_measured_report, program, device="cuda")
    c = cite(report, program, device="cuda")
    assert c.environment.id == "torch-2.11.0-cuda" and c.observation.status == "ok" and "2.11.0" in c.sentence, (
        f"measured on the H200 now: cited with its value: {c.sentence}")


def test_a_report_is_named_by_its_folder_or_its_file(capsys):
    """--report takes the folder (as $KINKCHECK_REPORTS does) or its conventions.json.gz: the same answer."""
    from conftest import ROOT

    answers = []
    for report in (ROOT / "reports", ROOT / "reports" / "conventions.json.gz"):
        assert main(["cite", "torch.clamp(x, min=0)", "--report", str(report)]) == 0
        answers.append(capsys.readouterr().out)
    assert answers[0] == answers[1] and "is 0 (left" in answers[0], answers


def test_cite_of_one_programs_rows_says_what_the_whole_report_says():
    """`kinkcheck cite` reads the JSON's head and one program's rows of the Parquet file (0.42 s instead of 3.6 s,
    nox -s bench -- --lookup); the sentence, anchor (the modes table's too), other cases and entries are those of
    the whole report."""
    from conftest import ROOT

    path = ROOT / "reports" / "conventions.json.gz"
    full = load_report_for(path)
    part = load_report_for(path, program="x.clamp(min=0)")
    assert {o.program for o in part.observations} == {"x.clamp(min=0)"} and len(part.observations) > 100
    assert part.changed_in == [] and part.conformance.rows == [], "no derived section from a part of the rows"
    for kwargs in ({}, {"mode": "inductor"}, {"mode": "functional"}, {"framework_version": "2.13.0"},
                   {"dtype": "float16"}):
        a, b = cite(full, "x.clamp(min=0)", **kwargs), cite(part, "x.clamp(min=0)", **kwargs)
        assert (a.sentence, a.anchor, a.others) == (b.sentence, b.anchor, b.others), kwargs
    assert bibtex(full) == bibtex(part) and cff(full) == cff(part), "the entries name the whole report"


def _answer(report, program, kwargs):
    """What cite says of ``program`` in ``report``: the sentence, anchor and other cases, or its refusal's words."""
    try:
        c = cite(report, program, **kwargs)
    except CiteError as err:
        return str(err)
    return c.sentence, c.anchor, c.others


@pytest.mark.parametrize(("program", "kwargs"), [
    ("x.clamp(min=0)", {}), ("x.clamp(min=0)", {"mode": "inductor"}), ("x.clamp(min=0)", {"mode": "functional"}),
    ("x.clamp(min=0)", {"framework_version": "2.13.0"}), ("x.clamp(min=0)", {"dtype": "float16"}),
    ("torch.clamp(x, min=0)", {"case": "relu@-0.0"}), ("jnp.maximum(x, y)", {}),
    ("x.clamp(min=0.0)", {"framework": "torch"}), ("x.clamp(min=0)", {"framework_version": "0.0.1"}),
    ("x.clamp(min=0)", {"device": "cuda", "dtype": "bfloat16"}), ("x.clamp(min=0)", {"case": "abs@0"}),
])
def test_cite_of_one_cell_s_rows_says_what_the_whole_report_says(program, kwargs):
    """Issue 46: `kinkcheck cite` reads only the rows of the cell it states (the case it chooses, the mode and dtype
    asked: a run per release of one row group) and says what the whole report says: the sentence, anchor, other
    cases, and every refusal word for word (an unmeasured release, a case without the program)."""
    from conftest import ROOT

    path = ROOT / "reports" / "conventions.json.gz"
    full = load_report_for(path)
    cell = {k: kwargs[k] for k in ("case", "framework", "mode", "dtype") if k in kwargs}
    part = load_report_for(path, program=program, one_cell=True, **cell)
    said = {(o.case, o.mode, o.dtype) for o in part.observations}
    assert len(said) <= 1 and all(m == kwargs.get("mode", "reverse") and d == kwargs.get("dtype", "float64")
                                  for _, m, d in said), said
    assert _answer(part, program, kwargs) == _answer(full, program, kwargs), (program, kwargs)
    assert bibtex(full) == bibtex(part), "the entry names the whole report"


def test_a_report_with_its_observations_inline_is_read_whole_for_one_cell(report, shards_report_path):
    """A report that holds its observations in the JSON (no Parquet file, no table index of modes) is not narrowed
    to one cell: the releases and the modes table's anchor come from the rows, so all the program's are read, and
    cite says what the whole report says (issue 46 review: a narrowed read linked the program's row, not the modes
    table, and said a measured place had no release)."""
    for program, kwargs in (("F.relu(x)", {"mode": "inductor"}), ("jnp.maximum(x, y)", {"mode": "jit"}),
                            ("jax.nn.relu(x)", {"device": "cpu-linux_x86_64_v2", "mode": "vmap"})):
        cell = {k: v for k, v in kwargs.items() if k != "device"}
        part = load_report_for(shards_report_path, program=program, one_cell=True, **cell)
        assert {o.mode for o in part.observations} != {kwargs["mode"]}, "the program's rows, every mode"
        assert _answer(part, program, kwargs) == _answer(report, program, kwargs), (program, kwargs)


def test_a_report_read_for_one_cell_refuses_another():
    """`load_report_for(..., one_cell=True)` holds one cell's rows: cite of another mode, dtype or case of it is refused
    as such, not answered "no observation" (the rows are in the file, not read)."""
    from conftest import ROOT

    part = load_report_for(ROOT / "reports", program="torch.relu(x)", one_cell=True)
    assert cite(part, "torch.relu(x)").case == "relu@0"
    for kwargs in ({"mode": "inductor"}, {"dtype": "float32"}, {"case": "relu@-0.0"}):
        with pytest.raises(CiteError, match=r"this report was read for the cell relu@0, reverse mode, float64 "):
            cite(part, "torch.relu(x)", **kwargs)


def test_a_method_form_shared_by_frameworks_cites_each_framework_s_spelling(report):
    """Issue 44: x.clamp(min=0.0) is MindSpore's own text and torch's x.clamp(min=0): with --framework torch it is
    torch's program, as on every face."""
    c = cite(report, "x.clamp(min=0.0)", case="relu@0", framework="torch")
    assert "`x.clamp(min=0)`" in c.sentence and c.environment.framework == "torch", c.sentence


# --- cite --rule: a rule of the committed reports/rules.json.gz, its evidence from the Parquet file beside it -----

@pytest.fixture(scope="module")
def rules_doc():
    from conftest import ROOT

    from kinkcheck.rules import doc

    return doc.load(ROOT / "reports" / doc.FILE)


@pytest.fixture(scope="module")
def parquet():
    from conftest import ROOT

    return ROOT / "reports" / "observations.parquet"


def _rule(doc, operation, kind):
    return next(r for r in doc["rules"] if r["operation"] == operation and r["kind"] == kind)


def _headline(doc, rule):
    """(release, labels) of the rule in reverse mode, float64, plain CPU environments, oldest first (from the file)."""
    from kinkcheck.vocabulary import release_key

    out = {}
    for labels, idx in rule["labels"].items():
        for i in idx:
            env, mode, dtype = doc["cells"][i]
            e = doc["environments"][env]
            if (mode, dtype) == ("reverse", "float64") and env == f"{e['framework']}-{e['version']}-cpu":
                out[e["version"]] = tuple(labels.split()) if labels != "-" else ()
    return sorted(out.items(), key=lambda kv: release_key(kv[0]))


def test_rule_sentence_states_the_label_and_the_releases_it_holds_in(rules_doc, parquet):
    from kinkcheck.answers.cite import cite_rule
    from kinkcheck.report.query import read_table
    from kinkcheck.rules.page import LABEL_WORDS

    rule = _rule(rules_doc, "torch.clamp", "max at a bound")
    releases = _headline(rules_doc, rule)
    newest, labels = releases[-1]
    i = len(releases) - 1
    while i > 0 and releases[i - 1][1] == labels:
        i -= 1
    since = releases[i][0]  # the first release of the newest run of equal labels
    c = cite_rule(rules_doc, "torch.clamp@max", observations=parquet)
    span = f"PyTorch {since} to {newest}" if since != releases[0][0] else f"every measured PyTorch release ({since}"
    assert c.sentence.startswith(f"In {span}"), f"the run of releases with {labels}, {since} to {newest}: {c.sentence}"
    assert f"returns {LABEL_WORDS[labels[0]]} at its kinks of kind \"max at a bound\"" in c.sentence, \
        f"the rule's first label {labels[0]} in words: {c.sentence}"
    assert f"labels {'/'.join(labels)}" in c.sentence or f"label {labels[0]}" in c.sentence, c.sentence
    assert "inferred from" in c.sentence and "not itself a measurement" in c.sentence, c.sentence
    assert c.sentence.endswith("(kinkcheck rule torch.clamp@max-at-a-bound)."), c.sentence
    assert c.rule == "torch.clamp@max-at-a-bound" and c.releases == (since, newest), (c.rule, c.releases)
    assert c.link() == "reports/rules.md#rule-torch-clamp--max-at-a-bound", c.link()
    assert c.link("https://u.github.io/kinkcheck/report/conventions.html") == \
        "https://u.github.io/kinkcheck/report/rules.html#rule-torch-clamp--max-at-a-bound", "the site's rules page"
    assert c.link("https://u.github.io/kinkcheck/report/cases/relu-at-0.html") == \
        "https://u.github.io/kinkcheck/report/rules.html#rule-torch-clamp--max-at-a-bound", "from a case page too"
    # relu@0's torch.clamp(x, min=0) is evidence: its line carries the value measured in the newest release
    row = read_table(parquet, filters=[("environment", "==", f"torch-{newest}-cpu"), ("case", "==", "relu@0"),
                                       ("program", "==", "torch.clamp(x, min=0)"), ("mode", "==", "reverse"),
                                       ("dtype", "==", "float64")]).to_pylist()[0]
    value = decimal_value(json.loads(row["value"]))
    line = next((ln for ln in c.evidence if ln.startswith("  relu@0  torch.clamp(x, min=0): ")), None)
    assert line is not None and f"{value} in {since}–{newest}" in line, \
        f"evidence names relu@0's torch.clamp(x, min=0) = {value} in {since}–{newest}: {c.evidence}"
    old = cite_rule(rules_doc, "torch.clamp@max", observations=parquet, framework_version=releases[0][0])
    assert old.releases[0] == releases[0][0] and old.labels == releases[0][1], \
        f"--framework-version {releases[0][0]}: the run it belongs to: {old.releases} {old.labels}"


def test_rule_spellings_and_abbreviations(rules_doc):
    from kinkcheck.answers.cite import find_rule

    for spec in ("torch.clamp@max", "torch.clamp@max at a bound", "torch.clamp@max-at-a-bound",
                 "torch.Tensor.clamp@max", "clamp@max"):
        r = find_rule(rules_doc, spec, framework="torch" if spec.startswith("clamp") else None)
        assert (r["operation"], r["kind"]) == ("torch.clamp", "max at a bound"), f"{spec}: {r['operation']} {r['kind']}"
    assert find_rule(rules_doc, "torch.relu")["operation"] == "torch.nn.functional.relu", \
        "torch.relu is the census's torch.nn.functional.relu"
    assert find_rule(rules_doc, "F.relu@max")["operation"] == "torch.nn.functional.relu", "the F alias"
    with pytest.raises(CiteError, match=r"fits 2 kinds of kink.*torch\.clamp@max-at-a-bound, "
                                        r"torch\.clamp@min-at-a-bound"):
        find_rule(rules_doc, "torch.clamp@bound")  # the two bounds are two rules, which differ since 2.14.1
    with pytest.raises(CiteError, match=r"torch\.clamp has rules at 2 kinds of kink"):
        find_rule(rules_doc, "torch.clamp")
    with pytest.raises(CiteError, match=r"'clamp' names \d+ operations"):
        find_rule(rules_doc, "clamp")


def test_rule_counterexamples_are_never_dropped(rules_doc, parquet):
    from kinkcheck.answers.cite import cite_rule

    rule = _rule(rules_doc, "torch.abs", "abs at 0")
    assert rule["counterexamples"], "torch.abs at 0 has counter-examples in the committed file"
    c = cite_rule(rules_doc, "torch.abs", observations=parquet)
    assert c.counter_cells == len(rule["counterexamples"]), c.counter_cells
    for cell, case, program, _ in rule["counterexamples"]:
        env, mode, dtype = rules_doc["cells"][cell]
        assert any(ln.startswith(f"  {case}  {program}: ") and mode in ln and dtype in ln
                   for ln in c.counterexamples), f"counter-example {case} {program} {env} {mode} {dtype} missing"


def test_rule_evidence_is_capped_with_a_way_to_see_all(rules_doc, parquet):
    from kinkcheck.answers.cite import MAX_EVIDENCE, CiteError as Err, cite_rule
    from kinkcheck.rules.page import rule_id

    for r in sorted(rules_doc["rules"], key=lambda r: -len(r["programs"])):
        try:
            c = cite_rule(rules_doc, rule_id(r["operation"], r["kind"]), observations=parquet)
        except Err:
            continue
        break
    assert len(c.evidence) == MAX_EVIDENCE and c.more > 0, (c.rule, len(c.evidence), c.more)


def test_rule_whose_evidence_contradicts_itself_is_one_line_exit_2(rules_doc, capsys):
    from conftest import ROOT

    from kinkcheck.rules.page import rule_id

    rule = next(r for r in rules_doc["rules"] if (h := _headline(rules_doc, r)) and h[-1][1] == ())
    assert main(["cite", "--rule", rule_id(rule["operation"], rule["kind"]), "--report", str(ROOT / "reports")]) == 2
    out, err = capsys.readouterr()
    assert out == "" and len(err.strip().splitlines()) == 1 and "contradicts itself" in err, err


def test_cli_cites_a_rule_with_its_evidence_and_the_dataset_entry(capsys):
    from conftest import ROOT

    assert main(["cite", "--rule", "torch.clamp@max", "--report", str(ROOT / "reports")]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("In PyTorch ") and "kinkcheck rule torch.clamp@max-at-a-bound" in out[0], out[0]
    assert out[1] == f"Rule: {SITE}report/rules.html#rule-torch-clamp--max-at-a-bound", out[1]
    assert out[2] == f"Local page: {ROOT / 'reports' / 'rules.md'}#rule-torch-clamp--max-at-a-bound", \
        f"the page is beside the report read: {out[2]}"
    assert out[3].startswith("History (CPU, float64, reverse mode): "), out[3]
    assert any(ln.startswith("Inferred from measurements") for ln in out), out
    assert any(ln.startswith("evidence (PyTorch ") for ln in out) and any(ln.startswith("counter-examples") for ln in
                                                                           out), out
    assert any(ln.startswith("@misc{kinkcheck-") for ln in out), "--bibtex: the dataset entry"
    assert main(["cite", "--rule", "torch.clamp@max", "--report", str(ROOT / "reports" / "conventions.json.gz"),
                 "--cff"]) == 0
    assert "- type: data" in capsys.readouterr().out.splitlines(), "--cff: the dataset entry"
    assert "(a lower bound, max(x, bound), as clamp's min= or relu's 0)" in out[0], \
        f"the kind says which bound @max is (a user reads max= otherwise): {out[0]}"
    assert main(["cite", "--rule", "torch.clamp@max", "--framework-version", "torch==2.13.0", "--report",
                 str(ROOT / "reports")]) == 0, "FRAMEWORK==VERSION, as lock and migrate take it"
    first = capsys.readouterr().out.splitlines()[0]
    assert first.startswith("In PyTorch ") and " to 2.13.0 " in first and "(label right)" in first, first


def test_cli_rule_link_says_where_the_page_is_when_it_is_not_beside_the_rules(tmp_path, capsys):
    """An installed package holds rules.json.gz but not rules.md: the printed link says the page is in kinkcheck's
    repository (a fresh reader followed reports/rules.md#… to nothing)."""
    import shutil

    from conftest import ROOT

    for name in ("rules.json.gz", "conventions.json.gz", "observations.parquet"):
        shutil.copy(ROOT / "reports" / name, tmp_path / name)
    assert main(["cite", "--rule", "torch.clamp@max", "--report", str(tmp_path), "--link-base", "reports"]) == 0
    line = capsys.readouterr().out.splitlines()[1]
    assert line.startswith("Rule: reports/rules.md#rule-torch-clamp--max-at-a-bound (in kinkcheck's repository"), line
    assert main(["cite", "--rule", "torch.clamp@max", "--report", str(tmp_path)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[1] == f"Rule: {SITE}report/rules.html#rule-torch-clamp--max-at-a-bound", \
        f"by default the published site's rules page, which resolves from anywhere: {out[1]}"
    assert not out[2].startswith("Local page:"), f"no rules.md beside the report read: {out[2]}"


@pytest.mark.parametrize(("argv", "words"), [
    (["--rule", "torch.clmap"], "no rule for operation 'torch.clmap'; close: torch.clamp"),
    (["--rule", "torch.clamp@bound"], "fits 2 kinds of kink"),
    (["--rule", "torch.clamp@max", "--framework", "jax"], "it has rules in torch"),
    (["--rule", "torch.clamp@max", "--framework-version", "0.0.1"], "no evidence in PyTorch 0.0.1"),
    (["--rule", "torch.clamp@max", "--mode", "bogus"], "unknown mode"),
    (["torch.clamp(x, min=0)", "--rule", "torch.clamp@max"], "give no program"),
    ([], "cite what?"),
    (["--rule", "torch.clamp@max", "--framework", "jax", "--framework-version", "torch==2.13.0"],
     "--framework jax but --framework-version torch==2.13.0"),
])
def test_cli_rule_bad_input_is_one_line_exit_2(argv, words, capsys):
    from conftest import ROOT

    assert main(["cite", *argv, "--report", str(ROOT / "reports")]) == 2
    out, err = capsys.readouterr()
    assert out == "" and len(err.strip().splitlines()) == 1 and words in err, err


@pytest.mark.parametrize(("content", "words"), [(None, "no rules file"), (b"garbage", "not a readable rules file")])
def test_cli_rule_missing_or_damaged_rules_file_is_one_line_exit_2(tmp_path, capsys, content, words):
    if content is not None:
        (tmp_path / "rules.json.gz").write_bytes(content)
    assert main(["cite", "--rule", "torch.clamp@max", "--report", str(tmp_path)]) == 2
    out, err = capsys.readouterr()
    assert out == "" and len(err.strip().splitlines()) == 1 and words in err, err


def test_rule_anchor_is_on_the_rules_page_and_survives_the_site(rules_doc, parquet):
    """The rules page carries every rule's anchor, once; MkDocs's Markdown (the site's extensions) keeps it."""
    import markdown

    from kinkcheck.answers.cite import cite_rule
    from kinkcheck.rules.page import render_page, rule_anchor

    c = cite_rule(rules_doc, "torch.clamp@max", observations=parquet)
    page = render_page(rules_doc, sorted({r["framework"] for r in rules_doc["rules"]}))
    ids = [rule_anchor(r["operation"], r["kind"]) for r in rules_doc["rules"]]
    assert len(set(ids)) == len(ids), "two rules share an anchor"
    assert all(page.count(f'id="{a}"') == 1 for a in ids), "every rule's anchor once on the page"
    lines = page.splitlines()
    start = next(i for i, ln in enumerate(lines) if ln.startswith("| family | kind of kink |"))
    end = next(i for i in range(start, len(lines)) if not lines[i].startswith("|"))
    html = markdown.markdown("\n".join(lines[start:end]), extensions=["tables", "attr_list", "md_in_html", "toc"])
    assert f'<a id="{c.anchor}"></a>' in html, "the rules table as the site renders it keeps the rule's anchor"


def test_rule_entry_is_the_whole_report_s():
    from conftest import ROOT

    path = ROOT / "reports" / "conventions.json.gz"
    head, part = load_report_for(path, frameworks=()), load_report_for(path, program="x.clamp(min=0)")
    assert bibtex(head) == bibtex(part) and cff(head) == cff(part), "cite --rule reads no row for its entry"


def test_the_site_url_is_the_documentation_url_and_its_pages_are_the_reports(monkeypatch):
    """Issue 46, item 3: the link starts from pyproject.toml's Documentation URL (the installed distribution's
    metadata outside a source tree), and the site's page of a case is the report's case page as MkDocs maps it
    (report/cases/<case>.md -> .html with use_directory_urls off), holding the anchor cited."""
    import tomllib
    from importlib import metadata

    from conftest import ROOT

    from kinkcheck.answers import cite as cite_module
    from kinkcheck.answers.cite import site_base, site_url
    from kinkcheck.render import site

    documented = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["urls"]["Documentation"]
    assert site_url() == documented.rstrip("/") + "/" == SITE, (site_url(), documented)
    assert site_base(None) == SITE + "report/conventions.html" and site_base("x/") == "x/", site_base(None)
    monkeypatch.setattr(cite_module, "source_tree", lambda: False)  # as an installed copy reads it
    monkeypatch.setattr(metadata, "metadata", lambda name: _Meta(
        ["Source, https://example.org/src", "Documentation, https://example.org/docs"]))
    assert site_url() == "https://example.org/docs/", "the metadata's Documentation entry, not another URL"
    monkeypatch.setattr(metadata, "metadata", lambda name: _Meta([]))
    assert site_url() is None and site_base(None) == "reports", "no URL known: the reports folder, as before"
    c = cite(load_report_for(ROOT / "reports", program="torch.relu(x)"), "torch.relu(x)")
    page, _, anchor = c.link(SITE + "report/conventions.html").removeprefix(SITE).partition("#")
    assert page == f"report/{c.page[:-3]}.html", page
    md = (ROOT / "reports" / c.page).read_text(encoding="utf-8")
    assert f'id="{anchor}"' in md, f"{anchor} is not an anchor of {c.page}"
    yml = site._mkdocs_yml([])
    assert "use_directory_urls: false" in yml, "a page's .md is its .html on the site: the link keeps its anchor"


class _Meta:
    def __init__(self, urls):
        self.urls = urls

    def get_all(self, key):
        return self.urls if key == "Project-URL" else None
