"""Benchmark: the per-agent knowledge archive (issue 4): indexing, refreshes and Search.

Run:  ``.venv/bin/python bench/kb_archive.py [--notes 10000] [--mb 50] [--queries 1000]
[--seed 4] [--quick] [--no-grpc] [--profile] [--keep-home]``
(``--quick`` = 1,000 notes / 5 MB, a smoke run of about 20 s; the full run takes
about 2 minutes, plus about 15 s the first time to generate the corpus.)

Method
------
0. **Corpus** (deterministic, ``random.Random(seed)``): ``--notes`` markdown
   notes totalling about ``--mb`` MB (MB = 10^6 bytes) under ``memory/``
   (``projects/<p>/``, ``people/``, ``log/<yyyy>/<mm>/``, ``meetings/``,
   ``topics/``, ``reference/``, ``inbox/``, ``archive/``), plus ``MEMORY.md`` and
   ``USER.md`` at the workspace root. Sizes are log-normal (sigma 0.9) around
   the mean. Text is drawn from a vocabulary of about 4,000 words (130 English
   function words first, then real content words and pronounceable synthetic
   words, shuffled) with Zipf-Mandelbrot frequencies (1/(r+2.7)^1.05): headings
   ``#``/``##``/``###``, paragraphs, bullet lists (some nested), code fences,
   ``<!-- importance: N -->`` markers, hyphenated compounds, dates and numbers;
   about a quarter of the notes have YAML frontmatter (title, tags,
   ``importance``). 3% of the notes are Chinese or Japanese (sentences from a
   CJK word list with particles, mixed with some English bullets). File mtimes
   are set to fixed past dates (2024-), so the stat guard treats them as
   settled. The corpus is generated once into ``/tmp/kb-bench-corpus/`` keyed
   by version, seed, notes and MB, and reused; its generation time is reported
   separately (and the time of the reuse). Each run copies it (``copy2``,
   mtimes kept) into a workspace in a fresh temp home, so edits never touch the
   cache.
1. **Home**: ``config.json`` (one agent ``bench`` whose workspace is the copy,
   ``gateway.grpc.kb`` on a free port, default archive settings: unicode61,
   400 tokens / 80 overlap), then ``gateway.home.ensure_home``. The archive
   settings come from ``gateway.config.load_config``.
2. **Indexing, in-process** through the domain layer: ``schema.open_index`` on
   ``<home>/agents/bench/kb.sqlite`` (the file the KB service will use) and
   ``indexer.refresh``: the full index (wall time from open to commit, and
   process CPU time), then ``--refreshes`` no-change refreshes (median, min,
   max), then ``--refreshes`` one-file-change refreshes, each after appending a
   line to a different note (content and size change; median, max; a tree walk
   each time, informational: see 4c for the goal row). When the
   indexer has ``reindex_paths`` (the targeted variant for a caller that knows
   which file changed), the same kind of edit is also timed through it
   (informational).
3. **Floor**: every source is read and chunked exactly as the indexer does
   (decode, ``split_lines``, ``indexer_parse.body_chunks``: the lines after the
   frontmatter, with the configured 400/80), outside the clock; then, timed, ``BEGIN`` +
   ``executemany(INSERT)`` of those chunk texts into a plain
   ``fts5(text, tokenize='unicode61')`` table (regular, not external-content)
   in a fresh database file (default pragmas) + ``COMMIT``. MB/s for both the
   index and the floor are *corpus* bytes per second (chunk text with overlap
   is about 1.2x the corpus; shown too), so the ratio compares like with like.
   A breakdown (informational) times the same index's ingredients on their
   own: the source scan, read + SHA-256 of every file, and the pure-Python
   per-file work (decode, frontmatter, entries, chunks, provenance, CJK check,
   entry attribution).
4. **Search**: ``--queries`` deterministic queries (single words, two and three
   words, ``a AND b``, ``"quoted phrase"``, ``x-y``, ``word*`` prefixes,
   punctuation/operators such as ``(a OR b)``, ``NOT c``, ``foo: bar?``, and
   about 3% CJK), drawn from the corpus's content words: 70% by their corpus
   frequency, 30% uniformly, so both common and rare words occur.

   (a) **in-process MATCH** (the baseline): a read-only apsw connection
   (``schema.open_reader``) on the same kb.sqlite runs one plain FTS5 query
   per user query on ``kb_chunks_fts``: every whitespace piece's letters and
   digits become one double-quoted phrase (``"x y"``; a trailing ``*`` keeps a
   prefix), pieces are ANDed (FTS5 implicit AND), ``ORDER BY rank LIMIT 6``,
   and then path, lines and text of those chunks are fetched (join on
   kb_chunks / kb_sources). CJK is not special-cased here.

   (b) **gRPC Search**: the real service (``python -m gateway_cli.cli serve kb
   --home H``) on the same home; after grpc.health.v1 says SERVING,
   ``Knowledge.Refresh(wait=true)`` (internal token in
   ``x-gateway-internal-token``, 600 s deadline; a no-change refresh, since the
   in-process run built the index in that file; its time is shown), then a
   sync ``KnowledgeStub`` on one channel calls ``Search(agent_id, query,
   limit=6)`` one query at a time. The service runs with its default settings
   (retrieval recording on).

   (b') **the baseline behind gRPC** (informational): ``bench/match_server.py``,
   a bare grpc.aio server whose one handler runs the baseline statement of (a)
   on its own read-only connection and returns the rows (bytes in, JSON out;
   no auth, logging or ranking), called through its own sync channel. It shows
   what the gRPC hop alone adds to a handler that takes as long as the
   baseline query on this machine (the hop grows with the handler's duration
   here: idle threads are woken from deeper sleep).

   The first ``--warmup`` queries run every way unmeasured; then, per query,
   (a), (b) and (b') alternate, so machine noise hits them alike. p50/p99 are
   nearest-rank. Informational rows: ``search.search`` in-process (the domain
   layer's full ranking, ``check_stale=False``, all queries, and
   ``check_stale=True`` on the first 100), the baseline with the pieces ORed,
   the server's CPU ms per Search (``/proc/<pid>/stat``), the Search handler
   time from the service's own ``rpc`` log lines, a gRPC round-trip floor
   (``grpc.health.v1`` Check on the same server and channel, 250 calls) and
   the same Search queries again with retrieval recording switched off by the
   ``x-gateway-record-retrievals: 0`` metadata. A second table splits the
   latencies by query kind, with the median number of chunks matching *any*
   term (what an OR query has to rank).

   (c) **Refresh through the service**, after the searches: 20 (or
   ``--refreshes``, if more) ``Refresh(wait=true)`` calls with nothing changed,
   then 20 one-file changes, each an append to a different note immediately
   followed by ``Refresh(wait=true)`` (no pause: the service's barrier must make
   the write count; each reply must report exactly one file indexed). This is
   the one-file goal row: the service refreshes from its file events
   (``services/kb/archive/archives.py``); the in-process ``indexer.refresh`` of step 2
   walks and stats the whole tree every time and is shown as information.

Goals (issue 4): full index >= 0.5x the floor in the same run; no-change
refresh of 10,000 files <= 0.5 s; one-file refresh <= 50 ms; Search p50 <=
2x the in-process query and <= 5 ms. The script prints a markdown table with
PASS/FAIL (also written to ``bench/results/kb_archive.md``, git-ignored) and
exits 0 whatever the goals say; non-zero only when the benchmark itself could
not run. With ``--no-grpc``, or when the service cannot start, the gRPC rows
say n/a. The KB child is stopped (SIGTERM, then SIGKILL) on exit, Ctrl-C or
failure; the temp home is removed unless ``--keep-home``. The machine may be
shared (2 cores): the load average before the run is printed.
"""

from __future__ import annotations

import argparse
import bisect
import contextlib
import cProfile
import hashlib
import io
import json
import math
import os
import platform
import pstats
import random
import re
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

BENCH_DIR = Path(__file__).resolve().parent
REPO = BENCH_DIR.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))
RESULTS = BENCH_DIR / "results" / "kb_archive.md"
CACHE_ROOT = Path(tempfile.gettempdir()) / "kb-bench-corpus"
CORPUS_VERSION = 2
AGENT = "bench"
KEY = "bench-key-123456"
START_TIMEOUT_S = 60.0
STOP_TIMEOUT_S = 10.0
REFRESH_DEADLINE_S = 600.0
SEARCH_LIMIT = 6
MB = 1_000_000


def say(text: str) -> None:
    print(f"bench: {text}", file=sys.stderr, flush=True)


# =========================================================================== corpus

