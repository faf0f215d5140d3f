"""New release lines on PyPI: ``nox -s releases`` (``python -m kinkcheck.releases``).

For each framework of the matrix (:data:`kinkcheck.registry.MATRIX`, ``matrix.toml``) it reads the package
index's JSON API (``https://pypi.org/pypi/<distribution>/json``), keeps the final, not-yanked releases with a
wheel that installs for CPython 3.11 on Linux x86-64 (:func:`installable`, by ``packaging``'s wheel-name
parser), and lists the newest patch of every minor line newer than the matrix's newest release
(:func:`new_lines`), and a newer patch of the matrix's newest line. ``--write`` appends the new lines to
``matrix.toml``; the scheduled CI workflow runs it and opens a pull request, whose matrix run probes them.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import urllib.request
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from packaging.utils import InvalidWheelFilename, parse_wheel_filename
from packaging.version import InvalidVersion, Version

__all__ = ["INDEX", "MATRIX_FILE", "installable", "lines", "new_lines", "write_matrix"]

#: The package index's JSON API (PEP 691's predecessor, the one PyPI serves for a project's every release).
INDEX = "https://pypi.org/pypi/{distribution}/json"
#: The matrix file :mod:`kinkcheck.registry` reads.
MATRIX_FILE = Path(__file__).with_name("matrix.toml")


def installable(filename: str, python: tuple[int, int] = (3, 11)) -> bool:
    """Whether the wheel ``filename`` installs for CPython ``python`` on Linux x86-64 (a ``manylinux``/``linux``
    x86_64 or ``any`` platform tag, a ``cpXY``/``abi3``/``none`` ABI that CPython XY takes); not a wheel: False."""
    try:
        _, _, _, tags = parse_wheel_filename(filename)
    except InvalidWheelFilename:
        return False
    cp = f"cp{python[0]}{python[1]}"
    for tag in tags:
        platform_ok = tag.platform == "any" or (tag.platform.endswith("_x86_64") and "linux" in tag.platform)
        interp_ok = tag.interpreter in (cp, f"py{python[0]}", f"py{python[0]}{python[1]}") or (
            tag.abi == "abi3" and tag.interpreter.startswith("cp3") and int(tag.interpreter[3:] or 0) <= python[1])
        abi_ok = tag.abi in (cp, "abi3", "none")
        if platform_ok and interp_ok and abi_ok:
            return True
    return False


def _supports(requires_python: str | None, python: tuple[int, int]) -> bool:
    """Whether a file's ``Requires-Python`` admits CPython ``python`` (none, or unreadable: it does)."""
    from packaging.specifiers import InvalidSpecifier, SpecifierSet

    if not requires_python:
        return True
    try:
        return SpecifierSet(requires_python).contains(f"{python[0]}.{python[1]}.0")
    except InvalidSpecifier:
        return True


def lines(project: Mapping[str, Any], python: tuple[int, int] = (3, 11)) -> dict[tuple[int, int], Version]:
    """(major, minor) → the newest installable final release of that line, from a project's index JSON
    (``{"releases": {version: [{"filename", "yanked"}, …]}}``)."""
    out: dict[tuple[int, int], Version] = {}
    for text, files in (project.get("releases") or {}).items():
        try:
            v = Version(text)
        except InvalidVersion:
            continue
        if v.is_prerelease or v.is_devrelease:
            continue
        if not any(installable(f.get("filename", ""), python) and _supports(f.get("requires_python"), python)
                   for f in files if not f.get("yanked")):
            continue
        line = (v.major, v.minor)
        if line not in out or v > out[line]:
            out[line] = v
    return out


#: The Python of the matrix's environments, and the newer ones a release line may need instead.
PYTHON = (3, 11)
NEWER_PYTHONS = ((3, 12), (3, 13), (3, 14))


