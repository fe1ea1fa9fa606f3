"""A fast CSV writer for tables of per-job results: the same bytes as ``DataFrame.to_csv(index=False)``.

``pandas.DataFrame.to_csv`` spends most of its time passing every cell through Python's csv module.
`write_csv` formats whole columns at once with numpy and joins the lines in C, reproducing pandas'
rules exactly (pandas 2.x/3.x, default options):

* floats: numpy's shortest round-trip text (``values.astype(str)``: ``1.0``, ``0.1``, ``1e+20``,
  ``inf``), NaN as an empty field; float32 columns keep their own shortest text;
* integers as decimal, booleans as ``True``/``False``;
* anything else (strings, mixed objects) through ``str``, missing values (None, NaN) empty;
  a field is quoted (``"..."``, quotes doubled) when it holds a comma, a quote or a line break
  (csv.QUOTE_MINIMAL), header names alike;
* lines end with ``os.linesep``; the file is UTF-8.

A column type it does not know (categoricals, datetimes, extension arrays...) makes it fall back to
``DataFrame.to_csv`` for the whole table, so the output is always pandas' output.
"""
from __future__ import annotations

import math
import os
from pathlib import Path
from typing import Any

import numpy as np

_SPECIAL = (",", '"', "\n")


def _quote(s: str) -> str:
    if "," in s or '"' in s or "\n" in s:
        return '"' + s.replace('"', '""') + '"'
    return s


def _all_str(values: list) -> bool:
    """Every value is exactly a ``str`` (a subclass is not), checked at C speed."""
    return not values or set(map(type, values)) == {str}


class _Unsupported(Exception):
    pass


def _integral_texts(a: np.ndarray) -> list[str] | None:
    """A float64 column whose values are all whole numbers below 1e16 in magnitude (or NaN), as
    ``repr`` writes them (``"12.0"``; NaN empty), from the integers' text (about 25 % faster than
    ``float.__repr__``); None when a value is fractional, infinite, >= 1e16 (``repr`` switches to an
    exponent there) or -0.0 (``"-0.0"``)."""
    nan = np.isnan(a)
    has_nan = bool(nan.any())
    b = np.where(nan, 0.0, a) if has_nan else a
    if not ((np.abs(b) < 1e16).all() and (b == np.trunc(b)).all()) or (np.signbit(b) & (b == 0)).any():
        return None
    out = list(map("{}.0".format, b.astype(np.int64).tolist()))
    if has_nan:
        for i in np.flatnonzero(nan).tolist():
            out[i] = ""
    return out


def _column_texts(values: Any) -> list[str]:
    """One column as the fields pandas writes."""
    a = np.asarray(values)
    kind = a.dtype.kind
    if kind == "f":
        if a.dtype == np.float64:
            ints = _integral_texts(a)
            if ints is not None:
                return ints
            # Python's repr is numpy's shortest round-trip text for float64 (same digits and
            # exponent rules), and much faster than astype(str)
            out = list(map(float.__repr__, a.tolist()))
            nan = np.flatnonzero(np.isnan(a))
            for i in nan.tolist():
                out[i] = ""
            return out
        out = a.astype(str).astype(object)
        out[np.isnan(a)] = ""
        return out.tolist()
    if kind in "iu":
        return list(map(str, a.tolist()))
    if kind == "b":
        return list(map(str, a.tolist()))
    if kind in "OU":
        vals = a.tolist()
        if _all_str(vals):
            joined = "\x00".join(vals)
            if "\r" in joined:
                raise _Unsupported("carriage return")
            if "," not in joined and '"' not in joined and "\n" not in joined:
                return vals
            if '"' not in joined and "\n" not in joined:      # commas only: quote the fields holding one
                return ['"' + v + '"' if "," in v else v for v in vals]
            return [_quote(v) for v in vals]
        out = []
        for v in vals:
            if v is None or (isinstance(v, float) and math.isnan(v)):
                out.append("")
            elif isinstance(v, str):
                if "\r" in v:
                    raise _Unsupported("carriage return")
                out.append(_quote(v))
            elif isinstance(v, (bool, int, float, np.generic)) and not isinstance(v, np.datetime64):
                out.append(_quote(str(v)))
            else:
                raise _Unsupported(type(v).__name__)
        return out
    raise _Unsupported(str(a.dtype))


#: rows formatted at a time: the cells of a chunk exist as Python strings only while it is written
#: (a 448k-row table would otherwise hold ~7 M strings, ~400 MB, at once)
CHUNK_ROWS = 4096


def _frame_arrays(df) -> tuple[list[str], list[np.ndarray]]:
    if df.columns.nlevels != 1 or len(df.columns) == 0:
        raise _Unsupported("no or multi-level columns")
    arrays = []
    for name in df.columns:
        s = df[name]
        if isinstance(s.dtype, np.dtype):
            if s.dtype.kind not in "fiubOU":
                raise _Unsupported(str(s.dtype))
            arrays.append(s.to_numpy())
        elif str(s.dtype) in ("str", "string"):       # pandas' string dtypes: missing values empty
            arrays.append(s.to_numpy(dtype=object))
        else:
            raise _Unsupported(str(s.dtype))
    return [str(c) for c in df.columns], arrays


