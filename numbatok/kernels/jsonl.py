"""JSON Lines: each line's text field as UTF-8 bytes, parsed by a kernel on every CPU thread, for the
`preprocess` and `encode` commands.

The parser is strict RFC 8259 and takes a line only when it is sure `json.loads` would give the
same: an object whose field (at the top level, once) is a string, keys without escapes, at most
64 levels of nesting, numbers under 4,000 characters, valid UTF-8 throughout. Every other line
is marked FALLBACK and `documents` hands it to `json.loads`, which either accepts it (NaN, an
escaped key, a repeated field) or names what is wrong with it. So the kernel never decides
anything the Python parser would decide differently; it only takes the common case off it.

Two passes over the same lines, as every variable-length stage here: `record` finds the field's
raw string and its decoded length, the lengths are scanned to offsets, `write_lines` writes. The
per-line helpers allocate nothing, so a CUDA kernel (a thread per line) can call them as well.
"""
import json

import numpy as np

from .._numba import cpu_kernel, jitable, prange, readonly_view
from .lines import equal_bytes, lines, load8
from .utf8 import encode, encoded_len

OK, BLANK, FALLBACK = 0, 1, 2
MAX_DEPTH = 64
MAX_NUMBER = 4000  # Python refuses integers of over 4,300 digits (int_max_str_digits)

_KEY, _KEY_OR_END, _VALUE, _VALUE_OR_END, _AFTER = 0, 1, 2, 3, 4


@jitable
def _ws(buf, i, b):
    while i < b:
        c = buf[i]
        if c != 32 and c != 10 and c != 13 and c != 9:
            break
        i += 1
    return i


@jitable
def _hex4(buf, i, b):
    """The value of 4 hex digits at buf[i:], or -1."""
    if i + 4 > b:
        return -1
    v = 0
    for q in range(4):
        c = np.int64(buf[i + q])
        if 48 <= c <= 57:
            d = c - 48
        elif 97 <= c <= 102:
            d = c - 87
        elif 65 <= c <= 70:
            d = c - 55
        else:
            return -1
        v = v * 16 + d
    return v


@jitable
def _utf8_len(buf, i, b):
    """Length of the well-formed UTF-8 character at buf[i] (a byte >= 0x80), or 0: invalid, overlong,
    cut short, past U+10FFFF or an encoded surrogate (which Python decodes, then cannot re-encode)."""
    c = buf[i]
    if c < 0xC2:
        return 0
    n = 2 if c < 0xE0 else (3 if c < 0xF0 else (4 if c < 0xF5 else 0))
    if n == 0 or i + n > b:
        return 0
    c1 = buf[i + 1]
    if (c1 & 0xC0) != 0x80 or (c == 0xE0 and c1 < 0xA0) or (c == 0xED and c1 >= 0xA0) or \
            (c == 0xF0 and c1 < 0x90) or (c == 0xF4 and c1 >= 0x90):
        return 0
    for q in range(2, n):
        if (buf[i + q] & 0xC0) != 0x80:
            return 0
    return n


@jitable
def _first_marked(m):
    """Index of the lowest byte of m (not 0) whose 0x80 bit is set: the lowest set bit, isolated, is
    1 << (8k + 7), and the multiply moves byte 7 - k of the constant, which holds k, to the top.
    (Numba's trailing-zeros intrinsic has no CUDA lowering; this is a few instructions on both.)"""
    low = m & (~m + np.uint64(1))
    return np.int64(((low >> np.uint64(7)) * np.uint64(0x0001020304050607)) >> np.uint64(56))


@jitable
def _plain8(buf, j):
    """How many of buf[j:j + 8] come before the first byte that is a quote, a backslash, a control
    character or non-ASCII: 8 bytes classified with word-wide operations (prose is long plain runs)."""
    v = load8(buf, j)
    control = ~((v & np.uint64(0x7F7F7F7F7F7F7F7F)) + np.uint64(0x6060606060606060))  # (no carry: < 0xE0)
    special = (control | v | equal_bytes(v, 34) | equal_bytes(v, 92)) & np.uint64(0x8080808080808080)
    if special == 0:
        return 8
    return _first_marked(special)