FUNCTION_WORDS = (
    "the of and to a in is it that for on was with as be at by this have from or an are not but had his "
    "they you were her all she there one we their can has been if more when will would who so no do up "
    "out its what about which than into them then could some our these two may other like also over "
    "only new just after any most should very how first where much well because through back still "
    "even before here must does both each those under while same another being around now such "
    "between again never however without against during"
).split()

CONTENT_WORDS = (
    "project meeting deploy server database user customer release budget plan deadline team review "
    "design document backup monitor alert latency throughput cache index query search memory archive "
    "note person email call schedule office travel flight hotel invoice contract payment account "
    "password token secret config setting version branch merge commit build test failure error bug "
    "fix patch incident outage postmortem runbook migration schema table column record report metric "
    "dashboard graph chart quarter roadmap milestone feature request ticket issue priority owner "
    "manager engineer designer product marketing sales support legal finance vendor partner launch "
    "demo workshop conference talk slide article book paper draft summary decision idea question "
    "answer problem solution approach option tradeoff risk cost estimate timeline week month year "
    "morning evening monday tuesday wednesday thursday friday weekend holiday birthday family friend "
    "doctor appointment gym running coffee lunch dinner recipe garden house apartment car bike train "
    "kubernetes docker terraform postgres sqlite redis kafka nginx python rust golang typescript react "
    "grpc protobuf http api endpoint gateway proxy cluster node pod container volume network firewall "
    "certificate domain dns bucket storage queue worker scheduler cron job pipeline artifact registry "
    "prompt model agent session context embedding vector tokenizer benchmark profile trace log span "
    "remember prefer likes dislikes always never usually sometimes important urgent blocked done todo "
    "waiting followup discussed agreed decided promised asked shared sent received updated moved "
    "renamed deleted created started finished paused resumed approved rejected escalated resolved "
    "berlin london tokyo paris lisbon austin seattle toronto sydney singapore zurich oslo"
).split()

FIRST_NAMES = (
    "alice bob carol dave erin frank grace heidi ivan judy mallory niaj olivia peggy rupert sybil "
    "trent victor walter yusuf zoe amara bjorn chen diego elif farid giulia hana ines jonas kenji "
    "lena mateo nadia oskar priya quinn rosa sven tariq uma vera wen xavier yara"
).split()

ONSETS = ("b", "br", "c", "ch", "cl", "d", "dr", "f", "fl", "g", "gr", "h", "j", "k", "l", "m", "n",
          "p", "pl", "pr", "qu", "r", "s", "sh", "sl", "st", "t", "th", "tr", "v", "w", "z")  # fmt: skip
VOWELS = ("a", "e", "i", "o", "u", "ai", "ea", "ee", "oa", "ou", "io")
CODAS = ("", "", "n", "r", "s", "t", "l", "m", "nd", "nt", "st", "ck", "ng", "rk", "sh", "x")
SUFFIXES = ("", "", "", "ing", "ed", "er", "ion", "ly", "ment", "ness", "able", "ive", "al", "ity", "s")

CJK_ZH = (
    "项目 会议 部署 服务器 数据库 用户 需求 测试 发布 计划 问题 解决 方案 团队 客户 预算 时间 文档 备份 监控 "
    "性能 优化 接口 配置 版本 安全 权限 日志 错误 修复 东京 北京 上海 周一 明天 今天 重要 注意 记得 我们 他们 "
    "已经 需要 可以 应该 没有 因为 所以 但是 如果 完成 开始 讨论 决定 确认 更新 检查 学习 研究 报告 搜索 索引 "
    "记忆 笔记 同事 经理 合同 发票 旅行 航班 酒店 生日 家人 朋友 咖啡 午饭 周末 下周 上周 季度 目标 风险"
).split()
CJK_JA = (
    "会議 予定 東京 大阪 明日 今日 プロジェクト サーバー データベース テスト リリース ユーザー 確認 問題 対応 "
    "設定 変更 資料 作成 準備 必要 担当 連絡 報告 会社 打ち合わせ 週末 新しい 重要な 早く 検索 記憶 メモ 同僚 "
    "部長 契約 請求書 出張 ホテル 誕生日 家族 友達 コーヒー 昼ご飯 来週 先週 目標 予算 障害 復旧 監視 性能"
).split()
JA_PARTICLES = ("は", "が", "を", "に", "で", "と", "の", "も", "から", "まで")
JA_ENDINGS = ("します。", "しました。", "です。", "でした。", "してください。", "予定です。", "が必要です。")

FOLDERS = (
    # (folder pattern, share, frontmatter probability)
    ("projects", 0.28, 0.35),
    ("people", 0.10, 0.50),
    ("log", 0.30, 0.05),
    ("meetings", 0.12, 0.20),
    ("topics", 0.10, 0.30),
    ("reference", 0.05, 0.30),
    ("inbox", 0.03, 0.10),
    ("archive", 0.02, 0.00),
)


@dataclass
class Vocabulary:
    words: list[str]
    cum_weights: list[float]
    content_start: int  # index of the first non-function word
    content_cum: list[float]  # Zipf weights over words[content_start:] alone

    def draw(self, rng: random.Random, k: int) -> list[str]:
        return rng.choices(self.words, cum_weights=self.cum_weights, k=k)

    def content(self, rng: random.Random) -> str:
        index = bisect.bisect_left(self.content_cum, rng.random() * self.content_cum[-1])
        return self.words[self.content_start + min(index, len(self.content_cum) - 1)]


def build_vocabulary(seed: int, size: int = 4000) -> Vocabulary:
    """Function words, then real content words (shuffled), then synthetic words (shuffled)."""
    rng = random.Random(seed * 7919 + 1)
    seen = set(FUNCTION_WORDS)
    real: list[str] = []
    for word in CONTENT_WORDS + FIRST_NAMES:
        if word not in seen:
            seen.add(word)
            real.append(word)
    synthetic: list[str] = []
    while len(real) + len(synthetic) + len(FUNCTION_WORDS) < size:
        word = "".join(rng.choice(ONSETS) + rng.choice(VOWELS) + rng.choice(CODAS) for _ in range(rng.choice((1, 1, 2, 2, 2, 3))))
        if rng.random() < 0.35:
            word += rng.choice(SUFFIXES)
        if 3 <= len(word) <= 12 and word not in seen:
            seen.add(word)
            synthetic.append(word)
    rng.shuffle(real)
    rng.shuffle(synthetic)
    # Interleave so real words are frequent but not all at the top: 2 real per synthetic word early on.
    content: list[str] = []
    while real or synthetic:
        content.extend(real[:2])
        del real[:2]
        if synthetic:
            content.append(synthetic.pop())
    words = list(FUNCTION_WORDS) + content
    cum = list(_accumulate(1.0 / (rank + 2.7) ** 1.05 for rank in range(len(words))))
    content_cum = list(_accumulate(1.0 / (rank + 5) ** 0.95 for rank in range(len(content))))
    return Vocabulary(words, cum, len(FUNCTION_WORDS), content_cum)


