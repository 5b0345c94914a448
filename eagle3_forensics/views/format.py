"""How a person reads a value: one set of rules for the notebooks, the widgets and the HTML reports.

Pure functions (pandas imported lazily, only by the table helpers); no computation beyond formatting.

Conventions (docs/notebooks.md, "How values read"):

* acceptance length: 2 decimals (``3.10``); acceptance rates, per-position acceptance and other
  fractions in [0, 1]: 3 decimals (``0.873``), never a percentage; shares of a corpus or vocabulary
  stay percentages (:func:`percent`, ``87.3%``) as the coverage tables always showed them;
* speeds with their unit (``297.6 tok/s``); ratios with ``×`` (``0.66×``); other floats 3 significant
  decimals; integers as they are; booleans ``yes`` / ``no``;
* a missing value is ``–``, with the reason when one is known (``– (no target)``): never ``None``,
  ``NaN`` or ``nan``;
* tokens readable: a lone byte is ``<0xCF>`` (SentencePiece's spelling, also for byte-level BPE
  pieces that are not UTF-8 on their own), a leading/trailing space ``␣``, newline and tab ``\\n``
  ``\\t``, other control or invisible characters ``<U+200B>``; in tables the raw id goes beside it.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from numbers import Integral, Real
from typing import TYPE_CHECKING, Any

from eagle3_forensics.vocab.byte_level import byte_decoder

if TYPE_CHECKING:  # pragma: no cover - typing only
    import pandas as pd

MISSING = "–"  # en dash
SPACE = "␣"
_BYTE_ESCAPE = re.compile(r"\\x([0-9a-fA-F]{2})")
_SP_BYTE = re.compile(r"<0x([0-9A-Fa-f]{2})>")


# -- missing values ----------------------------------------------------------------------------


def is_missing(v: Any) -> bool:
    """None, float NaN, numpy NaN / NaT and pandas' NA all count as missing."""
    if v is None:
        return True
    if isinstance(v, float | Real) and not isinstance(v, Integral):
        try:
            return math.isnan(float(v))
        except (TypeError, ValueError):
            return False
    return type(v).__name__ in ("NAType", "NaTType")


def missing(reason: str | None = None) -> str:
    """``–``, or ``– (reason)``."""
    return f"{MISSING} ({reason})" if reason else MISSING


# -- numbers -----------------------------------------------------------------------------------


def number(x: Any, nd: int = 3, reason: str | None = None) -> str:
    """A float to ``nd`` decimals; an int as is; missing -> ``–`` (with ``reason``)."""
    if is_missing(x):
        return missing(reason)
    if isinstance(x, bool):
        return yes_no(x)
    if isinstance(x, Integral):
        return str(int(x))
    try:
        return f"{float(x):.{nd}f}"
    except (TypeError, ValueError):
        return str(x)


def acceptance_length(x: Any, reason: str | None = None) -> str:
    """Acceptance length (mean tokens per verify step, bonus included): ``3.10``."""
    return number(x, 2, reason)


def rate(x: Any, reason: str | None = None) -> str:
    """An acceptance rate or another fraction in [0, 1]: ``0.873``."""
    return number(x, 3, reason)


def percent(x: Any, nd: int = 1, reason: str | None = None) -> str:
    """A share of a corpus or vocabulary: ``87.3%``."""
    if is_missing(x):
        return missing(reason)
    return f"{float(x):.{nd}%}"


def speed(x: Any, reason: str | None = None) -> str:
    """Tokens per second: ``297.6 tok/s``."""
    if is_missing(x):
        return missing(reason)
    return f"{float(x):.1f} tok/s"


def ratio(x: Any, reason: str | None = None) -> str:
    """A speedup or another ratio: ``0.66×``."""
    if is_missing(x):
        return missing(reason)
    return f"{float(x):.2f}×"


def yes_no(x: Any, reason: str | None = None) -> str:
    if is_missing(x):
        return missing(reason)
    return "yes" if x else "no"


def value(v: Any) -> str:
    """Any cell value as text: missing -> ``–``, bool -> yes/no, float -> 3 decimals, lists joined."""
    if is_missing(v):
        return MISSING
    if isinstance(v, bool) or (type(v).__module__ == "numpy" and type(v).__name__ in ("bool", "bool_")):
        return yes_no(bool(v))
    if isinstance(v, Integral):
        return str(int(v))
    if isinstance(v, Real):
        x = float(v)
        return f"{x:.2g}" if 0 < abs(x) < 0.001 else number(x)  # a tiny share keeps its digits
    if isinstance(v, str):
        return readable(v)
    if isinstance(v, Mapping):
        return ", ".join(f"{readable(str(k))}={value(x)}" for k, x in v.items()) or MISSING
    if isinstance(v, list | tuple | set | frozenset):
        return ", ".join(value(x) for x in v) if v else MISSING
    return readable(str(v))


# -- strings and tokens ------------------------------------------------------------------------


def _invisible(ch: str) -> bool:
    return not ch.isprintable() and ch != " "


def readable(text: str) -> str:
    """A string with control and invisible characters spelled out (``\\n``, ``\\t``, ``<0x07>``,
    ``<U+200B>``), so no hidden or reordered text shows; everything else as written."""
    if text.isprintable():
        return text
    return "".join(_spell(ch) if _invisible(ch) else ch for ch in text)