@jitable
def _string(buf, i, b):
    """The JSON string opening at buf[i]: (index of its closing quote, decoded UTF-8 length, holds an
    escape), or (-1, 0, False) for anything this parser leaves to Python."""
    j = i + 1
    n = 0
    esc = False
    while j < b:
        if j + 8 <= b:
            t = _plain8(buf, j)
            j += t
            n += t
            if t == 8:
                continue
        c = buf[j]
        if c == 34:
            return j, n, esc
        if c == 92:
            esc = True
            if j + 1 >= b:
                break
            e = buf[j + 1]
            if e == 117:  # \uXXXX, a surrogate pair as two of them
                v = _hex4(buf, j + 2, b)
                j += 6
                if 0xD800 <= v < 0xDC00:
                    if j + 1 < b and buf[j] == 92 and buf[j + 1] == 117:
                        w = _hex4(buf, j + 2, b)
                        if 0xDC00 <= w < 0xE000:
                            j += 6
                            n += 4
                            continue
                    break  # a lone surrogate
                if v < 0 or 0xDC00 <= v < 0xE000:
                    break
                n += encoded_len(v)
                continue
            if e == 34 or e == 92 or e == 47 or e == 98 or e == 102 or e == 110 or e == 114 or e == 116:
                n += 1
                j += 2
                continue
            break
        if c < 32:
            break  # a raw control character
        if c < 128:
            n += 1
            j += 1
            continue
        k = _utf8_len(buf, j, b)
        if k == 0:
            break
        n += k
        j += k
    return np.int64(-1), np.int64(0), False


@jitable
def _digits(buf, j, b):
    """End of the run of ASCII digits at buf[j:b]."""
    while j < b and 48 <= buf[j] <= 57:
        j += 1
    return j


@jitable
def _number(buf, i, b):
    """End of the JSON number starting at buf[i], or -1."""
    j = i
    if buf[j] == 45:
        j += 1
    if j >= b:
        return -1
    c = buf[j]
    if c == 48:
        j += 1
    elif 49 <= c <= 57:
        j = _digits(buf, j, b)
    else:
        return -1
    if j < b and buf[j] == 46:
        d = _digits(buf, j + 1, b)
        if d == j + 1:
            return -1
        j = d
    if j < b and (buf[j] == 101 or buf[j] == 69):
        j += 1
        if j < b and (buf[j] == 43 or buf[j] == 45):
            j += 1
        d = _digits(buf, j, b)
        if d == j:
            return -1
        j = d
    if j - i > MAX_NUMBER:
        return -1
    return j


@jitable
def _literal(buf, i, b, c):
    """End of true / false / null at buf[i] (first byte c), or -1."""
    if c == 116 and i + 4 <= b and buf[i + 1] == 114 and buf[i + 2] == 117 and buf[i + 3] == 101:
        return i + 4
    if c == 110 and i + 4 <= b and buf[i + 1] == 117 and buf[i + 2] == 108 and buf[i + 3] == 108:
        return i + 4
    if c == 102 and i + 5 <= b and buf[i + 1] == 97 and buf[i + 2] == 108 and buf[i + 3] == 115 and \
            buf[i + 4] == 101:
        return i + 5
    return -1


