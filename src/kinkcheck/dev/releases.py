"""New release lines on PyPI: ``nox -s releases`` (``python -m kinkcheck.dev.releases``).

For each framework of the matrix (:data:`kinkcheck.registry.MATRIX`, ``matrix.toml``) it reads the package
index's JSON API (``https://pypi.org/pypi/<distribution>/json``), keeps the final, not-yanked releases with a
wheel that installs for CPython 3.11 on Linux x86-64 (:func:`installable`, by ``packaging``'s wheel-name
parser), and lists the newest patch of every minor line newer than the matrix's newest release
(:func:`new_lines`), and a newer patch of the matrix's newest line. ``--write`` appends the new lines to
``matrix.toml``; the scheduled CI workflow runs it and opens a pull request, whose matrix run probes them.
"""

from __future__ import annotations

import argparse
import functools
import json
import re
import sys
import tomllib
import urllib.request
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from packaging.utils import InvalidWheelFilename, parse_wheel_filename
from packaging.version import InvalidVersion, Version

from kinkcheck.platforms import DEFAULT, PLATFORMS
from kinkcheck.registry import MATRIX, REGISTRY
from kinkcheck.shards import write_text_atomic

__all__ = ["GLIBC", "INDEX", "MACOS", "MATRIX_FILE", "PLATFORMS_FILE", "installable", "lines", "marker_environment",
           "new_lines", "pinned", "pinned_requirements", "platforms_of", "write_matrix", "write_platforms"]

#: The package index's JSON API (PEP 691's predecessor, the one PyPI serves for a project's every release).
INDEX = "https://pypi.org/pypi/{distribution}/json"
#: The matrix file :mod:`kinkcheck.registry` reads.
MATRIX_FILE = Path(__file__).resolve().parents[1] / "matrix.toml"
#: Per platform other than Linux x86-64, the releases of the matrix with wheels there (:mod:`kinkcheck.dev.ci` reads it).
PLATFORMS_FILE = Path(__file__).resolve().parents[1] / "platforms.toml"


#: The glibc of the matrix's Linux runners (ubuntu-22.04: 2.35): the newest manylinux tag a wheel may carry.
GLIBC = (2, 35)


#: The macOS of the matrix's macOS arm64 runners (macos-14): the newest ``macosx_*_arm64`` tag a wheel may carry.
MACOS = (14, 0)


def _wheel_platforms(platform: str) -> list[str]:
    """The wheel platform tags the runner image of ``platform`` (a :data:`kinkcheck.platforms.PLATFORMS` tag)
    takes, most specific first (``packaging.tags``' own list for macOS)."""
    from packaging import tags

    if platform in ("linux_x86_64", "linux_aarch64"):
        arch = platform.removeprefix("linux_")
        oldest = 4 if arch == "x86_64" else 16  # manylinux on aarch64 starts at glibc 2.17
        out = [f"manylinux_{GLIBC[0]}_{minor}_{arch}" for minor in range(GLIBC[1], oldest, -1)]
        return out + [f"manylinux2014_{arch}"] + ([f"manylinux2010_{arch}", f"manylinux1_{arch}"]
                                                 if arch == "x86_64" else []) + [platform]
    if platform == "macos_arm64":
        return list(tags.mac_platforms(MACOS, "arm64"))
    if platform == "windows_amd64":
        return ["win_amd64"]
    raise ValueError(f"unknown platform {platform!r} (known: {', '.join(PLATFORMS)})")


@functools.cache
def _supported(python: tuple[int, int], platform: str = DEFAULT) -> frozenset[Any]:
    """The wheel tags CPython ``python`` takes on ``platform`` (``packaging.tags``' own lists)."""
    from packaging import tags

    platforms = _wheel_platforms(platform)
    return frozenset([*tags.cpython_tags(python, platforms=platforms),
                      *tags.compatible_tags(python, f"cp{python[0]}{python[1]}", platforms=platforms)])


def installable(filename: str, python: tuple[int, int] = (3, 11), platform: str = DEFAULT) -> bool:
    """Whether the wheel ``filename`` installs for CPython ``python`` on ``platform`` (default Linux x86-64 with
    glibc :data:`GLIBC`; ``linux_aarch64`` with the same glibc, ``macos_arm64`` with macOS :data:`MACOS`,
    ``windows_amd64``): one of its tags is among those ``packaging.tags`` lists for that interpreter and platform
    (so no musllinux, no newer manylinux, abi3 only from a CPython at most ``python``); not a wheel: False.

    Raises
    ------
    ValueError
        ``platform`` is not a tag of :data:`kinkcheck.platforms.PLATFORMS`.
    """
    try:
        _, _, _, wheel_tags = parse_wheel_filename(filename)
    except InvalidWheelFilename:
        return False
    return not wheel_tags.isdisjoint(_supported(python, platform))


