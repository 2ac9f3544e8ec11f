"""Checks where the command line meets the user: option values, TOML values and paths.

Every rule is written once here and used by the argument parser, the TOML readers and the Python
API alike, so ``--lr nan`` on the command line, ``lr = nan`` in a TOML file and ``TrainConfig(lr=nan)``
are refused by the same words. A refusal is an :class:`~ltr.base.errors.LtrError` (the CLI prints it as
one line and exits with status 2); nothing here imports more than the standard library.

Values. A :class:`Rule` says what a value may be (an integer, a finite number, a boolean, a word from
a list, a list of such) and its range. ``rule.check(value, name)`` returns the value or raises;
``rule`` itself is an ``argparse`` ``type=``, which parses the option's text first. TOML gives typed
values, and a boolean is never taken for a number (``epochs = true``), nor a number for a boolean
(``batch_norm = 1``), nor text for either (``batch_norm = "false"``).

>>> EPOCHS = integer(min=1)
>>> EPOCHS.check(3, "epochs")
3
>>> EPOCHS.check(True, "cfg.toml [train] epochs")
Traceback (most recent call last):
...
ltr.base.errors.LtrError: cfg.toml [train] epochs must be an integer >= 1, got true (a boolean)
>>> number(above=0)("nan")
Traceback (most recent call last):
...
argparse.ArgumentTypeError: must be a finite number > 0, got 'nan'

Paths. :func:`input_file` refuses, before anything opens it, a path that is missing, a folder, a FIFO
or device (opening a FIFO would wait forever for a writer) or unreadable; :func:`output_file` and
:func:`output_folder` refuse a destination under a file, a folder where a file is wanted (or the
reverse), a read-only place, and a destination that is one of the command's inputs; and
:func:`output_file` holds the overwrite rule: an existing file is replaced only with ``--force``,
and never an input.
:func:`describe_os_error` turns any :class:`OSError` left over (a disk filling up mid-write) into
the same kind of one-line message.
"""

from __future__ import annotations

import argparse
import errno
import math
import os
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Sequence

from ltr.base.errors import LtrError

__all__ = [
    "Rule", "integer", "number", "boolean", "text", "list_of", "table",
    "SEED", "COUNT", "check_table",
    "input_file", "input_folder", "output_file", "output_folder", "describe_os_error", "same_file",
    "read_json_object", "RUN_MARK",
]

# The file that marks a folder as made by ltr (a run folder, an output folder); see ltr.runs.folder.
RUN_MARK = ".ltr-run.json"


# --------------------------------------------------------------------------------------------------
# Values
# --------------------------------------------------------------------------------------------------
def _show(value: Any) -> str:
    if isinstance(value, bool):
        return f"{str(value).lower()} (a boolean)"
    if isinstance(value, str):
        return repr(value)
    if isinstance(value, (list, tuple)):
        return f"{list(value)!r} (a list)"
    if isinstance(value, dict):
        return "a table"
    text = repr(value)
    return text if len(text) <= 60 else text[:28] + "..." + text[-12:]