@jitable
def record(buf, a, b, key):
    """Line buf[a:b] (no newline): (status, s, e, n): OK with the field's string between the quotes at
    buf[s:e] and its decoded length n; BLANK (only bytes that `bytes.strip` removes); or FALLBACK."""
    fail = (FALLBACK, np.int64(0), np.int64(0), np.int64(0))
    i = a
    while i < b and (buf[i] == 32 or 9 <= buf[i] <= 13):
        i += 1
    if i == b:
        return BLANK, np.int64(0), np.int64(0), np.int64(0)
    i = _ws(buf, a, b)
    if buf[i] != 123:
        return fail
    stack = np.uint64(1)  # one bit per open container, 1 = object; the innermost is bit 0
    depth = 1
    state = _KEY_OR_END
    i += 1
    is_field = False
    fs = np.int64(-1)
    fe = np.int64(0)
    fn = np.int64(0)
    while depth > 0:
        i = _ws(buf, i, b)
        if i >= b:
            return fail
        c = buf[i]
        close = False
        if state == _KEY or state == _KEY_OR_END:
            if c == 125 and state == _KEY_OR_END:
                close = True
            elif c == 34:
                j, n, esc = _string(buf, i, b)
                if j < 0 or esc:
                    return fail
                is_field = depth == 1 and j - i - 1 == key.shape[0]
                if is_field:
                    for q in range(key.shape[0]):
                        if buf[i + 1 + q] != key[q]:
                            is_field = False
                            break
                i = _ws(buf, j + 1, b)
                if i >= b or buf[i] != 58:
                    return fail
                i += 1
                state = _VALUE
                continue
            else:
                return fail
        elif state == _VALUE or state == _VALUE_OR_END:
            if c == 93 and state == _VALUE_OR_END:
                close = True
            elif c == 34:
                j, n, esc = _string(buf, i, b)
                if j < 0:
                    return fail
                if is_field:
                    if fs >= 0:
                        return fail  # the field twice: Python keeps the last
                    fs, fe, fn = i + 1, j, n
                i = j + 1
                state = _AFTER
                continue
            elif is_field:
                return fail  # not a string: Python names the type
            elif c == 123 or c == 91:
                if depth == MAX_DEPTH:
                    return fail
                stack = (stack << np.uint64(1)) | np.uint64(c == 123)
                depth += 1
                state = _KEY_OR_END if c == 123 else _VALUE_OR_END
                i += 1
                continue
            else:
                j = _number(buf, i, b) if c == 45 or 48 <= c <= 57 else _literal(buf, i, b, c)
                if j < 0:
                    return fail
                i = j
                state = _AFTER
                continue
        else:
            obj = (stack & np.uint64(1)) != 0
            if c == 44:
                state = _KEY if obj else _VALUE
                is_field = False
                i += 1
                continue
            if (c == 125 and obj) or (c == 93 and not obj):
                close = True
            else:
                return fail
        if close:
            stack >>= np.uint64(1)
            depth -= 1
            state = _AFTER
            i += 1
    if _ws(buf, i, b) != b or fs < 0:
        return fail
    return OK, fs, fe, fn


@jitable
def next_escape(buf, j, e):
    """The first backslash in buf[j:e], or e: 8 bytes at a time."""
    while j + 8 <= e:
        hit = equal_bytes(load8(buf, j), 92)
        if hit != 0:
            return j + _first_marked(hit)
        j += 8
    while j < e and buf[j] != 92:
        j += 1
    return j


@jitable
def escape(buf, j, e, out, o):
    """Writes what the escape at buf[j] (checked by `record`) stands for, as UTF-8, at out[o:]: (next j,
    next o)."""
    x = buf[j + 1]
    if x == 117:
        v = _hex4(buf, j + 2, e)
        j += 6
        if 0xD800 <= v < 0xDC00:
            v = 0x10000 + ((v - 0xD800) << 10) + (_hex4(buf, j + 2, e) - 0xDC00)
            j += 6
        return j, o + encode(out, o, v)
    out[o] = 8 if x == 98 else (12 if x == 102 else (10 if x == 110 else (13 if x == 114 else (
        9 if x == 116 else x))))
    return j + 2, o + 1


@cpu_kernel(parallel=True)
def scan_lines(buf, starts, ends, key, status, fs, fe, fn):
    """One thread's share of the lines: each line's status, field string and decoded length."""
    for r in prange(starts.shape[0]):
        status[r], fs[r], fe[r], fn[r] = record(buf, starts[r], ends[r], key)


