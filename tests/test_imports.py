"""The import graph of ``src/kinkcheck`` has no cycle (issue 12: the oracle and the classifier used to import
each other).

Every module is parsed with :mod:`ast`; every ``import`` and ``from … import`` counts, at any level: inside
functions (deferred imports), under ``if TYPE_CHECKING:`` and in ``try`` blocks, so a cycle cannot hide behind
a deferred import that happens to run late today.
"""

from __future__ import annotations

import ast
from pathlib import Path

import kinkcheck

SRC = Path(kinkcheck.__file__).resolve().parent
PACKAGE = "kinkcheck"


def _module_names() -> dict[str, Path]:
    """Dotted name → file, for every module of the package (``kinkcheck.oracles`` for its ``__init__.py``)."""
    out = {}
    for path in sorted(SRC.rglob("*.py")):
        parts = list(path.relative_to(SRC).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join([PACKAGE, *parts])] = path
    return out


def _imports(name: str, path: Path, modules: set[str]) -> set[str]:
    """The package's modules that ``name`` imports anywhere in its source.

    ``from a.b import c`` names the module ``a.b.c`` when that is a module (``from kinkcheck.oracles import
    symbolic``), else ``a.b``; relative imports are resolved against ``name``'s package.
    """
    is_package = path.name == "__init__.py"
    here = name.split(".") if is_package else name.split(".")[:-1]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = here[: len(here) - (node.level - 1)]
                stem = ".".join([*base, *([node.module] if node.module else [])])
            else:
                stem = node.module or ""
            targets = [f"{stem}.{alias.name}" if f"{stem}.{alias.name}" in modules else stem for alias in node.names]
        else:
            continue
        for target in targets:
            # ``import kinkcheck.a.b`` runs kinkcheck.a.b; keep the longest prefix that is one of our modules
            parts = target.split(".")
            for k in range(len(parts), 0, -1):
                candidate = ".".join(parts[:k])
                if candidate in modules:
                    if candidate != name:
                        found.add(candidate)
                    break
    return found


def _graph() -> dict[str, set[str]]:
    files = _module_names()
    names = set(files)
    return {name: _imports(name, path, names) for name, path in files.items()}


def _reach(graph: dict[str, set[str]], root: str) -> set[str]:
    """``root`` and every module it imports, directly or not."""
    seen, todo = {root}, [root]
    while todo:
        for nxt in graph[todo.pop()] - seen:
            seen.add(nxt)
            todo.append(nxt)
    return seen


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import cycle as ``[a, b, …, a]``, or None (iterative depth-first search, three colours)."""
    state: dict[str, int] = {}  # absent: unvisited, 1: on the current path, 2: done
    for root in sorted(graph):
        if root in state:
            continue
        path = [root]
        stack = [iter(sorted(graph[root]))]
        state[root] = 1
        while stack:
            nxt = next(stack[-1], None)
            if nxt is None:
                state[path.pop()] = 2
                stack.pop()
                continue
            if state.get(nxt) == 1:
                return [*path[path.index(nxt):], nxt]
            if nxt not in state:
                state[nxt] = 1
                path.append(nxt)
                stack.append(iter(sorted(graph[nxt])))
    return None


def test_graph_sees_deferred_and_type_checking_imports() -> None:
    graph = _graph()
    assert "kinkcheck.oracles.symbolic" in graph["kinkcheck.oracles.table"], \
        "oracle_table imports the sympy oracle inside a function; the graph must see it"
    assert "kinkcheck.oracles.symbolic" in graph["kinkcheck.oracles.classify"], \
        "classify imports OracleResult under TYPE_CHECKING; the graph must see it"
    assert {"kinkcheck.oracles.translate", "kinkcheck.oracles.pieces", "kinkcheck.oracles.cones",
            "kinkcheck.oracles.clarke"} <= graph["kinkcheck.oracles.symbolic"], graph["kinkcheck.oracles.symbolic"]


def test_cycle_search_finds_a_cycle() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a", "d"}, "d": set()}
    assert _cycle(graph) == ["a", "b", "c", "a"], _cycle(graph)
    assert _cycle({"a": {"b"}, "b": set(), "c": {"a", "b"}}) is None, "a diamond is not a cycle"


def test_no_import_cycle() -> None:
    cycle = _cycle(_graph())
    assert cycle is None, "import cycle under src/kinkcheck: " + " -> ".join(cycle or [])


def test_oracle_layers() -> None:
    """The sympy oracle's modules import only those below them: translate <- pieces <- cones <- clarke <- symbolic."""
    layers = ["translate", "pieces", "cones", "clarke", "symbolic"]
    graph = _graph()
    for i, layer in enumerate(layers):
        above = {f"kinkcheck.oracles.{m}" for m in layers[i:]}
        wrong = graph[f"kinkcheck.oracles.{layer}"] & above
        assert not wrong, f"oracles.{layer} imports {sorted(wrong)}, which sit above it"


