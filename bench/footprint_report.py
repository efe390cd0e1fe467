"""bench/footprint.py's tables and its lines against the goals: memory and CPU at rest per process,
the REST cases beside the floor (and a reference system), and the shim workers compared."""

from __future__ import annotations

from dataclasses import dataclass

from harness.report import table, verdict
from rest_cases import Result

SUITE, REFERENCE = "suite", "reference"
SUITE_RSS_MIB = 250.0  # the goals of docs/benchmarks/footprint.md
SERVICE_RSS_MIB = 50.0
LAUNCHER_RSS_MIB = 20.0
AFTER_LOAD_RATIO = 1.3
REST_CPU_PCT = 0.3
GET_P50_MS = 0.40
GET_CPU_US = 400.0
WORKERS_KEEP = 0.95  # "no throughput lost", less what one 5 s case moves by on a shared machine

Memory = dict[str, tuple[float, float] | None]  # process -> (RSS, PSS) in MiB; None: it was gone


@dataclass(frozen=True)
class Measured:
    """One wrk run and the CPU its target's processes spent per request (µs)."""

    result: Result
    path_us: float  # the request path: the shim(s) and the file API, or the whole floor or reference
    all_us: float  # every process of the target
    by_process_us: dict[str, float]


@dataclass(frozen=True)
class Case:
    target: str
    method: str
    conns: int
    measured: Measured


def _mib(value: tuple[float, float] | None, index: int) -> str:
    return "gone" if value is None else f"{value[index]:.1f}"


def _total(memory: Memory, names: list[str], index: int) -> float:
    return sum(v[index] for n in names if (v := memory.get(n)) is not None)


def memory_table(at_rest: Memory, after: Memory, idle: dict[str, float]) -> str:
    rows = []
    groups = [[n for n in at_rest if not n.startswith(REFERENCE)], [n for n in at_rest if n.startswith(REFERENCE)]]
    for names, label in zip(groups, ("suite, all processes", "reference, all processes"), strict=True):
        if not names:
            continue
        for name in names:
            rows.append((name, _mib(at_rest[name], 0), _mib(at_rest[name], 1), _mib(after.get(name), 0), _mib(after.get(name), 1),
                         f"{idle.get(name, 0.0):.2f}"))  # fmt: skip
        rows.append((f"**{label}**", *(f"**{_total(m, names, i):.1f}**" for m, i in ((at_rest, 0), (at_rest, 1), (after, 0), (after, 1))),
                     f"**{sum(idle.get(n, 0.0) for n in names):.2f}**"))  # fmt: skip
    return table(("process", "RSS at rest, MiB", "PSS at rest, MiB", "RSS after load, MiB", "PSS after load, MiB",
                  "CPU at rest, % of a core"), rows, "lrrrrr")  # fmt: skip


def cases_table(cases: list[Case]) -> str:
    rows = []
    for case in sorted(cases, key=lambda c: (c.method, c.conns)):
        r, m = case.measured.result, case.measured
        rows.append((case.target, case.method, case.conns, f"{r.rps:,.0f}", f"{r.p50_ms:.2f}", f"{r.p99_ms:.2f}", r.errors,
                     f"{m.path_us:,.0f}", f"{m.all_us:,.0f}"))  # fmt: skip
    return table(("path", "method", "connections", "req/s", "p50 ms", "p99 ms", "errors", "CPU µs/req, request path",
                  "CPU µs/req, all its processes"), rows, "llrrrrrrr")  # fmt: skip


def by_process_table(cases: list[Case]) -> str:
    rows = [(f"{c.method} c{c.conns}", " + ".join(f"{n} {v:,.0f}" for n, v in c.measured.by_process_us.items() if v >= 0.5))
            for c in cases if c.target == SUITE]  # fmt: skip
    return table(("suite case", "CPU µs per request, by process"), rows)


def workers_table(cases: list[Case]) -> str:
    rows = []
    for case in cases:
        m = case.measured
        shims = sum(v for n, v in m.by_process_us.items() if n.startswith("http"))
        rows.append((case.target, case.conns, f"{m.result.rps:,.0f}", f"{m.result.p50_ms:.2f}", f"{m.result.p99_ms:.2f}",
                     m.result.errors, f"{shims:,.0f}", f"{m.by_process_us.get('file_api', 0.0):,.0f}", f"{m.all_us:,.0f}"))  # fmt: skip
    return table(("REST shim workers", "connections", "req/s", "p50 ms", "p99 ms", "errors", "CPU µs/req, the shims",
                  "CPU µs/req, file API", "CPU µs/req, whole suite"), rows, "lrrrrrrrr")  # fmt: skip


def _find(cases: list[Case], target: str, method: str, conns: int) -> Measured | None:
    return next((c.measured for c in cases if c.target.startswith(target) and c.method == method and c.conns == conns), None)