def _supports(requires_python: str | None, python: tuple[int, int]) -> bool:
    """Whether a file's ``Requires-Python`` admits CPython ``python`` (none, or unreadable: it does)."""
    from packaging.specifiers import InvalidSpecifier, SpecifierSet

    if not requires_python:
        return True
    try:
        return SpecifierSet(requires_python).contains(f"{python[0]}.{python[1]}.0")
    except InvalidSpecifier:
        return True


def _installable_release(files: list[Mapping[str, Any]], python: tuple[int, int], platform: str = DEFAULT) -> bool:
    return any(installable(str(f.get("filename") or ""), python, platform)
               and _supports(f.get("requires_python"), python) for f in files if not f.get("yanked"))


def marker_environment(platform: str) -> dict[str, str]:
    """The PEP 508 marker variables of a platform's runner (``platform_system``, ``sys_platform``,
    ``platform_machine``), to evaluate a requirement's marker there (``mlx-cpu==v; platform_system ==
    "Windows"``)."""
    p = PLATFORMS[platform]
    sys_platform = {"Linux": "linux", "Darwin": "darwin", "Windows": "win32"}[p.system]
    machine = {"windows_amd64": "AMD64"}.get(platform, p.machines[0])
    return {"platform_system": p.system, "sys_platform": sys_platform, "platform_machine": machine}


def platforms_of(version: str, projects: Sequence[Mapping[str, Any]], python: tuple[int, int] = (3, 11),
                 markers: Sequence[Any] = ()) -> list[str]:
    """The platforms other than Linux x86-64 (:data:`kinkcheck.platforms.PLATFORMS`) where ``version`` installs
    for CPython ``python``: every one of ``projects`` (the index JSON of the framework's distribution, then its
    companions pinned to the same version, e.g. jaxlib) has a wheel for it there, or only a source distribution
    (a pure-Python release such as jax 0.4.13, which installs wherever its companions do). In ``PLATFORMS`` order.
    ``markers``: each project's requirement marker (``packaging.markers.Marker`` or None), in ``projects``' order;
    a project whose marker is false on a platform is not needed there (mlx-cpu off Windows).

    Raises
    ------
    ValueError
        An index JSON without a ``releases`` table.
    """
    out = []
    for tag in PLATFORMS:
        if tag == DEFAULT:
            continue
        ok = True
        for i, project in enumerate(projects):
            marker = markers[i] if i < len(markers) else None
            if marker is not None and not marker.evaluate(marker_environment(tag)):
                continue
            releases = project.get("releases") if isinstance(project, Mapping) else None
            if not isinstance(releases, Mapping):
                raise ValueError("the index JSON has no 'releases' table")
            files = releases.get(version)
            if not isinstance(files, list):
                ok = False
                break
            live = [f for f in files if not f.get("yanked")]
            if live and not any(str(f.get("filename") or "").endswith(".whl") for f in files) and any(
                    _supports(f.get("requires_python"), python) for f in live):
                continue  # only a source distribution (jax before 0.4.14): it installs wherever its companions do
            if not _installable_release(files, python, tag):
                ok = False
                break
        if ok:
            out.append(tag)
    return out


def lines(project: Mapping[str, Any], python: tuple[int, int] = (3, 11)) -> dict[tuple[int, int], Version]:
    """(major, minor) → the newest installable final release of that line, from a project's index JSON
    (``{"releases": {version: [{"filename", "yanked"}, …]}}``)."""
    out: dict[tuple[int, int], Version] = {}
    releases = project.get("releases") if isinstance(project, Mapping) else None
    if not isinstance(releases, Mapping):
        raise ValueError("the index JSON has no 'releases' table")
    for text, files in releases.items():
        if not isinstance(files, list) or not all(isinstance(f, Mapping) for f in files):
            raise ValueError(f"release {text!r}: its files are not a list of tables")
        try:
            v = Version(text)
        except InvalidVersion:
            continue
        if v.is_prerelease or v.is_devrelease:
            continue
        if not _installable_release(files, python):
            continue
        line = (v.major, v.minor)
        if line not in out or v > out[line]:
            out[line] = v
    return out


#: The Python of the matrix's environments, and the newer ones a release line may need instead.
PYTHON = (3, 11)
NEWER_PYTHONS = ((3, 12), (3, 13), (3, 14))


