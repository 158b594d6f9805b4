"""Which threads are embedded Chroma's, and which one core they share.

Embedded Chroma (chromadb's Rust bindings) runs a write on a tokio worker that hands every
SQLite statement to a dedicated sqlx worker thread and waits for the answer. When the two
threads sit on different cores each hand-off is a cross-core wake-up; on the 2-core
machine an 8,000-row ``add`` spent a third of its CPU in the kernel's futex and scheduler
paths, and took 9.3-11.8 s against 6.3-7.3 s with both threads on one core
(docs/performance.md). Sharing one core costs Chroma nothing, since the ``add`` holds the
GIL and runs one statement at a time anyway, and it leaves the other cores to the
sweep's helper processes.
"""

from collections.abc import Iterable

# Thread names as Linux shows them (comm, cut to 15 characters): tokio's runtime
# workers ("tokio-runtime-worker", or chromadb's "tokio-rt-worker") and sqlx's SQLite
# worker ("sqlx-sqlite-worker-N").
CHROMA_THREAD_PREFIXES = ("tokio-r", "sqlx-sqlite")


def is_chroma_thread(name: str) -> bool:
    """Whether a thread of this process, by its Linux name, is one of embedded Chroma's."""
    return name.strip().startswith(CHROMA_THREAD_PREFIXES)


def pick_core(allowed: Iterable[int], pid: int) -> int | None:
    """The one core Chroma's threads share, or None to leave them be.

    None when only one core is allowed (nothing to gain). Otherwise the process id picks
    among the allowed cores, so several processes on one machine (Dagster runs each run
    in its own) spread their Chroma threads instead of piling them on the same core.
    """
    cores = sorted(set(allowed))
    if len(cores) < 2:
        return None
    return cores[pid % len(cores)]
