"""Shards + oracles → the report document (the ``kinkcheck/conventions/v1`` JSON contract).

Every observation cell comes from a shard; labels come from :func:`kinkcheck.classify.classify` against
the sympy oracle; network cross-checks from :mod:`kinkcheck.oracles.backprop`. Nothing is typed in. The
document is a function of the shards and the catalog alone, with no wall clock: ``generated_at`` is the newest
``measured_at`` of its environments (:func:`report_date`), so the same shards give the same bytes on any machine.
"""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Iterable, Sequence
from fractions import Fraction
from typing import Any

from kinkcheck import __version__
from kinkcheck import conformance as conf
from kinkcheck.catalog import FRAMEWORKS, Case, Catalog
from kinkcheck.classify import OracleNumbers, classify, same_value
from kinkcheck.diff import Side, changed_in, compare
from kinkcheck.frameworks.base import flat_value
from kinkcheck.oracles import backprop
from kinkcheck.oracles.table import oracle_table
from kinkcheck.shards import missing_work

__all__ = ["P0_PROGRAMS", "SCHEMA_ID", "build", "report_date"]

SCHEMA_ID = "kinkcheck/conventions/v1"

#: Programs shown in the P0 worked example, in order (case relu@0).
P0_PROGRAMS: tuple[tuple[str, str], ...] = (
    ("torch", "torch.nn.functional.relu(x)"),
    ("torch", "x.clamp(min=0)"),
    ("torch", "torch.clamp(x, min=0)"),
    ("jax", "jax.nn.relu(x)"),
    ("jax", "jax.numpy.maximum(x, 0.0)"),
    ("jax", "jax.numpy.clip(x, 0)"),
)
#: relu'(0) values the NumPy oracle is shown with in the worked example.
P0_KINK_DERIVATIVES: tuple[Fraction, ...] = (Fraction(0), Fraction(1, 2), Fraction(1))


def _env_sort_key(env: dict[str, Any]) -> tuple[Any, ...]:
    from packaging.version import InvalidVersion, Version

    try:
        v: Any = Version(env["framework_version"])
    except InvalidVersion:
        v = Version("0")
    fw = env["framework"]
    rank = FRAMEWORKS.index(fw) if fw in FRAMEWORKS else len(FRAMEWORKS)
    return (rank, fw, v, env["device"])


def _value_key(case: Case, value: dict[str, Any] | None) -> list[float] | None:
    return None if value is None else flat_value({k: value[k] for k in case.inputs})


def _group(items: Iterable[tuple[str, list[float] | None, str, str]], dtype: str) -> list[dict[str, Any]]:
    """Group (program, flat value, framework, first label) by value within tolerance, in first-seen order."""
    groups: list[dict[str, Any]] = []
    for program, flat, framework, label in items:
        if flat is None:
            continue
        for g in groups:
            if same_value(g["flat"], flat, dtype):
                g["programs"].append({"framework": framework, "program": program})
                break
        else:
            groups.append({"flat": flat, "label": label, "programs": [{"framework": framework, "program": program}]})
    return groups


