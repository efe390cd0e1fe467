"""The forget bench's home: a fleet (bench/suite_up.py) with a text planted in a share of its agents'
files and of a generated 10,000-note vault (bench/kb_shared_vault.py), the control facts beside it,
and what the bench reads of the disk: the databases' sizes, the files' hashes, ``grep``.

bench/forget.py's docstring says the method. Nothing here decides a verdict.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from harness.report import say
from kb_shared_vault import VaultGen, prefill
from suite_up import FleetHome, write_fleet_home

# Invented words, so that hardly any 8-character run of it occurs in the generated corpora by chance: the
# home is grepped for every run before planting, and those found then (if any) are left out of the check
# after the forget.
TEXT = "Ottoqyne Brzwindlemoor-Quabbleworth: lokqercode QX7PLMNB4RTYWE, vaqultword Zephyxrinax"
RUN = 8
PROJECT = "global"
NOTES_PER_AGENT = 2  # memory/notes-0.md and notes-1.md (about 1.2 KB each), beside MEMORY.md and pruned.md
STAMP = "20261201T030000Z-0a1b2c"


def agent_fact(i: int) -> str:
    """A fact only agent ``i`` holds (in its memory/archive/pruned.md), one token a search can find."""
    return f"kept{i:04d}fact"


def note_fact(i: int) -> str:
    """A fact only vault note ``i`` holds."""
    return f"ctl{i:05d}note"


def runs(text: str = TEXT, size: int = RUN) -> list[str]:
    """Every ``size``-character run of ``text`` (grep -i matches them in any case)."""
    return sorted({text[i : i + size] for i in range(len(text) - size + 1)})


def planted_indexes(count: int, share: float, minimum: int) -> list[int]:
    """``share`` of ``range(count)`` (at least ``minimum``), spread evenly: the indexes that get the text."""
    n = max(minimum, round(count * share))
    step = count / n
    return sorted({int(k * step + step / 2) for k in range(n)})


@dataclass
class Home:
    fleet: FleetHome
    vault_dir: Path
    planted_agents: list[str]
    planted_notes: list[str]  # vault-relative paths (notes/<name>.md)
    control_notes: dict[str, str]  # vault-relative path -> its fact
    notes: int
    vault_bytes: int
    seconds: dict[str, float] = field(default_factory=dict)
    natural: set[str] = field(default_factory=set)  # runs of the text the generated corpora hold before planting

    @property
    def checked_runs(self) -> list[str]:
        return [run for run in runs() if run.lower() not in self.natural]

    @property
    def home(self) -> Path:
        return self.fleet.home

    def agent_dir(self, agent: str) -> Path:
        return self.home / "agents" / agent


def _pruned(agent: str, i: int) -> str:
    return f"# Pruned\n\n- 2026-11-30: {agent} dropped the old deploy checklist.\n- {agent_fact(i)}: the staging runbook moved.\n"


def _plant_agent(ws: Path, agent: str) -> None:
    """The text in MEMORY.md (a fact beside it), notes-1.md, pruned.md and a dream's backup of MEMORY.md."""
    memory = ws / "MEMORY.md"
    text = memory.read_text(encoding="utf-8") + f"- {TEXT}.\n- {agent} prefers the harbour view.\n"
    memory.write_text(text, encoding="utf-8")
    with open(ws / "memory" / "notes-1.md", "a", encoding="utf-8") as handle:
        handle.write(f"\nFrom the call: {TEXT}\n")
    with open(ws / "memory" / "archive" / "pruned.md", "a", encoding="utf-8") as handle:
        handle.write(f"- 2026-11-29: {TEXT}\n")
    backups = ws / ".dreaming" / "backups"
    backups.mkdir(parents=True, exist_ok=True)
    (backups / f"MEMORY.md.{STAMP}").write_text(text, encoding="utf-8")