def _chunks(names: list[str], arrays: list[np.ndarray], nrows: int) -> list[bytes]:
    """The file as encoded chunks (header, then CHUNK_ROWS rows at a time)."""
    nl = os.linesep
    if any("\r" in c for c in names):
        raise _Unsupported("carriage return")
    header = '""' if len(names) == 1 and names[0] == "" else ",".join(_quote(c) for c in names)
    out = [(header + nl).encode("utf-8")]
    for lo in range(0, nrows, CHUNK_ROWS):
        if len(arrays) == 1:
            # csv quotes a lone empty field so the line is not blank
            body = nl.join('""' if v == "" else v for v in _column_texts(arrays[0][lo:lo + CHUNK_ROWS]))
        else:
            specs, values = zip(*(_column_field(a[lo:lo + CHUNK_ROWS]) for a in arrays))
            body = nl.join(map(",".join(specs).__mod__, zip(*values)))   # one C-level format a row
        out.append((body + nl).encode("utf-8"))
    return out


def _column_field(a: np.ndarray) -> tuple[str, list]:
    """A column as a %-format field and its values: integers as ``%d`` (``str(int)``), float64 without
    NaN as ``%d.0`` of their integers when all are whole (`_integral_texts`' rule) else ``%r``
    (``float.__repr__``), anything else as the texts of `_column_texts` (``%s``)."""
    kind = a.dtype.kind
    if kind in "iu":
        return "%d", a.tolist()
    if a.dtype == np.float64 and not np.isnan(a).any():
        if (np.abs(a) < 1e16).all() and (a == np.trunc(a)).all() and not (np.signbit(a) & (a == 0)).any():
            return "%d.0", a.astype(np.int64).tolist()
        return "%r", a.tolist()
    return "%s", _column_texts(a)


def csv_bytes(df) -> bytes:
    """The bytes ``df.to_csv(index=False)`` writes (``df``: a pandas DataFrame)."""
    try:
        return b"".join(_chunks(*_frame_arrays(df), len(df)))
    except _Unsupported:
        return df.to_csv(index=False).encode("utf-8")


def columns_csv_bytes(columns: dict[str, Any]) -> bytes:
    """The same bytes for a table given as ``{name: 1-D array or list}`` (equal lengths), without
    pandas: what ``pandas.DataFrame(columns).to_csv(index=False)`` writes for numeric, bool and
    string/object columns. Raises ValueError for other column types or unequal lengths."""
    return b"".join(_column_chunks(columns))


def _column_chunks(columns: dict[str, Any]):
    """The CSV text chunks of a ``{name: column}`` table (header first); ValueError for no columns,
    unequal lengths or a column type `_chunks` does not write."""
    if not columns:
        raise ValueError("a CSV table needs at least one column")
    names = [str(c) for c in columns]
    arrays = [np.asarray(v) if not isinstance(v, list) else np.array(v, dtype=object) for v in columns.values()]
    lengths = {len(a) for a in arrays}
    if len(lengths) != 1:
        raise ValueError(f"columns have different lengths: {sorted(lengths)}")
    try:
        return _chunks(names, arrays, lengths.pop())
    except _Unsupported as e:
        raise ValueError(f"no CSV text for a column of type {e}") from None


def plain_columns(columns: dict[str, Any]) -> bool:
    """True when every column is one `columns_csv_bytes` writes exactly as pandas would after its own
    type inference: a numpy array of numbers, booleans or fixed-width text, an object array or list
    of ``str`` only, or a list of Python ``int`` only (pandas makes it int64). A list holding None,
    floats or mixed types (pandas may infer float64 and write ``1.0`` for ``1``) is not plain."""
    for v in columns.values():
        if isinstance(v, np.ndarray):
            if v.ndim != 1:
                return False
            if v.dtype.kind in "fiubU":
                continue
            if v.dtype.kind == "O" and _all_str(v.tolist()):
                continue
            return False
        if isinstance(v, list):
            if _all_str(v):
                continue
            if all(type(x) is int for x in v) and all(-2 ** 63 <= x < 2 ** 63 for x in v):
                continue
        return False
    return True


def write_columns_csv(columns: dict[str, Any], path: str | Path) -> None:
    """Write a ``{name: column}`` table (equal lengths) to ``path`` with the bytes of
    ``pandas.DataFrame(columns).to_csv(path, index=False)``, chunk by chunk (see `columns_csv_bytes`)."""
    chunks = _column_chunks(columns)
    with open(path, "wb") as f:
        f.writelines(chunks)


def write_csv(df, path: str | Path) -> None:
    """Write ``df`` to ``path`` with exactly the bytes of ``df.to_csv(path, index=False)``."""
    try:
        chunks = _chunks(*_frame_arrays(df), len(df))
    except _Unsupported:
        chunks = [df.to_csv(index=False).encode("utf-8")]
    with open(path, "wb") as f:
        f.writelines(chunks)
