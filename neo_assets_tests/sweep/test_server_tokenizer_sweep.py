"""Split to fit by the server's own count (``NEO_EMBEDDING_TOKENIZER=server``), whole
sweeps (``run_sweep``) against both real llama.cpp servers serving the bundled model
(512 tokens per input; ``neo_assets_tests/real_servers.py``).

Code denser than the character estimate (operators, indices, short names: about one
character per word piece) passes an estimated split and is then refused by the server
for its size: fenced undeliverable-at-geometry, not delivered. Counted by the server, the
same chunk is split into parts that each fit, and every part is stored."""

from pathlib import Path

import httpx
import pytest

from neo_assets.core import codes
from neo_assets.sweep.context import RepoContext
from neo_assets.tenants.validation import load_tenants
from neo_assets_tests.gitrepo import GitRepo
from neo_assets_tests.kb_handles import KbHandles, sweep_once
from neo_assets_tests.real_servers import (
    MODEL_DIMENSIONS,
    LlamaCppPythonServer,
    LlamaServer,
    RealServer,
    running,
)
from neo_assets_tests.servers import free_port
from neo_assets_tests.tenantfiles import repo_entry, write_tenants

LIMIT = 512
# ~1 character per word piece: the estimate (2.3 chars per token, 0.9 margin) thinks a
# ~1,000-character part is ~440 tokens; the model counts ~900.
DENSE = "def dense(a, b, c, d):\n" + "".join(
    f"    a[{i}]=b[{i}]+c[{i}]*d[{i}]-a[{i + 1}]\n" for i in range(90)
)


def _ctx(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, base_url: str, tokenizer: str
) -> RepoContext:
    repo = GitRepo(tmp_path / "r")
    repo.write("pkg/dense.py", DENSE)
    repo.write("pkg/small.py", "def tiny():\n    return 1\n")
    repo.commit("one", when=1_700_000_000)
    tenants = write_tenants(tmp_path / "t.yaml", {"acme": [repo_entry("w", repo.path)]})
    for name, value in {
        "NEO_TENANTS_FILE": str(tenants),
        "NEO_EMBEDDING_PROVIDER": "openai_compatible",
        "NEO_EMBEDDING_BASE_URL": base_url,
        "NEO_EMBEDDING_MODEL": "minilm",
        "NEO_EMBEDDING_DIMENSIONS": str(MODEL_DIMENSIONS),
        "NEO_EMBEDDING_CONTEXT_TOKENS": str(LIMIT),
        "NEO_EMBEDDING_TOKENIZER": tokenizer,
        "NEO_EMBEDDING_LOADING_MAX_WAIT_S": "3",
        "NEO_PROVIDER_SLOTS_DIR": str(tmp_path / "slots"),
    }.items():
        monkeypatch.setenv(name, value)
    t = load_tenants(tenants).tenants[0]
    return RepoContext(tenant=t, repo=t.repos[0])


def _server(kind: str, tmp_path: Path, port: int | None = None) -> RealServer:
    if kind == "llama-server":
        return LlamaServer(tmp_path / "server", port=port)
    return LlamaCppPythonServer(tmp_path / "server", n_ctx=LIMIT, port=port)


def _server_count(server: RealServer, text: str) -> int:
    if isinstance(server, LlamaServer):
        body = httpx.post(
            server.base_url + "/tokenize", json={"content": text, "add_special": True}
        ).json()
        return len(body["tokens"])
    return httpx.post(server.base_url + "/extras/tokenize/count", json={"input": text}).json()[
        "count"
    ]


KINDS = ["llama-server", "llama_cpp.server"]