@dataclass(frozen=True)
class Rule:
    """What one value may be; see the module docstring. Build with :func:`integer`, :func:`number`..."""

    kind: str  # "int", "float", "bool", "str", "list", "table", "any" (checked elsewhere)
    min: float | None = None  # inclusive bounds
    max: float | None = None
    above: float | None = None  # exclusive bounds
    below: float | None = None
    choices: tuple | None = None
    optional: bool = False  # None is accepted
    item: "Rule | None" = None  # the rule of a list's items
    min_len: int = 0
    words: tuple[str, ...] = ()  # text values also accepted in place of a number (e.g. "auto")

    # ---------------------------------------------------------------- description
    def describe(self) -> str:
        """``"an integer >= 1"``, ``"a finite number in (0, 1)"``, ``"one of a, b"``..."""
        if self.words:
            return " or ".join([Rule(self.kind, self.min, self.max, self.above, self.below, self.choices, self.optional,
                                     self.item, self.min_len).describe()] + [repr(w) for w in self.words])
        if self.kind == "str" and self.choices:
            return "one of " + ", ".join(map(str, self.choices))
        noun = {"int": "an integer", "float": "a finite number", "bool": "true or false", "str": "text",
                "table": "a table"}.get(self.kind)
        if self.kind == "list":
            noun = f"a list of {self.item.describe() if self.item else 'values'}"
            if self.min_len:
                noun += f" (at least {self.min_len})"
            return noun
        low = (self.min, "[") if self.min is not None else (self.above, "(") if self.above is not None else None
        high = (self.max, "]") if self.max is not None else (self.below, ")") if self.below is not None else None
        if low and high:
            noun += f" in {low[1]}{_num(low[0])}, {_num(high[0])}{high[1]}"
        elif low:
            noun += f" {'>=' if low[1] == '[' else '>'} {_num(low[0])}"
        elif high:
            noun += f" {'<=' if high[1] == ']' else '<'} {_num(high[0])}"
        return noun

    def problem(self, value: Any) -> str | None:
        """Why ``value`` breaks the rule (``"must be ..., got ..."``), or None when it is fine."""
        if self.kind == "any":
            return None
        if value is None:
            return None if self.optional else f"must be {self.describe()}, got nothing"
        if self.words and isinstance(value, str) and value in self.words:
            return None
        wrong = f"must be {self.describe()}, got {_show(value)}"
        if self.kind == "bool":
            return None if isinstance(value, bool) else wrong
        if self.kind == "str":
            if not isinstance(value, str) or (self.choices and value not in self.choices):
                return wrong
            return None
        if self.kind == "table":
            return None if isinstance(value, dict) else wrong
        if self.kind == "list":
            if not isinstance(value, (list, tuple)) or len(value) < self.min_len:
                return wrong
            for i, v in enumerate(value):
                why = self.item.problem(v) if self.item else None
                if why:
                    return f"item {i + 1} {why}"
            return None
        if isinstance(value, bool) or not isinstance(value, (int, float)) and not _is_numpy_number(value):
            return wrong
        if self.kind == "int" and not (isinstance(value, int) or _is_numpy_int(value)):
            return wrong
        try:
            if not math.isfinite(float(value)):
                return wrong
        except OverflowError:  # an integer beyond any float
            if self.kind == "float":
                return wrong
        v = value
        if ((self.min is not None and v < self.min) or (self.max is not None and v > self.max)
                or (self.above is not None and v <= self.above) or (self.below is not None and v >= self.below)):
            return wrong
        return None

    # ---------------------------------------------------------------- use
    def check(self, value: Any, name: str) -> Any:
        """``value`` when it keeps the rule (ints stay ints, numbers become floats), else an LtrError."""
        why = self.problem(value)
        if why:
            raise LtrError(f"{name} {why}")
        if isinstance(value, str) and value in self.words:
            return value
        if value is not None and self.kind == "float":
            return float(value)
        if value is not None and self.kind == "int":
            return int(value)
        return value

    def __call__(self, text: str) -> Any:
        """argparse ``type=``: parse the option's text, then check it."""
        value: Any = text
        if text in self.words:
            return text
        if self.kind == "int":
            try:
                value = int(text)
            except ValueError:
                raise argparse.ArgumentTypeError(f"must be {self.describe()}, got {text!r}") from None
        elif self.kind == "float":
            try:
                value = float(text)
            except ValueError:
                raise argparse.ArgumentTypeError(f"must be {self.describe()}, got {text!r}") from None
        why = self.problem(value)
        if why:
            shown = repr(text) if len(text) <= 60 else repr(text[:28] + "..." + text[-12:])
            raise argparse.ArgumentTypeError(why.replace(f"got {_show(value)}", f"got {shown}"))
        return value

    @property
    def __name__(self) -> str:  # argparse names the type in some messages
        return self.describe()


def _num(x: float) -> str:
    return str(int(x)) if float(x).is_integer() and abs(x) < 1e16 else f"{x:g}"


def _is_numpy_number(value: Any) -> bool:
    kind = getattr(getattr(value, "dtype", None), "kind", None)
    return getattr(value, "ndim", None) == 0 and kind in ("i", "u", "f")


def _is_numpy_int(value: Any) -> bool:
    return getattr(value, "ndim", None) == 0 and getattr(getattr(value, "dtype", None), "kind", None) in ("i", "u")


