"""Every error, cause and disposition code of the project, in one closed module.

Codes are constants; a code string is never built by formatting. Add a code here
(and to the set it belongs to) before using it anywhere else.
"""

# --- Embedding failure taxonomy (closed): the class alone decides what may be concluded.
KB_VECTOR_EMBED_TIMEOUT = "KB_VECTOR_EMBED_TIMEOUT"
KB_VECTOR_EMBED_ABORTED = "KB_VECTOR_EMBED_ABORTED"
KB_VECTOR_EMBED_CIRCUIT_OPEN = "KB_VECTOR_EMBED_CIRCUIT_OPEN"
KB_VECTOR_EMBED_CONNECTION_REFUSED = "KB_VECTOR_EMBED_CONNECTION_REFUSED"
KB_VECTOR_EMBED_TRANSPORT_CLOSED = "KB_VECTOR_EMBED_TRANSPORT_CLOSED"
KB_VECTOR_EMBED_PROVIDER_REFUSAL = "KB_VECTOR_EMBED_PROVIDER_REFUSAL"
KB_VECTOR_EMBED_CONTENT = "KB_VECTOR_EMBED_CONTENT"
KB_VECTOR_EMBED_WRITE_ERROR = "KB_VECTOR_EMBED_WRITE_ERROR"
KB_VECTOR_EMBED_UNCLASSIFIED = "KB_VECTOR_EMBED_UNCLASSIFIED"
KB_VECTOR_EMBED_YIELD = "KB_VECTOR_EMBED_YIELD"
KB_VECTOR_EMBED_INVALID_VECTORS = "KB_VECTOR_EMBED_INVALID_VECTORS"
# The provider is up but still loading its model (llama.cpp's 503 "Loading model", Ollama's
# and vLLM's equivalents): the lane waits, bounded; past the bound the rest defers with it.
KB_VECTOR_EMBED_PROVIDER_LOADING = "KB_VECTOR_EMBED_PROVIDER_LOADING"
# A refusal naming the provider's cap on inputs per request (TEI's 413 "batch size 64 >
# maximum allowed batch size 32"): about the request's shape, never about an input.
KB_VECTOR_EMBED_BATCH_CAP = "KB_VECTOR_EMBED_BATCH_CAP"
# A size refusal: the provider says the input is over its limit (llama.cpp's "input is too
# large", Ollama's context length, TEI's 413 / "less than N tokens", vLLM's and OpenAI's
# "maximum context length", the in-process model's own check). Geometry evidence, never
# content: the input alone fences undeliverable-at-geometry with the limit in its receipt.
KB_VECTOR_EMBED_INPUT_TOO_LARGE = "KB_VECTOR_EMBED_INPUT_TOO_LARGE"
# The provider's vectors are not NEO_EMBEDDING_DIMENSIONS wide at first contact: a
# configuration error, not a failure class (the sweep fails, naming the variable and the
# provider's answer; embedding/vectors.DimensionMismatchError).
KB_VECTOR_EMBED_DIMENSION_MISMATCH = "KB_VECTOR_EMBED_DIMENSION_MISMATCH"
# The band (NEO_EMBEDDING_CONTEXT_TOKENS) is over the limit the server reports for one
# input (llama.cpp /props, Ollama /api/show): a configuration error at first contact.
KB_VECTOR_EMBED_BAND_OVER_PROVIDER_LIMIT = "KB_VECTOR_EMBED_BAND_OVER_PROVIDER_LIMIT"
# The provider has not answered once this sweep and cannot be reached: its port refuses
# past NEO_EMBEDDING_UNREACHABLE_WAIT_S, its host does not resolve, or its URL answers 404.
# The lane stops at once and defers the rest with it, the message naming the URL, the
# setting and the likely fix; `neo-assets sweep` exits 1 on it. Never about content.
KB_VECTOR_EMBED_PROVIDER_UNREACHABLE = "KB_VECTOR_EMBED_PROVIDER_UNREACHABLE"
# NEO_EMBEDDING_TOKENIZER=server but the server has no tokenize endpoint (or refuses the
# key): a configuration error, named with the setting to change.
KB_VECTOR_EMBED_NO_TOKENIZE_ENDPOINT = "KB_VECTOR_EMBED_NO_TOKENIZE_ENDPOINT"

# Durable fence codes: a fence row's code, equal to its details.reasonCode.
KB_VECTOR_EMBED_PROVEN_CONTENT_POISON = "KB_VECTOR_EMBED_PROVEN_CONTENT_POISON"
KB_VECTOR_EMBED_UNDELIVERABLE_AT_GEOMETRY = "KB_VECTOR_EMBED_UNDELIVERABLE_AT_GEOMETRY"
# The chunk holds a secret (neo_assets/secrets/rules.py): never sent, stored or served;
# its fence is decided by the sweep before the lane, from the text alone.
KB_CHUNK_SECRET = "KB_CHUNK_SECRET"

