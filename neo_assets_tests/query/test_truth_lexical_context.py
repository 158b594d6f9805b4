"""What the lexical index reads besides a row's own text, built from a real sweep of two
repos of one tenant that hold the same path: a doc comment a blank line above a function
(left in the module row by the parser) and a method's enclosing class, each from the
row's own file, never from the other repo's file of the same path."""

from pathlib import Path

import pytest

from neo_assets.config.settings import load_settings
from neo_assets.query.rules.ranking import query_tokens
from neo_assets.query.search import QueryService
from neo_assets.query.serving import Resident
from neo_assets.services.handles import open_ledger, open_store
from neo_assets_tests.serve.service_harness import ServedKb

EAST = """'use strict'

const typeis = require('type-is')

/**
 * Check whether the incoming request's content type matches a quokka type.
 */

req.is = function is(types) {
  return typeis(this, types)
}

module.exports = req
"""
WEST = """'use strict'

function helper(a) {
  return a
}

const other = 1


req.west = function west(b) {
  return helper(b)
}

class WestHolder {
  hold() {
    return other
  }
}

module.exports = req
"""
EAST_JS = (
    "class Quintessa {\n"
    + "".join(f"  m{i} () {{\n    return {i}\n  }}\n\n" for i in range(2))
    + "}\n"
)
WEST_JS = "\n" * 2 + "function plainFunction () {\n  return 1\n}\n"
# Rows enough that a token of a few of them is rare (BM25 gives a token most rows hold none).
MORE = "".join(f"def spare_{i}(x):\n    return x + {i}\n\n\n" for i in range(12))


@pytest.fixture(scope="module")
def kb(tmp_path_factory: pytest.TempPathFactory) -> ServedKb:
    repos = {
        ("acme", "east"): {"lib/req.js": EAST, "lib/holder.js": EAST_JS, "lib/more.py": MORE},
        ("acme", "west"): {"lib/req.js": WEST, "lib/holder.js": WEST_JS, "lib/more.py": MORE},
    }
    return ServedKb.build(tmp_path_factory.mktemp("lexical-context"), repos=repos)


def _matches(kb: ServedKb, words: str, repo: str) -> set[str]:
    """The names of ``repo``'s rows BM25 finds for ``words`` in the tenant's view."""
    with kb.environment():
        settings = load_settings()
        with open_ledger(settings) as ledger, open_store(settings) as store:
            view = QueryService(Resident(settings, store, ledger)).view("acme")
            hits = view.index.bm25(query_tokens(words), [repo])
            return {view.index.place(rid)[2] for rid in hits if view.facets[rid].repo == repo}


def test_a_doc_comment_a_blank_line_above_a_function_is_its_lexical_context(
    kb: ServedKb, tmp_path: Path
) -> None:
    assert "req.is" in _matches(kb, "quokka", "east")
    assert "req.west" not in _matches(kb, "quokka", "west")


def test_a_methods_class_comes_from_its_own_repos_file_of_that_path(kb: ServedKb) -> None:
    east = _matches(kb, "Quintessa", "east")
    assert {"Quintessa.m0", "Quintessa.m1"} <= east
    assert _matches(kb, "Quintessa", "west") == set()