def build(shards: Sequence[dict[str, Any]], catalog: Catalog, gaps: Sequence[str] = ()) -> dict[str, Any]:
    """Build the report document.

    Parameters
    ----------
    shards : sequence of dict
        Shards as read by :func:`kinkcheck.shards.load_shards` (validated).
    catalog : Catalog
    gaps : sequence of str
        One line per shard that could not be read; shown in the report.

    Returns
    -------
    dict
        The ``kinkcheck/conventions/v1`` document (see ``schemas/conventions.v1.json``).
    """
    shards = sorted(shards, key=lambda s: _env_sort_key(s["environment"]))
    # case_hashes (per-case freshness, 16 hex digits a case) stay in the shards: bookkeeping, not provenance
    environments = [{k: v for k, v in s["environment"].items() if k != "case_hashes"} for s in shards]
    table = oracle_table(catalog)
    oracles = {cid: OracleNumbers.from_json(d) for cid, d in table.items()}
    second = {cid: OracleNumbers.from_json(d["second_order"]) for cid, d in table.items() if d.get("second_order")}
    cases_out = []
    for c in catalog:
        entry = {
            "id": c.id, "title": c.title, "sympy": c.sympy, "at": c.at, "tie": c.tie, "sources": list(c.sources),
            "note": c.note,
            "programs": [{"framework": p.framework, "program": p.id} for p in c.programs],
            "notes": dict(c.notes), "no_equivalent": dict(c.no_equivalent),
        }
        oj = dict(table[c.id])
        oj.pop("case", None)
        oj["oracle_notes"] = oj.pop("notes", [])
        entry.update(oj)
        cases_out.append(entry)

    observations = []
    stale: list[str] = []
    unknown: dict[str, set[str]] = {}
    labels_memo: dict[tuple[Any, ...], list[str]] = {}
    predictions: dict[tuple[str, str, str], conf.Prediction] = {}
    scalar_derivative: dict[tuple[str, str, str, str], float] = {}
    changed_cases: dict[str, set[str]] = {}
    for s in shards:
        env = s["environment"]
        changed = () if env.get("not_measured") is not None else missing_work(s, catalog).changed  # per case
        changed_cases[env["id"]] = set(changed)
        if changed:
            stale.append(f"{env['id']}: {len(changed)} case(s) measured against another definition than the "
                         f"catalog's ({', '.join(changed[:3])}{', …' if len(changed) > 3 else ''}); not shown "
                         "until `nox -s report` re-probes them")
        for ob in s["observations"]:
            if ob["case"] in changed:  # judged against today's oracle, an old point's value could be mislabelled
                continue
            try:
                case = catalog.case(ob["case"])
                case.program(env["framework"], ob["program"])
            except KeyError:
                unknown.setdefault(env["id"], set()).add(f"{ob['case']} / {ob['program']}")
                continue
            flat = _value_key(case, ob["value"])
            order = 2 if ob["mode"] == "second-order" else 1
            memo_key = (case.id, order, ob["dtype"], ob["status"], None if flat is None else tuple(flat))
            if memo_key not in labels_memo:  # many environments return the same value: classify it once
                if order == 2 and case.id not in second:
                    raise ValueError(f"the oracle table has no second-order entry for {case.id}")
                labels_memo[memo_key] = classify(
                    flat, second[case.id] if order == 2 else oracles[case.id], ob["dtype"],
                    error=ob["error"] if ob["status"] == "error" else None,
                    unavailable=ob["error"] if ob["status"] == "unavailable" else None,
                )
            labels = list(labels_memo[memo_key])
            row = {
                "case": case.id, "program": ob["program"], "framework": env["framework"], "environment": env["id"],
                "mode": ob["mode"], "dtype": ob["dtype"], "status": ob["status"], "value": ob["value"],
                "labels": labels, "error": ob["error"],
            }
            if ob["mode"] != "second-order" and ob["dtype"] in conf.JUDGED_DTYPES and ob.get("input") is None:
                pkey = (case.id, env["framework"], ob["program"])
                if pkey not in predictions:
                    predictions[pkey] = conf.predict(env["framework"], case.program(env["framework"], ob["program"]).tree,
                                                     oracles[case.id])
                verdict = conf.verdict(predictions[pkey], flat if ob["status"] == "ok" else None, ob["dtype"])
                if verdict is not None:
                    row["conformance"] = verdict
            if ob.get("input") is not None:
                row["input"] = ob["input"]
            observations.append(row)
            if flat is not None and len(flat) == 1:
                scalar_derivative[(env["id"], case.id, ob["program"], ob["dtype"], ob["mode"])] = flat[0]

    networks = []
    for s in shards:
        env = s["environment"]
        for nw in s["networks"]:
            if nw["case"] in changed_cases[env["id"]]:
                continue
            try:
                case = catalog.case(nw["case"])
            except KeyError:
                continue
            mode = nw.get("mode", "reverse")
            kd = scalar_derivative.get((env["id"], nw["case"], nw["program"], nw["dtype"], mode))
            row: dict[str, Any] = {
                "case": nw["case"], "program": nw["program"], "framework": env["framework"], "environment": env["id"],
                "mode": mode, "dtype": nw["dtype"], "status": nw["status"], "kink_derivative": None, "ok": None,
                "max_abs_diff": None, "detail": nw["error"], "W1": nw["W1"], "W2": nw["W2"],
            }
            if nw["status"] == "ok" and kd is not None and case.activation in backprop.ACTIVATIONS:
                try:
                    cc = backprop.crosscheck(nw["W1"], nw["W2"], case.activation, kd, nw["dtype"])
                except OverflowError:  # a finite but huge measured kink derivative: the exact oracle leaves float64
                    row.update(kink_derivative=_num(kd), detail=f"not checked: with the kink derivative {kd:.6g} "
                               "the oracle's gradient overflows float64")
                else:
                    row.update(kink_derivative=_num(kd), ok=bool(cc.ok), max_abs_diff=_num(cc.max_abs_diff),
                               detail=None if cc.ok else cc.detail)
            elif nw["status"] == "ok":
                row["detail"] = "no scalar observation of this program to take the kink derivative from"
            networks.append(row)

    doc = {
        "schema": SCHEMA_ID,
        "provenance": {
            "generated_at": report_date(environments),
            "kinkcheck_version": __version__,
            "catalog_hash": catalog.hash,
            "gaps": list(gaps) + stale + [
                f"{eid}: {len(items)} observation(s) of cases or programs not in the catalog were ignored "
                f"(e.g. {sorted(items)[0]})" for eid, items in sorted(unknown.items())
            ],
        },
        "environments": environments,
        "cases": cases_out,
        "observations": observations,
        "networks": networks,
        "p0": _p0(networks, {e["id"]: e for e in environments}),
    }
    doc["disagreements"] = disagreements(doc, catalog)
    doc["mode_disagreements"] = mode_disagreements(doc)
    doc["changed_in"] = changed_in(environments, observations, _env_sort_key)
    doc["conformance"] = _conformance(doc, predictions)
    doc["version_span"] = _version_span(doc)
    doc["coverage"] = _coverage(doc)
    doc["network_summary"] = _network_summary(doc["networks"])
    doc["summary"] = _summary(doc)
    return doc