# The lane's own per-request deadline (the "call ceiling"): the cause code of a call-scope
# cancellation; rows carry KB_VECTOR_EMBED_TIMEOUT with this as details.causeCode.
KB_VECTOR_EMBED_CALL_CEILING = "KB_VECTOR_EMBED_CALL_CEILING"
# The evidence code of an admission fence: the token estimate exceeded the band, nothing
# was dispatched, so no failure class applies.
KB_VECTOR_EMBED_OVER_ADMISSION_BAND = "KB_VECTOR_EMBED_OVER_ADMISSION_BAND"

EMBED_FAILURE_CODES = frozenset(
    {
        KB_VECTOR_EMBED_TIMEOUT,
        KB_VECTOR_EMBED_ABORTED,
        KB_VECTOR_EMBED_CIRCUIT_OPEN,
        KB_VECTOR_EMBED_CONNECTION_REFUSED,
        KB_VECTOR_EMBED_TRANSPORT_CLOSED,
        KB_VECTOR_EMBED_PROVIDER_REFUSAL,
        KB_VECTOR_EMBED_CONTENT,
        KB_VECTOR_EMBED_WRITE_ERROR,
        KB_VECTOR_EMBED_UNCLASSIFIED,
        KB_VECTOR_EMBED_YIELD,
        KB_VECTOR_EMBED_INVALID_VECTORS,
        KB_VECTOR_EMBED_PROVIDER_LOADING,
        KB_VECTOR_EMBED_BATCH_CAP,
        KB_VECTOR_EMBED_INPUT_TOO_LARGE,
        KB_VECTOR_EMBED_PROVIDER_UNREACHABLE,
    }
)

# Provider-specific deadline codes and the consumer-owned probe deadline.
ABORT_ERR = "ABORT_ERR"
PROVIDER_TIMEOUT = "PROVIDER_TIMEOUT"
OPENAI_COMPATIBLE_REQUEST_TIMEOUT = "OPENAI_COMPATIBLE_REQUEST_TIMEOUT"
OLLAMA_REQUEST_TIMEOUT = "OLLAMA_REQUEST_TIMEOUT"
GEMINI_REQUEST_TIMEOUT = "GEMINI_REQUEST_TIMEOUT"
EMBEDDING_PROBE_TIMEOUT = "EMBEDDING_PROBE_TIMEOUT"
# A provider's own request deadline fired (one code per provider family): the provider
# misbehaved, and no content verdict may follow from it.
PROVIDER_DEADLINE_CODES = frozenset(
    {
        PROVIDER_TIMEOUT,
        OPENAI_COMPATIBLE_REQUEST_TIMEOUT,
        OLLAMA_REQUEST_TIMEOUT,
        GEMINI_REQUEST_TIMEOUT,
    }
)
# Every cause that means "a deadline fired": a provider's own, or the consumer's probe's.
DEADLINE_CAUSE_CODES = PROVIDER_DEADLINE_CODES | {EMBEDDING_PROBE_TIMEOUT}

# (The embedding provider kinds are one table: embedding/rules/provider_kinds.KINDS.)

# --- Fence dispositions (closed vocabulary of the fence gate).
DISPOSITION_PROVEN_CONTENT_POISON = "proven-content-poison"
DISPOSITION_UNDELIVERABLE_AT_GEOMETRY = "undeliverable-at-geometry"
DISPOSITION_SECRET = "secret"
FENCE_DISPOSITIONS = frozenset(
    {DISPOSITION_PROVEN_CONTENT_POISON, DISPOSITION_UNDELIVERABLE_AT_GEOMETRY, DISPOSITION_SECRET}
)

# --- Sweep outcomes.
OUTCOME_COMPLETE = "complete"
OUTCOME_DEFERRED = "deferred"
OUTCOME_FAILED = "failed"
OUTCOME_SKIPPED = "skipped"
# What `neo-assets sweep` reports (never recorded) for a repo of its run set that the
# tenants file misdeclares and no last good declaration stands in for: not swept.
OUTCOME_MISDECLARED = "misdeclared"

# --- Non-embedding sweep failures.
SOURCE_UNREADABLE = "SOURCE_UNREADABLE"
SOURCE_REPO_MISSING = "SOURCE_REPO_MISSING"
PARSE_FAILED = "PARSE_FAILED"
STORE_FAILED = "STORE_FAILED"
KB_COLLECTION_FROZEN = "KB_COLLECTION_FROZEN"
# A summary the classifier cannot read fails the sweep (never completes it).
SWEEP_SUMMARY_MALFORMED = "SWEEP_SUMMARY_MALFORMED"
SWEEP_LEASE_HELD = "SWEEP_LEASE_HELD"  # another sweep holds the repo lease: skipped, no write