def new_lines(matrix: Sequence[str], project: Mapping[str, Any], companions: Sequence[Mapping[str, Any]] = ()
              ) -> tuple[list[str], str | None, dict[str, str]]:
    """What the index has beyond ``matrix`` (a framework's versions, oldest first): the newest patch of every
    minor line newer than the matrix's newest release that installs for :data:`PYTHON`; a newer patch of that
    release's own line (None when there is none; reported, not added: the release measured stays); and the
    newer lines that install only for a newer Python (version → the first such Python, e.g. ``"3.12"``).

    ``companions``: the index JSON of the other distributions an environment pins to the same version (jaxlib
    for jax); a release counts only where each of them has it installable too.

    Raises
    ------
    ValueError
        An index JSON without a ``releases`` table of file lists.
    """
    newest = max(Version(v) for v in matrix)
    line_of = (newest.major, newest.minor)

    def found_for(py: tuple[int, int]) -> dict[tuple[int, int], Version]:
        mine = lines(project, py)
        for other in companions:
            lines(other, py)  # validates its shape
            have = {Version(t) for t, files in other["releases"].items() if _parses(t) and _installable_release(files, py)}
            mine = {line: v for line, v in mine.items() if v in have}
        return mine

    found = found_for(PYTHON)
    added = [str(v) for line, v in sorted(found.items()) if line > line_of]
    patch = found.get(line_of)
    later: dict[str, str] = {}
    for py in NEWER_PYTHONS:
        for line, v in sorted(found_for(py).items()):
            if line > line_of and line not in found and str(v) not in later:
                later[str(v)] = f"{py[0]}.{py[1]}"
    return added, str(patch) if patch is not None and patch > newest else None, later


def _parses(text: str) -> bool:
    try:
        Version(text)
    except InvalidVersion:
        return False
    return True


def pinned(requirements: Sequence[str], version: str) -> list[str]:
    """The distributions of ``requirements`` pinned to ``version`` (``jax==v``, ``jaxlib==v``), first the
    framework's own; extras and markers dropped (``mlx[cpu]==v`` → ``mlx``)."""
    return [req.name for req in pinned_requirements(requirements, version)]


def pinned_requirements(requirements: Sequence[str], version: str) -> list[Any]:
    """The ``packaging.requirements.Requirement`` of each of ``requirements`` pinned to ``version``, in order
    (an unreadable one is left out); ``.marker`` says where one is needed."""
    from packaging.requirements import InvalidRequirement, Requirement

    out = []
    for text in requirements:
        try:
            req = Requirement(text)
        except InvalidRequirement:
            continue
        if str(req.specifier) == f"=={version}":
            out.append(req)
    return out


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
    text = path.read_text(encoding="utf-8")
    for fw, versions in additions.items():
        if not versions:
            continue
        current = tomllib.loads(text).get(fw)
        m = re.compile(rf"^{re.escape(fw)}\s*=\s*\[[^\]]*\]", re.M).search(text)  # one line or several
        if m is None or not isinstance(current, list):
            raise ValueError(f"{path}: no array '{fw} = [...]'")
        merged = current + [v for v in versions if v not in current]
        text = text[:m.start()] + f"{fw} = [{', '.join(json.dumps(v) for v in merged)}]" + text[m.end():]
    write_text_atomic(path, text)


def write_platforms(table: Mapping[str, Mapping[str, Sequence[str]]], path: Path = PLATFORMS_FILE) -> None:
    """Write ``table`` (platform → framework → releases with wheels there) as ``platforms.toml``, platforms and
    frameworks in the order given, with the header saying how it is made (same table, same bytes)."""
    lines_ = ["# Per platform other than Linux x86-64 (kinkcheck.platforms): the releases of the matrix (matrix.toml)",
              "# with a wheel there for the environment's Python, framework and companions alike (jaxlib for jax).",
              "# Written by `nox -s releases -- --write` from PyPI's JSON API; the CI workflow (kinkcheck.dev.ci) runs a",
              "# probe job on a platform's runner for each release listed here. A release missing from a platform",
              "# has no wheel for it there.", ""]
    for tag, frameworks in table.items():
        lines_.append(f"[{tag}]")
        lines_ += [f"{fw} = [{', '.join(json.dumps(v) for v in versions)}]" for fw, versions in frameworks.items()]
        lines_.append("")
    write_text_atomic(path, "\n".join(lines_).rstrip("\n") + "\n")


