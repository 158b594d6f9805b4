"""A repo's declared path: its ``${NEO_HOME}`` / ``$$`` expansion, and the checks that
turn it into an absolute, resolved directory (allowed roots; existence and readability
when the filesystem is checked). Every refusal is a ``PathProblem`` saying why."""

import difflib
import os
import re
import stat
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from neo_assets.config.settings import SettingsError, load_settings
from neo_assets.tenants.problems import found_value, short_repr
from neo_assets.tenants.rules import _NAME_RE, PATH_VARIABLES

PATH_ALLOWED = (
    "a directory path (absolute, '~/...', '${NEO_HOME}/...', or relative to the "
    "tenants file's folder)"
)


def is_git_work_tree(path: Path) -> bool:
    """True when ``path`` is the top of a git work tree (has a ``.git`` directory, or a
    ``.git`` file as in linked worktrees and submodules); a plain directory otherwise."""
    return (path / ".git").exists()


def _reference(name: str) -> str:
    """``${NAME}`` as a message shows it: bare when it is a plain name, else quoted."""
    if re.fullmatch(r"[A-Za-z0-9_]{1,64}", name, re.ASCII):
        return "${" + name + "}"
    return short_repr("${" + name + "}")


def _unknown_variable_hint(name: str) -> str:
    if name == "HOME":
        return " (write '~' for your home directory)"
    close = difflib.get_close_matches(name.upper(), PATH_VARIABLES, n=1, cutoff=0.6)
    return f" (did you mean ${{{close[0]}}}?)" if close else ""


class PathVariableError(ValueError):
    """A repo path's ``$`` references cannot be expanded; the message says why."""


def expand_path_variables(text: str, value_of: Callable[[str], str]) -> str:
    """``text`` with each ``${NAME}`` (NAME in PATH_VARIABLES) replaced by
    ``value_of(NAME)`` and each ``$$`` by a literal ``$``; ``value_of`` is called only
    for the names used. Raises PathVariableError listing every defect: an unknown or
    empty name, an unclosed ``${``, a ``$`` that starts neither."""
    out: list[str] = []
    defects: list[str] = []
    index = 0
    while (dollar := text.find("$", index)) >= 0:
        out.append(text[index:dollar])
        following = text[dollar + 1 : dollar + 2]
        if following == "$":
            out.append("$")
            index = dollar + 2
        elif following == "{":
            close = text.find("}", dollar + 2)
            if close < 0:
                defects.append(
                    f"has an unclosed variable reference {short_repr(text[dollar:])} "
                    "(no closing '}')"
                )
                index = len(text)
                break
            name = text[dollar + 2 : close]
            index = close + 1
            if name in PATH_VARIABLES:
                out.append(value_of(name))
            elif name == "":
                defects.append("has an empty variable reference ${}")
            else:
                defects.append(
                    f"uses the unknown variable {_reference(name)}{_unknown_variable_hint(name)}"
                )
        else:
            word = _NAME_RE.match(text, dollar + 1)
            name = word.group() if word else ""
            if name in PATH_VARIABLES:
                instead = f"write ${{{name}}}, or '$$' for a literal '$'"
            elif name == "HOME":
                instead = "write '~' for your home directory, or '$$' for a literal '$'"
            else:
                instead = "write '$$' for a literal '$'"
            defects.append(
                f"has a '$' that starts no variable reference, {short_repr('$' + name)} ({instead})"
            )
            index = dollar + 1
    out.append(text[index:])
    if defects:
        raise PathVariableError("; ".join(defects))
    return "".join(out)


class PathProblem(ValueError):
    """A repo path that cannot be used; the message is the whole problem."""


@dataclass(slots=True)
class PathRules:
    """How declared repo paths resolve: against the file's folder (``base_dir``), with
    ``${NEO_HOME}`` as ``home`` (None: the settings' home, read when a path first uses
    it), inside ``allowed_roots`` when given, checked on disk when ``check_paths``."""

    base_dir: Path
    allowed_roots: tuple[Path, ...] | None
    check_paths: bool
    home: Path | None = None

    def neo_home(self) -> Path:
        if self.home is None:
            self.home = load_settings().store.home_dir
        return self.home

    def resolve(self, text: str) -> Path:
        """The absolute, resolved directory ``text`` names; PathProblem otherwise."""
        if text.strip() == "" or "\x00" in text:
            raise PathProblem(
                f"'path' is empty or contains NUL; found {found_value(text)}; "
                f"allowed: {PATH_ALLOWED}"
            )
        expanded, used = self._expand(text)
        declared = Path(os.path.expanduser(expanded))
        path_notes = ""
        if used:
            path_notes = f" (${{NEO_HOME}} is {str(self.neo_home())!r})"
        if not declared.is_absolute():
            declared = self.base_dir / declared
            path_notes += f" (relative paths resolve against {str(self.base_dir)!r})"
        try:
            resolved = declared.resolve()
        except (OSError, RuntimeError) as error:  # a symlink loop, a name too long
            raise PathProblem(
                f"'path' cannot be resolved ({error}); found {found_value(text)}{path_notes}; "
                f"allowed: {PATH_ALLOWED}"
            ) from None
        where = f"found {found_value(text)}, which resolves to {str(resolved)!r}{path_notes}"
        if self.allowed_roots is not None and not any(
            resolved.is_relative_to(root) for root in self.allowed_roots
        ):
            roots = ", ".join(repr(str(root)) for root in self.allowed_roots) or "(none)"
            raise PathProblem(
                f"repo path is outside the allowed roots; {where}; allowed: a directory "
                f"under one of {roots}"
            )
        if self.check_paths:
            _check_directory(resolved, where)
        return resolved

    def _expand(self, text: str) -> tuple[str, list[str]]:
        used: list[str] = []

        def value_of(name: str) -> str:
            used.append(name)
            return str(self.neo_home())

        try:
            return expand_path_variables(text, value_of), used
        except PathVariableError as error:
            raise PathProblem(
                f"'path' {error}; found {found_value(text)}; allowed: {PATH_ALLOWED}, where "
                "${NEO_HOME} (the data root, NEO_HOME) is the only variable (environment "
                "variables are not expanded) and '$$' is a literal '$'"
            ) from None
        except SettingsError as error:
            raise PathProblem(
                f"'path' uses ${{NEO_HOME}}, but the settings cannot be read "
                f"({' '.join(str(error).split())}); found {found_value(text)}; allowed: valid "
                "NEO_* settings (fix the variable named)"
            ) from None


def _check_directory(resolved: Path, where: str) -> None:
    """PathProblem unless ``resolved`` is an existing directory this process can read."""
    try:
        mode = resolved.stat().st_mode
    except FileNotFoundError:
        raise PathProblem(
            f"repo directory does not exist; {where}; allowed: an existing directory "
            "(a git work tree or a plain directory)"
        ) from None
    except OSError as error:
        raise PathProblem(
            f"repo directory cannot be inspected ({error.strerror or error}); {where}; "
            "allowed: an existing directory this process can read"
        ) from None
    if not stat.S_ISDIR(mode):
        kind = "a file" if stat.S_ISREG(mode) else "not a directory"
        raise PathProblem(
            f"repo path is {kind}, not a directory; {where}; allowed: a directory "
            "(a git work tree or a plain directory)"
        )
    if not os.access(resolved, os.R_OK | os.X_OK):
        raise PathProblem(
            f"repo directory is not readable by this process; {where}; allowed: a "
            "directory this process can list and read"
        )