def test_oracle_cache_key_covers_the_oracle_sources() -> None:
    """The on-disk oracle cache is keyed on the source of every module the sympy oracle runs: a module missing
    from ``ORACLE_SOURCES`` could change a result while the cache keeps serving the old one."""
    from kinkcheck.oracles.table import ORACLE_SOURCES

    graph = _graph()
    needed = _reach(graph, "kinkcheck.oracles.symbolic")
    hashed = {f"{pkg}.{file.removesuffix('.py')}" for pkg, file in ORACLE_SOURCES}
    assert needed == hashed, f"imported by the oracle, not hashed: {sorted(needed - hashed)}; " \
                             f"hashed, not imported: {sorted(hashed - needed)}"


def test_judgement_cache_key_covers_the_mapping() -> None:
    """``grad``'s cached judgements (:mod:`kinkcheck.answers.explain.judgement`) are keyed on the oracle's sources and the
    mapping's (:func:`kinkcheck.oracles.rows.source_files`): every module the mapping imports, and every
    framework folder's rows, which it imports by name."""
    from pathlib import Path

    from kinkcheck.oracles.rows import source_files
    from kinkcheck.oracles.table import ORACLE_SOURCES
    from kinkcheck.registry import REGISTRY

    graph = _graph()
    needed = _reach(graph, "kinkcheck.oracles.mapping")
    src = Path(kinkcheck.__file__).parent.parent
    files = {".".join(p.resolve().relative_to(src).with_suffix("").parts) for p in source_files()}
    hashed = files | {f"{pkg}.{file.removesuffix('.py')}" for pkg, file in ORACLE_SOURCES}
    assert needed <= hashed, f"imported by the mapping, not in its cache key: {sorted(needed - hashed)}"
    rows = {f"{record.adapter}.mapping" for record in REGISTRY.values()
            if (Path(src, *record.adapter.split(".")) / "mapping.py").is_file()}
    assert rows and rows <= files, f"framework rows not in the cache key: {sorted(rows - files)}"


#: Rendering (issue 31, item 4): the modules that turn a report into pages import the model and one another, and
#: below them only these leaves, each for a reason that is not judging.
RENDERING = ["kinkcheck.render.view", "kinkcheck.report.text", "kinkcheck.render.markdown", "kinkcheck.render.site",
             "kinkcheck.render.plots", "kinkcheck.render.census"]
RENDERING_LEAVES = {
    "kinkcheck.report.model": "the one read API: the typed report, its index, the vocabulary it re-exports",
    "kinkcheck.language.anchors": "the anchors cite links to (one spelling of a case's and a program's name)",
    "kinkcheck.cache": "the cache folder (plots, template bytecode)",
    "kinkcheck.registry": "each framework's marker and line style in the plots",
    "kinkcheck.report.query": "the census's operations for the site's index (the read API's search)",
    "kinkcheck.language.decimals": "numbers as a person reads them (the shortest float64 decimal; standard library only)",
    "kinkcheck.rules.page": "the rules table from the rules file's document (a dict: nothing of the rules' machinery)",
    "kinkcheck.rules": "the rules package's face (its modules import their parts on first use)",
    "kinkcheck.rules.doc": "the rules file's reader (standard library only)",
    "kinkcheck.vocabulary": "the records the pages print in words (modes, comparisons, the oracle's kinds)",
}
#: plots draws the case's function near its kink: that needs the expression's meaning, which only the oracle's
#: translation to sympy has.
PLOTS_DRAW = {"kinkcheck.language.expr", "kinkcheck.oracles.symbolic"}


def test_rendering_imports_the_model_and_nothing_below_it() -> None:
    graph = _graph()
    allowed = set(RENDERING) | set(RENDERING_LEAVES)
    for module in RENDERING:
        extra = graph[module] - allowed - (PLOTS_DRAW if module == "kinkcheck.render.plots" else set())
        assert not extra, f"{module} imports {sorted(extra)}: rendering reads the report through " \
                          "kinkcheck.report.model (judging, frameworks, catalog and shards sit below it)"