def new_lines(matrix: Sequence[str], project: Mapping[str, Any]) -> tuple[list[str], str | None, dict[str, str]]:
    """What the index has beyond ``matrix`` (a framework's versions, oldest first): the newest patch of every
    minor line newer than the matrix's newest release that installs for :data:`PYTHON`; a newer patch of that
    release's own line (None when there is none; reported, not added: the release measured stays); and the
    newer lines that install only for a newer Python (version → the first such Python, e.g. ``"3.12"``)."""
    newest = max(Version(v) for v in matrix)
    line_of = (newest.major, newest.minor)
    found = lines(project, PYTHON)
    added = [str(v) for line, v in sorted(found.items()) if line > line_of]
    patch = found.get(line_of)
    later: dict[str, str] = {}
    for py in NEWER_PYTHONS:
        for line, v in sorted(lines(project, py).items()):
            if line > line_of and line not in found and str(v) not in later:
                later[str(v)] = f"{py[0]}.{py[1]}"
    return added, str(patch) if patch is not None and patch > newest else None, later


def fetch(distribution: str, timeout: float = 60) -> dict[str, Any]:
    """The index JSON of ``distribution`` (:data:`INDEX`). Raises OSError (no network, HTTP error) or ValueError."""
    with urllib.request.urlopen(INDEX.format(distribution=distribution), timeout=timeout) as resp:  # noqa: S310
        return json.loads(resp.read().decode("utf-8"))


def write_matrix(additions: Mapping[str, Sequence[str]], path: Path = MATRIX_FILE) -> None:
    """Append ``additions`` (framework → versions) to the framework's line of the matrix file, comments kept.

    Raises
    ------
    ValueError
        The file has no line ``<framework> = [...]`` for a framework of ``additions``.
    """
    from kinkcheck.shards import write_text_atomic

    text = path.read_text(encoding="utf-8")
    for fw, versions in additions.items():
        if not versions:
            continue
        pattern = re.compile(rf"^{re.escape(fw)} = \[(.*)\]$", re.M)
        m = pattern.search(text)
        if m is None:
            raise ValueError(f"{path}: no line '{fw} = [...]'")
        current = json.loads(f"[{m.group(1)}]")
        merged = current + [v for v in versions if v not in current]
        text = text[:m.start()] + f"{fw} = [{', '.join(json.dumps(v) for v in merged)}]" + text[m.end():]
    write_text_atomic(path, text)


def main(argv: list[str] | None = None, get: Callable[[str], dict[str, Any]] = fetch) -> int:
    from kinkcheck.registry import MATRIX, REGISTRY

    ap = argparse.ArgumentParser(prog="python -m kinkcheck.releases", description=__doc__.splitlines()[0])
    ap.add_argument("--write", action="store_true", help=f"append the new release lines to {MATRIX_FILE.name}")
    ap.add_argument("--framework", action="append", choices=tuple(MATRIX), help="default: every framework")
    args = ap.parse_args(argv)
    additions: dict[str, list[str]] = {}
    failed = 0
    for fw in args.framework or list(MATRIX):
        dist = REGISTRY[fw].distribution
        try:
            added, patch, later = new_lines(MATRIX[fw], get(dist))
        except (OSError, ValueError) as err:
            print(f"{fw}: cannot read the index for {dist}: {' '.join(str(err).split())[:200]}", file=sys.stderr)
            failed += 1
            continue
        additions[fw] = added
        news = f"new release lines {', '.join(added)}" if added else "no new release line"
        print(f"{fw:<11} matrix newest {MATRIX[fw][-1]:<8} {news}"
              + (f"; a newer patch of {MATRIX[fw][-1]}'s line: {patch}" if patch else "")
              + (f"; only for a newer Python (not added): "
                 + ", ".join(f"{v} (Python {py})" for v, py in later.items()) if later else ""))
    if args.write and any(additions.values()):
        write_matrix(additions)
        print(f"appended to {MATRIX_FILE}: " + "; ".join(f"{fw} {', '.join(v)}" for fw, v in additions.items() if v))
    return 2 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
