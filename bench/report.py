"""Runs every scenario in one run and writes the table and charts.

Writes docs/bench-results.json (raw numbers), the table between the markers
of docs/performance.md, and PNG charts under docs/img/. ``--rows`` scales
every scenario down; without it each runs at the issue's size.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from . import churn, common, drain, enqueue, limit, pools, worst_case

DOCS = Path(__file__).resolve().parent.parent / "docs"
START = "<!-- bench:table:start -->"
END = "<!-- bench:table:end -->"


def _f(x: float, digits: int = 0) -> str:
    return f"{x:,.{digits}f}"


def table(r: dict[str, Any]) -> str:
    rows = ["| target | measured | reference (same run) | ratio | goal | met |", "|---|---|---|---|---|---|"]
    w = r.get("worst_case")
    if w:
        rows.append(f"| 1. worst case, {w['rows']:,} rows, 8 consumers | {_f(w['ours']['per_second'])} claims/s | naive {_f(w['naive']['per_second'], 1)} claims/s | {_f(w['speedup_vs_naive'], 1)}× | ≥ 100× | {'yes' if w['targets']['speedup_100x'] else 'no'} |")
        sizes = list(w["latency_single_client"])
        small, big = (w["latency_single_client"][k] for k in sizes)
        rows.append(f"| 1. claim p99, {sizes[0]} → {sizes[1]} backlog | {_f(big['p99_ms'], 2)} ms | {_f(small['p99_ms'], 2)} ms | {_f(w['p99_growth'], 2)}× | ≤ 1.5× | {'yes' if w['targets']['p99_growth_le_1_5'] else 'no'} |")
        rows.append(f"| 5. worst-case claims vs limit (8 clients) | {_f(w['ours']['per_second'])} /s | {_f(w['limit']['per_second'])} UPDATE+COMMIT/s | {_f(w['ours_vs_limit'], 2)} | (report) | — |")
    p = r.get("pools")
    if p:
        rows.append(f"| 2. full pools, {p['rows']:,} tasks / {p['pools']:,} pools | {_f(p['with_pools']['per_second'])} claim+complete/s | no pools {_f(p['without_pools']['per_second'])}/s | {_f(p['ratio_pools_vs_none'], 2)} | ≥ 0.5 | {'yes' if p['targets']['pools_ratio_ge_0_5'] else 'no'} |")
        rows.append(f"| 5. pools vs limit (8 clients) | {_f(p['with_pools']['per_second'])} /s | {_f(p['limit']['per_second'])} /s | {_f(p['with_pools_vs_limit'], 2)} | (report) | — |")
    bigs = [(p or {}).get("big_pool") or r.get("pools_big", {}).get("big_pool"),
            (p or {}).get("big_pool_head") or r.get("pools_big_head", {}).get("big_pool_head")]
    for big in filter(None, bigs):
        where = "queued first" if big.get("layout") == "head" else "interleaved"
        rows.append(f"| 2. one big pool: half of {big['rows']:,} tasks ({where}), limit 2 | "
                    f"{_f(big['ours']['per_second'])} claim+complete/s | naive loop {_f(big['naive']['per_second'])}/s; "
                    f"no pools {_f(big['ours_no_pools']['per_second'])}/s | {_f(big['ours_vs_naive'], 2)} of naive | "
                    "(report) | — |")
    d = r.get("drain")
    if d and "table" in d:
        for row in d["table"]:
            if "pgqueuer_defaults" not in row:
                continue
            what = f"3. drain, {row['handler']} handler, {row['processes']} process(es)"
            for kind, goal in (("defaults", 1.5), ("best", 1.0)):
                ours, theirs, ratio = row[f"taskqueue_{kind}"], row[f"pgqueuer_{kind}"], row[f"ratio_{kind}"]
                rows.append(f"| {what}, {kind} | {_f(ours['per_second'])} jobs/s | PGQueuer {_f(theirs['per_second'])} jobs/s | {_f(ratio, 2)}× | ≥ {goal}× | {'yes' if ratio >= goal else 'no'} |")
    e = r.get("enqueue")
    if e:
        rows.append(f"| 4. enqueue_many, 10k batches | {_f(e['enqueue_many_per_second'])} tasks/s | COPY {_f(e['copy_per_second'])} rows/s | {_f(e['ratios']['enqueue_many_vs_copy'], 2)} of COPY | ≥ 100k/s | {'yes' if e['targets']['enqueue_many_ge_100k'] else 'no'} |")
        rows.append(f"| 4. single enqueue | {_f(e['enqueue_single_per_second'])} /s | bare INSERT+COMMIT {_f(e['bare_insert_commit_per_second'])} /s | {_f(e['ratios']['single_vs_bare_insert'], 2)} | ≥ 0.8 | {'yes' if e['targets']['single_ge_0_8_bare'] else 'no'} |")
        if "pgqueuer_batch_per_second" in e:
            rows.append(f"| 4. peers' enqueue (batch / single) | ours {_f(e['enqueue_many_per_second'])} / {_f(e['enqueue_single_per_second'])} | PGQueuer {_f(e['pgqueuer_batch_per_second'])} / {_f(e['pgqueuer_single_per_second'])}; procrastinate {_f(e.get('procrastinate_batch_per_second', 0))} / {_f(e.get('procrastinate_single_per_second', 0))} | — | (report) | — |")
    c = r.get("churn")
    if c:
        rows.append(f"| 6. churn {c['rows']:,} tasks, claim_many p50 first → last 5% | {_f(c['claim_latency_last_5pct']['p50_ms'], 2)} ms | {_f(c['claim_latency_first_5pct']['p50_ms'], 2)} ms | {_f(c['p50_growth'], 2)}× | ≤ 1.5× | {'yes' if c['targets']['p50_within_1_5'] else 'no'} |")
        rows.append(f"| 6. tasks table bytes, before → after run | {_f(c['sizes_after_run'].get('tasks', 0) / 1024)} KiB | {_f(c['sizes_before'].get('tasks', 0) / 1024)} KiB | {_f(c['tasks_bytes_growth'], 2)}× | small | — |")
    lim = r.get("limit")
    if lim:
        by = lim["by_clients"]
        rows.append("| 5. physical limit, UPDATE+COMMIT/s at 1 / 2 / 8 clients | " + " / ".join(_f(by[k]["per_second"]) for k in ("1", "2", "8")) + " | — | — | (reference) | — |")
    return "\n".join(rows)


def charts(r: dict[str, Any], out: Path) -> list[str]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out.mkdir(parents=True, exist_ok=True)
    made = []
    w = r.get("worst_case")
    if w:
        sizes = list(w["latency_single_client"])
        fig, ax = plt.subplots(figsize=(6, 3.5))
        for q in ("p50_ms", "p90_ms", "p99_ms"):
            ax.plot([int(s) for s in sizes], [w["latency_single_client"][s][q] for s in sizes], marker="o", label=q[:-3])
        ax.set_xscale("log")
        ax.set_xlabel("waiting tasks (worst case: 0.5% fit)")
        ax.set_ylabel("claim latency, ms (1 client)")
        ax.set_ylim(bottom=0)
        ax.legend()
        ax.set_title("Claim latency against backlog")
        fig.tight_layout()
        fig.savefig(out / "latency-vs-backlog.png", dpi=110)
        plt.close(fig)
        made.append("latency-vs-backlog.png")
    d = r.get("drain")
    if d and "table" in d:
        rows = [row for row in d["table"] if "pgqueuer_best" in row]
        labels = [f"{row['handler']}\n×{row['processes']}" for row in rows]
        fig, ax = plt.subplots(figsize=(8, 3.8))
        width = 0.2
        series = (("taskqueue_defaults", "taskqueue defaults", "#63b3ed"), ("taskqueue_best", "taskqueue best", "#2b6cb0"),
                  ("pgqueuer_defaults", "PGQueuer defaults", "#f6ad55"), ("pgqueuer_best", "PGQueuer best", "#dd6b20"))
        for i, (key, name, color) in enumerate(series):
            ax.bar([x + (i - 1.5) * width for x in range(len(rows))], [row[key]["per_second"] for row in rows],
                   width, label=name, color=color)
        ax.set_xticks(range(len(rows)), labels)
        ax.set_ylabel("jobs/s")
        ax.set_title(f"Drain {d['rows']:,} jobs (1 ms CPU: {d['cpu_rows']:,}), real worker processes")
        ax.legend(fontsize=7)
        fig.tight_layout()
        fig.savefig(out / "drain-vs-peers.png", dpi=110)
        plt.close(fig)
        made.append("drain-vs-peers.png")
    if w:
        fig, ax = plt.subplots(figsize=(6, 3.5))
        names = ["naive query", "claim_tasks()", "limit: UPDATE+\nCOMMIT, 8 clients"]
        vals = [w["naive"]["per_second"], w["ours"]["per_second"], w["limit"]["per_second"]]
        ax.bar(names, vals, color=["#a0aec0", "#2b6cb0", "#718096"])
        ax.set_yscale("log")
        ax.set_ylabel("claims/s (log)")
        ax.set_title(f"Worst case, {w['rows']:,} waiting, 8 consumers")
        fig.tight_layout()
        fig.savefig(out / "worst-case-claims.png", dpi=110)
        plt.close(fig)
        made.append("worst-case-claims.png")
    return made


def write_table(doc: Path, text: str) -> None:
    block = f"{START}\n{text}\n{END}"
    body = doc.read_text() if doc.exists() else f"# Performance\n\n{START}\n{END}\n"
    if START in body and END in body:
        head, rest = body.split(START, 1)
        _, tail = rest.split(END, 1)
        body = head + block + tail
    else:
        body += "\n" + block + "\n"
    doc.write_text(body)


def run(opts: common.Options) -> dict[str, Any]:
    results: dict[str, Any] = {"scenario": "report"}
    for name, module in (("limit", limit), ("worst_case", worst_case), ("pools", pools),
                         ("drain", drain), ("enqueue", enqueue), ("churn", churn)):
        common.console.log(f"report: {name}")
        if name == "churn" and opts.churn_rows:
            results[name] = module.run(common.Options(opts.dsn, opts.churn_rows, opts.seconds))
        else:
            results[name] = module.run(opts)
    results["server"] = common.server_facts(opts.dsn)
    DOCS.mkdir(exist_ok=True)
    (DOCS / "bench-results.json").write_text(json.dumps(results, indent=2, default=str) + "\n")
    write_table(DOCS / "performance.md", table(results))
    results["charts"] = charts(results, DOCS / "img")
    return results


def render(path: str) -> None:
    """Re-render table and charts from a saved docs/bench-results.json (no measuring)."""
    results = json.loads(Path(path).read_text())
    write_table(DOCS / "performance.md", table(results))
    charts(results, DOCS / "img")
