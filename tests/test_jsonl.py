"""JSON Lines parsed by the kernel equal `json.loads` line by line: the same texts in the same order and
the same problems on the same lines, for valid records, records Python accepts but strict JSON does
not, and broken bytes. The line splitters equal bytes.split(b"\\n")."""
import json

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

pytest.importorskip("pyarrow")

from numbatok import batch, preprocess  # noqa: E402
from numbatok.kernels import jsonl  # noqa: E402


class Bad:
    def __init__(self):
        self.items = []

    def report(self, path, where, reason):
        self.items.append((where(), reason))


def by_json_loads(block, field):
    """The reference: every line through json.loads (the parser the kernel must agree with)."""
    lines = block.split(b"\n")
    if block.endswith(b"\n"):
        lines.pop()
    texts, problems = [], []
    for i, line in enumerate(lines):
        data, problem = jsonl.loads_field(line, field)
        if problem is not None:
            problems.append((i, problem))
        elif data is not None:
            texts.append(data.decode("utf-8"))
    return texts, problems


def by_kernel(block, field):
    bad = Bad()
    texts = preprocess._jsonl_texts(block, lambda i: i, "f.jsonl", field, bad)
    return texts.to_pylist(), bad.items


def check(block, field="text"):
    assert by_kernel(block, field) == by_json_loads(block, field)


EDGE = [
    b'{"text": "hello"}', b'{"id": 7, "text": "a\\u00e9\\ud83d\\ude00\\n\\t\\"\\\\\\/\\b\\f\\r", "x": [1, 2.5e-3, '
    b'{"a": null}, true, false]}', b'{"text": ""}', b'  {"text"  :  "spaces"  }  ', b'{"text":"crlf"}\r',
    b'{"a": {"text": 5}, "text": "only the top level counts"}', b'{"text": "\\u0000 nul"}',
    b'{"text": "\xe2\x80\xa8 line separator, raw"}', b'{"text": "\xf0\x9f\x98\x80 raw emoji"}',
    b'{"a": [], "b": {}, "c": [[{}]], "text": "empty containers"}', b'{"a": -0.0e+0, "b": 1E5, "text": "numbers"}',
    # Python accepts these, strict JSON does not: they must come out as json.loads reads them
    b'{"text": "nan", "a": NaN}', b'{"a": -Infinity, "text": "inf"}', b'{"text": "a", "text": "last wins"}',
    b'{"te\\u0078t": "escaped key"}',
    # problems
    b'{"text": NaN}', b'{"text": 1}', b'{"text": null}', b'{}', b'[1]', b'"text"', b'{"text": "\\ud800"}',
    b'{"text": "\\udd1e"}', b'{"text": "\\ud834x"}', b'{"text": "\\x"}', b'{"text": "\xed\xa0\x80"}',
    b'{"text": "\xff"}', b'{"text": "\xc3"}', b'{"text": "\xe0\x80\x80"}', b'{"text": "\xf4\x90\x80\x80"}',
    b'\xef\xbb\xbf{"text": "bom"}', b'{"text": "a"} x', b'{"text": "a",}', b'{"a": 01, "text": "x"}',
    b'{"a": 1., "text": "x"}', b'{"a": .5, "text": "x"}', b'{"a": tru, "text": "x"}', b'{"text": "ctl\x01"}',
    b'{"text": "del\x7f"}', b'{"text": "unterminated', b'{"text": "ok"', b'{"text": "a"}{"text": "b"}',
    b'{"a": [,], "text": "e"}', b'{"a": [1,], "text": "e"}', b'{,"text": "e"}', b'{"text" "e"}', b'{"text": "e" :}',
    b'{"a": ' + b"[" * 63 + b"]" * 63 + b', "text": "deep"}', b'{"a": ' + b"[" * 64 + b"]" * 64 + b', "text": "deeper"}',
    b'{"a": ' + b"[" * 100000 + b"]" * 100000 + b', "text": "too deep for Python"}',
    b'{"a": ' + b"1" * 5000 + b', "text": "an integer Python refuses"}', b'{"a": 1.' + b"5" * 5000 + b', "text": "ok"}',
    # blank lines, as bytes.strip() sees them, are skipped; other whitespace is a problem
    b"", b"   ", b"\t\x0b\x0c\r", b"\x0b{\"text\": \"v\"}", b"\x1c",
]