def report_date(environments: Sequence[dict[str, Any]]) -> str:
    """The report's date: the newest ``measured_at`` (ISO 8601) among ``environments``, as written there.

    Derived from the data rather than read from the clock, so a re-render of the same shards is byte-identical.
    A time without an offset counts as UTC; a value that is not ISO 8601 is skipped. ``"unknown"`` when no
    environment has a readable ``measured_at``.
    """
    def key(text: str) -> dt.datetime | None:
        try:
            t = dt.datetime.fromisoformat(text)
        except (TypeError, ValueError):
            return None
        return t if t.tzinfo else t.replace(tzinfo=dt.UTC)

    dated = []
    for e in environments:
        when = key(e.get("measured_at"))
        if when is not None:
            dated.append((when, e["measured_at"]))
    return max(dated)[1] if dated else "unknown"


def _conformance(doc: dict[str, Any], predictions: dict[tuple[str, str, str], conf.Prediction]) -> dict[str, Any]:
    """The Conformance section: each framework's rule, counts, and per program (reverse mode, float64) its
    verdict in every release, consecutive releases with the same verdict and value merged into one row."""
    env_by_id = {e["id"]: e for e in doc["environments"]}
    order = {e["id"]: i for i, e in enumerate(doc["environments"])}
    rows: list[dict[str, Any]] = []
    last: dict[tuple[str, str, str], dict[str, Any]] = {}
    obs = sorted((o for o in doc["observations"] if o["mode"] == "reverse" and o["dtype"] == "float64"
                  and o.get("conformance")), key=lambda o: order[o["environment"]])
    case_rank = {c["id"]: i for i, c in enumerate(doc["cases"])}
    for o in obs:
        key = (o["case"], o["framework"], o["program"])
        p = predictions[key]
        prev = last.get(key)
        if prev is not None and prev["verdict"] == o["conformance"] and prev["value"] == o["value"]:
            prev["environments"].append(o["environment"])
            continue
        row = {"case": o["case"], "framework": o["framework"], "program": o["program"], "verdict": o["conformance"],
               "step": p.step, "predicted": [[_num(v) for v in vec] for vec in p.values], "value": o["value"],
               "label": o["labels"][0], "environments": [o["environment"]]}
        last[key] = row
        rows.append(row)
    rows.sort(key=lambda r: (case_rank[r["case"]], FRAMEWORKS.index(r["framework"]) if r["framework"] in FRAMEWORKS
                             else len(FRAMEWORKS), r["program"], order[r["environments"][0]]))
    for r in rows:
        versions = [env_by_id[e]["framework_version"] + ("" if env_by_id[e]["device"] == "cpu"
                                                          else f" {env_by_id[e]['device']}") for e in r["environments"]]
        r["releases"] = versions[0] if len(versions) == 1 else f"{versions[0]} – {versions[-1]} ({len(versions)} releases)"
    newest: dict[str, dict[str, int]] = {}
    for fw in FRAMEWORKS:
        envs = [e["id"] for e in doc["environments"] if e["framework"] == fw and e["device"] == "cpu"
                and any(o["environment"] == e["id"] for o in obs)]
        if envs:
            counts = {v: 0 for v in conf.VERDICTS}
            for o in obs:
                if o["environment"] == envs[-1]:
                    counts[o["conformance"]] += 1
            newest[fw] = {"environment": envs[-1], **counts}
    return {"rules": {fw: {"text": r.text, "source": r.source} for fw, r in conf.RULES.items()},
            "newest": newest, "rows": rows}


