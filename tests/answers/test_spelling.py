"""One program, one spelling (issue 44, item 4): every face that matches a user's program to the catalog's
(``lookup``, ``cite``, ``grad``, ``ask``, ``lock``) finds the same catalog program for ``min=0.0``, ``min=0``,
``min=0.``, ``min= 0``, a positional bound and ``1e0``, through one function, :func:`kinkcheck.language.expr.program_key`
(:func:`kinkcheck.language.expr.same_program`)."""

from __future__ import annotations

import io
import tokenize

import pytest

from kinkcheck.language import expr as ex

#: (spelling, point, case, the catalog's program it spells)
SPELLINGS = [
    ("torch.clamp(x, min=0)", "x=0", "relu@0", "torch.clamp(x, min=0)"),
    ("torch.clamp(x, min=0.0)", "x=0", "relu@0", "torch.clamp(x, min=0)"),
    ("torch.clamp(x, min=0.)", "x=0", "relu@0", "torch.clamp(x, min=0)"),
    ("torch.clamp(x, min= 0)", "x=0", "relu@0", "torch.clamp(x, min=0)"),
    ("torch.clamp(x, min=0e0)", "x=0", "relu@0", "torch.clamp(x, min=0)"),
    ("torch.clamp(x, 0)", "x=0", "relu@0", "torch.clamp(x, min=0)"),  # positional: the catalog's is keyword
    ("torch.clamp(x, 0.0)", "x=0", "relu@0", "torch.clamp(x, min=0)"),
    ("torch.clamp(x, min=-1e0, max=1e0)", "x=1", "clamp@1", "torch.clamp(x, min=-1, max=1)"),
    ("torch.clamp(x, -1.0, 1.0)", "x=1", "clamp@1", "torch.clamp(x, -1, 1)"),  # the catalog measures both spellings
]


# --------------------------------------------------------------------------- the function


@pytest.mark.parametrize("a, b", [
    ("torch.clamp(x, min=0.0)", "torch.clamp(x, min=0)"),
    ("torch.clamp(x, min=0.)", "torch.clamp(x, min=0)"),
    ("torch.clamp(x, min= 0)", "torch.clamp(x, min=0)"),
    ("torch.clamp(x, 0)", "torch.clamp(x, min=0)"),
    ("torch.clamp(x, max=1, min=-1)", "torch.clamp(x, -1, 1)"),
    ("torch.pow(x, 1e0)", "torch.pow(x, 1)"),
    ("x ** 2.0", "x ** 2"),
    ("F.relu( x )", "torch.nn.functional.relu(x)"),
    ("jnp.maximum(x, 0.)", "jax.numpy.maximum(x, 0)"),
    ("autograd.numpy.maximum(x, 0.0)", "autograd.numpy.maximum(x, 0)"),
])
def test_spellings_of_one_call_have_one_key(a, b):
    assert ex.program_key(a) == ex.program_key(b), f"{a} and {b} are one program: {ex.program_key(a)} vs " \
                                                   f"{ex.program_key(b)}"


@pytest.mark.parametrize("a, b", [
    ("torch.clamp(x, min=-0.0)", "torch.clamp(x, min=0)"),  # the catalog tells -0.0 from 0
    ("torch.clamp(x, min=0.5)", "torch.clamp(x, min=0)"),
    ("torch.clamp(x, max=0)", "torch.clamp(x, min=0)"),
    ("torch.sum(v, 0, keepdim=True)", "torch.sum(v, 0, keepdim=1)"),  # a bool is not a number
    ("x.clamp(0)", "x.clamp(max=0)"),  # a method binds as written: no signature says 0 is min
    ("torch.clamp(x, min=0)", "jax.numpy.clip(x, min=0)"),
])
def test_other_programs_keep_other_keys(a, b):
    assert ex.program_key(a) != ex.program_key(b), f"{a} and {b} are two programs, both {ex.program_key(a)}"


def test_the_closest_spelling_the_catalog_measures_comes_first():
    both = ["torch.clamp(x, -1, 1)", "torch.clamp(x, min=-1, max=1)"]
    assert ex.same_program("torch.clamp(x, -1, 1)", both) == both[:1], "the text itself"
    assert ex.same_program("torch.clamp(x,-1,1)", both) == both[:1], "its canonical text"
    assert ex.same_program("torch.clamp(x, min=-1.0, max=1e0)", both) == both[1:], "its numbers"
    assert ex.same_program("torch.clamp(x, max=1, min=-1)", both) == both, "the call: both, in the order given"
    assert ex.same_program("torch.clamp(x, min=1)", both) == [], "another call"
    assert ex.same_program("torch.clamp(x,", both) == [], "outside the language: nothing"