def _bytes_readable(text: str) -> str:
    """:func:`readable`, plus every byte escape ``\\xNN`` (a lone byte) as ``<0xNN>``."""
    return readable(_BYTE_ESCAPE.sub(lambda m: f"<0x{m.group(1).upper()}>", text))


def _spell(ch: str) -> str:
    if ch == "\n":
        return "\\n"
    if ch == "\t":
        return "\\t"
    if ch == "\r":
        return "\\r"
    code = ord(ch)
    if code < 0x20 or code == 0x7F:
        return f"<0x{code:02X}>"
    return f"<U+{code:04X}>"


def byte_level_text(piece: str) -> str | None:
    """A GPT-2/BPE byte-level vocabulary piece (``Ġthe``) as the bytes it stands for, decoded, with
    bytes that are not UTF-8 on their own as ``\\xNN``; ``None`` when ``piece`` is not byte-level."""
    dec = byte_decoder()
    if not piece or not all(ch in dec for ch in piece):
        return None
    raw = bytes(dec[ch] for ch in piece)
    return raw.decode("utf-8", errors="backslashreplace")


def token(text: Any, byte_level: bool = False, reason: str | None = None) -> str:
    """A token's text as a reader sees it: ``␣the``, ``<0xCF>``, ``\\n``, ``<U+200B>``.

    ``text`` is the decoded text (``\\xNN`` for a lone byte, as :class:`~eagle3_forensics.vocab.coverage.TokenTable`
    spells it), a SentencePiece piece (``<0xCF>``, ``▁the``) or, with ``byte_level``, a byte-level
    BPE piece (``Ġthe``, ``Ï``), mapped back to its bytes first. Missing -> ``–`` (``reason``).
    """
    if is_missing(text):
        return missing(reason)
    s = str(text)
    if _SP_BYTE.fullmatch(s):
        return f"<0x{s[3:5].upper()}>"
    if byte_level:
        s = byte_level_text(s) or s
    s = s.replace("▁", " ")
    if s == "":
        return missing("empty")
    lead = len(s) - len(s.lstrip(" "))
    trail = len(s) - len(s.rstrip(" ")) if s.strip(" ") else 0
    core = s[lead : len(s) - trail] if trail else s[lead:]
    return SPACE * lead + _bytes_readable(core) + SPACE * trail


def token_with_id(text: Any, token_id: int, byte_level: bool = False) -> str:
    """``␣the (#262)``: the readable token with its raw id, for lines of text."""
    return f"{token(text, byte_level)} (#{int(token_id)})"


def out_of_range(vocab: int | None) -> str:
    """What a cell says for an id beyond the vocabulary: ``out of range (vocab 512)``."""
    return f"out of range (vocab {vocab})" if vocab is not None else "out of range"


# -- small tables ------------------------------------------------------------------------------


def flags_table(
    flags: Mapping[str, Any] | None, columns: tuple[str, str] = ("flag", "value")
) -> pd.DataFrame:
    """A dict of flags (e.g. a drafter view's norm flags) as a two-column table, one row per flag."""
    import pandas as pd  # optional: pandas

    rows = [(readable(str(k)), value(v)) for k, v in (flags or {}).items()]
    return pd.DataFrame(rows, columns=list(columns))


def flags_text(flags: Mapping[str, Any] | None) -> str:
    """The same flags on one line: ``norm_before_fc yes · final_norm no`` (``–`` when empty)."""
    if not flags:
        return MISSING
    return " · ".join(f"{readable(str(k))} {value(v)}" for k, v in flags.items())


def index_means_something(df: pd.DataFrame) -> bool:
    """Whether a frame's index carries information: named, or not the default 0..n-1 range."""
    import pandas as pd  # optional: pandas

    idx = df.index
    if any(name is not None for name in idx.names):
        return True
    if isinstance(idx, pd.RangeIndex):
        return not (idx.start == 0 and idx.step == 1)
    return not (idx.dtype.kind in "iu" and list(idx) == list(range(len(idx))))


def tidy(df: pd.DataFrame) -> pd.DataFrame:
    """``df`` ready for a reader: the index a column only when it means something, every cell text
    formatted by :func:`value` (so ``None``/``NaN`` -> ``–``, floats to 3 decimals, invisible
    characters spelled out); a column of ints that a missing value turned into floats shows ints."""
    import pandas as pd  # optional: pandas

    out = df.reset_index() if index_means_something(df) else df.reset_index(drop=True)
    out.columns = [value(c) if not isinstance(c, str) else readable(c) for c in out.columns]
    cols = []
    for name in range(out.shape[1]):
        col = out.iloc[:, name]
        present = col.dropna()
        if col.dtype.kind == "f" and len(present) < len(col) and (present == present.round()).all():
            # ints that a missing value turned into floats: shown as ints again
            cols.append(col.astype(object).map(lambda x: value(x if is_missing(x) else int(x))))
        else:
            cols.append(col.astype(object).map(value))
    return pd.concat(cols, axis=1) if cols else out.astype(object)