def _network_summary(networks: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per case and program: how many end-to-end network runs agree with the NumPy oracle."""
    out: dict[tuple[str, str, str], dict[str, Any]] = {}
    for n in networks:
        row = out.setdefault((n["case"], n["framework"], n["program"]), {
            "case": n["case"], "framework": n["framework"], "program": n["program"], "runs": 0, "agree": 0,
            "differ": [], "not_checked": 0, "modes": []})
        row["runs"] += 1
        if n["mode"] not in row["modes"]:
            row["modes"].append(n["mode"])
        if n["ok"] is True:
            row["agree"] += 1
        elif n["ok"] is False:
            row["differ"].append(f"{n['environment']} {n['mode']} {n['dtype']}: {n['detail']}")
        else:
            row["not_checked"] += 1
    return list(out.values())


def _version_span(doc: dict[str, Any]) -> list[dict[str, Any]]:
    """Per framework (CPU): how many programs changed between the oldest and newest measured release."""
    measured = {o["environment"] for o in doc["observations"]}
    out = []
    for fw in FRAMEWORKS:
        envs = sorted((e for e in doc["environments"] if e["framework"] == fw and e["device"] == "cpu"
                       and e["id"] in measured), key=_env_sort_key)
        if len(envs) < 2:
            continue
        sides = []
        for e in (envs[0], envs[-1]):
            obs = {(o["case"], o["program"], o["mode"], o["dtype"]): o for o in doc["observations"]
                   if o["environment"] == e["id"]}
            sides.append(Side(e["id"], e, obs))
        # A mode or dtype that did not exist in the oldest release is coverage, not a changed convention.
        changes = [c for c in compare(*sides) if "unavailable" not in (c.old.get("status"), c.new.get("status"))]
        out.append({"framework": fw, "oldest": envs[0]["framework_version"], "newest": envs[-1]["framework_version"],
                    "releases": len(envs), "programs_changed": len({(c.case, c.program) for c in changes})})
    return out


def _coverage(doc: dict[str, Any]) -> dict[str, Any]:
    """What the shards measured and, derived from their absence, what they did not (with the reason)."""
    from kinkcheck.frameworks.base import DTYPES, MODES

    obs = doc["observations"]
    have = {"devices": sorted({e["device"] for e in doc["environments"]}),
            "dtypes": [d for d in DTYPES if any(o["dtype"] == d for o in obs)],
            "modes": [m for m in MODES if any(o["mode"] == m for o in obs)]}
    missing = [f"{e['id']}: {e['not_measured']}" for e in doc["environments"] if e.get("not_measured")]
    missing += [f"{e['id']}: the attempt to measure it again on {a['attempted_at']} failed ({a['not_measured']}); "
                f"shown as measured on {e['measured_at']}"
                for e in doc["environments"] if isinstance(a := e.get("last_attempt"), dict)]
    old = [e["id"] for e in doc["environments"] if not e.get("not_measured") and "modes" not in e]
    if old:
        missing.append(f"{', '.join(old)}: measured before the mode and dtype matrix (reverse mode, float64 and "
                       "float32, forward mode for P9 cases only); their other modes and dtypes are not measured "
                       "(`nox -s report` re-probes these stale shards)")
    for fw in FRAMEWORKS:
        envs = [e for e in doc["environments"] if e["framework"] == fw]
        if not envs:
            missing.append(f"{fw}: not measured: no shard")
        elif not any(e["device"] == "cuda" for e in envs):
            missing.append(f"{fw} on CUDA: not measured: no shard from a CUDA device")
    absent_dtypes = [d for d in DTYPES if d not in have["dtypes"]]
    if absent_dtypes:
        missing.append(f"{', '.join(absent_dtypes)}: not measured: no shard probed these dtypes")
    absent_modes = [m for m in MODES if m not in have["modes"]]
    if absent_modes:
        missing.append(f"{', '.join(absent_modes)} mode: not measured: no shard probed it")
    return {**have, "not_measured": missing}


def _num(v: float) -> Any:
    if math.isnan(v):
        return "nan"
    if math.isinf(v):
        return "inf" if v > 0 else "-inf"
    return v


def _p0(networks: Sequence[dict[str, Any]], env_by_id: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """The worked example of P0: NumPy oracle rows for relu'(0) = 0, 1/2, 1 and the measured programs."""
    oracle_rows = []
    for kd in P0_KINK_DERIVATIVES:
        g = backprop.two_layer_grads(backprop.P0, "relu", kd, dtype=Fraction)
        oracle_rows.append({
            "kink_derivative": str(kd),
            "W1": [[_frac_num(v) for v in row] for row in g.dW1.tolist()],
            "W2": [[_frac_num(v) for v in row] for row in g.dW2.tolist()],
        })
    measured = []
    for fw, prog in P0_PROGRAMS:
        runs = sorted((nw for nw in networks if nw["case"] == "relu@0" and nw["framework"] == fw
                       and nw["program"] == prog and nw["dtype"] == "float32" and nw["mode"] == "reverse"),
                      key=lambda nw: _env_sort_key(env_by_id[nw["environment"]]))
        for nw in runs:  # consecutive releases with the same result share one row
            same = ("W1", "W2", "kink_derivative", "ok", "status")
            if measured and measured[-1]["program"] == prog and measured[-1]["framework"] == fw and \
                    all(measured[-1][k] == nw[k] for k in same):
                measured[-1]["environments"].append(nw["environment"])
                continue
            row = {k: nw[k] for k in ("framework", "program", "dtype", "status", "kink_derivative", "ok", "W1", "W2",
                                      "detail")}
            row["environments"] = [nw["environment"]]
            row["W1_minus_oracle0"] = _minus(nw["W1"], oracle_rows[0]["W1"])
            measured.append(row)
    for row in measured:
        versions = [env_by_id[e]["framework_version"] for e in row["environments"]]
        row["releases"] = versions[0] if len(versions) == 1 else f"{versions[0]} – {versions[-1]} ({len(versions)} releases)"
    net = backprop.P0
    return {
        "net": {"X": net.X.tolist(), "W1": net.W1.tolist(), "W2": net.W2.tolist(), "target": net.target.tolist(),
                "loss": "sum((relu(X @ W1) @ W2 - target) ** 2)"},
        "oracle": oracle_rows,
        "measured": measured,
    }


def _minus(a: Any, b: Any) -> Any:
    """Elementwise a - b of two nested lists (shard numbers, possibly "nan"); None when ``a`` is None."""
    if a is None:
        return None
    if isinstance(a, list):
        return [_minus(x, y) for x, y in zip(a, b)]
    return _num(float(a) - float(b))


def _frac_num(v: Any) -> Any:
    f = Fraction(v)
    return int(f) if f.denominator == 1 else float(f)


def disagreements(doc: dict[str, Any], catalog: Catalog) -> dict[str, list[dict[str, Any]]]:
    """Programs for the same case that return different values (reverse mode), within and across frameworks.

    ``within``: per environment, case and dtype, the groups of programs with equal values, when there are
    two or more groups. ``across``: per case and dtype, comparing the newest environment of each framework,
    the values some framework returns that no program of another framework returns.
    """
    by_key: dict[tuple[str, str, str], list[dict[str, Any]]] = {}
    for ob in doc["observations"]:
        if ob["mode"] != "reverse":
            continue
        by_key.setdefault((ob["environment"], ob["case"], ob["dtype"]), []).append(ob)
    within = []
    envs = doc["environments"]
    dtypes = sorted({ob["dtype"] for ob in doc["observations"]}, key=["float64", "float32", "float16", "bfloat16"].index)
    for env in envs:
        for case in catalog:
            for dtype in dtypes:
                obs = by_key.get((env["id"], case.id, dtype), [])
                groups = _group(((o["program"], _value_key(case, o["value"]), o["framework"], o["labels"][0])
                                 for o in obs), dtype)
                if len(groups) > 1:
                    within.append({"environment": env["id"], "framework": env["framework"], "case": case.id,
                                   "dtypes": [dtype], "groups": [_strip(g) for g in groups]})
    newest: dict[str, str] = {}
    for env in sorted(envs, key=_env_sort_key):
        if env["device"] == "cpu":
            newest[env["framework"]] = env["id"]
    across = []
    for case in catalog:
        for dtype in dtypes:
            obs = [o for eid in newest.values() for o in by_key.get((eid, case.id, dtype), [])]
            groups = _group(((o["program"], _value_key(case, o["value"]), o["framework"], o["labels"][0])
                             for o in obs), dtype)
            frameworks = {p["framework"] for g in groups for p in g["programs"]}
            one_sided = [g for g in groups if len({p["framework"] for p in g["programs"]}) == 1]
            if len(frameworks) > 1 and one_sided:
                stripped = []
                for g in groups:
                    fws = {p["framework"] for p in g["programs"]}
                    stripped.append({**_strip(g), "only": fws.pop() if len(fws) == 1 else None})
                across.append({"case": case.id, "dtypes": [dtype], "environments": sorted(newest.values()),
                               "groups": stripped})
    merged = _merge_dtypes(within, ("environment", "case"))
    return {"within": _merge_environments(merged, {e["id"]: e for e in envs}), "across": _merge_dtypes(across, ("case",))}


def _merge_environments(entries: list[dict[str, Any]], env_by_id: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    """One entry for all releases of a framework whose programs split the same way (case order kept)."""
    out: dict[tuple[Any, ...], dict[str, Any]] = {}
    for e in entries:
        key = (e["framework"], e["case"], tuple(e["dtypes"]),
               tuple((g["label"], tuple((p["framework"], p["program"]) for p in g["programs"])) for g in e["groups"]))
        if key in out:
            out[key]["environments"].append(e["environment"])
        else:
            out[key] = {**{k: v for k, v in e.items() if k != "environment"}, "environments": [e["environment"]]}
    for e in out.values():
        versions = [env_by_id[i]["framework_version"] for i in e["environments"]]
        e["releases"] = versions[0] if len(versions) == 1 else f"{', '.join(versions)}"
    order = {c: i for i, c in enumerate(dict.fromkeys(e["case"] for e in entries))}
    return sorted(out.values(), key=lambda e: (order[e["case"]], e["framework"] != "torch", e["environments"][0]))


def _merge_dtypes(entries: list[dict[str, Any]], keys: tuple[str, ...]) -> list[dict[str, Any]]:
    """One entry for several dtypes when the programs fall into the same groups with the same labels."""
    out: list[dict[str, Any]] = []
    for e in entries:
        shape = [(g["label"], g["programs"]) for g in e["groups"]]
        for prev in out:
            if all(prev[k] == e[k] for k in keys) and [(g["label"], g["programs"]) for g in prev["groups"]] == shape:
                prev["dtypes"].extend(e["dtypes"])
                break
        else:
            out.append(e)
    return out


def _strip(g: dict[str, Any]) -> dict[str, Any]:
    return {"value": [_num(v) for v in g["flat"]], "label": g["label"], "programs": g["programs"]}


def _summary(doc: dict[str, Any]) -> dict[str, Any]:
    obs = doc["observations"]
    return {
        "cases": len(doc["cases"]),
        "programs": sum(len(c["programs"]) for c in doc["cases"]),
        "environments": len(doc["environments"]),
        "observations": len(obs),
        "errors": sum(o["status"] == "error" for o in obs),
        "unavailable": sum(o["status"] == "unavailable" for o in obs),
        "outside_clarke": sum("outside-clarke" in o["labels"] for o in obs),
        "not_lipschitz": sum("not-lipschitz" in o["labels"] for o in obs),
        "not_judged": sum("not-judged" in o["labels"] for o in obs),
        "cases_not_judged": sum(c["kind"] == "not-judged" for c in doc["cases"]),
        "nan": sum("nan" in o["labels"] for o in obs),
        "disagreements_within": len(doc["disagreements"]["within"]),
        "disagreements_across": len(doc["disagreements"]["across"]),
        "network_mismatches": sum(n["ok"] is False for n in doc["networks"]),
        "mode_disagreements": len(doc["mode_disagreements"]["rows"]),
        "network_runs": len(doc["networks"]),
        "changed_in": len(doc["changed_in"]),
        "conformance": {v: sum(o.get("conformance") == v for o in obs) for v in conf.VERDICTS},
        "not_measured": sum(1 for e in doc["environments"] if e.get("not_measured")),
    }


#: How a mode is compared with its reference, and the heading of the comparison in the report.
COMPARISONS: dict[str, str] = {
    "functional": "reverse vs functional",
    "jacrev": "reverse vs functional",
    "forward": "reverse vs forward",
    "forward-ad": "reverse vs forward",
    "jacfwd": "reverse vs forward",
    "inductor": "eager vs compiled",
    "aot_eager": "eager vs compiled",
    "jit": "grad vs jit",
    "vmap": "unbatched vs vmap",
}
_DTYPE_ORDER = ("float64", "float32", "float16", "bfloat16")


def _differs(a: dict[str, Any], b: dict[str, Any], case: dict[str, Any], dtype: str) -> bool:
    """Whether two observations of one program disagree: status, value beyond ``dtype``'s tolerance, or label.

    A mode or dtype ``unavailable`` in a version is coverage, not a disagreement.
    """
    if "unavailable" in (a["status"], b["status"]):
        return False
    if a["status"] != b["status"]:
        return True
    if a["status"] != "ok":
        return False
    fa = flat_value({k: a["value"][k] for k in case["at"]})
    fb = flat_value({k: b["value"][k] for k in case["at"]})
    return not same_value(fa, fb, dtype) or a["labels"][0] != b["labels"][0]


def _brief(ob: dict[str, Any]) -> dict[str, Any]:
    out = {"status": ob["status"], "value": ob["value"], "label": ob["labels"][0], "error": ob["error"]}
    if ob.get("input") is not None:
        out["input"] = ob["input"]
    return out


def mode_disagreements(doc: dict[str, Any]) -> dict[str, Any]:
    """Where the same program gives different values or labels by mode, dtype or device.

    Comparisons, each within one environment unless said otherwise:

    * a mode against reverse mode in the same dtype (:data:`COMPARISONS`: reverse vs forward, eager vs
      compiled, grad vs jit, unbatched vs vmap, reverse vs functional);
    * a lower precision against float64, in reverse and in second-order mode ("float64 vs bfloat16");
    * a CUDA environment against the CPU environment of the same framework version ("CPU vs CUDA").

    Rows that differ the same way in several environments (and dtypes) are merged; ``releases`` lists them.

    Returns
    -------
    dict
        ``rows``: list of dicts (framework, case, program, comparison, mode, reference_mode, dtypes, reference,
        observed, environments, releases); ``not_measured``: comparisons that could not be made, with why.
    """
    cases = {c["id"]: c for c in doc["cases"]}
    env_by_id = {e["id"]: e for e in doc["environments"]}
    index: dict[tuple[str, str, str], dict[tuple[str, str], dict[str, Any]]] = {}
    for ob in doc["observations"]:
        index.setdefault((ob["environment"], ob["case"], ob["program"]), {})[(ob["mode"], ob["dtype"])] = ob
    raw: list[tuple[dict[str, Any], dict[str, Any], dict[str, Any], str, str]] = []
    for (eid, cid, prog), cells in index.items():
        case = cases[cid]
        for (mode, dtype), ob in cells.items():
            if mode in COMPARISONS:
                ref = cells.get(("reverse", dtype))
                if ref is not None and _differs(ref, ob, case, dtype):
                    raw.append((ref, ob, case, COMPARISONS[mode], eid))
            if mode in ("reverse", "second-order") and dtype != "float64":
                ref = cells.get((mode, "float64"))
                if ref is not None and _differs(ref, ob, case, dtype):
                    raw.append((ref, ob, case, f"float64 vs {dtype}", eid))
    not_measured = []
    for env in doc["environments"]:
        if env["device"] == "cpu":
            continue
        cpu = next((e for e in doc["environments"] if e["device"] == "cpu" and e["framework"] == env["framework"]
                    and e["framework_version"] == env["framework_version"]), None)
        if cpu is None:
            not_measured.append(f"{env['id']}: no CPU shard of {env['framework']} {env['framework_version']} "
                                "to compare with")
            continue
        for (eid, cid, prog), cells in index.items():
            if eid != env["id"]:
                continue
            cpu_cells = index.get((cpu["id"], cid, prog), {})
            for key, ob in cells.items():
                ref = cpu_cells.get(key)
                if ref is not None and _differs(ref, ob, cases[cid], key[1]):
                    raw.append((ref, ob, cases[cid], f"CPU vs {env['device'].upper()}", eid))
    for fw in FRAMEWORKS:
        if not any(e["framework"] == fw and e["device"] != "cpu" for e in doc["environments"]):
            not_measured.append(f"{fw}: CPU vs CUDA not measured: no shard from a CUDA device")
    # First the dtypes per environment, then one row per set of environments with the same dtypes, so that
    # every (release, dtype) a row names really shows the difference.
    per_env: dict[tuple[Any, ...], dict[str, Any]] = {}
    for ref, ob, case, comparison, eid in raw:
        r, o = _brief(ref), _brief(ob)
        key = (ob["framework"], case["id"], ob["program"], comparison, ref["mode"], ob["mode"],
               repr((r["value"], r["label"], r["status"], r.get("input"))),
               repr((o["value"], o["label"], o["status"], o.get("input"))), eid)
        entry = per_env.setdefault(key, {
            "framework": ob["framework"], "case": case["id"], "program": ob["program"], "comparison": comparison,
            "reference_mode": ref["mode"], "mode": ob["mode"], "reference_dtype": ref["dtype"], "dtypes": [],
            "reference": r, "observed": o, "environments": [eid],
        })
        if ob["dtype"] not in entry["dtypes"]:
            entry["dtypes"].append(ob["dtype"])
    merged: dict[tuple[Any, ...], dict[str, Any]] = {}
    for key, entry in per_env.items():
        entry["dtypes"].sort(key=_DTYPE_ORDER.index)
        mkey = (*key[:-1], tuple(entry["dtypes"]))
        if mkey in merged:
            merged[mkey]["environments"].append(key[-1])
        else:
            merged[mkey] = entry
    rows = list(merged.values())
    case_order = {c["id"]: i for i, c in enumerate(doc["cases"])}
    fams = list(dict.fromkeys([*COMPARISONS.values(), "float64 vs float32", "float64 vs float16",
                               "float64 vs bfloat16"]))
    for row in rows:
        row["environments"].sort(key=lambda i: _env_sort_key(env_by_id[i]))
        versions = [env_by_id[i]["framework_version"] + ("" if env_by_id[i]["device"] == "cpu"
                                                          else f" {env_by_id[i]['device']}")
                    for i in row["environments"]]
        row["releases"] = ", ".join(versions)
    rows.sort(key=lambda r: (fams.index(r["comparison"]) if r["comparison"] in fams else len(fams), r["comparison"],
                             FRAMEWORKS.index(r["framework"]) if r["framework"] in FRAMEWORKS else 9,
                             case_order[r["case"]], r["program"], r["mode"], r["environments"][0]))
    return {"rows": rows, "not_measured": not_measured}
