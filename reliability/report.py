"""The summary of a run: faults injected (by kind and crash point), records produced and in the
tables, lost, duplicated, each bad input with its answers, and the verdict (:func:`exit_code`)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from .catalogue import DATA_INPUTS, PRODUCER_INPUTS, RAW_INPUTS
from .ingest_chaos import CRASH_POINTS

__all__ = ["exit_code", "render", "summarize"]

CHAOS = {
    "ingest": "parka ingest chaos",
    "ingest-iceberg": "parka ingest chaos (Iceberg)",
    "evolution": "schema evolution chaos",
    "upsert": "parka ingest --upsert chaos",
    "upsert-cdc": "parka ingest --cdc debezium chaos",
    "upsert-iceberg": "parka ingest --upsert chaos (Iceberg)",
    "history": "long history (VACUUM, checkpoints, log cleanup)",
    "fleet": "parka ingest of many topics, several daemons",
    "spark": "spark-ingest chaos",
    "broker": "broker restarts",
}
MIN_INGEST_KILLS = {"full": 30, "quick": 5}
STOP_BOUND_S = 35.0
"""A SIGTERM'd worker's time to exit at most: ``parka ingest``'s default ``--stop-timeout`` (30 s)
plus 5 for the exit itself (a graceful stop takes seconds; one past the timeout exits 143, a
problem of its own)."""


def _is_crash(kind: str) -> bool:
    return "crash point" in kind or "SIGKILL" in kind


def _verdicts(kind: str, results: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """Every place this kind of bad input was answered, as (where, verdict)."""
    out = []
    calm = results.get("bad-inputs", {}).get(kind, {})
    for key, where in (("without_dlq", "alone, no DLQ"), ("with_dlq", "alone, DLQ")):
        if key in calm:
            out.append((where, calm[key]))
    if "producer" in calm:
        out.append(("producer", calm["producer"]))
    for scenario in ("ingest", "ingest-iceberg", "history", "spark"):
        verdict = results.get(scenario, {}).get("bad_input_kinds", {}).get(kind)
        if verdict is not None:
            out.append((f"{scenario} chaos", verdict))
    return out


def summarize(
    results: dict[str, Any], *, mode: str, seed: int, bootstrap: str, command: str, wall_s: float
) -> dict[str, Any]:
    faults: dict[str, int] = {}
    for scenario, title in CHAOS.items():
        for kind, n in sorted(results.get(scenario, {}).get("faults", {}).items()):
            faults[f"{title}: {kind}"] = n
    crashes = sum(n for kind, n in faults.items() if _is_crash(kind))
    totals = {"records_produced": 0, "records_in_table": 0, "lost": 0, "duplicated": 0}
    per_scenario = {}
    for scenario, title in CHAOS.items():
        res = results.get(scenario)
        if res is None:
            continue
        per_scenario[title] = {k: res.get(k) for k in (*totals, "unexpected", "orphans", "compacted_files", "wall_s")}
        per_scenario[title].update({k: res[k] for k in ("tombstones", "stale_events") if k in res})  # upserts
        for k in totals:
            totals[k] += res.get(k) or 0
    bad_inputs = []
    for bad in (*RAW_INPUTS, *DATA_INPUTS, *PRODUCER_INPUTS):
        verdicts = _verdicts(bad.kind, results)
        answered = bool(verdicts) and all(v["sent"] == v["answered"] and not v["problems"] for _, v in verdicts)
        bad_inputs.append(
            {
                "input": bad.description,
                "kind": bad.kind,
                "answered": answered,
                "outcomes": [
                    {"where": where, "sent": v["sent"], "answered": v["answered"], "example": v["example"]}
                    | ({"problems": v["problems"]} if v["problems"] else {})
                    for where, v in verdicts
                ],
            }
        )
    requirements = []
    for scenario, on in (("ingest", ""), ("ingest-iceberg", " (Iceberg)")):  # the same plan, either format
        if scenario not in results:
            continue
        ingest_faults = results[scenario].get("faults", {})
        ingest_kills = sum(n for kind, n in ingest_faults.items() if _is_crash(kind))
        # the mode's floor, or all the plan makes when it visits fewer points (Iceberg's quick one)
        needed = min(MIN_INGEST_KILLS.get(mode, 0), results[scenario].get("planned_kills", 1 << 30))
        requirements.append(
            (f"at least {needed} SIGKILLs of parka ingest workers{on} ({ingest_kills})", ingest_kills >= needed)
        )
        stops = results[scenario].get("stop_seconds", [])
        if stops:
            requirements.append(
                (
                    f"every SIGTERM'd worker{on} exited within {STOP_BOUND_S:.0f} s (max {max(stops):.1f} s of "
                    f"{len(stops)})",
                    max(stops) <= STOP_BOUND_S,
                )
            )
        for point in results[scenario].get("crash_points", CRASH_POINTS):
            n = ingest_faults.get(f"crash point {point}", 0)
            requirements.append((f"parka ingest killed at crash point {point}{on} ({n})", n > 0))
    for scenario, flag in (
        ("upsert", "--upsert"),
        ("upsert-cdc", "--cdc debezium"),
        ("upsert-iceberg", "--upsert --catalog"),
    ):
        if scenario not in results:
            continue
        upsert_faults = results[scenario].get("faults", {})
        for point in results[scenario].get("crash_points", ()):
            n = upsert_faults.get(f"crash point {point}", 0)
            requirements.append((f"parka ingest {flag} killed at crash point {point} ({n})", n > 0))
        if scenario == "upsert-cdc":
            stale = results[scenario].get("stale_events", 0)
            requirements.append((f"out-of-order change events among the updates ({stale})", stale > 0))
    if "history" in results:
        res = results["history"]
        kills = sum(n for kind, n in res.get("faults", {}).items() if _is_crash(kind))
        requirements.append(
            (f"SIGKILLs amid VACUUM and checkpoints ({kills} of {res['planned_kills']})", kills >= res["planned_kills"])
        )
        checked = res.get("pinned_versions_checked", 0)
        requirements.append((f"versions inside the retention checked for their files ({checked})", checked > 0))
    if "spark" in results:
        done = sum(n for kind, n in results["spark"].get("faults", {}).items() if _is_crash(kind) and "not" not in kind)
        planned = results["spark"].get("planned_kills", 1)
        requirements.append((f"Spark drivers killed as planned ({done} of {planned})", done >= planned))
    problems = [f"{name}: {p}" for name, res in results.items() for p in res.get("problems", [])]
    notes = [f"{CHAOS.get(name, name)}: {n}" for name, res in results.items() for n in res.get("notes", [])]
    ok = (
        totals["lost"] == 0
        and totals["duplicated"] == 0
        and all(b["answered"] for b in bad_inputs if "bad-inputs" in results)
        and all(met for _, met in requirements)
        and not problems
    )
    return {
        "command": command,
        "mode": mode,
        "seed": seed,
        "bootstrap": bootstrap,
        "wall_s": round(wall_s, 1),
        "faults": faults,
        "crashes": crashes,
        **totals,
        "scenarios": per_scenario,
        "bad_inputs": bad_inputs,
        "requirements": [{"what": what, "met": met} for what, met in requirements],
        "problems": problems,
        "notes": notes,
        "ok": ok,
        "results": results,
    }


def exit_code(summary: dict[str, Any]) -> int:
    return 0 if summary["ok"] else 1


def _table(rows: Iterable[tuple[str, ...]], right: int = 1) -> list[str]:
    rows = list(rows)
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return [
        "  ".join(c.ljust(w) if i < right else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths, strict=True)))
        for r in rows
    ]


def render(s: dict[str, Any]) -> str:
    minutes, seconds = divmod(round(s["wall_s"]), 60)
    lines = [
        f"parka fault suite: mode {s['mode']}, seed {s['seed']}, broker {s['bootstrap']}, {minutes} min {seconds} s",
        "",
    ]
    lines += _table([("fault injected", "count"), *((k, str(n)) for k, n in s["faults"].items())])
    lines += [f"SIGKILLs in all (crash points, process groups, the broker): {s['crashes']}", ""]
    rows = [("scenario", "produced", "in table", "lost", "duplicated", "orphans", "compacted files", "wall s")]
    for title, r in s["scenarios"].items():
        rows.append(
            (
                title,
                f"{r['records_produced'] or 0:,}",
                f"{r['records_in_table'] or 0:,}",
                str(r["lost"]),
                str(r["duplicated"]),
                str(r["orphans"]),
                "-" if r.get("compacted_files") is None else str(r["compacted_files"]),
                str(r["wall_s"]),
            )
        )
    rows.append(
        (
            "total",
            f"{s['records_produced']:,}",
            f"{s['records_in_table']:,}",
            str(s["lost"]),
            str(s["duplicated"]),
            "",
            "",
            "",
        )
    )
    lines += [*_table(rows), ""]
    lines.append(
        "bad inputs, answered/sent (alone: on a topic of its own, parka ingest without and with --dlq-table;\n"
        "ingest/spark chaos: dead-letter rows of those scenarios; producer: its delivery callback), one answer:"
    )
    for b in s["bad_inputs"]:
        where = "; ".join(f"{o['where']} {o['answered']}/{o['sent']}" for o in b["outcomes"])
        lines.append(f"{'ok' if b['answered'] else 'NO'}  {b['input']}: {where}")
        example = b["outcomes"][0]["example"] if b["outcomes"] else ""
        lines.append("      " + (example if len(example) <= 150 else f"{example[:105]} ... {example[-40:]}"))
        lines += [f"      PROBLEM: {p}" for o in b["outcomes"] for p in o.get("problems", [])[:3]]
    lines.append("")
    lines += [f"{'met ' if r['met'] else 'NOT '} {r['what']}" for r in s["requirements"]]
    lines += [f"note: {n}" for n in s["notes"]]
    lines += [f"PROBLEM {p[:600]}" for p in s["problems"]]
    verdict = "PASS" if s["ok"] else "FAIL"
    lines.append(
        f"result: {verdict}: lost {s['lost']}, duplicated {s['duplicated']}, "
        f"{sum(b['answered'] for b in s['bad_inputs'])}/{len(s['bad_inputs'])} bad inputs answered, "
        f"{len(s['problems'])} problem(s)"
    )
    return "\n".join(lines)
