"""Parsing with a helper process: the same rows, in the same order, whatever happens to
the helper."""

import pytest

import neo_assets.concurrency.parse_helper as parse_helper
from neo_assets.concurrency.helper_process import HelperProcess, HelperUnavailable
from neo_assets.concurrency.parse_helper import ParseIdentity, parse_files, parse_rows

IDENTITY = ParseIdentity("t1", "repo", "neo-code", "1.0.0", 6000, 60)


def _files(n: int) -> list[tuple[str, str]]:
    return [
        (
            f"pkg/mod_{i:04d}.py",
            f'"""Module {i}."""\n\n\ndef handler_{i}(value):\n    return value * {i}\n\n\n'
            f"class Thing{i}:\n    def run(self):\n        return {i}\n",
        )
        for i in range(n)
    ]


def test_the_helper_gives_the_rows_parsing_here_gives_in_file_order() -> None:
    files = _files(30)
    rows, helped = parse_files(IDENTITY, iter(files), len(files), help_min_files=10)
    assert helped
    assert rows == parse_rows(IDENTITY, files)
    assert [r[1] for r in rows] == sorted(r[1] for r in rows)  # file order kept
    assert len({r[0] for r in rows}) == len(rows)


def test_few_files_are_parsed_here_without_a_helper(monkeypatch: pytest.MonkeyPatch) -> None:
    def no_helper(*_args: object) -> None:
        raise AssertionError("no helper for a small parse")

    monkeypatch.setattr(parse_helper, "HelperProcess", no_helper)
    files = _files(5)
    rows, helped = parse_files(IDENTITY, iter(files), len(files), help_min_files=10)
    assert not helped and rows == parse_rows(IDENTITY, files)


def test_a_helper_that_cannot_start_leaves_its_half_to_this_process(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A module that is not there: the child exits before it is ready.
    monkeypatch.setattr(
        parse_helper, "HelperProcess", lambda _module: HelperProcess("neo_assets.no_such_module")
    )
    files = _files(30)
    rows, helped = parse_files(IDENTITY, iter(files), len(files), help_min_files=10)
    assert not helped and rows == parse_rows(IDENTITY, files)


def test_a_parse_error_in_the_helper_is_raised_here_as_parsing_here_would() -> None:
    bad_identity = ParseIdentity("t1", "repo", "other-parser", "1.0.0", 6000, 60)
    files = _files(30)
    with pytest.raises(ValueError, match="other-parser"):
        parse_files(bad_identity, iter(files), len(files), help_min_files=10)


def test_a_helper_error_answer_is_unavailable_not_a_crash() -> None:
    with HelperProcess("neo_assets.concurrency.parse_helper") as helper:
        with pytest.raises(HelperUnavailable, match="ValueError"):
            helper.call(
                (("t", "r", "nope", "1", 6000, 60), _files(2)), wait_ready_s=30, answer_within_s=30
            )
        # Still usable after an error answer.
        fields = ("t", "r", "neo-code", "1.0.0", 6000, 60)
        assert helper.call((fields, _files(2)), wait_ready_s=30, answer_within_s=30) == parse_rows(
            ParseIdentity(*fields), _files(2)
        )


def test_a_parser_shares_a_batch_between_its_helper_and_this_process() -> None:
    """A sweep's second wave: the same Parser that parsed the first wave in its helper
    then parses one batch on both cores, with the rows in file order."""
    files = _files(31)
    with parse_helper.Parser(IDENTITY) as parser:
        first, _ = parser.parse(files[:5], wait_ready_s=30)
        rows, helped = parser.parse_shared(files[5:], wait_ready_s=30)
    assert helped and first + rows == parse_rows(IDENTITY, files)
