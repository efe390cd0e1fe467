"""Benchmark: the vault's weekly reflection on a 10,000-note vault with planted reworded duplicates.

Run:  ``.venv/bin/python bench/vault_reflection.py [--notes 10000] [--caps 20,800] [--weeks 4] [--quick] [--keep-home]``
(``--quick`` = 1,000 notes, about a minute; the full run took 15 minutes on 2 shared cores, most of it
the eight plans of about a minute each and the 3,200 reviewer calls at cap 800: ``--caps 800`` alone
takes about 9.)

Method
------
0. **Vault** (``bench/vault_reflection_corpus.plant``, seed ``--seed``): ``--notes`` notes of the
   shared-vault benches' generator in link families of 1 to 4 (related notes, never duplicates),
   and reworded copies (one, or two for 30%) of ``--dup-share`` of them under other names, with no
   link to their original: the answer key lists each duplicate group. Written straight into
   ``<home>/shared/kb/<project>/notes/`` and indexed in-process before the suite starts.
1. **Suite**: a home with one agent sharing the project (``knowledge.shared``: enabled, graph off,
   ``reflection.enabled`` false so no scheduled run interferes, ``maxClustersPerRun`` = the cap),
   ``reviewerCommand`` = ``bench/vault_reflection_reviewer.py`` (an instant reviewer, no model:
   merges the notes of a cluster whose word-bigram containment clears 0.2, keeping the largest word
   for word). The file API, watcher, KB, dreaming and the REST shim run as real processes
   (``gateway serve``).
2. **Weeks**: ``gateway vault reflect --project P`` ``--weeks`` times in a row (each run one
   "week"), each timed by the bench (wall, the CLI process included); the KB's handler time of its
   ``PlanVaultReflection`` from its ``rpc`` log; reviewer calls from the reviewer's own log.
3. **Judging** against the key, from the notes on disk: every retired ``stale__`` note names the
   note it was merged into. *Precision*: merged-away notes that are a copy of (in one group with) the
   note they merged into / all merged-away notes. *Recall*: such merges / copies planted.
   *Duplicates left*: per group, its live notes minus one. *Facts lost*: every line of fact (the
   KB's own definition) of every merged-away note is looked for in the note it merged into, then in
   the pruned archive; a line in neither is lost. ``--probes`` lines that only the archive holds are
   searched through REST (``memory:search``, corpus shared, first 16 words, 20 hits): found when a
   hit is the archive or the merged note.
4. **Revert** (last cap only): the notes folder is read before each week; ``gateway vault revert
   --project P --last`` then undoes the last week's run that merged anything, and every note but the
   pruned archive (whose blocks a revert leaves) must be back as it was before that week, byte for
   byte, retired twins gone.
5. **Baseline**: the same near-duplicate work bare, in-process: read every note, bucket the notes by
   their 4 rarest words, and compute the word-bigram containment of the pairs that share a bucket.

Steps 1 to 4 run once per cap of ``--caps`` (the default 20, and one that meets the goal), each on
a fresh home with the same planted vault. Goals: precision 100%, facts lost 0, duplicates left
after the weeks under 2% of the notes (at the larger cap), revert exact. The script prints a
markdown table with PASS/FAIL (also written to ``bench/results/vault_reflection.md``, git-ignored)
and exits 0 whatever the goals say; non-zero only when the benchmark itself could not run.
"""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness import BENCH_DIR, page
from harness.home import KEY, agent_entry, api_key, session, write_config
from harness.procs import Children, rpc_seconds, start_service, wait_until
from harness.report import Figures, say, table

import httpx
from start_agents import ready
from vault_reflection_corpus import PlantedVault, plant
from vault_reflection_judge import Baseline, Judged, baseline, judge, probe_search, read_notes