def build(home: Path, agents: int, notes: int, share: float, seed: int) -> Home:
    """The fleet (``write_fleet_home``) with a pruned.md per agent, the vault's notes (``prefill``), the
    control facts, a check that no run of the text is anywhere yet, then the text planted in ``share``
    of the agents and of the notes, and the vault indexed in-process (as bench/kb_shared.py does)."""
    from services.kb.vault import note_index as vault_index

    seconds: dict[str, float] = {}
    t0 = time.perf_counter()
    fleet = write_fleet_home(home, agents, seed=seed, notes_per_agent=NOTES_PER_AGENT)
    for i, agent in enumerate(fleet.agents):
        archive = fleet.workspaces[agent] / "memory" / "archive"
        archive.mkdir()
        (archive / "pruned.md").write_text(_pruned(agent, i), encoding="utf-8")
    seconds["fleet"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    vault_dir = home / "shared" / "kb" / PROJECT
    info = prefill(VaultGen(seed), vault_dir / "notes", notes)
    names = sorted(p.name for p in (vault_dir / "notes").glob("*.md"))
    seconds["vault"] = time.perf_counter() - t0
    natural = present_runs([home])
    planted_agents = [fleet.agents[i] for i in planted_indexes(agents, share, 2)]
    for agent in planted_agents:
        _plant_agent(fleet.workspaces[agent], agent)
    planted_at = planted_indexes(len(names), share, 5)
    controls = planted_indexes(len(names), share * 2, 10)  # a control fact in planted notes and in others
    planted_notes, control_notes = [], {}
    for i in sorted(set(planted_at) | set(controls)):
        path = vault_dir / "notes" / names[i]
        lines = [f"Control: {note_fact(i)} is filed here."]
        if i in planted_at:
            lines.append(TEXT)
            planted_notes.append(f"notes/{names[i]}")
        if i in controls or i in planted_at:
            control_notes[f"notes/{names[i]}"] = note_fact(i)
        stat = path.stat()
        with open(path, "a", encoding="utf-8") as handle:
            handle.write("\n" + "\n\n".join(lines) + "\n")
        os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    t0 = time.perf_counter()
    conn = vault_index.open_vault_index(vault_dir)
    try:
        report = vault_index.refresh_vault(conn, vault_dir)
    finally:
        conn.close()
    seconds["vault index"] = time.perf_counter() - t0
    say(f"vault: {info.notes:,} notes ({info.bytes / 1e6:.1f} MB), indexed in-process in {seconds['vault index']:.1f} s "
        f"({report.indexed:,} indexed, {len(report.errors)} errors); text planted in {len(planted_agents)} agents and "
        f"{len(planted_notes)} notes")  # fmt: skip
    return Home(fleet, vault_dir, planted_agents, planted_notes, control_notes, info.notes, info.bytes, seconds, natural)


# --------------------------------------------------------------------------- the disk


@dataclass
class Sizes:
    """Bytes of every agent's kb.sqlite and its -wal, and of the vault's."""

    archives_db: int
    archives_wal: int
    archives: int  # how many kb.sqlite
    vault_db: int
    vault_wal: int

    @property
    def total(self) -> int:
        return self.archives_db + self.archives_wal + self.vault_db + self.vault_wal


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except FileNotFoundError:
        return 0


def sizes(home: Home) -> Sizes:
    db = wal = count = 0
    for agent in home.fleet.agents:
        path = home.agent_dir(agent) / "kb.sqlite"
        if path.exists():
            count += 1
            db += _size(path)
            wal += _size(path.with_name("kb.sqlite-wal"))
    vault = home.vault_dir / "kb.sqlite"
    return Sizes(db, wal, count, _size(vault), _size(vault.with_name("kb.sqlite-wal")))


def db_bytes(path: Path) -> int:
    """A database's bytes with its WAL."""
    return _size(path) + _size(path.with_name(path.name + "-wal"))


def hashes(root: Path, skip: set[Path]) -> dict[Path, str]:
    """SHA-256 of every regular file under ``root`` but ``skip`` and the databases (which the KB writes)."""
    found = {}
    for folder, _, names in os.walk(root):
        for name in names:
            path = Path(folder) / name
            if path in skip or ".sqlite" in name or not path.is_file():
                continue
            found[path] = hashlib.sha256(path.read_bytes()).hexdigest()
    return found


def grep(paths: list[Path], *, fixed: str | None = None, patterns: Path | None = None, binary: bool = True) -> tuple[list[str], float]:
    """``grep -r -l -i -F`` (with ``-a`` when ``binary``) of ``fixed`` or of the lines of ``patterns``
    over ``paths``: the files it lists and its wall seconds."""
    cmd = ["grep", "-r", "-l", "-i", "-F"] + (["-a"] if binary else [])
    cmd += ["-e", fixed] if fixed is not None else ["-f", str(patterns)]
    t0 = time.perf_counter()
    done = subprocess.run([*cmd, "--", *map(str, paths)], capture_output=True, text=True, check=False)
    seconds = time.perf_counter() - t0
    if done.returncode > 1:
        raise RuntimeError(f"grep failed ({done.returncode}): {done.stderr.strip()}")
    return sorted(done.stdout.splitlines()), seconds


def grep_runs(paths: list[Path], chosen: list[str], *, only: bool = False) -> list[str]:
    """The files under ``paths`` holding any of the runs ``chosen``, in any case, bytes included (``only``:
    the runs found, lowercased, instead)."""
    handle, name = tempfile.mkstemp(prefix="forget-bench-runs-", suffix=".txt")  # outside the home
    listing = Path(name)
    try:
        os.write(handle, ("\n".join(chosen) + "\n").encode())
        os.close(handle)
        if not only:
            return grep(paths, patterns=listing)[0]
        done = subprocess.run(["grep", "-r", "-o", "-h", "-i", "-F", "-a", "-f", str(listing), "--", *map(str, paths)],
                              capture_output=True, text=True, check=False)
        if done.returncode > 1:
            raise RuntimeError(f"grep failed ({done.returncode}): {done.stderr.strip()}")
        return sorted({line.lower() for line in done.stdout.splitlines()})
    finally:
        listing.unlink()


def present_runs(paths: list[Path]) -> set[str]:
    """The runs of the text found under ``paths`` (lowercased)."""
    return set(grep_runs(paths, runs(), only=True))
