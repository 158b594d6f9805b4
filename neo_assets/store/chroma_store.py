"""The Chroma adapter: one shared collection, embeddings always passed explicitly. Opened
with ``RefuseToEmbed`` (``embedding_function=None`` does not stop Chroma downloading a
model), so anything asking Chroma to embed fails loudly instead of reaching the network."""

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import chromadb
import numpy as np
from chromadb.api.types import Documents, EmbeddingFunction
from chromadb.config import Settings as ChromaSettings

from neo_assets.core.store_urls import chroma_address

COLLECTION_SPACE = "cosine"

# Ids per page when only ids are listed. Each page is one filtered query, and a later
# page (an offset) scans the earlier ones again, so pages are large yet bounded.
ID_PAGE = 50_000
# Metadata keys the project stamps on every row (CONTRACT.md, "The collection").
STAMP_KEYS = (
    "tenantId",
    "repoSlug",
    "sourcePath",
    "kind",
    "name",
    "parserId",
    "parserVersion",
    "tenantConfigVersion",
    "ingestedAt",
    "revision",
    "embeddingGeneration",
)
# Digests per reuse lookup: one filtered get each (Chroma's $in takes a list).
DIGEST_PAGE = 1000
Texts = Sequence[str]  # row ids, documents
Metadatas = Sequence[Mapping[str, Any]]


class RefuseToEmbed(EmbeddingFunction[Documents]):
    """Never embeds: the project always passes ``embeddings=``/``query_embeddings=``."""

    def __init__(self) -> None:
        pass

    def __call__(self, input: Documents) -> Any:  # noqa: A002 - Chroma's signature
        raise RuntimeError(
            "neo_assets never lets Chroma embed (its default model needs a download); "
            "pass embeddings explicitly"
        )

    @staticmethod
    def name() -> str:
        return "neo-refuse-to-embed"

    def get_config(self) -> dict[str, Any]:
        return {}

    @staticmethod
    def build_from_config(config: dict[str, Any]) -> "RefuseToEmbed":
        return RefuseToEmbed()


def make_client(*, persist_dir: Path | None = None, url: str | None = None) -> Any:
    """A Chroma client: HttpClient for ``url`` (http://host:port), else PersistentClient."""
    chroma_settings = ChromaSettings(anonymized_telemetry=False, allow_reset=False)
    if url:
        address = chroma_address(url)
        return chromadb.HttpClient(
            host=address.host, port=address.port, ssl=address.ssl, settings=chroma_settings
        )
    if persist_dir is None:
        raise ValueError("a persistent Chroma needs a directory (NEO_HOME)")
    persist_dir.mkdir(parents=True, exist_ok=True)
    try:
        return chromadb.PersistentClient(path=str(persist_dir), settings=chroma_settings)
    except Exception:
        _forget_unstarted_system(str(persist_dir))
        raise


def _forget_unstarted_system(identifier: str) -> None:
    """Chroma keeps a directory's system when its start fails (a read-only directory), and every
    later client of that directory in the process then fails on it; forgotten here while no
    client holds it, so the next open starts afresh."""
    from chromadb.api.shared_system_client import SharedSystemClient  # noqa: PLC0415

    with SharedSystemClient._refcount_lock:  # noqa: SLF001 - no public way to undo this
        if not SharedSystemClient._identifier_to_refcount.get(identifier):  # noqa: SLF001
            SharedSystemClient._identifier_to_system.pop(identifier, None)  # noqa: SLF001