TITLE = "Vault weekly reflection: 10,000 notes with planted reworded duplicates"
METHOD = """\
A 10,000-note vault with reworded copies of 5% of its notes planted under other names (a known answer
key) is reflected by the real suite (`gateway vault reflect`, four runs in a row: four "weeks") with
an instant reviewer that merges the notes of a cluster that read alike. The merges are judged against
the key (precision, recall, duplicates left), every line of fact of every merged-away note is looked
for in the vault, and the last run is reverted and checked byte for byte. The baseline is the same
near-duplicate work done bare in-process."""
PROJECT = "team"
AGENT = "bench"
SERVICES = ("file_api", "watcher", "kb", "dreaming")
PORTS = {"file_api": "fileApi", "watcher": "watcher", "kb": "kb", "dreaming": "dreaming"}
CLI_TIMEOUT_S = 3600.0
DURING_PLAN_AFTER_S = 5.0  # a create and a search made this long after week 1's run began, while its plan runs
LEFT_GOAL = 0.02


@dataclass
class Week:
    wall_s: float
    plan_s: float
    calls: int
    status: str
    outcomes: dict[str, int]
    remaining: int
    refusals: dict[str, int]
    during: dict[str, float] = field(default_factory=dict)  # "create", "search": seconds, made during the plan


@dataclass
class Phase:
    cap: int
    weeks: list[Week] = field(default_factory=list)
    judged: Judged | None = None
    probes: tuple[int, int, list[str]] = (0, 0, [])
    revert_ok: bool | None = None
    revert_detail: str = ""
    reverted_week: int = 0  # the last week whose run merged (revert --last undoes it)
    start_s: float = 0.0


def write_home(home: Path, cap: int, reviewer_log: Path, merge: str) -> dict[str, int]:
    from datetime import UTC, datetime, timedelta

    slot = datetime.now(UTC) + timedelta(hours=12)
    reviewer = [sys.executable, "-S", str(BENCH_DIR / "vault_reflection_reviewer.py"), str(reviewer_log)] + (["--pair"] if merge == "pair" else [])
    shared = {"enabled": True, "project": PROJECT, "graph": False, "reflection": {"enabled": False, "maxClustersPerRun": cap}}
    dreaming = {"dreamHour": slot.hour, "dreamMinute": slot.minute, "staggerWindowMinutes": 0, "reviewerCommand": reviewer}
    return write_config(home, [agent_entry(AGENT)], keys=[api_key("*", write=True)],
                        gateway={"knowledge": {"shared": shared}, "dreaming": dreaming})  # fmt: skip


def start_suite(children: Children, home: Path, ports: dict[str, int]) -> None:
    for name in SERVICES:
        start_service(children, name, home, ports[PORTS[name]], timeout=300)
    children.serve("http", home)
    wait_until(children, lambda: ready("http", ports["api"]), "the REST shim's /healthz", name="http")


def gateway(home: Path, *words: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "gateway_cli.cli", "vault", *words, "--project", PROJECT, "--home", str(home)],
                          capture_output=True, text=True, timeout=CLI_TIMEOUT_S)  # fmt: skip


def count_lines(path: Path) -> int:
    return len(path.read_text(encoding="utf-8").splitlines()) if path.exists() else 0


def plant_vault(home: Path, args: Any) -> tuple[Path, PlantedVault]:
    from gateway.config import load_config
    from services.kb.vault import note_index as vault_index

    agent = load_config(home).agent(AGENT)
    assert agent is not None
    agent.workspace.mkdir(parents=True, exist_ok=True)
    vault_dir = agent.knowledge.shared.vault_dir
    vault = plant(vault_dir / "notes", count=args.notes, seed=args.seed, dup_share=args.dup_share)
    conn = vault_index.open_vault_index(vault_dir)
    vault_index.refresh_vault(conn, vault_dir)
    conn.close()
    return vault_dir / "notes", vault


def during_plan(client: httpx.Client, out: dict[str, float]) -> None:
    """A vault search and a shared-note create, side by side, made while the run's plan is (most likely)
    running: the plan is one write decision of the vault, so the create waits for it; the search
    (the vault walked already) does not."""
    time.sleep(DURING_PLAN_AFTER_S)

    def search() -> None:
        t0 = time.perf_counter()
        client.get(f"/api/v1/agents/{AGENT}/memory:search", params={"query": "kettle ferry", "corpus": "shared"}).raise_for_status()
        out["search"] = time.perf_counter() - t0

    def create() -> None:
        t0 = time.perf_counter()
        response = client.post(f"/api/v1/agents/{AGENT}/shared/notes", timeout=600, json={
            "name": "made during the plan", "content": "# Made during the plan\n\nA zebra quilt.\n", "confirm": True})
        out["create"] = time.perf_counter() - t0
        out["create_status"] = response.status_code

    both = [threading.Thread(target=f, daemon=True) for f in (search, create)]
    for t in both:
        t.start()
    for t in both:
        t.join()