@pytest.mark.parametrize("kind", KINDS)
def test_dense_code_is_split_by_the_servers_count_and_delivered(
    kind: str, neo_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "server").mkdir()
    with running(_server(kind, tmp_path)) as server:
        ctx = _ctx(tmp_path, monkeypatch, server.base_url, "server")
        doc = sweep_once(ctx)
        assert doc["outcome"] == codes.OUTCOME_COMPLETE, doc
        assert doc["undeliverableChunks"]["count"] == 0
        assert doc["contentPoisonChunks"]["count"] == 0
        kb = KbHandles()
        try:
            rows = kb.store.collection.get(include=["documents", "metadatas"])
        finally:
            kb.close()
        dense = sorted(
            (m["startLine"], d)
            for d, m in zip(rows["documents"], rows["metadatas"], strict=True)
            if m["sourcePath"] == "pkg/dense.py"
        )
        assert len(dense) > 1, "the dense function was not split"
        # Every part is whole and fits by the server's own count (header included: the
        # stored document is the content; the input adds a short header).
        assert "".join(d for _, d in dense) == DENSE.rstrip("\n")
        assert all(_server_count(server, d) <= LIMIT for _, d in dense)


@pytest.mark.parametrize("kind", KINDS)
def test_the_estimate_refused_for_size_learns_a_smaller_ratio_splits_again_and_delivers(
    kind: str, neo_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The gap the server's count closes, closed by the refusals too: with the estimate,
    # parts of the dense function are refused for their size (never poison); the ratio
    # they show is recorded, the repo split again by it, and every part delivered.
    (tmp_path / "server").mkdir()
    with running(_server(kind, tmp_path)) as server:
        doc = sweep_once(_ctx(tmp_path, monkeypatch, server.base_url, "estimate"))
    assert doc["outcome"] == codes.OUTCOME_COMPLETE, doc
    assert doc["undeliverableChunks"]["count"] == 0
    assert doc["contentPoisonChunks"]["count"] == 0
    assert any("refused for their size" in n for n in doc.get("notices", [])), doc


def test_a_server_down_at_split_time_defers_the_sweep_and_records_nothing(
    neo_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    port = free_port()
    ctx = _ctx(tmp_path, monkeypatch, f"http://127.0.0.1:{port}", "server")
    doc = sweep_once(ctx)
    assert doc["outcome"] == codes.OUTCOME_DEFERRED, doc
    # Nothing listens: named as the lane names a dead provider (the URL, the setting).
    assert doc["deferredCauseCode"] == codes.KB_VECTOR_EMBED_PROVIDER_UNREACHABLE
    assert "NEO_EMBEDDING_BASE_URL" in doc["error"]
    kb = KbHandles()
    try:
        state = kb.ledger.repo_state("acme", "w") or {}
        assert state.get("last_ingested_rev") is None
        assert state["last_outcome"] == codes.OUTCOME_DEFERRED
        assert kb.ledger.declared_chunks("acme", "w") == []
    finally:
        kb.close()
    # The server comes up: the next sweep splits by its count and completes.
    (tmp_path / "server").mkdir()
    with running(LlamaServer(tmp_path / "server", port=port)):
        doc = sweep_once(ctx)
    assert doc["outcome"] == codes.OUTCOME_COMPLETE, doc
    assert doc["undeliverableChunks"]["count"] == 0


def test_a_server_that_takes_more_than_the_band_is_named_with_the_setting_to_raise(
    neo_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # llama-server reports 512 tokens per slot (/props); the band stays at the configured
    # 256 (it is in the generation), and the sweep says how to use the rest.
    (tmp_path / "server").mkdir()
    with running(LlamaServer(tmp_path / "server")) as server:
        ctx = _ctx(tmp_path, monkeypatch, server.base_url, "server")
        monkeypatch.setenv("NEO_EMBEDDING_CONTEXT_TOKENS", "256")
        doc = sweep_once(ctx)
    assert doc["outcome"] == codes.OUTCOME_COMPLETE, doc
    assert doc["undeliverableChunks"]["count"] == 0
    (notice,) = doc["notices"]
    assert "NEO_EMBEDDING_CONTEXT_TOKENS=512" in notice and "256" in notice