def test_the_vocabulary_is_a_leaf_and_read_from_there() -> None:
    """Modes, dtypes and the value codec live in kinkcheck.vocabulary, which imports only the dtype and framework
    registries; outside frameworks/, nothing imports them from the adapters' package or base module."""
    graph = _graph()
    assert graph["kinkcheck.vocabulary"] <= {"kinkcheck.dtypes", "kinkcheck.registry"}, graph["kinkcheck.vocabulary"]
    names = {"COMPILED_MODES", "DTYPES", "FRAMEWORK_MODES", "GRADIENT_MODES", "MODES", "MODE_INFO", "decode", "encode",
             "flat_value", "flatten"}
    for path in sorted(SRC.rglob("*.py")):
        if "frameworks" in path.relative_to(SRC).parts:
            continue
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            if isinstance(node, ast.ImportFrom) and node.module in ("kinkcheck.frameworks", "kinkcheck.frameworks.base"):
                wrong = {a.name for a in node.names} & names
                assert not wrong, f"{path.relative_to(SRC)} imports {sorted(wrong)} from {node.module}: " \
                                  "read them from kinkcheck.vocabulary"
    report = [m for m in graph if m.startswith(("kinkcheck.report", "kinkcheck.judge", "kinkcheck.render"))]
    assert not any(t.startswith("kinkcheck.frameworks") for m in report for t in graph[m]), \
        "the report never imports frameworks/ (the design's rule)"


#: docs/architecture.md, whose table of layers is the one this test holds the code to.
DOC = Path(__file__).resolve().parents[1] / "docs" / "architecture.md"


def _outside_parentheses(text: str) -> str:
    """``text`` without its parenthesised asides (nested too; a parenthesis inside backticks is code, not one)."""
    out, depth, code = [], 0, False
    for ch in text:
        if ch == "`":
            code = not code
        elif not code and ch == "(":
            depth += 1
            continue
        elif not code and ch == ")" and depth:
            depth -= 1
            continue
        if not depth:
            out.append(ch)
    return "".join(out)


def _module(path: str) -> str:
    """``registry.py`` → ``kinkcheck.registry``, ``platforms/`` → ``kinkcheck.platforms``, ``census/__init__.py`` →
    ``kinkcheck.census``."""
    parts = path.rstrip("/").removesuffix(".py").split("/")
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join([PACKAGE, *parts])


def doc_layers() -> list[tuple[str, list[str]]]:
    """The layers of docs/architecture.md's table, bottom first: each row's name and the modules its second column
    names outside parentheses (files ``*.py`` and folders ``*/`` of src/kinkcheck/); the package itself is the first
    layer's."""
    import re

    rows: list[tuple[str, list[str]]] = []
    lines = iter(DOC.read_text().splitlines())
    for line in lines:
        if line.startswith("| layer | modules"):
            break
    for line in lines:
        if not line.startswith("|"):
            break
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if set(cells[0]) <= set("-: "):
            continue
        tokens = re.findall(r"`([^`]+)`", _outside_parentheses(cells[1]))
        rows.append((cells[0], [_module(t) for t in tokens if t.endswith((".py", "/"))]))
    assert rows, f"{DOC}: no table of layers"
    rows[0][1].insert(0, PACKAGE)
    return rows


#: The layers of src/kinkcheck, bottom first (docs/architecture.md's table): a module imports its own layer and
#: those below, never one above. A module belongs to the layer of its longest prefix listed there.
LAYERS: list[tuple[str, list[str]]] = doc_layers()
#: Imports that go up a layer, each for a reason.
UPWARD = {
    ("kinkcheck", "kinkcheck.report.query"): "the package's `kinkcheck.lookup`/`search`, re-exported on first use",
}


def _layer(module: str) -> int | None:
    best = None
    for i, (_, prefixes) in enumerate(LAYERS):
        for prefix in prefixes:
            if (module == prefix or module.startswith(prefix + ".")) and (best is None or len(prefix) > best[1]):
                best = (i, len(prefix))
    return None if best is None else best[0]


def test_every_module_has_a_layer_and_imports_none_above_it() -> None:
    """Issue 33: the layers of docs/architecture.md hold; the worker runs the faces' tasks by name
    (kinkcheck.probe.worker.TASKS), not by import."""
    graph = _graph()
    unplaced = [m for m in graph if _layer(m) is None]
    assert not unplaced, f"modules in no layer (add them to LAYERS and docs/architecture.md): {unplaced}"
    upward = [f"{m} ({LAYERS[_layer(m)][0]}) -> {t} ({LAYERS[_layer(t)][0]})" for m in sorted(graph)
              for t in sorted(graph[m]) if _layer(t) > _layer(m) and (m, t) not in UPWARD]
    assert not upward, "imports of a layer above: " + "; ".join(upward)
    stale = [edge for edge in UPWARD if edge[1] not in graph.get(edge[0], ())]
    assert not stale, f"listed upward imports that no longer exist: {stale}"