def week(home: Path, children: Children, client: httpx.Client, log: Path, n: int) -> Week:
    calls_before = count_lines(log)
    during: dict[str, float] = {}
    probe = threading.Thread(target=during_plan, args=(client, during), daemon=True) if n == 0 else None
    t0 = time.perf_counter()
    if probe is not None:
        probe.start()
    done = gateway(home, "reflect")
    wall = time.perf_counter() - t0
    if probe is not None:
        probe.join()
    if done.returncode != 0:
        raise RuntimeError(f"gateway vault reflect failed ({done.returncode}): {done.stdout}{done.stderr}")
    plan_s = rpc_seconds(children.logs["kb"], "PlanVaultReflection", n, 1)[0]
    run = client.get(f"/api/v1/vaults/{PROJECT}/reflection:runs", params={"limit": 1}).json()["runs"][0]
    outcomes: dict[str, int] = {}
    refusals: dict[str, int] = {}
    for cluster in run.get("clusters", []):
        outcomes[cluster.get("outcome", "")] = outcomes.get(cluster.get("outcome", ""), 0) + 1
        if cluster.get("outcome") in ("refused", "changed"):
            why = cluster.get("reason", "")[:60]
            refusals[why] = refusals.get(why, 0) + 1
    say(f"week {n + 1}: {run.get('status')} in {wall:.1f} s (plan {plan_s:.1f} s), {count_lines(log) - calls_before} "
        f"reviewer calls, {outcomes}, remaining {run.get('remaining', 0)}")  # fmt: skip
    return Week(wall, plan_s, count_lines(log) - calls_before, run.get("status", ""), outcomes, int(run.get("remaining", 0)),
                refusals, during)  # fmt: skip


def revert_check(home: Path, notes_dir: Path, before: dict[str, bytes]) -> tuple[bool, str]:
    done = gateway(home, "revert", "--last")
    after = read_notes(notes_dir)
    keep = {n: d for n, d in before.items() if not n.startswith("pruned__")}
    now = {n: d for n, d in after.items() if not n.startswith("pruned__")}
    differ = sorted(n for n in keep.keys() | now.keys() if keep.get(n) != now.get(n))
    ok = done.returncode == 0 and not differ
    head = done.stdout.strip().splitlines()[0] if done.stdout.strip() else done.stderr.strip()[:200]
    return ok, f"{head}; {len(differ)} notes differ from before the run" + (f" (e.g. {differ[:3]})" if differ else "")


def phase(args: Any, cap: int, revert: bool) -> tuple[Phase, PlantedVault, Baseline | None]:
    result = Phase(cap)
    with session(f"bench-vault-reflection-{cap}-", keep=args.keep_home) as (home, children):
        log = home / "reviewer-calls.jsonl"
        ports = write_home(home, cap, log, args.merge)
        t0 = time.perf_counter()
        notes_dir, vault = plant_vault(home, args)
        say(f"cap {cap}: {len(vault.names):,} notes ({vault.copies} copies in {len(vault.groups)} groups) planted and indexed "
            f"in {time.perf_counter() - t0:.1f} s")  # fmt: skip
        base = baseline(notes_dir, vault) if revert else None
        t0 = time.perf_counter()
        start_suite(children, home, ports)
        result.start_s = time.perf_counter() - t0
        with httpx.Client(base_url=f"http://127.0.0.1:{ports['api']}", headers={"X-Api-Key": KEY}, timeout=120) as client:
            before: dict[str, bytes] = {}  # the notes before the last week that merged: what revert --last undoes
            client.get(f"/api/v1/agents/{AGENT}/memory:search", params={"query": "warm", "corpus": "shared"}).raise_for_status()
            for n in range(args.weeks):
                candidate = read_notes(notes_dir) if revert else {}
                result.weeks.append(week(home, children, client, log, n))
                if revert and result.weeks[-1].outcomes.get("merged", 0):
                    before, result.reverted_week = candidate, n + 1
            result.judged = judge(read_notes(notes_dir), vault)
            result.probes = probe_search(client, AGENT, result.judged, args.probes, args.seed)
            if revert and result.reverted_week:
                result.revert_ok, result.revert_detail = revert_check(home, notes_dir, before)
    return result, vault, base