@dataclass
class ChromaStore:
    """Rows of the shared collection, read and written by id."""

    client: Any
    collection_name: str
    # False for a sibling (another generation's collection on the same client): closing
    # it leaves the client to its owner.
    owns_client: bool = True
    closed: bool = field(default=False, init=False)
    # Run once when the store closes (an embedded directory's hold: store/local_server.py).
    on_close: Callable[[], None] | None = field(default=None, init=False)

    def __post_init__(self) -> None:
        self.collection = self.client.get_or_create_collection(
            self.collection_name,
            configuration={"hnsw": {"space": COLLECTION_SPACE}},
            embedding_function=RefuseToEmbed(),
        )
        self.max_batch = int(self.client.get_max_batch_size())

    def sibling(self, collection_name: str) -> "ChromaStore":
        """Another collection (another embedding generation's) on this store's client."""
        if collection_name == self.collection_name:
            return self
        return ChromaStore(self.client, collection_name, owns_client=False)

    def generation_siblings(self) -> list["ChromaStore"]:
        """This store and every collection of another embedding generation beside it (its
        name, then ``-<digest>``), that exist now."""
        names = self._collection_names()
        own = [self] if self.collection_name in names else []
        prefix = f"{self.collection_name}-"
        return own + [self.sibling(n) for n in sorted(names) if n.startswith(prefix)]

    def _collection_names(self) -> set[str]:
        return {str(getattr(c, "name", c)) for c in self.client.list_collections()}

    def collection_exists(self, collection_name: str) -> bool:
        return collection_name in self._collection_names()

    def drop_collection(self, collection_name: str) -> None:
        """Delete a whole collection (a reclaimed generation's); absent: nothing to do."""
        if self.collection_exists(collection_name):
            self.client.delete_collection(collection_name)

    def close(self) -> None:
        """Release the client: a persistent Chroma's files are closed when the last client
        of its directory in this process closes (Chroma counts them). Idempotent."""
        if self.owns_client and not self.closed:
            self.client.close()
        self.closed = True
        release, self.on_close = self.on_close, None
        if release is not None:
            release()

    def __enter__(self) -> "ChromaStore":
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    def _batches(self, seq: Sequence[Any], size: int | None = None) -> Iterator[Sequence[Any]]:
        step = max(1, min(size or self.max_batch, self.max_batch))
        for start in range(0, len(seq), step):
            yield seq[start : start + step]

    def present_ids(self, ids: Iterable[str]) -> set[str]:
        """Which of ``ids`` exist: checked by id, never by scanning a tenant."""
        wanted = list(dict.fromkeys(ids))
        found: set[str] = set()
        for batch in self._batches(wanted):
            found.update(self.collection.get(ids=list(batch), include=[])["ids"])
        return found

    def add(
        self, ids: Texts, embeddings: np.ndarray, documents: Texts, metadatas: Metadatas
    ) -> None:
        """Write new rows with ``add`` (upsert of existing ids is ~5x slower)."""
        self._write(self.collection.add, ids, embeddings, documents, metadatas)

    def upsert(
        self, ids: Texts, embeddings: np.ndarray, documents: Texts, metadatas: Metadatas
    ) -> None:
        """Rewrite rows that exist (re-embedded at a new generation) in place."""
        self._write(self.collection.upsert, ids, embeddings, documents, metadatas)

    def _write(
        self, write: Any, ids: Texts, embeddings: np.ndarray, documents: Texts, metadatas: Metadatas
    ) -> None:
        step = self.max_batch
        for start in range(0, len(ids), step):
            stop = start + step
            write(
                ids=list(ids[start:stop]),
                embeddings=np.asarray(embeddings[start:stop], dtype=np.float32),
                documents=list(documents[start:stop]),
                metadatas=[dict(m) for m in metadatas[start:stop]],
            )

    def vectors_by_input_digest(
        self, digests: Iterable[str], *, generation: str, tenant_id: str | None
    ) -> dict[str, np.ndarray]:
        """A stored vector per input digest found among rows of ``generation`` (and of
        ``tenant_id`` unless None: reuse across tenants), one get per page of digests.
        Each row is re-checked against the filter before its vector is taken."""
        wanted = list(dict.fromkeys(digests))
        found: dict[str, np.ndarray] = {}
        for start in range(0, len(wanted), DIGEST_PAGE):
            page = wanted[start : start + DIGEST_PAGE]
            clauses: list[dict[str, Any]] = [
                {"embeddingGeneration": {"$eq": generation}},
                {"embeddingInputDigest": {"$in": page}},
            ]
            if tenant_id is not None:
                clauses.append({"tenantId": {"$eq": tenant_id}})
            got = self.collection.get(where={"$and": clauses}, include=["embeddings", "metadatas"])
            for meta, vector in zip(got["metadatas"], got["embeddings"], strict=True):
                meta = meta or {}
                digest = meta.get("embeddingInputDigest")
                if meta.get("embeddingGeneration") != generation or digest in found:
                    continue
                if tenant_id is not None and meta.get("tenantId") != tenant_id:
                    continue
                found[str(digest)] = np.asarray(vector, dtype=np.float32)
        return found

    def get_rows(
        self, ids: Sequence[str], *, include_documents: bool = False
    ) -> dict[str, dict[str, Any]]:
        """Metadata (and optionally documents) of ``ids``, keyed by id."""
        include = ["metadatas", "documents"] if include_documents else ["metadatas"]
        out: dict[str, dict[str, Any]] = {}
        for batch in self._batches(list(ids)):
            got = self.collection.get(ids=list(batch), include=include)
            docs = got.get("documents") or [None] * len(got["ids"])
            for rid, meta, doc in zip(got["ids"], got["metadatas"], docs, strict=True):
                out[rid] = {"id": rid, "metadata": dict(meta or {}), "document": doc}
        return out

    def iter_rows(
        self, where: Mapping[str, Any] | None = None, *, page: int = 5000
    ) -> Iterator[dict[str, Any]]:
        """Every row matching ``where`` (id + metadata), paged so memory stays bounded."""
        for got in self._pages(where, ["metadatas"], page):
            for rid, meta in zip(got["ids"], got["metadatas"], strict=True):
                yield {"id": rid, "metadata": dict(meta or {})}

    def tenant_rows(self, tenant_id: str) -> Iterator[dict[str, Any]]:
        """A tenant's rows: filtered by tenantId in Chroma, checked again row by row."""
        for row in self.iter_rows({"tenantId": tenant_id}):
            if row["metadata"].get("tenantId") == tenant_id:
                yield row

    def count_where(self, where: Mapping[str, Any], *, page: int = ID_PAGE) -> int:
        """How many rows match ``where``: ids only, paged (a tenth of reading metadata)."""
        return sum(len(ids) for ids in self._id_pages(where, page))

    def ids_where(self, where: Mapping[str, Any], *, page: int = ID_PAGE) -> set[str]:
        """The ids of the rows matching ``where`` (ids only, paged)."""
        return {i for ids in self._id_pages(where, page) for i in ids}

    def _id_pages(self, where: Mapping[str, Any], page: int) -> Iterator[list[str]]:
        return (got["ids"] for got in self._pages(where, [], page))

    def _pages(
        self, where: Mapping[str, Any] | None, include: list[str], page: int
    ) -> Iterator[dict[str, Any]]:
        """The rows matching ``where``, ``page`` at a time, until a page is short."""
        offset = 0
        while True:
            got = self.collection.get(
                where=dict(where) if where else None, include=include, limit=page, offset=offset
            )
            yield got
            if len(got["ids"]) < page:
                return
            offset += page

    def update_metadata(self, ids: Texts, metadatas: Metadatas) -> None:
        for id_batch, meta_batch in zip(self._batches(ids), self._batches(metadatas), strict=True):
            self.collection.update(ids=list(id_batch), metadatas=[dict(m) for m in meta_batch])

    def delete_ids(self, ids: Sequence[str]) -> None:
        for batch in self._batches(list(ids)):
            self.collection.delete(ids=list(batch))

    def query(
        self, embedding: np.ndarray, *, where: Mapping[str, Any], k: int
    ) -> list[dict[str, Any]]:
        """Nearest rows to ``embedding`` among those matching ``where``."""
        got = self.collection.query(
            query_embeddings=np.asarray([embedding], dtype=np.float32),
            n_results=max(1, k),
            where=dict(where),
            include=["metadatas", "documents", "distances"],
        )
        columns = (got[key][0] for key in ("ids", "metadatas", "documents", "distances"))
        return [
            {"id": rid, "score": 1.0 - float(dist), "document": doc, "metadata": dict(meta)}
            for rid, meta, doc, dist in zip(*columns, strict=True)
        ]

    def count(self) -> int:
        return int(self.collection.count())


def open_store(
    *,
    persist_dir: Path | None,
    url: str | None,
    collection_name: str,
) -> ChromaStore:
    """The collection (a server at ``url``, else the directory)."""
    return ChromaStore(make_client(persist_dir=persist_dir, url=url), collection_name)
