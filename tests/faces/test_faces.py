"""The faces (kinkcheck.faces): one module per command, found by kinkcheck.cli, none importing another."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from kinkcheck import cli, faces

SRC = Path(faces.__file__).resolve().parent

COMMANDS = ["grad", "ask", "lock", "probe", "report", "diff", "rules", "cite", "migrate", "check", "census"]


def test_every_command_is_a_face_in_help_order() -> None:
    mods = faces.faces()
    assert [m.__name__.rsplit(".", 1)[1] for m in mods] == COMMANDS, "the faces, in kinkcheck --help's order"
    for m in mods:
        assert callable(m.add_parser) and callable(m.run) and isinstance(m.POSITION, int), (
            f"{m.__name__} has add_parser(subparsers), run(args) and POSITION")
    parser = cli.build_parser()
    sub = next(a for a in parser._actions if a.dest == "command")
    assert list(sub.choices) == COMMANDS, f"kinkcheck's subcommands are the faces': {list(sub.choices)}"
    for name in COMMANDS:
        args = parser.parse_args([name, *{"grad": ["x", "--at", "x=0"], "ask": ["x", "--at", "x=0"],
                                          "report": ["--shards", "s", "--out", "o"], "diff": ["a", "b"],
                                          "migrate": ["--from", "torch", "--to", "jax"],
                                          "check": ["m:f", "m:g", "--at", "x=0"]}.get(name, [])])
        assert args.func.__module__ == f"kinkcheck.faces.{name}", f"{name} runs its own face's run: {args.func}"


def _imported(path: Path) -> set[str]:
    """The kinkcheck.faces modules ``path`` imports anywhere in its source (function bodies too)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name.startswith("kinkcheck.faces.")}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            if node.module == "kinkcheck.faces":
                found |= {f"kinkcheck.faces.{a.name}" for a in node.names}
            elif node.module.startswith("kinkcheck.faces."):
                found.add(node.module)
        elif isinstance(node, ast.ImportFrom) and node.level > 0:
            found |= {f"kinkcheck.faces.{node.module or a.name}" for a in node.names}
    return found


def test_no_face_imports_another() -> None:
    """Issue 47: faces are siblings; what two of them share lives in kinkcheck.faces.shared or a layer below."""
    names = set(faces.names())
    assert names == set(COMMANDS), f"the faces found: {sorted(names)}"
    for name in sorted(names):
        others = {m for m in _imported(SRC / f"{name}.py") if m.rsplit(".", 1)[1] in names - {name}}
        assert not others, f"kinkcheck.faces.{name} imports the face(s) {sorted(others)}"
    assert not {m for m in _imported(SRC / "shared.py") if m.rsplit(".", 1)[1] in names}, (
        "the faces' shared module imports no face")


def test_the_rule_sees_a_face_importing_another(tmp_path) -> None:
    bad = tmp_path / "bad.py"
    bad.write_text("def run(args):\n    from kinkcheck.faces.cite import run as cite\n    from kinkcheck.faces import diff\n")
    assert _imported(bad) == {"kinkcheck.faces.cite", "kinkcheck.faces.diff"}, "imports inside a function count"


def test_cli_is_a_short_loop_over_the_faces() -> None:
    lines = len((SRC.parent / "cli.py").read_text().splitlines())
    assert lines <= 150, f"cli.py has {lines} lines: a command's options and code belong in its face"


def test_a_new_command_is_one_new_module(tmp_path, monkeypatch, capsys) -> None:
    """A module dropped into kinkcheck/faces/ with add_parser, run and POSITION is a command: nothing else edited."""
    (tmp_path / "hello.py").write_text(
        "POSITION = 999\n"
        "def add_parser(sub):\n"
        "    p = sub.add_parser('hello', help='say hello')\n"
        "    p.add_argument('--to', default='world')\n"
        "    p.set_defaults(func=run)\n"
        "def run(args):\n"
        "    print(f'hello {args.to}')\n"
        "    return 0\n")
    monkeypatch.setattr(faces, "__path__", [*faces.__path__, str(tmp_path)])
    assert cli.main(["hello", "--to", "kinks"]) == 0
    assert capsys.readouterr().out == "hello kinks\n"
    assert cli.main(["hello", "--bad"]) == 2, "bad input to the new command: the shared one-line error, exit 2"
    assert capsys.readouterr().err == "kinkcheck: error: unrecognized arguments: --bad\n"


@pytest.mark.parametrize("name", COMMANDS)
def test_every_face_says_what_it_is(name) -> None:
    module = getattr(__import__(f"kinkcheck.faces.{name}").faces, name)
    assert module.__doc__ and module.__doc__.startswith(f"``kinkcheck {name}"), f"{name}'s docstring names its command"


def test_mode_and_dtype_help_come_from_the_registry() -> None:
    """Issue 47: the CLI's --mode and --dtype help is read from the registry's records, not written by hand."""
    from kinkcheck.faces.shared import dtypes_help, modes_help
    from kinkcheck.vocabulary import DTYPES, FRAMEWORK_MODES

    text = modes_help()
    for fw, modes in FRAMEWORK_MODES.items():
        part = text.split(f"{fw}: ", 1)
        assert len(part) == 2, f"{fw} is in --mode's help: {text}"
        for mode in modes:
            assert mode == "reverse" or mode in part[1].split(";")[0], f"{fw}'s {mode} is in --mode's help"
    assert dtypes_help().split(" | ") == [f"{DTYPES[0]} (default)", *DTYPES[1:]]