def _integers_as_floats(text: str) -> str:
    """``text`` with every integer literal written as a float (``0`` → ``0.0``), tokens only."""
    out = []
    for tok in tokenize.generate_tokens(io.StringIO(text).readline):
        s = tok.string
        if tok.type == tokenize.NUMBER and s.isdigit() and int(s) < 2 ** 53:
            s += ".0"
        out.append((tok.type, s))
    return tokenize.untokenize(out)


def test_every_catalog_program_keeps_its_key_when_its_integers_are_floats(catalog):
    """The whole catalog: a program respelled with float literals is still that program to every face."""
    seen = 0
    for case in catalog:
        for p in case.programs:
            respelled, key = _integers_as_floats(p.id), ex.program_key(p.id, case.at)
            assert ex.program_key(respelled, case.at) == key, f"{case.id}: {respelled!r} is {p.id!r}"
            found = ex.same_program(respelled, [q.id for q in case.programs if q.framework == p.framework], case.at)
            assert found and all(ex.program_key(f, case.at) == key for f in found), \
                f"{case.id}: {respelled!r} finds {found}, spellings of {p.id!r}"
            seen += 1
    assert seen > 1000, f"every program of the catalog, not {seen}"


# --------------------------------------------------------------------------- every face


@pytest.fixture()
def ask_home(tmp_path, monkeypatch):
    from kinkcheck.answers import ask

    monkeypatch.setenv(ask.ENV_HOME, str(tmp_path / "ask"))
    return tmp_path / "ask"


@pytest.mark.parametrize("spelling, at, case, program", SPELLINGS)
def test_lookup_finds_the_catalog_program(spelling, at, case, program):
    import kinkcheck

    rows = kinkcheck.lookup(spelling, case=case, release="2.14.1")
    assert [r.program for r in rows] == [program], f"lookup({spelling!r}, case={case!r}): {rows}"


@pytest.mark.parametrize("spelling, at, case, program", SPELLINGS)
def test_cite_finds_the_catalog_program(spelling, at, case, program):
    from kinkcheck.answers.cite import cite
    from kinkcheck.report.cells import load_report_for
    from kinkcheck.report.query import default_report

    c = cite(load_report_for(default_report(), program=spelling), spelling, case=case)
    assert f"`{program}` at" in c.sentence and c.case == case, f"cite {spelling!r}: {c.sentence}"


@pytest.mark.parametrize("spelling, at, case, program", SPELLINGS)
def test_ask_finds_the_catalog_program(spelling, at, case, program, ask_home):
    from kinkcheck.answers import ask

    q = ask.question(spelling, at)
    assert (q.case, q.expr) == (case, program), f"ask {spelling!r} --at {at}: {q}"
    assert ask.from_report(q, ["2.14.1"]), f"ask {spelling!r}: the report's cells of {program} answer it"
    live = ask.question(spelling, at, live=True)
    assert live.case == case and live.expr == ex.unparse(ex.parse(spelling, {at.split("=")[0]}, ["torch"])), \
        f"--live measures the program as typed, against the catalog's case: {live}"


@pytest.mark.parametrize("spelling, at, case, program", SPELLINGS)
def test_lock_finds_the_catalog_program(spelling, at, case, program):
    from kinkcheck.answers import lock

    got = lock.conventions("torch", "2.14.1", [(spelling, at, "float64")], quiet=True, report_only=True)
    status, value, labels, source, found = got[(spelling, at, "float64")]
    assert (source, found) == ("report", case), f"lock's {spelling!r} at {at}: {got}"


@pytest.mark.parametrize("spelling, at, case, program", SPELLINGS[1:7:5] + SPELLINGS[7:8])
def test_grad_finds_the_catalog_program(spelling, at, case, program, capsys, torch_adapter):
    from kinkcheck import cli

    assert cli.main(["grad", spelling, "--at", at, "--no-isolate"]) == 0
    out, err = capsys.readouterr()
    own = [ln for ln in out.splitlines() if ln.endswith("← this program")]
    assert len(own) == 1 and f"torch {program} " in " ".join(own[0].split()) + " ", \
        f"grad {spelling!r}: the report's row of {program} is this program's:\n{out}{err}"
