"""The secret guard through the real processes (docs/concepts/secrets.md): a shared note holding a secret
is refused (400 naming the detector and line), a PUT holding one is written and answered with warnings,
and ``gateway doctor secrets`` finds it afterwards; the value is never in an answer, a log or the report."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator

import grpc
import httpx
import pytest
from secret_samples import AWS_KEY, KEYWORD_SECRETS, PRIVATE_KEY_BLOCK, SECRETS
from suite_support import ADMIN_KEY, Suite, make_home, wait_until, workspace

from gateway.v1 import kb_pb2, kb_pb2_grpc

pytestmark = pytest.mark.integration

NOTES = "/api/v1/agents/alfred/shared/notes"
SOUL = f"# Soul\n\nAlfred is warm.\n{PRIVATE_KEY_BLOCK}\n"


@pytest.fixture(scope="module")
def gsuite(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Suite]:
    agents = [{"id": "alfred", "memory": {"episodicArchiveDir": "journal"}}, {"id": "bob"}]
    home, ports, http_port = make_home(tmp_path_factory.mktemp("secrets"), agents)
    running = Suite(home, http_port, ports)
    try:
        running.start("file_api", "kb", "http")
        yield running
    finally:
        running.stop_all()


@pytest.fixture
def http(gsuite: Suite) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=gsuite.base_url, timeout=30, headers={"X-Api-Key": ADMIN_KEY}) as client:
        yield client


def test_a_shared_note_holding_a_secret_is_refused_naming_the_detector(gsuite: Suite, http: httpx.Client) -> None:
    content = f"# Deploys\n- The deploy user is ci.\n- Its key is {AWS_KEY}.\n"
    refused = http.post(NOTES, json={"name": "deploys", "content": content, "confirm": True})
    assert refused.status_code == 400, refused.text
    message = refused.json()["message"]
    assert "content holds a secret (line 3: AWS Access Key)" in message and AWS_KEY not in message
    assert not list((gsuite.home / "shared").rglob("deploys*"))
    created = http.post(NOTES, json={"name": "deploys", "content": "# Deploys\n- The deploy user is ci.\n", "confirm": True})
    assert created.status_code == 200 and created.json()["created"] is True, created.text
    updated = http.put(f"{NOTES}/deploys", json={"content": content, "confirm": True})
    assert updated.status_code == 400 and "line 3: AWS Access Key" in updated.json()["message"], updated.text
    assert http.get(f"{NOTES}/deploys").json()["content"] == "# Deploys\n- The deploy user is ci.\n"


def test_a_shared_note_whose_keyword_values_are_plainly_words_is_written(gsuite: Suite, http: httpx.Client) -> None:
    """The soak's note (docs/concepts/secrets.md "What is not a secret"): a generated example whose
    ``api_key`` is two words is written; the same note with a real-looking value is still refused."""
    example = '# Whale watch\n\n```json\n{"api_key": "blue whale", "password": "ask Marta at the desk"}\n```\n'
    created = http.post(NOTES, json={"name": "whale-watch", "content": example, "confirm": True})
    assert created.status_code == 200 and created.json()["created"] is True, created.text
    refused = http.put(f"{NOTES}/whale-watch", json={"content": f"{example}{KEYWORD_SECRETS['a live key']}\n", "confirm": True})
    assert refused.status_code == 400 and "(line 6: Secret Keyword)" in refused.json()["message"], refused.text


def test_a_promoted_fact_holding_a_secret_is_refused(gsuite: Suite) -> None:
    request = kb_pb2.PromoteFactRequest(agent_id="alfred", topic="deploy-key", reason="deploy key",
                                        content=f"- The deploy key is {AWS_KEY}.", run_id="r1", request_id="alfred/r1/1")
    with grpc.insecure_channel(gsuite.address("kb")) as channel:
        with pytest.raises(grpc.RpcError) as refused:
            kb_pb2_grpc.KnowledgeStub(channel).PromoteFact(request, metadata=(("x-api-key", ADMIN_KEY),), timeout=30)
    assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "line 1: AWS Access Key" in str(refused.value.details()) and AWS_KEY not in str(refused.value.details())
    assert not list((gsuite.home / "shared").rglob("deploy-key*"))


def test_a_put_holding_a_secret_is_written_with_a_warning_and_logged_without_the_value(gsuite: Suite, http: httpx.Client) -> None:
    put = http.put("/api/v1/agents/alfred/files/SOUL.md", json={"content": SOUL})
    assert put.status_code == 200, put.text
    (warning,) = put.json()["warnings"]
    assert warning.startswith("line 4: Private Key: this file now holds a secret;")
    assert "gateway doctor secrets alfred" in warning
    assert (workspace(gsuite, "alfred") / "SOUL.md").read_text() == SOUL

    def logged() -> list[dict[str, object]]:
        return [r for r in gsuite.log_lines("file_api") if r.get("event") == "put_holds_secret"]

    wait_until(lambda: bool(logged()), 30, "the file API logs the secret it was given")
    (line,) = logged()
    assert (line["agent"], line["file"], line["key"], line["line"], line["detector"]) == ("alfred", "SOUL.md", "admin", 4, "Private Key")
    assert "PRIVATE KEY-----" not in gsuite.log_path("file_api").read_text()
    clean = http.put("/api/v1/agents/alfred/files/USER.md", json={"content": "# User\n- Prefers tea.\n"})
    assert clean.status_code == 200 and clean.json()["warnings"] == [], clean.text


def doctor(gsuite: Suite, agent: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "gateway_cli.cli", "doctor", "secrets", agent, "--home", str(gsuite.home)],
                          capture_output=True, text=True, timeout=60)


def test_doctor_secrets_lists_where_secrets_sit_with_the_forget_command(gsuite: Suite, http: httpx.Client) -> None:
    """alfred's episodic notes go to ``journal/`` (config), which is scanned too."""
    assert http.put("/api/v1/agents/bob/files/SOUL.md", json={"content": "# Soul\nBob is calm.\n"}).status_code == 200
    clean = doctor(gsuite, "bob")
    assert clean.returncode == 0 and clean.stdout.startswith("no secret found in the "), clean.stdout + clean.stderr
    assert http.put("/api/v1/agents/alfred/files/SOUL.md", json={"content": SOUL}).status_code == 200
    memory = workspace(gsuite, "alfred") / "memory"
    memory.mkdir(exist_ok=True)
    (memory / "keys.md").write_text(f"# Keys\n\n- deploy {AWS_KEY}\n")
    (workspace(gsuite, "alfred") / "journal").mkdir(exist_ok=True)
    (workspace(gsuite, "alfred") / "journal" / "deploys.md").write_text(f"- 2026-11-30 used {SECRETS['GitHub Token']}\n")
    notes = gsuite.home / "shared" / "kb" / "global" / "notes"  # a note written by hand, past the KB's refusal
    notes.mkdir(parents=True, exist_ok=True)
    (notes / "by-hand.md").write_text(f"# By hand\n{PRIVATE_KEY_BLOCK}\n")
    found = doctor(gsuite, "alfred")
    assert found.returncode == 1, found.stdout + found.stderr
    lines = found.stdout.splitlines()
    assert "SOUL.md:4: Private Key" in lines and "memory/keys.md:3: AWS Access Key" in lines
    assert "vault global:by-hand.md:2: Private Key" in lines and "journal/deploys.md:1: GitHub Token" in lines
    assert "  gateway forget alfred --text '<the secret at memory/keys.md:3>'" in lines
    assert AWS_KEY not in found.stdout + found.stderr and "PRIVATE KEY-----" not in found.stdout
    unknown = doctor(gsuite, "nobody")
    assert unknown.returncode == 2 and "no agent 'nobody'" in unknown.stderr
