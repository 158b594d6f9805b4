"""The code tools' bounds and defaults, and the kinds and languages they answer."""

from neo_assets.sources.rules.languages import known_languages

# The kinds of unit find_symbol answers (sources/rules/chunk_kinds.CODE_UNIT_KINDS; a unit
# test keeps them equal).
SYMBOL_KINDS = ("class", "class-config", "function", "method", "type")
LANGUAGES = known_languages()

MAX_NAME_CHARS = 256
MAX_PATTERN_CHARS = 1000
DEFAULT_SYMBOLS = 20
MAX_SYMBOLS = 200
DEFAULT_REFERENCES = 100
MAX_REFERENCES = 1000
DEFAULT_GREP = 100
MAX_GREP = 1000
DEFAULT_READ_LINES = 400
MAX_READ_LINES = 2000
MAX_LIST_FILES = 5000
MAX_LINE_CHARS = 500  # a result line is cut here (minified files have 100 kB lines)
FUZZY_CUTOFF = 0.75