def pct(part: int, whole: int) -> str:
    return f"{100 * part / whole:.1f}%" if whole else "n/a"


def report(phases: list[Phase], vault: PlantedVault, base: Baseline, args: Any) -> tuple[str, list[str]]:
    figs = Figures()
    notes = len(vault.names)
    figs.add("Vault", f"{notes:,} notes ({vault.bytes / 1e6:.1f} MB), {vault.families:,} link families, "
             f"{vault.copies:,} reworded copies in {len(vault.groups):,} duplicate groups ({pct(vault.copies, notes)} of the notes)")
    for ph in phases:
        j = ph.judged
        assert j is not None
        tag = f"cap {ph.cap}"
        first = ph.weeks[0]
        figs.add(f"{tag}: clusters reviewed per week", ", ".join(str(sum(w.outcomes.values())) for w in ph.weeks)
                 + f" (waiting after week 1: {first.remaining:,})")
        figs.add(f"{tag}: wall time per run (CLI)", ", ".join(f"{w.wall_s:.1f} s" for w in ph.weeks))
        figs.add(f"{tag}: plan time per run (KB PlanVaultReflection)", ", ".join(f"{w.plan_s:.1f} s" for w in ph.weeks))
        if first.during:
            figs.add(f"{tag}: made {DURING_PLAN_AFTER_S:.0f} s into week 1's run: a vault search, a shared-note create",
                     f"{first.during['search'] * 1000:.0f} ms, {first.during['create']:.1f} s (HTTP {first.during['create_status']:.0f})")
        figs.add(f"{tag}: reviewer calls per run", ", ".join(str(w.calls) for w in ph.weeks))
        merged = sum(w.outcomes.get("merged", 0) for w in ph.weeks)
        refused = sum(w.outcomes.get("refused", 0) + w.outcomes.get("changed", 0) for w in ph.weeks)
        figs.add(f"{tag}: clusters merged, left, refused", f"{merged}, {sum(w.outcomes.get('left', 0) for w in ph.weeks)}, {refused}")
        figs.add(f"{tag}: precision (merged away into a note it copies)", f"{j.true_copies} of {j.merged_away} ({pct(j.true_copies, j.merged_away)})",
                 "100%", j.true_copies == j.merged_away)  # fmt: skip
        figs.add(f"{tag}: recall (copies merged / planted)", f"{j.true_copies} of {vault.copies} ({pct(j.true_copies, vault.copies)})")
        figs.add(f"{tag}: facts lost (lines of fact of merged-away notes in no live note)", f"{len(j.lost)} of {j.lines:,} "
                 f"({j.in_merged:,} in the merged note, {j.in_archive:,} in the pruned archive)", "0", not j.lost)  # fmt: skip
        probed, found, _ = ph.probes
        figs.add(f"{tag}: archive-only lines found by vault search (REST, sample)", f"{found} of {probed}", "all", found == probed)
        goal = ph.cap == max(p.cap for p in phases)
        figs.add(f"{tag}: reworded duplicates left after {len(ph.weeks)} weeks", f"{j.left} ({pct(j.left, notes)} of the notes)",
                 "< 2% of notes" if goal else "", j.left / notes < LEFT_GOAL if goal else None)  # fmt: skip
        if ph.revert_ok is not None:
            figs.add(f"{tag}: revert --last (week {ph.reverted_week}, the last that merged): notes back byte for byte",
                     ph.revert_detail, "exact", ph.revert_ok)
    figs.add("Baseline: read every note, bigram containment of bucketed pairs (in-process)",
             f"{base.seconds:.1f} s (read {base.read_seconds:.1f} s), {base.candidates:,} pairs compared, {base.pairs:,} "
             f"over the bar ({base.true_pairs:,} true), {base.copies_found:,} of {vault.copies:,} copies found")  # fmt: skip
    for ph in phases:
        plan = sum(w.plan_s for w in ph.weeks) / len(ph.weeks)
        wall = sum(w.wall_s for w in ph.weeks) / len(ph.weeks)
        figs.add(f"ratio cap {ph.cap}: run wall / baseline, plan / baseline (mean per week)",
                 f"{wall / base.seconds:.1f}x, {plan / base.seconds:.1f}x")
    md = [f"## Vault reflection benchmark ({notes:,} notes, {len(phases[0].weeks)} weeks)", "",
          f"- machine: {page.machine()}; load average before {args.load_before}, after {page.load_average()} "
          "(the machine is shared with other work: times are noisy)",
          f"- vault: bench/vault_reflection_corpus.py seed {args.seed}, dup share {args.dup_share}",
          f"- reviewer: bench/vault_reflection_reviewer.py (instant, no model), merging {'one pair' if args.merge == 'pair' else 'every alike note'} per cluster", "", figs.table()]
    for ph in phases:
        rows = [(f"week {i + 1}", w.status, w.outcomes.get("merged", 0), w.outcomes.get("left", 0),
                 w.outcomes.get("refused", 0), w.outcomes.get("changed", 0), w.remaining, w.calls, f"{w.wall_s:.1f}", f"{w.plan_s:.1f}")
                for i, w in enumerate(ph.weeks)]  # fmt: skip
        md += ["", f"### maxClustersPerRun {ph.cap}", "",
               table(("run", "status", "merged", "left", "refused", "changed", "waiting", "reviewer calls", "wall s", "plan s"), rows)]
        reasons = {}
        for w in ph.weeks:
            for why, n in w.refusals.items():
                reasons[why] = reasons.get(why, 0) + n
        if reasons:
            md += ["", "Refusals by reason: " + "; ".join(f"{why!r} x{n}" for why, n in sorted(reasons.items(), key=lambda x: -x[1]))]
        j = ph.judged
        if j is not None and (j.wrong or j.lost or ph.probes[2]):
            md += ["", "Judged wrong: " + "; ".join(j.wrong[:10] + j.lost[:10] + [f"not found: {m!r}" for m in ph.probes[2][:10]])]
    return "\n".join(md), figs.verdicts()