class NoteWriter:
    """Generates one note's markdown with a shared RNG and vocabulary."""

    def __init__(self, rng: random.Random, vocab: Vocabulary) -> None:
        self.rng = rng
        self.vocab = vocab
        self.pool: list[str] = []

    def words(self, k: int) -> list[str]:
        if len(self.pool) < k:
            self.pool.extend(self.vocab.draw(self.rng, max(4096, k)))
        out = self.pool[-k:]
        del self.pool[-k:]
        return out

    def content_word(self) -> str:
        return self.vocab.content(self.rng)

    def sentence(self) -> str:
        rng = self.rng
        ws = self.words(rng.randint(6, 22))
        roll = rng.random()
        if roll < 0.12:
            ws[rng.randrange(len(ws))] = f"{self.content_word()}-{self.content_word()}"
        elif roll < 0.18:
            ws[rng.randrange(len(ws))] = f"{rng.randint(2019, 2026)}-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}"
        elif roll < 0.24:
            ws[rng.randrange(len(ws))] = f"{rng.randint(1, 999)}{rng.choice(('ms', 'GB', '%', 'k', ''))}"
        elif roll < 0.28:
            ws[rng.randrange(len(ws))] = f"`{self.content_word()}_{self.content_word()}`"
        text = " ".join(ws)
        if rng.random() < 0.25:
            cut = rng.randrange(3, len(text) - 1) if len(text) > 6 else len(text)
            space = text.find(" ", cut)
            if space > 0:
                text = text[:space] + "," + text[space:]
        return text[0].upper() + text[1:] + rng.choice((".", ".", ".", ".", "?", "!", ":"))

    def heading(self, level: int) -> str:
        ws = self.words(self.rng.randint(1, 5))
        ws[0] = self.content_word()
        return "#" * level + " " + " ".join(ws).capitalize()

    def paragraph(self) -> str:
        return " ".join(self.sentence() for _ in range(self.rng.randint(1, 5)))

    def bullets(self) -> list[str]:
        rng = self.rng
        lines = []
        ordered = rng.random() < 0.15
        for i in range(rng.randint(2, 9)):
            marker = f"{i + 1}." if ordered else rng.choice(("-", "-", "-", "*"))
            item = self.sentence()
            if rng.random() < 0.08:
                item += f" <!-- importance: {rng.randint(1, 10)} -->"
            elif rng.random() < 0.05:
                item = f"[ ] {item}" if rng.random() < 0.5 else f"[x] {item}"
            lines.append(f"{marker} {item}")
            if rng.random() < 0.15:
                for _ in range(rng.randint(1, 3)):
                    lines.append(f"  - {self.sentence()}")
        return lines

    def code(self) -> list[str]:
        rng = self.rng
        lang = rng.choice(("python", "bash", "json", "yaml", "sql"))
        w = self.content_word
        body: list[str] = []
        for _ in range(rng.randint(2, 12)):
            if lang == "python":
                body.append(rng.choice((f"def {w()}_{w()}({w()}, {w()}=None):", f"    return {w()}.{w()}({rng.randint(0, 99)})",
                                        f"    {w()} = {w()}[{w()!r}]", f"import {w()}", f"# {w()} {w()} {w()}")))  # fmt: skip
            elif lang == "bash":
                body.append(rng.choice((f"kubectl -n {w()} get pods -l app={w()}", f"git checkout -b {w()}-{w()}",
                                        f"curl -s https://{w()}.example.com/api/{w()} | jq .{w()}", f"export {w().upper()}_{w().upper()}=1")))  # fmt: skip
            elif lang == "json":
                body.append(f'  "{w()}": "{w()} {w()}",')
            elif lang == "yaml":
                body.append(f"{w()}:\n  {w()}: {rng.randint(1, 500)}")
            else:
                body.append(f"SELECT {w()}, {w()} FROM {w()} WHERE {w()} = {rng.randint(1, 99)};")
        return ["```" + lang, *body, "```"]

    def frontmatter(self, title: str) -> list[str]:
        rng = self.rng
        lines = ["---", f"title: {title}", f"tags: [{', '.join(self.content_word() for _ in range(rng.randint(1, 4)))}]"]
        if rng.random() < 0.8:
            lines.append(f"importance: {rng.randint(1, 10)}")
        lines.append(f"created: {rng.randint(2021, 2025)}-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}")
        if rng.random() < 0.05:
            lines.append("provenance: untrusted")
        lines.append("---")
        return lines

    def note(self, title: str, target: int, frontmatter: bool, daily: bool) -> str:
        rng = self.rng
        lines: list[str] = []
        if frontmatter:
            lines += self.frontmatter(title)
        lines += [f"# {title}", ""]
        size = sum(len(x) + 1 for x in lines)
        while True:
            block: list[str]
            roll = rng.random()
            if daily:
                block = [f"## {rng.randint(7, 22):02d}:{rng.randint(0, 59):02d} {self.content_word()}", *self.bullets()]
            elif roll < 0.18:
                block = [self.heading(rng.choice((2, 2, 2, 3)))]
            elif roll < 0.55:
                block = [self.paragraph()]
            elif roll < 0.92:
                block = self.bullets()
            elif roll < 0.97:
                block = self.code()
            else:
                block = [f"<!-- importance: {rng.randint(1, 10)} -->", self.paragraph()]
            block.append("")
            cost = sum(len(x) + 1 for x in block)
            if size + cost > target and size > target * 0.6:
                break
            lines += block
            size += cost
            if size >= target:
                break
        return "\n".join(lines).rstrip("\n") + "\n"

    def cjk_note(self, title: str, target: int) -> str:
        rng = self.rng
        japanese = rng.random() < 0.5
        lines = [f"# {title}", ""]
        size = len(lines[0].encode()) + 2
        while size < target:
            roll = rng.random()
            if roll < 0.15:
                block = [f"## {''.join(rng.choice(CJK_JA if japanese else CJK_ZH) for _ in range(rng.randint(1, 3)))}"]
            elif roll < 0.30:
                block = [f"- {self.sentence()}" for _ in range(rng.randint(1, 3))]
            elif roll < 0.60:
                block = [f"- {self.cjk_sentence(japanese)}" for _ in range(rng.randint(2, 6))]
            else:
                block = ["".join(self.cjk_sentence(japanese) for _ in range(rng.randint(1, 4)))]
            block.append("")
            lines += block
            size += sum(len(x.encode()) + 1 for x in block)
        return "\n".join(lines).rstrip("\n") + "\n"

    def cjk_sentence(self, japanese: bool) -> str:
        rng = self.rng
        if japanese:
            parts = []
            for _ in range(rng.randint(2, 5)):
                parts.append(rng.choice(CJK_JA) + rng.choice(JA_PARTICLES))
            return "".join(parts) + rng.choice(CJK_JA) + rng.choice(JA_ENDINGS)
        ws = [rng.choice(CJK_ZH) for _ in range(rng.randint(4, 12))]
        if len(ws) > 6 and rng.random() < 0.6:
            ws.insert(rng.randrange(2, len(ws) - 1), "，")
        if rng.random() < 0.15:
            ws.insert(rng.randrange(len(ws)), f" {self.content_word()} ")
        return "".join(ws) + "。"


@dataclass
class CorpusInfo:
    workspace: Path
    files: int
    bytes: int
    cjk_notes: int
    frontmatter_notes: int
    generation_s: float
    cached: bool
    reuse_s: float = 0.0


def _note_paths(rng: random.Random, notes: int, vocab_words: list[str]) -> list[tuple[str, str, bool]]:
    """(relative path, title, daily?) for each note, deterministic and unique."""
    projects = [f"{rng.choice(vocab_words[200:])}-{rng.choice(vocab_words[200:])}" for _ in range(60)]
    shares = [share for _, share, _ in FOLDERS]
    out: list[tuple[str, str, bool]] = []
    used: set[str] = set()
    day0 = time.mktime((2021, 1, 1, 12, 0, 0, 0, 0, -1))
    for i in range(notes):
        folder = rng.choices([f for f, _, _ in FOLDERS], weights=shares)[0]
        daily = False
        if folder == "projects":
            project = rng.choice(projects)
            stem = rng.choice(("overview", "decisions", "todo", "notes", "design", "status", "risks", "retro"))
            rel, title = f"memory/projects/{project}/{stem}-{i}.md", f"{project} {stem}"
        elif folder == "people":
            name = rng.choice(FIRST_NAMES)
            rel, title = f"memory/people/{name}-{rng.choice(vocab_words[200:])}-{i}.md", f"{name.capitalize()}"
        elif folder == "log":
            t = time.localtime(day0 + i * 86400 * 1.7 % (5 * 365 * 86400))
            rel, title, daily = f"memory/log/{t.tm_year}/{t.tm_mon:02d}/{t.tm_year}-{t.tm_mon:02d}-{t.tm_mday:02d}-{i}.md", time.strftime("%Y-%m-%d", t), True
        else:
            word = rng.choice(vocab_words[130:])
            rel, title = f"memory/{folder}/{word}-{i}.md", f"{word.capitalize()} {rng.choice(vocab_words[130:])}"
        if rel in used:  # pragma: no cover - the index in the name makes paths unique
            rel = rel[:-3] + "-x.md"
        used.add(rel)
        out.append((rel, title, daily))
    return out


def generate_corpus(dest: Path, seed: int, notes: int, mb: float) -> dict[str, Any]:
    """Write the corpus under ``dest`` (the workspace root). Returns its stats."""
    rng = random.Random(seed)
    vocab = build_vocabulary(seed)
    writer = NoteWriter(rng, vocab)
    target_total = int(mb * MB)
    core = {"MEMORY.md": 6000, "USER.md": 2500}
    per_note = max(200, (target_total - sum(core.values())) / max(1, notes))
    sigma = 0.9
    mu = math.log(per_note) - sigma * sigma / 2
    raw_sizes = [min(max(150.0, rng.lognormvariate(mu, sigma)), per_note * 40) for _ in range(notes)]
    # A note stops before the block that would overshoot its size: about 5% under on average.
    scale = 1.05 * (target_total - sum(core.values())) / max(1.0, sum(raw_sizes))
    sizes = [max(150, int(s * scale)) for s in raw_sizes]
    paths = _note_paths(rng, notes, vocab.words)
    base_mtime = time.mktime((2024, 1, 1, 9, 0, 0, 0, 0, -1))
    total = 0
    cjk = fm = 0
    made_dirs: set[Path] = set()

    def write(rel: str, text: str, index: int) -> None:
        nonlocal total
        path = dest / rel
        if path.parent not in made_dirs:
            path.parent.mkdir(parents=True, exist_ok=True)
            made_dirs.add(path.parent)
        data = text.encode("utf-8")
        path.write_bytes(data)
        stamp = int((base_mtime + index * 613) * 1e9)
        os.utime(path, ns=(stamp, stamp))
        total += len(data)

    memory = ["# MEMORY", "", "Evergreen facts the agent keeps in context.", ""]
    user = ["# USER", "", "## Preferences", ""]
    write("MEMORY.md", writer.note("MEMORY", core["MEMORY.md"], False, False).replace("# MEMORY\n", "\n".join(memory), 1), 0)
    write("USER.md", writer.note("USER", core["USER.md"], False, False).replace("# USER\n", "\n".join(user), 1), 1)
    folder_fm = {f: p for f, _, p in FOLDERS}
    for i, ((rel, title, daily), size) in enumerate(zip(paths, sizes)):
        if rng.random() < 0.03:
            text = writer.cjk_note(title, size)
            cjk += 1
        else:
            folder = rel.split("/")[1]
            has_fm = rng.random() < folder_fm[folder]
            fm += has_fm
            text = writer.note(title, size, has_fm, daily)
        write(rel, text, i + 2)
    return {"files": notes + 2, "bytes": total, "cjk_notes": cjk, "frontmatter_notes": fm}