def integer(*, min: int | None = None, max: int | None = None, optional: bool = False, words: Sequence[str] = ()) -> Rule:
    """An integer; ``words``: text values accepted instead (``integer(min=1, words=("auto",))``)."""
    return Rule("int", min=min, max=max, optional=optional, words=tuple(words))


def number(*, min: float | None = None, max: float | None = None, above: float | None = None,
           below: float | None = None, optional: bool = False) -> Rule:
    """A finite number (an integer is accepted too, a boolean never)."""
    return Rule("float", min=min, max=max, above=above, below=below, optional=optional)


def boolean(*, optional: bool = False) -> Rule:
    return Rule("bool", optional=optional)


def text(*, choices: Sequence[str] | None = None, optional: bool = False) -> Rule:
    return Rule("str", choices=None if choices is None else tuple(choices), optional=optional)


def list_of(item: Rule, *, min_len: int = 0, optional: bool = False) -> Rule:
    return Rule("list", item=item, min_len=min_len, optional=optional)


def table(*, optional: bool = False) -> Rule:
    return Rule("table", optional=optional)


# Seeds feed numpy's legacy generator (32 bits) as well as torch's and numpy's new ones.
SEED = integer(min=0, max=2**32 - 1)
COUNT = integer(min=1)


def check_table(values: dict, rules: dict[str, Rule], *, where: str) -> dict:
    """Check every key of a TOML table (or keyword dict) against ``rules``; return the checked values.

    An unknown key is refused with the allowed ones listed; a value is refused by its rule, with the
    message naming ``where`` and the key.

    >>> check_table({"epochs": 2}, {"epochs": COUNT}, where="run.toml [train]")
    {'epochs': 2}
    >>> check_table({"epoch": 2}, {"epochs": COUNT}, where="run.toml [train]")
    Traceback (most recent call last):
    ...
    ltr.base.errors.LtrError: run.toml [train]: unknown key 'epoch' (allowed: epochs)
    """
    out = {}
    for key, value in values.items():
        if key not in rules:
            raise LtrError(f"{where}: unknown key {key!r} (allowed: {', '.join(rules)})")
        out[key] = rules[key].check(value, f"{where} {key}")
    return out


# --------------------------------------------------------------------------------------------------
# Paths
# --------------------------------------------------------------------------------------------------
def _label(what: str | None, path: Path) -> str:
    return f"{what} {path}" if what else str(path)


def _first_existing(path: Path) -> tuple[Path, os.stat_result | None]:
    """The nearest ancestor of ``path`` (itself included) that exists, with its stat."""
    p = path
    while True:
        try:
            return p, os.stat(p)
        except FileNotFoundError:
            if p.parent == p:
                return p, None
            p = p.parent
        except NotADirectoryError:
            p = p.parent


def input_file(path: str | os.PathLike, what: str | None = None) -> Path:
    """``path`` if it is a readable regular file; else an LtrError saying what it is instead.

    ``what`` names the option (``"--train"``) or the role of the file in the message.
    """
    path = Path(os.path.expanduser(str(path)))
    who = _label(what, path)
    try:
        st = os.stat(path)
    except FileNotFoundError:
        anc, anc_st = _first_existing(path.parent)
        if anc_st is not None and not stat.S_ISDIR(anc_st.st_mode):
            raise LtrError(f"{who}: file not found ({anc} is a file, not a folder)") from None
        raise LtrError(f"{who}: file not found") from None
    except NotADirectoryError:
        anc, _ = _first_existing(path.parent)
        raise LtrError(f"{who}: file not found ({anc} is a file, not a folder)") from None
    except OSError as exc:
        raise LtrError(f"{who}: cannot be read ({exc.strerror or exc})") from None
    if stat.S_ISDIR(st.st_mode):
        raise LtrError(f"{who}: is a folder, not a file")
    if not stat.S_ISREG(st.st_mode):
        raise LtrError(f"{who}: is not a regular file (a FIFO, socket or device); give a file")
    try:
        with open(path, "rb"):
            pass
    except OSError as exc:
        raise LtrError(f"{who}: cannot be read ({exc.strerror or exc})") from None
    return path