def test_the_layers_are_the_docs_table() -> None:
    """Issue 47, item 6: the layers come from docs/architecture.md's table, in its order, each naming what it holds."""
    names = [name for name, _ in LAYERS]
    assert names == ["vocabulary", "language", "storage", "frameworks", "oracles", "rules", "probe", "report", "judge",
                     "render", "faces"], names
    held = {m: name for name, prefixes in LAYERS for m in prefixes}
    assert held["kinkcheck.registry"] == "vocabulary" and held["kinkcheck.shards"] == "storage", held
    assert held["kinkcheck.rules.answer"] == "faces" and held["kinkcheck.census"] == "language", held
    assert _outside_parentheses("`a.py` (`b.py` (`c.py`)), `d/` (`e(f)`)") == "`a.py` , `d/` ", "asides dropped"
    named = [m for _, prefixes in LAYERS for m in prefixes if m != PACKAGE]
    modules = _module_names()
    missing = [m for m in named if m not in modules]
    assert not missing, f"docs/architecture.md names modules src/kinkcheck lacks: {missing}"


def test_the_layer_rule_catches_an_upward_import() -> None:
    assert _layer("kinkcheck.report.model") > _layer("kinkcheck.shards") > _layer("kinkcheck.catalog"), "report above"
    assert _layer("kinkcheck.probe.worker") < _layer("kinkcheck.answers.check"), "the worker sits below the faces it serves"
    assert _layer("kinkcheck.census") < _layer("kinkcheck.frameworks.torch.census"), \
        "the census's generators are framework code"


def test_the_probe_package_is_a_leaf_of_its_planning() -> None:
    """Planning (what a shard lacks, merging) imports nothing of frameworks/, so nox's own Python and the report
    use it; the probe package's face imports its parts on first use only."""
    graph = _graph()
    seen = _reach(graph, "kinkcheck.probe.plan") - {"kinkcheck.probe.plan"}
    framework = sorted(m for m in seen if m.startswith("kinkcheck.frameworks"))
    assert not framework, f"planning reaches frameworks/: {framework}"
    assert not graph["kinkcheck.probe"], f"kinkcheck.probe imports its parts lazily: {graph['kinkcheck.probe']}"


#: Modules outside the framework folders that import a framework today, each with its reason (none: the kink-hit
#: counters, the census networks and check's calls are each framework folder's own, reached through
#: kinkcheck.frameworks.kink_counter and census_network).
FRAMEWORK_IMPORTS_ELSEWHERE: dict[str, str] = {}