def corpus(seed: int, notes: int, mb: float, dest_workspace: Path) -> CorpusInfo:
    """Generate (or reuse) the cached corpus and copy it to ``dest_workspace``."""
    key = f"v{CORPUS_VERSION}-seed{seed}-n{notes}-mb{mb:g}"
    cached_dir = CACHE_ROOT / key
    stats_path = cached_dir / "stats.json"
    cached = stats_path.is_file()
    if not cached:
        CACHE_ROOT.mkdir(parents=True, exist_ok=True)
        work = Path(tempfile.mkdtemp(prefix=f"{key}.", dir=CACHE_ROOT))
        say(f"generating corpus {key} (cached for later runs in {cached_dir})")
        started = time.perf_counter()
        stats = generate_corpus(work / "workspace", seed, notes, mb)
        stats["generation_s"] = time.perf_counter() - started
        (work / "stats.json").write_text(json.dumps(stats), encoding="utf-8")
        try:
            work.rename(cached_dir)
        except OSError:  # another run finished first: use its copy
            shutil.rmtree(work, ignore_errors=True)
    stats = json.loads(stats_path.read_text(encoding="utf-8"))
    started = time.perf_counter()
    shutil.copytree(cached_dir / "workspace", dest_workspace, copy_function=shutil.copy2)
    reuse = time.perf_counter() - started
    return CorpusInfo(dest_workspace, stats["files"], stats["bytes"], stats["cjk_notes"],
                      stats["frontmatter_notes"], stats["generation_s"], cached, reuse)  # fmt: skip


# =========================================================================== queries

CJK_QUERY_WORDS = CJK_ZH + CJK_JA


def make_queries(seed: int, count: int) -> list[tuple[str, str]]:
    """``count`` deterministic mixed queries over the corpus vocabulary, as (kind, query)."""
    rng = random.Random(seed * 31 + 7)
    vocab = build_vocabulary(seed)
    content = vocab.words[vocab.content_start :]

    def w() -> str:
        # 70% by the corpus's own content-word frequencies, 30% uniform: common and rare words both occur.
        return vocab.content(rng) if rng.random() < 0.7 else rng.choice(content)

    def fn() -> str:
        return rng.choice(FUNCTION_WORDS[:60])

    kinds = (
        ("one word", 0.28, lambda: w()),
        ("two words", 0.18, lambda: f"{w()} {w()}"),
        ("three words", 0.12, lambda: f"{w()} {fn()} {w()}" if rng.random() < 0.3 else f"{w()} {w()} {w()}"),
        ("a AND b", 0.07, lambda: f"{w()} AND {w()}"),
        ('"quoted phrase"', 0.07, lambda: f'"{w()} {w()}"'),
        ("x-y", 0.06, lambda: f"{w()}-{w()}"),
        ("prefix*", 0.08, lambda: (lambda x: x[: max(3, len(x) - rng.randint(1, 3))] + "*")(w())),
        ("(a OR b) / a NOT b", 0.05, lambda: f"({w()} OR {w()})" if rng.random() < 0.6 else f"{w()} NOT {w()}"),
        ("punctuation", 0.03, lambda: rng.choice((f"{w()}: {w()}?", f"{w()}/{w()}", f"what about {w()}?", f"{w()}'s {w()}!!", f"#{w()} @{w()}"))),
        ("CJK", 0.03, lambda: rng.choice((rng.choice(CJK_QUERY_WORDS), rng.choice(CJK_QUERY_WORDS) + rng.choice(CJK_QUERY_WORDS),
                                          f"{rng.choice(CJK_QUERY_WORDS)} {rng.choice(CJK_QUERY_WORDS)}", f"{rng.choice(CJK_QUERY_WORDS)} {w()}"))),
        ("word + year", 0.03, lambda: f"{w()} {rng.randint(2019, 2026)}"),
    )  # fmt: skip
    weights = [k[1] for k in kinds]
    out = []
    for _ in range(count):
        name, _, make = rng.choices(kinds, weights=weights)[0]
        out.append((name, make()))
    return out


def _accumulate(values: Any) -> Any:
    total = 0.0
    for v in values:
        total += v
        yield total


_WORD = re.compile(r"[^\W_]+")


def baseline_terms(query: str) -> list[str]:
    """Each whitespace piece's letters and digits as one quoted FTS5 phrase (``"x y"``; ``"w"*`` for ``w*``)."""
    terms = []
    for piece in query.split():
        tokens = _WORD.findall(piece)
        if tokens:
            terms.append('"' + " ".join(tokens) + '"' + ("*" if piece.endswith("*") else ""))
    return terms


def baseline_match(query: str) -> str:
    """The baseline's plain, safe FTS5 expression: the quoted pieces ANDed (implicit AND)."""
    return " ".join(baseline_terms(query))


def baseline_or(query: str) -> str:
    """The same quoted pieces ORed (the service's OR-fallback query; informational)."""
    return " OR ".join(baseline_terms(query))


BASELINE_SQL = (
    "SELECT c.id, s.path, c.start_line, c.end_line, c.text FROM "
    f"(SELECT rowid AS id FROM kb_chunks_fts WHERE kb_chunks_fts MATCH ? ORDER BY rank LIMIT {SEARCH_LIMIT}) m "
    "JOIN kb_chunks c ON c.id = m.id JOIN kb_sources s ON s.id = c.source_id"
)


# =========================================================================== children