@pytest.mark.parametrize("line", EDGE, ids=range(len(EDGE)))
def test_edge_lines(line):
    check(line)
    check(line + b"\n")
    check(b'{"text": "before"}\n' + line + b'\n{"text": "after"}\n')


def test_other_field_and_empty_block():
    check(b'{"body": "b", "text": "t"}\n{"text": "t"}\n', field="body")
    check(b'{"": "empty key"}\n', field="")
    check(b'{"\xc3\xa9": "non-ASCII key"}\n', field="\u00e9")
    assert by_kernel(b"\n\n", "text") == ([], [])


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True) | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4),
    max_leaves=12)


@st.composite
def records(draw):
    obj = draw(st.dictionaries(st.sampled_from(["text", "id", "meta", "tèxt", "te\"xt"]), json_values, max_size=4))
    if draw(st.booleans()):
        obj["text"] = draw(st.text(st.characters(exclude_categories=())))
    line = json.dumps(obj, ensure_ascii=draw(st.booleans()), indent=draw(st.sampled_from([None, 0])),
                      separators=draw(st.sampled_from([(",", ":"), (", ", ": "), (" , ", " : ")])))
    line = line.replace("\n", " ").encode("utf-8", "surrogatepass")  # (a lone surrogate: encoded as such)
    if draw(st.integers(0, 9)) == 0 and line:  # a broken byte somewhere
        i = draw(st.integers(0, len(line) - 1))
        line = line[:i] + bytes([draw(st.integers(0, 255))]) + line[i + 1:]
    return line


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(records(), max_size=8), st.booleans())
def test_random_records(lines, final_newline):
    check(b"\n".join(lines) + (b"\n" if final_newline else b""))


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=300).map(lambda b: b.replace(b"\x00", b"\n")), st.sampled_from([8, 16, 24, 1 << 16]))
def test_lines_split_as_bytes_split(buf, seg):
    starts, ends = jsonl.lines(np.frombuffer(buf, np.uint8), seg)
    expected = buf.split(b"\n")
    if buf.endswith(b"\n"):
        expected.pop()
    assert [buf[a:b] for a, b in zip(starts.tolist(), ends.tolist())] == expected


def test_strict_records_do_not_fall_back():
    """The kernel really takes the common case: strict JSON records never reach json.loads."""
    texts = ["plain", "", "tab\there \"quoted\" back\\slash /", "é中😀\u2028", "\x00\x1f\x7f", "x" * 5000]
    block = b"".join(json.dumps({"id": i, "text": t, "meta": [1.5e-3, None, True, {"k": ["v"]}]},
                                ensure_ascii=i % 2 == 0).encode("utf-8") + b"\n"
                     for i, t in enumerate(texts * 2))
    status = jsonl.parse(np.frombuffer(block, np.uint8), "text")[2]
    assert (status == jsonl.OK).all()
    check(block)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from([b"a", b"\n", b"\r", b"\r\n", b"\xc3\xa9", b" "]), max_size=40).map(b"".join))
def test_text_lines_as_python_splits_them(block):
    """.txt documents: a line each, a "\\r" before its "\\n" cut off with it."""
    expected = block.split(b"\n")
    if block.endswith(b"\n") or not block:
        expected.pop()
    expected = [line[:-1] if line.endswith(b"\r") else line for line in expected]
    b = batch.from_lines(block)
    assert [bytes(b.data[x:y]) for x, y in zip(b.offsets[:-1].tolist(), b.offsets[1:].tolist())] == expected