def input_folder(path: str | os.PathLike, what: str | None = None) -> Path:
    """``path`` if it is an existing folder; else an LtrError."""
    path = Path(os.path.expanduser(str(path)))
    who = _label(what, path)
    try:
        st = os.stat(path)
    except (FileNotFoundError, NotADirectoryError):
        raise LtrError(f"{who}: folder not found") from None
    except OSError as exc:
        raise LtrError(f"{who}: cannot be read ({exc.strerror or exc})") from None
    if not stat.S_ISDIR(st.st_mode):
        raise LtrError(f"{who}: is a file, not a folder")
    return path


def read_json_object(path: str | os.PathLike, what: str | None = None) -> dict:
    """The JSON object (a dict) in a file; a missing, unreadable or malformed file is an LtrError."""
    import json

    path = input_file(path, what)
    who = _label(what, path)
    try:
        value = json.loads(path.read_bytes().decode("utf-8-sig"))
    except UnicodeDecodeError as exc:
        raise LtrError(f"{who}: not UTF-8 text (byte {exc.start})") from None
    except ValueError as exc:
        raise LtrError(f"{who}: invalid JSON: {exc}") from None
    if not isinstance(value, dict):
        raise LtrError(f"{who}: expected a JSON object {{...}}, found {type(value).__name__}")
    return value


def same_file(a: str | os.PathLike, b: str | os.PathLike) -> bool:
    """Whether two paths name the same existing file (hard links and symlinks included)."""
    try:
        return os.path.samefile(a, b)
    except OSError:
        return os.path.abspath(a) == os.path.abspath(b)


def _writable_place(path: Path, who: str) -> None:
    """Refuse a destination whose nearest existing ancestor is a file or cannot be written."""
    anc, anc_st = _first_existing(path.parent)
    if anc_st is None:
        raise LtrError(f"{who}: cannot be created (no existing folder above it)")
    if not stat.S_ISDIR(anc_st.st_mode):
        raise LtrError(f"{who}: cannot be created ({anc} is a file, not a folder)")
    if not os.access(anc, os.W_OK | os.X_OK):
        raise LtrError(f"{who}: cannot be created ({anc} is not writable)")


def output_file(path: str | os.PathLike, what: str | None = None, *,
                inputs: Iterable[tuple[str, Any]] = (), force: bool | None = None) -> Path:
    """``path`` if a file can be written there without harming anything; else an LtrError.

    The overwrite rule of every command that writes a file: an existing file is replaced only when
    the user says so (``force=True``, the command's ``--force``), because ltr cannot tell its own
    earlier output from the user's file of the same name; and never when it is one of ``inputs``
    (``(option, path)`` pairs; ``None`` paths are skipped), lies inside an input folder, or belongs
    to a folder ltr made (:data:`RUN_MARK`: an earlier run's record), whatever ``force`` says.
    ``force=None`` is a command without ``--force``: its refusal names another way out. Also refused:
    an existing folder or non-regular file at ``path``, an ancestor that is a file, a read-only folder.
    Each refusal's hint names a command line that works.
    """
    path = Path(os.path.expanduser(str(path)))
    who = _label(what, path)
    _refuse_inputs(path, who, inputs)
    try:
        st = os.stat(path)
    except (FileNotFoundError, NotADirectoryError):
        st = None
    if st is not None:
        if stat.S_ISDIR(st.st_mode):
            raise LtrError(f"{who}: is a folder; give a file name")
        if not stat.S_ISREG(st.st_mode):
            raise LtrError(f"{who}: exists and is not a regular file; give another file name")
        if (path.parent / RUN_MARK).is_file():
            raise LtrError(f"{who}: is an output of an earlier ltr run (its folder holds {RUN_MARK}); give another file name")
        if not force:
            how = ("give another file name, or pass --force to replace it" if force is False
                   else "give another file name, or move the old file away first")
            raise LtrError(f"{who}: already exists (ltr replaces a file only when told to); {how}")
    _writable_place(path, who)
    return path