def memory_verdicts(at_rest: Memory, after: Memory, idle: dict[str, float], rest_s: float) -> list[str]:
    names = [n for n in at_rest if not n.startswith(REFERENCE)]
    rss, pss, rss_after = _total(at_rest, names, 0), _total(at_rest, names, 1), _total(after, names, 0)
    out = [verdict(rss <= SUITE_RSS_MIB, f"the suite's RSS at rest <= {SUITE_RSS_MIB:.0f} MiB: {rss:.1f} MiB "
                   f"({len(names)} processes; PSS {pss:.1f} MiB)")]  # fmt: skip
    services = {n: v[0] for n in names if n != "launcher" and (v := at_rest[n]) is not None}
    heaviest = max(services, key=lambda n: services[n]) if services else "none"
    out.append(verdict(all(v <= SERVICE_RSS_MIB for v in services.values()),
                       f"no service over {SERVICE_RSS_MIB:.0f} MiB RSS at rest: the largest, {heaviest}, "
                       f"{services.get(heaviest, 0.0):.1f} MiB"))  # fmt: skip
    launcher = at_rest.get("launcher")
    if launcher is not None:
        out.append(verdict(launcher[0] < LAUNCHER_RSS_MIB, f"the launcher under {LAUNCHER_RSS_MIB:.0f} MiB RSS: {launcher[0]:.1f} MiB"))
    if rss:
        out.append(verdict(rss_after <= AFTER_LOAD_RATIO * rss, f"RSS after this run's load within {AFTER_LOAD_RATIO}x of at rest: "
                           f"{rss_after:.1f} MiB ({rss_after / rss:.2f}x; the goal is stated after the soak's 20 minutes)"))  # fmt: skip
    cpu = sum(idle.get(n, 0.0) for n in names)
    out.append(verdict(cpu <= REST_CPU_PCT, f"CPU at rest <= {REST_CPU_PCT}% of a core, all processes over {rest_s:g} s: {cpu:.2f}%"))
    return out


def path_verdicts(cases: list[Case], worker_cases: list[Case], with_reference: bool) -> list[str]:
    out = []
    get1, floor1 = _find(cases, SUITE, "GET", 1), _find(cases, "floor", "GET", 1)
    if get1 is not None:
        out.append(verdict(get1.result.p50_ms <= GET_P50_MS, f"GET c1 p50 <= {GET_P50_MS} ms: {get1.result.p50_ms:.2f} ms"))
        out.append(verdict(get1.path_us <= GET_CPU_US, f"CPU per GET (c1; the shim and the file API) <= {GET_CPU_US:.0f} µs: {get1.path_us:,.0f} µs"))
    if floor1 is not None:
        above = floor1.result.p50_ms > GET_P50_MS or floor1.path_us > GET_CPU_US
        out.append(f"floor: bare shim + bare gRPC server, GET c1 p50 {floor1.result.p50_ms:.2f} ms, CPU {floor1.path_us:,.0f} µs per GET"
                   + (" (above a goal in this run: no shim and server pair on these libraries met it here)" if above else ""))
    if with_reference:
        for method, conns in (("GET", 1), ("GET", 32), ("PUT", 32)):
            ours, ref = _find(cases, SUITE, method, conns), _find(cases, REFERENCE, method, conns)
            if ours is not None and ref is not None and ref.result.rps:
                out.append(f"reference: {method} c{conns} {ours.result.rps / ref.result.rps:.2f}x its req/s, p99 "
                           f"{ours.result.p99_ms:.2f} vs {ref.result.p99_ms:.2f} ms, CPU {ours.all_us:,.0f} vs {ref.all_us:,.0f} µs/req")
    if len(worker_cases) >= 2:
        one, most = worker_cases[0].measured, worker_cases[-1].measured
        x = most.result.rps / one.result.rps if one.result.rps else 0.0
        out.append(verdict(x >= WORKERS_KEEP, f"{worker_cases[-1].target} keep GET c{worker_cases[-1].conns} throughput "
                           f"(>= {WORKERS_KEEP}x of {worker_cases[0].target}): {most.result.rps:,.0f} vs {one.result.rps:,.0f} req/s ({x:.2f}x)"))  # fmt: skip
    errors = sum(c.measured.result.errors for c in [*cases, *worker_cases])
    if errors:
        out.append(f"note: {errors} errors in all; see the errors columns")
    return out


def report(meta: dict[str, str], at_rest: Memory, after: Memory, idle: dict[str, float], rest_s: float,
           cases: list[Case], worker_cases: list[Case], with_reference: bool) -> tuple[str, list[str]]:  # fmt: skip
    """(markdown, PASS/FAIL and information lines) of one run."""
    md = ["## Footprint", "", *(f"- {k}: {v}" for k, v in meta.items()), ""]
    if at_rest:  # not with --workers-only
        md += ["### Memory and CPU at rest, per process", "", memory_table(at_rest, after, idle), "",
               "### GET and PUT through the REST shim, beside the floor", "", cases_table(cases), "",
               "Where the suite's CPU per request goes:", "", by_process_table(cases), ""]  # fmt: skip
    md += ["### REST shim workers (`gateway.api.workers`), GET side by side", "", workers_table(worker_cases)]
    said = memory_verdicts(at_rest, after, idle, rest_s) if at_rest else []
    return "\n".join(md) + "\n", said + path_verdicts(cases, worker_cases, with_reference)