def parse_args(argv: list[str] | None) -> Any:
    p = page.parser(__doc__, quick="smoke run: 1,000 notes", keep_home="keep the temp homes (vaults, logs)")
    p.add_argument("--notes", type=int, default=10_000, help="notes planted before the copies (default 10000)")
    p.add_argument("--dup-share", type=float, default=0.05, help="share of the notes given reworded copies (default 0.05)")
    p.add_argument("--caps", default="20,800", help="maxClustersPerRun values, one fresh home each (default 20,800)")
    p.add_argument("--weeks", type=int, default=4, help="runs in a row (default 4)")
    p.add_argument("--probes", type=int, default=100, help="archive-only lines searched through REST (default 100)")
    p.add_argument("--merge", choices=("pair", "group"), default="pair",
                   help="the reviewer merges the most alike pair of a cluster (default) or every alike note at once")
    p.add_argument("--seed", type=int, default=36, help="seed of the planted vault (default 36)")
    args = p.parse_args(argv)
    if args.quick:
        args.notes = 1000
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    run = page.Run.begin("vault_reflection", TITLE, METHOD, argv)
    args.load_before = run.load_before
    caps = [int(c) for c in args.caps.split(",")]
    phases: list[Phase] = []
    base: Baseline | None = None
    vault: PlantedVault | None = None
    for i, cap in enumerate(caps):
        ph, vault, b = phase(args, cap, revert=i == len(caps) - 1)
        phases.append(ph)
        base = b or base
    assert vault is not None and base is not None
    markdown, verdicts = report(phases, vault, base, args)
    run.finish(markdown, verdicts, write_docs=args.write_docs)
    return 0


if __name__ == "__main__":
    sys.exit(main())
