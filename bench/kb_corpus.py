"""The KB archive bench's corpus: word lists, the vocabulary, the note writer and the cached corpus.

bench/kb_archive.py's docstring (step 0) says the method. Deterministic: ``random.Random(seed)`` throughout.
"""

from __future__ import annotations

import bisect
import json
import math
import os
import random
import shutil
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.report import say
from kb_bench_support import MB

CACHE_ROOT = Path(tempfile.gettempdir()) / "kb-bench-corpus"
CORPUS_VERSION = 2


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


def _accumulate(values: Any) -> Any:
    total = 0.0
    for v in values:
        total += v
        yield total