@cpu_kernel(parallel=True)
def write_lines(buf, fs, fe, fn, rows, off, out):
    """Row k of the output: line rows[k]'s field, decoded at out[off[k]:] (one copy when it holds no
    escape: every escape is longer than what it stands for)."""
    for k in prange(rows.shape[0]):
        r = rows[k]
        j, e, o = fs[r], fe[r], off[k]
        while True:  # the runs between escapes copied as slices (memcpy)
            x = next_escape(buf, j, e) if fe[r] - fs[r] != fn[r] else e
            out[o:o + x - j] = buf[j:x]
            o += x - j
            if x == e:
                break
            j, o = escape(buf, x, e, out, o)


def parse(buf, field):
    """Every line of `buf` (uint8): (status, field start, field end, decoded length), arrays per line."""
    buf = readonly_view(buf)
    starts, ends = lines(buf)
    n = starts.shape[0]
    status = np.empty(n, np.int64)
    fs, fe, fn = np.empty(n, np.int64), np.empty(n, np.int64), np.empty(n, np.int64)
    key = np.frombuffer(field.encode("utf-8"), np.uint8)
    scan_lines(buf, starts, ends, key, status, fs, fe, fn)
    return starts, ends, status, fs, fe, fn


def loads_field(line, field):
    """`json.loads`' reading of one line (bytes): (UTF-8 bytes of its field, None), or (None, the
    problem), or (None, None) for a blank line. `documents` hands it every line the kernel is not sure of."""
    if not line.strip():
        return None, None
    try:
        obj = json.loads(line)
    except UnicodeDecodeError as e:
        return None, f"invalid UTF-8 (byte {e.start} of the line)"
    except ValueError as e:
        msg = f"{e.msg} at column {e.colno}" if isinstance(e, json.JSONDecodeError) else str(e)
        return None, f"invalid JSON: {msg}"
    except RecursionError:
        return None, "invalid JSON: nested too deeply"
    if not isinstance(obj, dict):
        return None, f"expected a JSON object, got {type(obj).__name__}"
    text = obj.get(field)
    if not isinstance(text, str):
        return None, (f"field {field!r} is {type(text).__name__}, not a string" if field in obj
                      else f"no field {field!r} (choose the text field with --field)")
    try:
        return text.encode("utf-8"), None
    except UnicodeEncodeError:  # a lone surrogate from a "\ud800" escape
        return None, "invalid UTF-8: a lone surrogate escape"


def documents(block, field, report):
    """The `field` of every record of `block` (whole lines, bytes-like) as (UTF-8 data, row offsets),
    in line order: the kernel takes the lines it is sure of (nearly all), `loads_field` the rest.
    report(line index in block, problem) is called, in line order, for each line that is no document;
    blank lines are skipped."""
    buf = readonly_view(np.frombuffer(block, np.uint8))
    starts, ends, status, fs, fe, lengths = parse(buf, field)
    keep = status == OK
    slow = {}
    for i in np.flatnonzero(status == FALLBACK).tolist():
        data, problem = loads_field(bytes(buf[starts[i]:ends[i]]), field)
        if problem is not None:
            report(i, problem)
        elif data is not None:
            slow[i] = data
            keep[i] = True
            lengths[i] = len(data)
    rows = np.flatnonzero(keep)
    offsets = np.zeros(rows.shape[0] + 1, np.int64)
    np.cumsum(lengths[rows], out=offsets[1:])
    data = np.empty(int(offsets[-1]), np.uint8)
    fast = status[rows] == OK
    write_lines(buf, fs, fe, lengths, rows[fast], offsets[:-1][fast], data)
    for k in np.flatnonzero(~fast).tolist():
        data[offsets[k]:offsets[k + 1]] = np.frombuffer(slow[int(rows[k])], np.uint8)
    return data, offsets
