"""Which rows a sweep may take as present or absent from one listing of the repo's rows.

The listing (the ids of the repo's rows when the sweep began) answers for the run, which
holds the repo's lease: only the lease holder writes a repo's rows, and reconciliation
deletes only rows whose id the current declaration lacks. So:

- an id not listed is absent: no one else can have written it since;
- a listed id of the recorded generation is present: it was declared when listed and
  stays declared (a path keeps its ids or loses them), so nothing deletes its row;
- any other listed id must be asked about again, by id: its row may have been a stale
  one that a reconciliation deleted since (the caller asks after declaring it).
"""

from collections.abc import Iterable, Set


def answer_from_listing(
    wanted: Iterable[str], listed: Set[str], recorded: Set[str]
) -> tuple[set[str], list[str]]:
    """(the ids of ``wanted`` known present, those to ask the store about again, in
    order and once each); every other id of ``wanted`` is absent."""
    present: set[str] = set()
    again: list[str] = []
    for chunk_id in dict.fromkeys(wanted):
        if chunk_id not in listed:
            continue
        if chunk_id in recorded:
            present.add(chunk_id)
        else:
            again.append(chunk_id)
    return present, again
