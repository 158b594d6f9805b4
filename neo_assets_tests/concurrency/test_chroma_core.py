from neo_assets.concurrency.chroma_core import is_chroma_thread, pick_core


def test_chroma_threads_are_told_by_their_linux_names():
    assert is_chroma_thread("tokio-rt-worker")
    assert is_chroma_thread("tokio-runtime-w")
    assert is_chroma_thread("sqlx-sqlite-wor\n")
    assert not is_chroma_thread("python")
    assert not is_chroma_thread("python3.11")
    assert not is_chroma_thread("tokio")  # too short to be a runtime worker's name
    assert not is_chroma_thread("")


def test_one_allowed_core_leaves_the_threads_alone():
    assert pick_core([3], pid=1234) is None
    assert pick_core([], pid=1234) is None


def test_the_process_id_spreads_processes_over_the_allowed_cores():
    allowed = {0, 1, 2, 3}
    picked = {pick_core(allowed, pid) for pid in range(1000, 1008)}
    assert picked == allowed
    # The same process always gets the same core, and only an allowed one.
    assert pick_core(allowed, 1001) == pick_core(allowed, 1001)
    assert pick_core({4, 6}, 7) in {4, 6}