def _framework_imports(path: Path, roots: set[str]) -> set[str]:
    """The frameworks (top-level package names in ``roots``) that a module imports anywhere in its source."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            found |= {a.name.split(".")[0] for a in node.names} & roots
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found |= {node.module.split(".")[0]} & roots
    return found


#: The modules of a framework's folder that import it: its adapter, its kink-hit counter, its census generator and
#: its kink-hit census network (torch, jax).
FRAMEWORK_CODE = ("adapter", "kinkhits", "census", "hitcensus")


def test_only_the_framework_folders_adapters_import_a_framework() -> None:
    """A framework is imported by its folder's code (``adapter.py``; ``kinkhits.py``, the kink-hit counter;
    ``census.py``, the census generator) and nowhere else (the design's rule; the exceptions of
    :data:`FRAMEWORK_IMPORTS_ELSEWHERE` say why): its record, code templates and bench head are text, read where no
    framework is installed (the noxfile's own Python, the report)."""
    from kinkcheck.registry import REGISTRY

    roots = set(REGISTRY) | {"jaxlib"}
    files = _module_names()
    importers = {name: _framework_imports(path, roots) for name, path in files.items()}
    importers = {name: found for name, found in importers.items() if found}
    for name, found in sorted(importers.items()):
        parts = name.split(".")
        if parts[:2] == ["kinkcheck", "frameworks"] and len(parts) == 4 and parts[3] in FRAMEWORK_CODE:
            assert found <= {parts[2], "jaxlib"}, f"{name} imports {sorted(found)}: a folder imports its own framework"
            continue
        assert name in FRAMEWORK_IMPORTS_ELSEWHERE, \
            f"{name} imports {sorted(found)}: only frameworks/<name>/adapter.py imports a framework"
    assert {f"kinkcheck.frameworks.{n}.adapter" for n in REGISTRY} <= set(importers), \
        "every registered framework's adapter imports it (the check sees the folders)"
    stale = set(FRAMEWORK_IMPORTS_ELSEWHERE) - set(importers)
    assert not stale, f"listed as importing a framework, and no longer do: {sorted(stale)}"


#: Framework folders' modules imported from outside their folder, each with its reason: the JAX census runs on the
#: networks and minibatches PyTorch draws (the paper's reference network, converted).
FOLDER_IMPORTS_ELSEWHERE = {("kinkcheck.frameworks.jax.hitcensus", "torch"): "JAX's census runs PyTorch's networks"}


def test_a_framework_folder_is_reached_through_the_registry_not_by_name() -> None:
    """Outside ``frameworks/<name>/`` no module imports that folder's modules by name: the adapters
    (:func:`kinkcheck.frameworks.get_adapter`), the kink-hit counters (``kink_counter``) and the census networks
    (``census_network``) are found from the registry, so a new framework's folder is reached without an edit
    elsewhere (issue 47, item 3)."""
    from kinkcheck.registry import REGISTRY

    graph = _graph()
    found = set()
    for name, imported in graph.items():
        parts = name.split(".")
        own = parts[2] if parts[:2] == ["kinkcheck", "frameworks"] and len(parts) > 2 else None
        for target in imported:
            t = target.split(".")
            if t[:2] == ["kinkcheck", "frameworks"] and len(t) > 2 and t[2] in REGISTRY and t[2] != own:
                found.add((name, t[2]))
    assert found == set(FOLDER_IMPORTS_ELSEWHERE), \
        f"framework folders imported by name from outside: {sorted(found - set(FOLDER_IMPORTS_ELSEWHERE))}; " \
        f"listed and no longer so: {sorted(set(FOLDER_IMPORTS_ELSEWHERE) - found)}"


#: Standard-library modules slow enough to import on first use only (each 5 ms or more under ``python -X importtime``
#: in a fresh interpreter), and those some platforms lack (``resource``, ``fcntl``: not on Windows).
SLOW_STDLIB = ("importlib.metadata", "concurrent.futures", "tempfile", "secrets", "subprocess", "inspect", "logging",
               "statistics")
OPTIONAL_STDLIB = ("resource", "fcntl", "msvcrt", "winreg", "termios")


def _third_party(root: str) -> bool:
    import sys

    return root not in sys.stdlib_module_names and root not in (PACKAGE, "__future__")


def _targets(name: str, path: Path, node: ast.Import | ast.ImportFrom, modules: set[str]) -> list[tuple[str, str]]:
    """(module imported, what it is: ``"kinkcheck"``, ``"stdlib"`` or ``"third-party"``) for each name ``node``
    imports; a package module named for ``from a import b`` when ``a.b`` is one."""
    import sys

    if isinstance(node, ast.Import):
        found = [alias.name for alias in node.names]
    else:
        here = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
        stem = ".".join([*here[: len(here) - (node.level - 1)], *([node.module] if node.module else [])]) \
            if node.level else (node.module or "")
        found = [f"{stem}.{a.name}" if f"{stem}.{a.name}" in modules or stem.split(".")[0] != PACKAGE else stem
                 for a in node.names]  # outside the package ``a.b`` may be a name, not a module: only read its start
    out = []
    for target in found:
        root = target.split(".")[0]
        if root == PACKAGE:
            parts = target.split(".")
            target = next(".".join(parts[:k]) for k in range(len(parts), 0, -1) if ".".join(parts[:k]) in modules)
        out.append((target, PACKAGE if root == PACKAGE else "stdlib" if root in sys.stdlib_module_names else
                    "third-party"))
    return out


def _top_level(tree: ast.Module) -> list[ast.Import | ast.ImportFrom]:
    """The imports a module runs when it is imported: outside functions, ``if TYPE_CHECKING:`` left out."""
    out, todo = [], list(tree.body)
    while todo:
        node = todo.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) or (
                isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)):
            continue
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            out.append(node)
        todo.extend(ast.iter_child_nodes(node))
    return out


