"""A real llama.cpp server with only its URL and model set (no band, no tokenizer): the
sweep's first contact finds its limit and tokenizer, the ledger keeps them, and later
digests read them without the network; a server restarted with another context is a new
generation at the next sweep (``embedding/discovery.py``). Both real servers serve the
bundled model (``neo_assets_tests/real_servers.py``)."""

import time
from pathlib import Path

import pytest

from neo_assets.config.settings import load_settings
from neo_assets.core import codes
from neo_assets.generations.serving import configured_generation
from neo_assets.services.handles import open_ledger
from neo_assets.store.provider_limits import recorded_discovery
from neo_assets.sweep.context import RepoContext
from neo_assets.tenants.validation import load_tenants
from neo_assets_tests.gitrepo import GitRepo
from neo_assets_tests.kb_handles import sweep_once
from neo_assets_tests.real_servers import (
    MODEL_DIMENSIONS,
    LlamaCppPythonServer,
    LlamaServer,
    RealServer,
    running,
)
from neo_assets_tests.servers import free_port
from neo_assets_tests.tenantfiles import repo_entry, write_tenants

# Dense code (~1 character per word piece): an estimate under-counts it ~2x.
DENSE = "def dense(a, b, c, d):\n" + "".join(
    f"    a[{i}]=b[{i}]+c[{i}]*d[{i}]-a[{i + 1}]\n" for i in range(90)
)
# A function whose name alone costs ~330 word pieces: every input of it starts with its
# name (the input header), so no part of it fits a 256-token window; 512 takes it.
LONG_NAME = "h_" + "_".join(f"w{i}" for i in range(100))
LONG = f"def {LONG_NAME}():\n    return 1\n"


def _ctx(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, base_url: str) -> RepoContext:
    repo = GitRepo(tmp_path / "r")
    repo.write("pkg/dense.py", DENSE)
    repo.write("pkg/named.py", LONG)
    repo.write("pkg/small.py", "def tiny():\n    return 1\n")
    repo.commit("one", when=1_700_000_000)
    tenants = write_tenants(
        tmp_path / "t.yaml", {"acme": [repo_entry("w", repo.path, version="2.0.0")]}
    )
    for name in ("NEO_EMBEDDING_CONTEXT_TOKENS", "NEO_EMBEDDING_TOKENIZER"):
        monkeypatch.delenv(name, raising=False)
    for name, value in {
        "NEO_TENANTS_FILE": str(tenants),
        "NEO_EMBEDDING_PROVIDER": "openai_compatible",
        "NEO_EMBEDDING_BASE_URL": base_url,
        "NEO_EMBEDDING_MODEL": "minilm",
        "NEO_EMBEDDING_DIMENSIONS": str(MODEL_DIMENSIONS),
        "NEO_EMBEDDING_LOADING_MAX_WAIT_S": "3",
        "NEO_EMBEDDING_UNREACHABLE_WAIT_S": "1",
        "NEO_PROVIDER_SLOTS_DIR": str(tmp_path / "slots"),
    }.items():
        monkeypatch.setenv(name, value)
    t = load_tenants(tenants).tenants[0]
    return RepoContext(tenant=t, repo=t.repos[0])


def _recorded() -> tuple[int | None, str | None]:
    settings = load_settings()
    e = settings.embedding
    with open_ledger(settings) as ledger:
        found = recorded_discovery(ledger, e.provider, e.base_url, e.model)
    assert found is not None
    return found.limit_tokens, found.tokenizer


def _server(kind: str, tmp_path: Path) -> RealServer:
    if kind == "llama-server":
        return LlamaServer(tmp_path / "server")  # -c 1024 --parallel 2: 512 per slot
    return LlamaCppPythonServer(tmp_path / "server", n_ctx=512)


@pytest.mark.parametrize(
    ("kind", "tokenizer"),
    [("llama-server", "llama.cpp"), ("llama_cpp.server", "llama-cpp-python")],
)
def test_only_url_and_model_set_the_limit_is_discovered_kept_and_every_chunk_delivered(
    kind: str, tokenizer: str, neo_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "server").mkdir()
    with running(_server(kind, tmp_path)) as server:
        ctx = _ctx(tmp_path, monkeypatch, server.base_url)
        before = configured_generation(load_settings())  # nothing discovered yet
        doc = sweep_once(ctx)
        assert doc["outcome"] == codes.OUTCOME_COMPLETE, doc
        assert doc["undeliverableChunks"]["count"] == 0, doc["undeliverableChunks"]
        assert doc["contentPoisonChunks"]["count"] == 0
        assert _recorded() == (512, tokenizer)
    # The server is gone: the digest reads the recorded limit, not the network.
    assert configured_generation(load_settings()) == doc["embeddingGeneration"] != before


def test_a_server_restarted_with_a_larger_context_is_a_new_generation_that_delivers_the_fenced(
    neo_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "server").mkdir()
    port = free_port()
    # -c 512 over 2 slots: 256 tokens per input; the long name cannot be cut that small.
    with running(LlamaServer(tmp_path / "server", ctx=512, port=port)) as server:
        ctx = _ctx(tmp_path, monkeypatch, server.base_url)
        first = sweep_once(ctx)
        assert _recorded() == (256, "llama.cpp")
    assert first["outcome"] == codes.OUTCOME_COMPLETE, first
    assert first["undeliverableChunks"]["count"] == 1, first["undeliverableChunks"]
    assert first["contentPoisonChunks"]["count"] == 0
    # Restarted with -c 2048 (512 per slot: the model's own window caps it there).
    with running(LlamaServer(tmp_path / "server", ctx=2048, port=port)):
        second = sweep_once(ctx)
        assert _recorded() == (512, "llama.cpp")
    assert second["outcome"] == codes.OUTCOME_COMPLETE, second
    assert second["embeddingGeneration"] != first["embeddingGeneration"]
    assert second["undeliverableChunks"]["count"] == 0, second["undeliverableChunks"]
    assert second["contentPoisonChunks"]["count"] == 0


def test_a_server_gone_after_its_tokenizer_was_recorded_is_named_within_seconds(
    neo_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The split counts with the recorded tokenizer: a server that is gone by the next
    # sweep is named as the lane names it (the URL, the setting), not waited for as loading.
    (tmp_path / "server").mkdir()
    with running(LlamaServer(tmp_path / "server")) as server:
        ctx = _ctx(tmp_path, monkeypatch, server.base_url)
        assert sweep_once(ctx)["outcome"] == codes.OUTCOME_COMPLETE
    monkeypatch.setenv("NEO_EMBEDDING_LOADING_MAX_WAIT_S", "300")
    repo = GitRepo(tmp_path / "r", init=False)
    repo.write("pkg/more.py", DENSE.replace("dense", "denser"))
    repo.commit("two", when=1_700_000_100)
    started = time.monotonic()
    doc = sweep_once(ctx)
    assert time.monotonic() - started < 30
    assert doc["outcome"] == codes.OUTCOME_DEFERRED, doc
    assert doc["deferredCauseCode"] == codes.KB_VECTOR_EMBED_PROVIDER_UNREACHABLE
    assert server.base_url in doc["error"] and "NEO_EMBEDDING_BASE_URL" in doc["error"]