def free_ports(count: int) -> list[int]:
    socks = []
    try:
        for _ in range(count):
            s = socket.socket()
            s.bind(("127.0.0.1", 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


class Children:
    """The server processes this run started; all stopped by ``stop_all``."""

    def __init__(self, log_dir: Path) -> None:
        self.log_dir = log_dir
        self.procs: dict[str, subprocess.Popen[bytes]] = {}
        self.logs: dict[str, Path] = {}
        env = {k: v for k, v in os.environ.items() if not k.startswith("GATEWAY_")}
        env["PYTHONDONTWRITEBYTECODE"] = "1"
        self.env = env

    def start(self, name: str, cmd: list[str]) -> subprocess.Popen[bytes]:
        log = self.log_dir / f"{name}.log"
        self.logs[name] = log
        with open(log, "ab") as handle:
            self.procs[name] = subprocess.Popen(
                cmd, cwd=REPO, env=self.env, stdout=handle, stderr=subprocess.STDOUT, start_new_session=True
            )
        return self.procs[name]

    def alive(self, name: str) -> bool:
        return self.procs[name].poll() is None

    def tail(self, name: str, lines: int = 20) -> str:
        try:
            return "\n".join(self.logs[name].read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"

    def stop_all(self) -> None:
        for proc in self.procs.values():
            if proc.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    proc.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + STOP_TIMEOUT_S
        for name, proc in self.procs.items():
            try:
                proc.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                say(f"{name} did not stop within {STOP_TIMEOUT_S:.0f}s; killing it")
                proc.kill()
                proc.wait()


def cpu_seconds(pid: int) -> float:
    """user+system CPU of ``pid`` (all threads) from /proc."""
    with open(f"/proc/{pid}/stat") as handle:
        fields = handle.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def write_home(home: Path, kb_port: int) -> None:
    from gateway.config_migrations import CURRENT_VERSION
    from gateway.home import ensure_home

    ports = free_ports(4)
    config = {
        "configVersion": CURRENT_VERSION,
        "gateway": {
            "grpc": {"host": "127.0.0.1", "fileApi": ports[0], "watcher": ports[1], "kb": kb_port, "dreaming": ports[2]},
            "metrics": {"enabled": False},  # not the default ports: another run may hold them
            "api": {"host": "127.0.0.1", "port": ports[3], "keys": [{"key": KEY, "agents": [AGENT], "write": False, "name": "bench"}]},
        },
        "agents": [{"id": AGENT, "workspace": f"agents/{AGENT}/workspace", "transcriptsDir": f"agents/{AGENT}/sessions"}],
    }  # fmt: skip
    home.mkdir(parents=True, exist_ok=True)
    (home / "config.json").write_text(json.dumps(config, indent=2) + "\n", encoding="utf-8")
    ensure_home(home)


# =========================================================================== measurements


def pct(values: list[float], q: float) -> float:
    """Nearest-rank percentile (q in 0..100)."""
    xs = sorted(values)
    if not xs:
        return float("nan")
    return xs[min(len(xs) - 1, max(0, math.ceil(q / 100 * len(xs)) - 1))]


@dataclass
class Figures:
    rows: list[tuple[str, str, str, str]] = field(default_factory=list)  # figure, value, goal, verdict
    notes: list[str] = field(default_factory=list)

    def add(self, figure: str, value: str, goal: str = "", ok: bool | None = None) -> None:
        verdict = "" if ok is None else ("PASS" if ok else "FAIL")
        self.rows.append((figure, value, goal, verdict))



def read_sources(workspace: Path) -> list[tuple[str, bytes]]:
    from services.kb.index.sources import scan_sources

    scan = scan_sources(workspace)
    return [(rel, (workspace / rel).read_bytes()) for rel in sorted(scan.files)]


def chunk_corpus(sources: list[tuple[str, bytes]], settings: Any) -> list[str]:
    from services.kb.index.chunking import split_lines
    from services.kb.index.entries import parse_frontmatter
    from services.kb.index.indexer_parse import body_chunks

    texts: list[str] = []
    for _, data in sources:
        lines = split_lines(data.decode("utf-8", errors="replace").removeprefix("\ufeff"))
        chunks = body_chunks(lines, parse_frontmatter(lines), settings.chunk_tokens, settings.chunk_overlap)
        texts.extend(c.text for c in chunks)
    return texts


def floor_insert(db: Path, chunks: list[str]) -> float:
    """Seconds for BEGIN + executemany INSERT + COMMIT into a plain unicode61 FTS5 table."""
    import apsw

    conn = apsw.Connection(os.fspath(db))
    conn.execute("CREATE VIRTUAL TABLE t USING fts5(text, tokenize='unicode61')")
    rows = [(c,) for c in chunks]
    started = time.perf_counter()
    conn.execute("BEGIN")
    conn.executemany("INSERT INTO t(text) VALUES (?)", rows)
    conn.execute("COMMIT")
    seconds = time.perf_counter() - started
    conn.close()
    return seconds


def python_work(sources: list[tuple[str, bytes]], settings: Any) -> float:
    """Seconds of the indexer's per-file Python work, without SQLite."""
    from services.kb.index.chunking import split_lines
    from services.kb.index.entries import DEFAULT_IMPORTANCE, parse_entries, parse_frontmatter
    from services.kb.index.indexer_parse import attribute as _attribute
    from services.kb.index.indexer_parse import body_chunks
    from services.kb.index.provenance import classify
    from services.kb.index.query import has_unsegmented

    started = time.perf_counter()
    for rel, data in sources:
        text = data.decode("utf-8", errors="replace").removeprefix("\ufeff")
        lines = split_lines(text)
        frontmatter = parse_frontmatter(lines)
        classify(rel, frontmatter.provenance)
        entries = parse_entries(lines, frontmatter)
        chunks = body_chunks(lines, frontmatter, settings.chunk_tokens, settings.chunk_overlap)
        default = frontmatter.importance if frontmatter.importance is not None else DEFAULT_IMPORTANCE
        _attribute(chunks, entries, default)
        for c in chunks:
            has_unsegmented(c.text)
    return time.perf_counter() - started


def fmt_ms(seconds: float) -> str:
    return f"{seconds * 1000:.2f} ms"


def index_phase(args: argparse.Namespace, home: Path, workspace: Path, corpus_bytes: int, tmp: Path) -> dict[str, Any]:
    from gateway.config import load_config
    from services.kb.index import indexer, schema
    from services.kb.index.sources import scan_sources

    agent = load_config(home).agent(AGENT)
    assert agent is not None
    settings = agent.knowledge.archive
    kb_path = agent.kb_path
    mb = corpus_bytes / MB
    out: dict[str, Any] = {"settings": settings, "kb_path": kb_path}

    # Full index (in-process).
    profiler = cProfile.Profile() if args.profile else None
    cpu0 = time.process_time()
    started = time.perf_counter()
    if profiler:
        profiler.enable()
    conn = schema.open_index(kb_path, settings)
    report = indexer.refresh(conn, workspace, settings)
    if profiler:
        profiler.disable()
    full_s = time.perf_counter() - started
    full_cpu = time.process_time() - cpu0
    if report.errors:
        raise RuntimeError(f"full index reported errors: {report.errors[:5]}")
    counts = conn.execute("SELECT (SELECT count(*) FROM kb_chunks), (SELECT count(*) FROM kb_chunks WHERE has_cjk), "
                          "(SELECT count(*) FROM kb_entries)").fetchall()[0]  # fmt: skip
    out.update(full_s=full_s, full_mbps=mb / full_s, chunks=counts[0], cjk_chunks=counts[1], entries=counts[2])
    say(f"full index: {report.indexed} files, {counts[0]:,} chunks ({counts[1]:,} CJK), {counts[2]:,} entries, "
        f"{full_s:.2f} s wall, {full_cpu:.2f} s CPU")  # fmt: skip
    if profiler:
        buf = io.StringIO()
        pstats.Stats(profiler, stream=buf).sort_stats("tottime").print_stats(18)
        say("profile of the full index (tottime):\n" + buf.getvalue())

    # No-change refreshes.
    nochange = []
    for _ in range(args.refreshes):
        r = indexer.refresh(conn, workspace, settings)
        if r.indexed or r.pruned:
            raise RuntimeError(f"no-change refresh indexed {r.indexed}, pruned {r.pruned}")
        nochange.append(r.seconds)
    out["nochange"] = nochange
    scan_times = []
    for _ in range(3):
        t0 = time.perf_counter()
        scan_sources(workspace)
        scan_times.append(time.perf_counter() - t0)
    out["scan_s"] = min(scan_times)

    # One-file-change refreshes: a different note each time.
    notes = sorted(p for p in (workspace / "memory").rglob("*.md"))
    picks = [notes[(i * 2654435761) % len(notes)] for i in range(1, args.refreshes + 1)]
    onefile = []
    for i, path in enumerate(picks):
        with open(path, "a", encoding="utf-8") as handle:
            handle.write(f"\n- bench edit {i}: the {AGENT} run changed this note to time a one-file refresh.\n")
        r = indexer.refresh(conn, workspace, settings)
        if r.indexed != 1:
            raise RuntimeError(f"one-file refresh indexed {r.indexed} files, expected 1")
        onefile.append(r.seconds)
    out["onefile"] = onefile
    # Informational: the same kind of edit through indexer.reindex_paths (the targeted variant a caller
    # that knows which file changed can use), when the indexer has it.
    reindex = getattr(indexer, "reindex_paths", None)
    if reindex is not None:
        targeted = []
        for i, path in enumerate(notes[(i * 40503) % len(notes)] for i in range(1, args.refreshes + 1)):
            with open(path, "a", encoding="utf-8") as handle:
                handle.write(f"\n- bench targeted edit {i}: one more line for reindex_paths.\n")
            t0 = time.perf_counter()
            r = reindex(conn, workspace, [path.relative_to(workspace).as_posix()], settings)
            targeted.append(time.perf_counter() - t0)
            if r.indexed != 1:
                raise RuntimeError(f"reindex_paths indexed {r.indexed} files, expected 1")
        out["targeted"] = targeted
    out["db_tables"] = {
        str(name): int(size) / MB
        for name, size in conn.execute("SELECT name, sum(pgsize) FROM dbstat GROUP BY name ORDER BY 2 DESC LIMIT 6")
    }
    conn.close()
    from kb_size import settled_bytes  # the WAL checkpointed first: a bulk refresh does it on a thread of its own

    db_mb = settled_bytes(kb_path) / MB
    out["db_ratio"] = db_mb * MB / corpus_bytes

    # Floor and breakdown: same sources, chunked the same way.
    sources = read_sources(workspace)
    chunks = chunk_corpus(sources, settings)
    chunk_bytes = sum(len(c.encode()) for c in chunks)
    floor_s = floor_insert(tmp / "floor.sqlite", chunks)
    out.update(floor_s=floor_s, floor_mbps=mb / floor_s, floor_chunks=len(chunks), chunk_mb=chunk_bytes / MB)
    t0 = time.perf_counter()
    for _, data in read_sources(workspace):
        hashlib.sha256(data).hexdigest()
    out["read_hash_s"] = time.perf_counter() - t0
    out["python_s"] = python_work(sources, settings)
    out["full_cpu"] = full_cpu
    out["db_mb"] = db_mb
    return out


def service_refreshes(stub: Any, metadata: tuple[tuple[str, str], ...], workspace: Path, count: int) -> dict[str, Any]:
    """Refresh(wait=true) through the running service: ``count`` no-change calls, then ``count``
    one-file changes, each an append to a different note immediately followed by the call."""
    from gateway.v1 import kb_pb2

    def call() -> tuple[float, Any]:
        t0 = time.perf_counter()
        reply = stub.Refresh(kb_pb2.RefreshRequest(agent_id=AGENT, wait=True), metadata=metadata, timeout=120)
        return time.perf_counter() - t0, reply.report

    nochange = []
    for _ in range(count):
        seconds, report = call()
        if report.indexed or report.pruned:
            raise RuntimeError(f"no-change Refresh indexed {report.indexed}, pruned {report.pruned}")
        nochange.append(seconds)
    notes = sorted(workspace.glob("memory/**/*.md"))
    onefile = []
    for i in range(count):
        path = notes[(i * 2246822519 + 7) % len(notes)]
        with open(path, "a", encoding="utf-8") as handle:
            handle.write(f"\n- bench service edit {i}: one more line, refreshed at once through the RPC.\n")
        seconds, report = call()
        if report.indexed != 1:
            raise RuntimeError(f"one-file Refresh indexed {report.indexed} files, expected 1")
        onefile.append(seconds)
    return {"svc_nochange": nochange, "svc_onefile": onefile}


def search_phase(home: Path, workspace: Path, kb_path: Path, warm: list[str], queries: list[str],
                 children: Children | None, kb_port: int, refreshes: int = 20) -> dict[str, Any]:  # fmt: skip
    from services.kb.index import schema, search

    out: dict[str, Any] = {}
    reader = schema.open_reader(kb_path)

    def inproc(q: str, build: Any = baseline_match) -> tuple[float, int]:
        expr = build(q)
        t0 = time.perf_counter()
        rows = reader.execute(BASELINE_SQL, (expr,)).fetchall() if expr else []
        return time.perf_counter() - t0, len(rows)

    # OR variant of the baseline (informational).
    for q in warm:
        inproc(q, baseline_or)
    out["base_or"] = [inproc(q, baseline_or)[0] for q in queries]

    # Domain-layer search in-process (informational), before any server exists.
    for q in warm:
        search.search(reader, workspace, q, SEARCH_LIMIT, check_stale=False)
    lat = []
    for q in queries:
        t0 = time.perf_counter()
        search.search(reader, workspace, q, SEARCH_LIMIT, check_stale=False)
        lat.append(time.perf_counter() - t0)
    out["domain"] = lat
    out["or_matches"] = [
        reader.execute("SELECT count(*) FROM kb_chunks_fts WHERE kb_chunks_fts MATCH ?", (baseline_or(q),)).fetchall()[0][0]
        if baseline_or(q) else 0
        for q in queries
    ]
    lat = []
    for q in queries[:100]:
        t0 = time.perf_counter()
        search.search(reader, workspace, q, SEARCH_LIMIT, check_stale=True)
        lat.append(time.perf_counter() - t0)
    out["domain_stale"] = lat

    stub = channel = bare = bare_channel = None
    metadata: tuple[tuple[str, str], ...] = ()
    if children is not None:
        stub, channel, metadata, refresh_s, kb_pid = start_kb(home, kb_port, children)
        out["grpc_refresh_s"] = refresh_s
        out["kb_pid"] = kb_pid
        bare, bare_channel = start_match_server(kb_path, children)
    try:
        from gateway.v1 import kb_pb2

        no_record = (*metadata, ("x-gateway-record-retrievals", "0"))

        def remote(q: str, md: tuple[tuple[str, str], ...] = metadata) -> tuple[float, int]:
            assert stub is not None
            t0 = time.perf_counter()
            reply = stub.Search(kb_pb2.SearchRequest(agent_id=AGENT, query=q, limit=SEARCH_LIMIT), metadata=md, timeout=30)
            return time.perf_counter() - t0, len(reply.hits)

        def served(q: str) -> float:
            assert bare is not None
            expr = baseline_match(q)
            t0 = time.perf_counter()
            bare(expr.encode(), timeout=30)
            return time.perf_counter() - t0

        for q in warm:
            inproc(q)
            if stub is not None:
                remote(q)
                served(q)
        base, grpc_lat, bare_lat, base_hits, grpc_hits = [], [], [], 0, 0
        out["grpc_hit_list"] = []
        cpu0 = cpu_seconds(out["kb_pid"]) if stub is not None else 0.0
        log_mark = rpc_log_lines(children.logs["kb"]) if stub is not None and children is not None else 0
        wall0 = time.perf_counter()
        for q in queries:
            s, n = inproc(q)
            base.append(s)
            base_hits += n
            if stub is not None:
                s, n = remote(q)
                grpc_lat.append(s)
                grpc_hits += n
                out["grpc_hit_list"].append(n)
                bare_lat.append(served(q))
        out["wall_s"] = time.perf_counter() - wall0
        out.update(base=base, base_hits=base_hits)
        if stub is not None:
            out.update(bare=bare_lat)
            out.update(grpc=grpc_lat, grpc_hits=grpc_hits, server_cpu_ms=1000 * (cpu_seconds(out["kb_pid"]) - cpu0) / len(queries))
            time.sleep(0.5)  # let the recorder thread and the log catch up
            assert children is not None
            out["server_ms"] = [ms / 1000 for ms in rpc_search_ms(children.logs["kb"], log_mark)]
            # Informational: the gRPC round-trip floor of this server (grpc.health.v1 Check, same channel).
            from grpc_health.v1 import health_pb2, health_pb2_grpc

            health = health_pb2_grpc.HealthStub(channel)
            ping = []
            for _ in range(300):
                t0 = time.perf_counter()
                health.Check(health_pb2.HealthCheckRequest(), timeout=10)
                ping.append(time.perf_counter() - t0)
            out["ping"] = ping[50:]
            # Informational: the same queries with retrieval recording switched off by metadata.
            cpu0 = cpu_seconds(out["kb_pid"])
            out["grpc_norecord"] = [remote(q, no_record)[0] for q in queries]
            out["server_cpu_norecord_ms"] = 1000 * (cpu_seconds(out["kb_pid"]) - cpu0) / len(queries)
            reply = stub.Search(kb_pb2.SearchRequest(agent_id=AGENT, query=queries[0], limit=SEARCH_LIMIT), metadata=metadata, timeout=30)
            out["stale_after"] = reply.stale
            out["generation"] = reply.generation
            out.update(service_refreshes(stub, metadata, workspace, refreshes))
    finally:
        for each in (channel, bare_channel):
            if each is not None:
                each.close()
        reader.close()
    return out


def start_match_server(kb_path: Path, children: Children) -> tuple[Any, Any]:
    """``bench/match_server.py`` on a free port: the baseline query behind a bare grpc.aio server."""
    import grpc

    port = free_ports(1)[0]
    proc = children.start("match", [sys.executable, str(BENCH_DIR / "match_server.py"), str(port), str(kb_path), BASELINE_SQL])
    deadline = time.monotonic() + START_TIMEOUT_S
    while "ready" not in children.tail("match"):
        if proc.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError(f"bench/match_server.py did not start; log tail:\n{children.tail('match')}")
        time.sleep(0.05)
    channel = grpc.insecure_channel(f"127.0.0.1:{port}")
    return channel.unary_unary("/bench.Match/Run"), channel


def rpc_log_lines(log: Path) -> int:
    try:
        with open(log, "rb") as handle:
            return sum(1 for _ in handle)
    except OSError:
        return 0


def rpc_search_ms(log: Path, skip: int) -> list[float]:
    """The ``ms`` of the service's own "rpc" log lines for Search after the first ``skip`` lines."""
    out = []
    with open(log, encoding="utf-8", errors="replace") as handle:
        for n, line in enumerate(handle):
            if n < skip or not line.startswith("{"):
                continue
            with contextlib.suppress(ValueError):
                row = json.loads(line)
                if row.get("event") == "rpc" and row.get("method") == "Search" and "ms" in row:
                    out.append(float(row["ms"]))
    return out


def start_kb(home: Path, port: int, children: Children) -> tuple[Any, Any, tuple[tuple[str, str], ...], float, int]:
    import grpc
    from grpc_health.v1 import health_pb2, health_pb2_grpc

    from gateway.home import read_internal_token
    from gateway.v1 import kb_pb2, kb_pb2_grpc

    proc = children.start("kb", [sys.executable, "-m", "gateway_cli.cli", "serve", "kb", "--home", str(home)])
    address = f"127.0.0.1:{port}"
    channel = grpc.insecure_channel(address)
    health = health_pb2_grpc.HealthStub(channel)
    deadline = time.monotonic() + START_TIMEOUT_S
    while True:
        if proc.poll() is not None:
            channel.close()
            raise RuntimeError(f"kb exited with code {proc.returncode}; log tail:\n{children.tail('kb')}")
        serving = False
        with contextlib.suppress(grpc.RpcError):  # not listening yet
            serving = health.Check(health_pb2.HealthCheckRequest(), timeout=1).status == health_pb2.HealthCheckResponse.SERVING
        if serving:
            break
        if time.monotonic() > deadline:
            channel.close()
            raise RuntimeError(f"kb not SERVING after {START_TIMEOUT_S:.0f}s; log tail:\n{children.tail('kb')}")
        time.sleep(0.1)
    metadata = (("x-gateway-internal-token", read_internal_token(home)),)
    stub = kb_pb2_grpc.KnowledgeStub(channel)
    t0 = time.perf_counter()
    reply = stub.Refresh(kb_pb2.RefreshRequest(agent_id=AGENT, wait=True), metadata=metadata, timeout=REFRESH_DEADLINE_S)
    refresh_s = time.perf_counter() - t0
    say(f"kb SERVING on {address} (pid {proc.pid}); Refresh(wait) {refresh_s * 1000:.1f} ms: "
        f"generation {reply.generation}, indexed {reply.report.indexed}, skipped {reply.report.skipped}, "
        f"errors {len(reply.report.errors)}")  # fmt: skip
    return stub, channel, metadata, refresh_s, proc.pid


# =========================================================================== report


def build_report(args: argparse.Namespace, info: CorpusInfo, idx: dict[str, Any], srch: dict[str, Any] | None,
                 grpc_note: str, meta: dict[str, str], kinds: list[str]) -> tuple[str, list[str]]:  # fmt: skip
    figs = Figures()
    mb = info.bytes / MB
    figs.add("Corpus", f"{info.files:,} files, {mb:.1f} MB ({info.cjk_notes} CJK notes, {info.frontmatter_notes:,} with frontmatter); "
             f"{idx['chunks']:,} chunks ({idx['cjk_chunks']:,} CJK), {idx['entries']:,} entries")  # fmt: skip
    figs.add("Corpus generation", f"{info.generation_s:.1f} s" + (" (cached; this run reused it)" if info.cached else " (this run)")
             + f"; copy to the workspace {info.reuse_s:.1f} s")  # fmt: skip
    floor_goal = 0.5 * idx["floor_mbps"]
    figs.add("Floor: bare apsw FTS5 insert", f"{idx['floor_s']:.2f} s, {idx['floor_mbps']:.1f} MB/s "
             f"({idx['floor_chunks']:,} chunks, {idx['chunk_mb']:.1f} MB of chunk text)", "about 20-28 MB/s here")  # fmt: skip
    figs.add("Full index, in-process", f"{idx['full_s']:.2f} s wall ({idx['full_cpu']:.2f} s CPU), {idx['full_mbps']:.1f} MB/s",
             f">= 0.5x floor = {floor_goal:.1f} MB/s", idx["full_mbps"] >= floor_goal)  # fmt: skip
    figs.add("Full index / floor", f"{idx['full_mbps'] / idx['floor_mbps']:.2f}x", ">= 0.5x", idx["full_mbps"] >= floor_goal)
    nc = idx["nochange"]
    figs.add(f"No-change refresh ({info.files:,} files)", f"median {statistics.median(nc):.3f} s (min {min(nc):.3f}, max {max(nc):.3f}; n={len(nc)})",
             "<= 0.5 s", statistics.median(nc) <= 0.5)  # fmt: skip
    one = idx["onefile"]
    svc = (srch or {}).get("svc_onefile")
    if svc:
        figs.add("One-file-change refresh: Refresh(wait) via gRPC (file events + barrier)",
                 f"median {fmt_ms(statistics.median(svc))} (p90 {fmt_ms(pct(svc, 90))}, max {fmt_ms(max(svc))}; n={len(svc)})",
                 "<= 50 ms", statistics.median(svc) <= 0.05)  # fmt: skip
        nc_svc = srch["svc_nochange"]  # type: ignore[index]
        figs.add("No-change refresh: Refresh(wait) via gRPC (info)",
                 f"median {fmt_ms(statistics.median(nc_svc))} (max {fmt_ms(max(nc_svc))}; n={len(nc_svc)})")  # fmt: skip
    else:
        figs.add("One-file-change refresh: Refresh(wait) via gRPC", f"n/a ({grpc_note})", "<= 50 ms", None)
    figs.add("One-file-change refresh, in-process walk: indexer.refresh, what the service does without its watch (info)",
             f"median {fmt_ms(statistics.median(one))} (max {fmt_ms(max(one))}; n={len(one)})")  # fmt: skip
    if "targeted" in idx:
        tg = idx["targeted"]
        figs.add("One-file change via indexer.reindex_paths (info)", f"median {fmt_ms(statistics.median(tg))} (max {fmt_ms(max(tg))}; n={len(tg)})")
    if srch is not None:
        base = srch["base"]
        figs.add("In-process FTS5 MATCH (baseline)", f"p50 {fmt_ms(pct(base, 50))}, p99 {fmt_ms(pct(base, 99))} "
                 f"({len(base):,} queries, {srch['base_hits'] / len(base):.1f} hits/query)")  # fmt: skip
        if "grpc" in srch:
            g = srch["grpc"]
            p50, bp50 = pct(g, 50), pct(base, 50)
            figs.add("gRPC Search", f"p50 {fmt_ms(p50)}, p99 {fmt_ms(pct(g, 99))} ({srch['grpc_hits'] / len(g):.1f} hits/query; "
                     f"server CPU {srch['server_cpu_ms']:.2f} ms/query, mean)", "p50 <= 5 ms", p50 <= 0.005)  # fmt: skip
            figs.add("gRPC Search p50 / in-process p50", f"{p50 / bp50:.1f}x (p99 ratio {pct(g, 99) / pct(base, 99):.1f}x)",
                     "<= 2x", p50 <= 2 * bp50)  # fmt: skip
            sm = srch.get("server_ms") or []
            if sm:
                figs.add("Search handler time in the service, from its rpc log (info)",
                         f"p50 {fmt_ms(pct(sm, 50))}, p99 {fmt_ms(pct(sm, 99))}, mean {fmt_ms(statistics.fmean(sm))} (n={len(sm)}); "
                         f"so client + gRPC transport p50 about {fmt_ms(p50 - pct(sm, 50))}")  # fmt: skip
            if srch.get("bare"):
                bare = srch["bare"]
                figs.add("The baseline MATCH itself behind a bare grpc.aio server, bench/match_server.py (info)",
                         f"p50 {fmt_ms(pct(bare, 50))} = {pct(bare, 50) / bp50:.1f}x the in-process p50 (p99 {fmt_ms(pct(bare, 99))}): "
                         "what the gRPC hop alone adds to a handler as long as the baseline query")  # fmt: skip
            figs.add("gRPC round trip floor: health Check on the KB server (info)",
                     f"p50 {fmt_ms(pct(srch['ping'], 50))}, p99 {fmt_ms(pct(srch['ping'], 99))}")  # fmt: skip
            nr = srch["grpc_norecord"]
            figs.add("gRPC Search, retrieval recording off by metadata (info)",
                     f"p50 {fmt_ms(pct(nr, 50))}, p99 {fmt_ms(pct(nr, 99))}; server CPU {srch['server_cpu_norecord_ms']:.2f} ms/query")  # fmt: skip
        else:
            figs.add("gRPC Search", f"n/a ({grpc_note})", "p50 <= 5 ms and <= 2x in-process", None)
        bo = srch["base_or"]
        figs.add("In-process FTS5 MATCH, pieces ORed (info)", f"p50 {fmt_ms(pct(bo, 50))}, p99 {fmt_ms(pct(bo, 99))}")
        d, ds = srch["domain"], srch["domain_stale"]
        figs.add("search.search in-process, check_stale=False (info)", f"p50 {fmt_ms(pct(d, 50))}, p99 {fmt_ms(pct(d, 99))}")
        figs.add("search.search in-process, check_stale=True (info)", f"p50 {fmt_ms(pct(ds, 50))}, p99 {fmt_ms(pct(ds, 99))} (first {len(ds)} queries)")
        if "grpc_refresh_s" in srch:
            figs.add("Refresh(wait) via gRPC, index already current (info)", fmt_ms(srch["grpc_refresh_s"]))
            figs.add("Search reply after the run (info)", f"generation {srch['generation']}, stale={srch['stale_after']}")
    figs.add("Breakdown: scan_sources (info)", fmt_ms(idx["scan_s"]))
    figs.add("Breakdown: read + SHA-256 of all files (info)", f"{idx['read_hash_s']:.2f} s")
    figs.add("Breakdown: per-file Python work, no SQLite (info)", f"{idx['python_s']:.2f} s (decode, frontmatter, entries, chunks, "
             "provenance, CJK check, attribution)")  # fmt: skip
    rest = idx["full_s"] - idx["read_hash_s"] - idx["python_s"] - idx["scan_s"]
    tables = ", ".join(f"{name} {size:.1f}" for name, size in idx["db_tables"].items())
    figs.add("kb.sqlite after the refreshes (info; bench/kb_size.py has the size goal)",
             f"{idx['db_mb']:.1f} MB = {idx['db_ratio']:.2f}x the corpus; largest (MB): {tables}")  # fmt: skip
    figs.add("Breakdown: left for SQLite writes (info)", f"{rest:.2f} s = full index - the three above (floor inserts alone: {idx['floor_s']:.2f} s)")

    kind_rows: list[str] = []
    if srch is not None and kinds:
        grpc_all = srch.get("grpc")
        kind_rows = ["", "Search latency by query kind (p50 / p99 ms; \"OR matches\" = median chunks matching any term):", "",
                     "| kind | n | in-process MATCH | search.search in-process | gRPC Search | gRPC hits/query | OR matches |",
                     "|---|---:|---:|---:|---:|---:|---:|"]  # fmt: skip
        for kind in dict.fromkeys(kinds):
            ix = [i for i, k in enumerate(kinds) if k == kind]

            def cell(values: list[float] | None) -> str:
                if not values:
                    return "n/a"
                sub = [values[i] for i in ix]
                return f"{pct(sub, 50) * 1000:.2f} / {pct(sub, 99) * 1000:.2f}"

            hits = f"{sum(srch['grpc_hit_list'][i] for i in ix) / len(ix):.1f}" if grpc_all else "n/a"
            ors = sorted(srch["or_matches"][i] for i in ix)
            kind_rows.append(f"| {kind} | {len(ix)} | {cell(srch['base'])} | {cell(srch['domain'])} | {cell(grpc_all)} | {hits} | {ors[len(ors) // 2]:,} |")
    md = [f"## KB archive benchmark ({info.files:,} files, {mb:.1f} MB)", ""]
    md += [f"- {k}: {v}" for k, v in meta.items()]
    md += ["", "| figure | value | goal | result |", "|---|---|---|---|"]
    md += [f"| {a} | {b} | {c} | {d} |" for a, b, c, d in figs.rows]
    md += kind_rows
    verdicts = [f"{d}: {a} = {b} (goal {c})" for a, b, c, d in figs.rows if d]
    return "\n".join(md), verdicts


# =========================================================================== main


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--notes", type=int, default=10_000, help="notes under memory/ (default 10000)")
    p.add_argument("--mb", type=float, default=50.0, help="corpus size in MB of 10^6 bytes (default 50)")
    p.add_argument("--quick", action="store_true", help="smoke run: 1,000 notes / 5 MB")
    p.add_argument("--queries", type=int, default=1000, help="measured search queries (default 1000)")
    p.add_argument("--warmup", type=int, default=50, help="unmeasured warm-up queries (default 50)")
    p.add_argument("--refreshes", type=int, default=5, help="no-change and one-file refreshes each (default 5)")
    p.add_argument("--seed", type=int, default=4, help="corpus and query seed (default 4)")
    p.add_argument("--no-grpc", action="store_true", help="skip the KB service (in-process figures only)")
    p.add_argument("--profile", action="store_true", help="cProfile the full index and print the top functions")
    p.add_argument("--keep-home", action="store_true", help="keep the temp home (workspace, kb.sqlite, logs)")
    args = p.parse_args(argv)
    if args.quick:
        args.notes, args.mb = 1000, 5.0
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, lambda *_: (_ for _ in ()).throw(KeyboardInterrupt()))
    load_before = "{:.2f} {:.2f} {:.2f}".format(*os.getloadavg())
    home = Path(tempfile.mkdtemp(prefix="bench-kb-archive-"))
    tmp = home / "bench"
    tmp.mkdir()
    children = Children(tmp)
    srch: dict[str, Any] | None = None
    grpc_note = "--no-grpc"
    try:
        import apsw

        kb_port = free_ports(1)[0]
        write_home(home, kb_port)
        workspace = home / "agents" / AGENT / "workspace"
        info = corpus(args.seed, args.notes, args.mb, workspace)
        say(f"corpus: {info.files:,} files, {info.bytes / MB:.1f} MB in {workspace} "
            f"({'cached' if info.cached else 'generated'} {info.generation_s:.1f} s; copy {info.reuse_s:.1f} s)")  # fmt: skip
        tagged = make_queries(args.seed, args.warmup + args.queries)
        warm = [q for _, q in tagged[: args.warmup]]
        queries = [q for _, q in tagged[args.warmup :]]
        query_kinds = [kind for kind, _ in tagged[args.warmup :]]
        idx = index_phase(args, home, workspace, info.bytes, tmp)
        use_grpc = not args.no_grpc
        if use_grpc and not (REPO / "services" / "kb" / "main.py").is_file():
            use_grpc, grpc_note = False, "services/kb/main.py does not exist yet"
            say(f"gRPC part skipped: {grpc_note}")
        try:
            srch = search_phase(home, workspace, idx["kb_path"], warm, queries, children if use_grpc else None, kb_port,
                                max(20, args.refreshes))
        except RuntimeError as exc:
            if not use_grpc:
                raise
            grpc_note = f"the KB service failed: {str(exc).splitlines()[0]}"
            say(f"{exc}\nretrying the in-process search without the service")
            children.stop_all()
            srch = search_phase(home, workspace, idx["kb_path"], warm, queries, None, kb_port)
    except KeyboardInterrupt:
        say("interrupted; stopping the children")
        return 130
    finally:
        children.stop_all()
        if args.keep_home:
            say(f"home kept: {home}")
        else:
            shutil.rmtree(home, ignore_errors=True)

    settings = idx["settings"]
    kinds = "single words, two/three words, a AND b, quoted phrases, x-y, prefixes word*, (a OR b), NOT, punctuation, 3% CJK"
    meta = {
        "date": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
        "machine": f"{os.cpu_count()} cores, {platform.system()} {platform.release()}, Python {platform.python_version()}, "
        f"SQLite {apsw.sqlite_lib_version()} (apsw {apsw.apswversion()}); load average before the run {load_before} "
        "(the machine is shared: numbers are noisy)",
        "corpus": f"seed {args.seed}, {args.notes:,} notes + MEMORY.md + USER.md, target {args.mb:g} MB (MB = 10^6 bytes), "
        f"cached in {CACHE_ROOT}",
        "archive settings": f"tokenizer {settings.tokenizer}, chunkTokens {settings.chunk_tokens}, chunkOverlap {settings.chunk_overlap}",
        "full index": "in-process schema.open_index + indexer.refresh on a fresh kb.sqlite (WAL, synchronous=NORMAL); "
        "MB/s = corpus bytes / wall seconds; files in the page cache (just copied)",
        "floor": "same chunks (services.kb.index.chunking, configured sizes), one transaction of INSERTs into a plain "
        "fts5(text, tokenize='unicode61') in a fresh file, default pragmas; only BEGIN..COMMIT timed; corpus MB/s",
        "refreshes": f"median of {args.refreshes}; one-file = append a line to a different note each time",
        "queries": f"{args.queries:,} measured after {args.warmup} warm-up, seed {args.seed}: {kinds}",
        "in-process baseline": "read-only apsw connection on the same kb.sqlite: kb_chunks_fts MATCH of the quoted "
        f"pieces (AND), ORDER BY rank LIMIT {SEARCH_LIMIT}, joined to kb_chunks/kb_sources for path, lines, text",
        "gRPC": "python -m gateway_cli.cli serve kb; one sync KnowledgeStub, sequential Search(limit=6) calls, "
        "alternating with the baseline query by query; internal-token metadata; nearest-rank percentiles",
    }
    markdown, verdicts = build_report(args, info, idx, srch, grpc_note, meta, query_kinds)
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(markdown + "\n", encoding="utf-8")
    print()
    for line in verdicts:
        print(line)
    print()
    print(markdown)
    say(f"markdown written to {RESULTS.relative_to(REPO)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