# --- Envelope skip reasons (recorded per path, never silently dropped).
SKIP_EXCLUDED = "excluded"
SKIP_BINARY = "binary"
SKIP_TOO_LARGE = "too-large"
SKIP_SYMLINK = "symlink"
SKIP_NOT_REGULAR = "not-regular-file"
SKIP_SUBMODULE = "submodule"
SKIP_UNREADABLE = "unreadable"

# --- Configuration errors (tenants.yaml and settings).
CONFIG_INVALID = "CONFIG_INVALID"

# --- Orphan kinds of reconciliation (closed vocabulary, one kind per row at most).
KIND_MANIFEST_ORPHAN = "manifest-orphan"
KIND_MANIFEST_ORPHAN_PENDING = "manifest-orphan-pending"
KIND_UNDECLARED_REPO = "undeclared-repo"
KIND_UNYIELDED_PATH = "unyielded-path"
KIND_SUPERSEDED_GENERATION = "superseded-generation"
KIND_SUPERSEDED_PENDING = "superseded-pending"
KIND_STALE_CONTENT = "stale-content"
KIND_STALE_CONTENT_PENDING = "stale-content-pending"
KIND_CONFIG_STALE = "config-stale"

# --- Reconciliation: why a repo's records have no authority (telemetry, never an
# error by themselves), and why a reclaim did not run.
RECONCILE_NO_ENVELOPE = "RECONCILE_NO_ENVELOPE"
RECONCILE_NO_GENERATION = "RECONCILE_NO_GENERATION"
RECONCILE_GENERATION_REVISION_MISMATCH = "RECONCILE_GENERATION_REVISION_MISMATCH"
RECONCILE_DECLARATION_MOVED = "RECONCILE_DECLARATION_MOVED"
RECONCILE_RECORDS_INCONSISTENT = "RECONCILE_RECORDS_INCONSISTENT"
RECONCILE_CLASSIFY_ONLY = "RECONCILE_CLASSIFY_ONLY"
RECONCILE_DISABLED = "RECONCILE_DISABLED"
RECONCILE_PLAN_OPENS_HOLE = "RECONCILE_PLAN_OPENS_HOLE"
RECONCILE_PLAN_FOREIGN_ROWS = "RECONCILE_PLAN_FOREIGN_ROWS"
RECONCILE_NOTHING_TO_RECLAIM = "RECONCILE_NOTHING_TO_RECLAIM"

# --- The query service: why a request was refused (the error body's "code").
QUERY_INVALID = "QUERY_INVALID"  # a field holds a value the service cannot use
QUERY_UNKNOWN_FIELD = "QUERY_UNKNOWN_FIELD"
QUERY_MALFORMED_JSON = "QUERY_MALFORMED_JSON"
QUERY_INVALID_UTF8 = "QUERY_INVALID_UTF8"
QUERY_CONTENT_TYPE = "QUERY_CONTENT_TYPE"
QUERY_BODY_TOO_LARGE = "QUERY_BODY_TOO_LARGE"
QUERY_NOT_FOUND = "QUERY_NOT_FOUND"
QUERY_TOO_MANY_REQUESTS = "QUERY_TOO_MANY_REQUESTS"
# A client address holding its cap of connections, each with a request running (429).
QUERY_TOO_MANY_CONNECTIONS = "QUERY_TOO_MANY_CONNECTIONS"
# A token holding its cap of open event streams (MCP GET /mcp): 429.
QUERY_TOO_MANY_STREAMS = "QUERY_TOO_MANY_STREAMS"
QUERY_TIMEOUT = "QUERY_TIMEOUT"
QUERY_UNAVAILABLE = "QUERY_UNAVAILABLE"
# The store holds none of the rows of a repo the ledger records as swept complete (a
# missing or emptied Chroma directory / server): 503, never an empty answer.
QUERY_STORE_MISSING = "QUERY_STORE_MISSING"
# The code tools (find_symbol, grep, read_file, ...) have no index of a repo at the
# revision it is served at yet (swept before the tools existed, or never): 503.
QUERY_NOT_INDEXED = "QUERY_NOT_INDEXED"
# /readyz: which part is not ready.
READY_STORE_UNREACHABLE = "READY_STORE_UNREACHABLE"
READY_LEDGER_UNREACHABLE = "READY_LEDGER_UNREACHABLE"
READY_PROVIDER_UNAVAILABLE = "READY_PROVIDER_UNAVAILABLE"
AUTH_MISSING_TOKEN = "AUTH_MISSING_TOKEN"
AUTH_UNKNOWN_TOKEN = "AUTH_UNKNOWN_TOKEN"
AUTH_REVOKED_TOKEN = "AUTH_REVOKED_TOKEN"
AUTH_EXPIRED_TOKEN = "AUTH_EXPIRED_TOKEN"
# A token sent in the URL's query string (where access logs and proxies keep it): 400.
AUTH_TOKEN_IN_URL = "AUTH_TOKEN_IN_URL"
AUTH_FORBIDDEN = "AUTH_FORBIDDEN"