def output_folder(path: str | os.PathLike, what: str | None = None, *,
                  inputs: Iterable[tuple[str, Any]] = ()) -> Path:
    """``path`` if a folder can be made (or filled) there; else an LtrError.

    Refused: an existing file at ``path``, an ancestor that is a file, a read-only place, the current
    folder or one above it, a folder holding one of ``inputs``, and a folder inside an input folder.
    """
    path = Path(os.path.expanduser(str(path)))
    who = _label(what, path)
    try:
        st = os.stat(path)
    except (FileNotFoundError, NotADirectoryError):
        st = None
    if st is not None and not stat.S_ISDIR(st.st_mode):
        raise LtrError(f"{who}: exists and is not a folder")
    cwd = Path.cwd().resolve()
    target = path.resolve()
    if target == cwd or target in cwd.parents:
        raise LtrError(f"{who}: is the current folder or one above it; give a new folder for the outputs")
    for option, p in inputs:
        if p is not None and _inside(Path(p), target):
            raise LtrError(f"{who}: holds the input {option} {p}; give a new folder for the outputs")
        if p is not None and os.path.isdir(p) and _inside(target, Path(p).expanduser().resolve()):
            # nothing new inside an input folder (a Parquet data set, a store, a model folder)
            raise LtrError(f"{who}: is inside the input folder {option} {p}; write it outside that folder")
    if st is None:
        _writable_place(path / "x", who)
    elif not os.access(path, os.W_OK | os.X_OK):
        raise LtrError(f"{who}: is not writable")
    return path


def _inside(p: Path, folder: Path) -> bool:
    try:
        rp = p.expanduser().resolve()
    except OSError:
        return False
    return rp == folder or folder in rp.parents


def _refuse_inputs(path: Path, who: str, inputs: Iterable[tuple[str, Any]]) -> None:
    for option, p in inputs:
        if p is None or not os.path.exists(p):
            continue
        if same_file(path, p):
            raise LtrError(f"{who}: is the input {option}; writing there would destroy it, give another name")
        if os.path.isdir(p) and _inside(path, Path(p).resolve()):
            if path.exists():
                raise LtrError(f"{who}: is a file of the input {option} {p}; writing there would destroy it, give another name")
            anc, anc_st = _first_existing(path.parent)
            if anc_st is not None and not stat.S_ISDIR(anc_st.st_mode):  # the more precise refusal first
                raise LtrError(f"{who}: cannot be created ({anc} is a file, not a folder)")
            # a new file would change the input folder (a model or store folder, a Parquet data set)
            raise LtrError(f"{who}: is inside the input folder {option} {p}; write it outside that folder")


_ERRNO_WORDS = {
    errno.ENOSPC: "no space left on the device",
    errno.EDQUOT: "disk quota exceeded",
    errno.EROFS: "read-only file system",
    errno.EACCES: "permission denied",
    errno.EPERM: "operation not permitted",
    errno.ENOENT: "no such file or folder",
    errno.EISDIR: "is a folder",
    errno.ENOTDIR: "a part of the path is a file, not a folder",
    errno.EEXIST: "already exists",
    errno.EFBIG: "file too large (beyond the file-size limit of this process or file system)",
}


def describe_os_error(exc: OSError) -> str:
    """One line for an :class:`OSError`: the path(s), what went wrong, and that nothing was replaced.

    >>> describe_os_error(OSError(28, "No space left on device", "runs/x/model.pt"))
    'runs/x/model.pt: no space left on the device (nothing finished was replaced; free some space and run again)'
    """
    words = _ERRNO_WORDS.get(exc.errno or -1, exc.strerror or str(exc))
    where = " -> ".join(str(f) for f in (exc.filename, exc.filename2) if f is not None)
    hint = ""
    if exc.errno in (errno.ENOSPC, errno.EDQUOT):
        hint = " (nothing finished was replaced; free some space and run again)"
    elif exc.errno == errno.EFBIG:
        hint = " (nothing finished was replaced; raise the limit, ulimit -f, and run again)"
    elif exc.errno in (errno.EROFS, errno.EACCES, errno.EPERM):
        hint = " (choose a writable place for the outputs, or check the input's permissions)"
    return f"{where}: {words}{hint}" if where else f"{words}{hint}"