def read_platforms(path: Path = PLATFORMS_FILE) -> dict[str, dict[str, tuple[str, ...]]]:
    """``platforms.toml``: platform → framework → the releases with wheels there; {} when the file is absent.
    Every platform must be one of :data:`kinkcheck.platforms.PLATFORMS` (not Linux x86-64), every framework
    and release one of the matrix: a typo would otherwise drop jobs without a word.

    Raises
    ------
    ValueError
        The file is not TOML of tables of string arrays (one line naming the file).
    """
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as err:
        raise ValueError(f"{path}: {' '.join(str(err).split())}") from None

    out: dict[str, dict[str, tuple[str, ...]]] = {}
    for tag, frameworks in data.items():
        if tag not in PLATFORMS or tag == DEFAULT:  # a typo would silently drop that platform's jobs
            raise ValueError(f"{path}: unknown platform [{tag}] (known: "
                             f"{', '.join(t for t in PLATFORMS if t != DEFAULT)})")
        if not isinstance(frameworks, dict) or not all(
                isinstance(v, list) and all(isinstance(x, str) for x in v) for v in frameworks.values()):
            raise ValueError(f"{path}: [{tag}] is not a table of framework = [releases]")
        for fw, versions in frameworks.items():
            if fw not in MATRIX:
                raise ValueError(f"{path}: [{tag}] names {fw!r}, not a framework of the matrix "
                                 f"(known: {', '.join(MATRIX)})")
            stray = [v for v in versions if v not in MATRIX[fw]]
            if stray:
                raise ValueError(f"{path}: [{tag}] {fw}: {', '.join(stray)} not in the matrix (matrix.toml)")
        out[tag] = {fw: tuple(v) for fw, v in frameworks.items()}
    return out


def main(argv: list[str] | None = None, get: Callable[[str], dict[str, Any]] = fetch) -> int:
    ap = argparse.ArgumentParser(prog="python -m kinkcheck.dev.releases", description=__doc__.splitlines()[0])
    ap.add_argument("--write", action="store_true", help=f"append the new release lines to {MATRIX_FILE.name}")
    ap.add_argument("--framework", action="append", choices=tuple(MATRIX), help="default: every framework")
    args = ap.parse_args(argv)
    additions: dict[str, list[str]] = {}
    elsewhere: dict[str, dict[str, list[str]]] = {tag: {} for tag in PLATFORMS if tag != DEFAULT}
    failed = 0
    for fw in args.framework or list(MATRIX):
        rec = REGISTRY[fw]
        reqs = pinned_requirements(rec.requirements(MATRIX[fw][-1]), MATRIX[fw][-1])
        dists = [r.name for r in reqs] or [rec.distribution]
        markers = [r.marker for r in reqs]
        here = marker_environment(DEFAULT)
        try:
            projects = [get(d) for d in dists]
            added, patch, later = new_lines(MATRIX[fw], projects[0], [p for p, mk in zip(projects[1:], markers[1:])
                                                                       if mk is None or mk.evaluate(here)])
            for v in (*MATRIX[fw], *added):
                for tag in platforms_of(v, projects, rec.min_python.get(v, PYTHON), markers):
                    elsewhere[tag].setdefault(fw, []).append(v)
        except (OSError, ValueError) as err:
            print(f"{fw}: cannot read the index for {', '.join(dists)}: {' '.join(str(err).split())[:200]}",
                  file=sys.stderr)
            failed += 1
            continue
        additions[fw] = added
        news = f"new release lines {', '.join(added)}" if added else "no new release line"
        n = len(MATRIX[fw]) + len(added)
        where = ", ".join(f"{tag} {len(elsewhere[tag].get(fw, []))}/{n}" for tag in elsewhere)
        print(f"{fw:<11} matrix newest {MATRIX[fw][-1]:<8} {news}"
              + (f"; a newer patch of {MATRIX[fw][-1]}'s line: {patch}" if patch else "")
              + (f"; only for a newer Python (not added): "
                 + ", ".join(f"{v} (Python {py})" for v, py in later.items()) if later else "")
              + f"; wheels elsewhere: {where}")
    if args.write and any(additions.values()):
        try:
            write_matrix(additions)
        except (OSError, ValueError) as err:
            print(f"kinkcheck.dev.releases: cannot write {MATRIX_FILE}: {' '.join(str(err).split())}", file=sys.stderr)
            return 2
        print(f"appended to {MATRIX_FILE}: " + "; ".join(f"{fw} {', '.join(v)}" for fw, v in additions.items() if v))
    if args.write and not failed and not args.framework:  # the whole table, or none: a partial one would drop jobs
        try:
            write_platforms(elsewhere)
        except OSError as err:
            print(f"kinkcheck.dev.releases: cannot write {PLATFORMS_FILE}: {' '.join(str(err).split())}", file=sys.stderr)
            return 2
        print(f"wrote {PLATFORMS_FILE}: " + "; ".join(f"{tag} {sum(map(len, t.values()))} releases"
                                                      for tag, t in elsewhere.items()))
    if args.write and args.framework and not failed:
        print(f"{PLATFORMS_FILE.name} left as it is: it is written from every framework's index at once")
    return 2 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