def _top_graph() -> tuple[dict[str, set[str]], dict[str, set[str]]]:
    """Module → the third-party libraries its top-level imports name, and module → the package's modules they
    import: what importing it runs."""
    files = _module_names()
    modules = set(files)
    direct: dict[str, set[str]] = {}
    edges: dict[str, set[str]] = {}
    for name, path in files.items():
        direct[name], edges[name] = set(), set()
        for node in _top_level(ast.parse(path.read_text())):
            for target, kind in _targets(name, path, node, modules):
                if kind == "third-party":
                    direct[name].add(target.split(".")[0])
                elif kind == PACKAGE and target != name:
                    edges[name].add(target)
    return direct, edges


def _slow_libraries(direct: dict[str, set[str]], edges: dict[str, set[str]]) -> dict[str, set[str]]:
    """Module → the third-party libraries importing it imports (followed through the package's modules)."""
    return {name: set().union(*(direct[m] for m in _reach(edges, name))) for name in direct}


#: What a user starts: the CLI and every face (its parser imports each one: :func:`kinkcheck.faces.faces`),
#: ``import kinkcheck``, ``kinkcheck.lookup``'s module and the pytest plugin (loaded in every pytest run where
#: kinkcheck is installed). A module these import at the top defers a module they do not, to its first use
#: (``# on first use``): the start stays as light as it is.
ENTRY_POINTS = ("kinkcheck.cli", "kinkcheck", "kinkcheck.report.query", "kinkcheck.pytest_plugin", "kinkcheck.faces.*")


def _start(edges: dict[str, set[str]], entry: str) -> set[str]:
    """What importing ``entry`` loads: its top-level imports, followed, and each one's parent packages."""
    loaded = _reach(edges, entry)
    return loaded | {".".join(m.split(".")[:k]) for m in loaded for k in range(1, m.count(".") + 1)}


def test_a_function_body_import_is_slow_or_optional_and_says_which() -> None:
    """An import inside a function is one a module must not pay for when it is imported: a third-party library
    (the statement names it: numpy, sympy, pyarrow, rich, a framework), a slow or missing standard-library module
    (:data:`SLOW_STDLIB`, :data:`OPTIONAL_STDLIB`), or a kinkcheck module whose own imports reach a third-party
    library this module does not import already. Each but the first says which on its line (or the line above):
    ``# slow: sympy``, ``# slow to import``, ``# optional: …``; and a module that starts a command
    (:data:`ENTRY_POINTS`) defers the modules the start does not need (``# on first use``). Any other import belongs
    at the top, where a reader sees the module's real structure (issue 47)."""
    files = _module_names()
    modules = set(files)
    direct, edges = _top_graph()
    slow = _slow_libraries(direct, edges)
    entries = [m for pattern in ENTRY_POINTS for m in files
               if m == pattern or (pattern.endswith(".*") and m.startswith(pattern[:-1]))]
    starts = [_start(edges, entry) for entry in entries]
    wrong = []
    for name, path in files.items():
        text = path.read_text()
        lines = text.splitlines()
        for fn in ast.walk(ast.parse(text)):
            if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            for node in ast.walk(fn):
                if not isinstance(node, (ast.Import, ast.ImportFrom)):
                    continue
                above = lines[node.lineno - 2].strip() if node.lineno > 1 else ""
                line = lines[node.lineno - 1]
                said = (line[line.find("#"):] if "#" in line else "") + (above if above.startswith("#") else "")
                for target, kind in _targets(name, path, node, modules):
                    where = f"{path.relative_to(SRC.parent)}:{node.lineno} ({ast.unparse(node)[:60]})"
                    if kind == "third-party":
                        continue
                    if kind == "stdlib":
                        if target.startswith(OPTIONAL_STDLIB):
                            ok = "optional" in said
                        elif target.startswith(SLOW_STDLIB):
                            ok = "slow" in said
                        else:
                            wrong.append(f"{where}: a quick standard-library import: at the top")
                            continue
                        if not ok:
                            wrong.append(f"{where}: say why it waits (# slow to import, # optional: …)")
                        continue
                    extra = slow[target] - slow[name]
                    later = any(name in start and target not in start for start in starts)
                    if extra and not any(lib in said for lib in extra):
                        wrong.append(f"{where}: name what it waits for ({', '.join(sorted(extra))})")
                    elif not extra and not later:
                        wrong.append(f"{where}: {target} imports nothing slow that {name} does not: at the top")
                    elif not extra and "first use" not in said:
                        wrong.append(f"{where}: a start-up module waits for {target}: say so (# on first use)")
    assert not wrong, f"{len(wrong)} function-body import(s):\n" + "\n".join(wrong[:40])
