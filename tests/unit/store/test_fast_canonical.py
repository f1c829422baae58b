"""The import's fast line route (bwtune.store.lines.load_line and canonical_text, orjson
where it is exact) gives json's value and json's canonical text for every line: the stored
line and its idempotency hash stay what they were, so a database already written re-imports
as unchanged (issue 21 #15; docs/benchmarks.md, "Results store at scale")."""

from __future__ import annotations

import hashlib
import json
import random
import struct
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bwtune import results_db
from bwtune.store import lines
from tests.unit.db.sample_results import sample_results


def _json_canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


def _same_as_json(raw: bytes) -> tuple[Any, bool]:
    """load_line(raw) checked against json.loads(raw): the same value (types and float bits,
    by repr) or the same refusal, and canonical_text against json.dumps's canonical text."""
    try:
        expected = json.loads(raw)
    except (ValueError, RecursionError) as exc:  # RecursionError: nested too deep for json
        with pytest.raises(type(exc)) as refused:
            lines.load_line(raw)
        assert str(refused.value) == str(exc)  # the same message a bad line names today
        return None, False
    value, by_orjson = lines.load_line(raw)
    assert repr(value) == repr(expected), raw
    assert lines.canonical_text(value, by_orjson) == _json_canonical(expected), raw
    return value, by_orjson


EDGE_LINES = [
    b'{"a": 1, "b": [1.5, -0.0, 0, -0, true, false, null], "c": {"z": 1, "A": 2, "_": 3}}\n',
    b'{"v": NaN}\n',
    b'{"v": Infinity}\n',
    b'{"v": -Infinity}\n',
    b'{"v": 1e400}\n',
    b'{"v": -1e400}\n',
    b'{"v": 1e-400}\n',
    b'{"v": 2.4703282292062327e-324}\n',
    b'{"v": 0.30000000000000004441, "w": 0.0007363530621963084, "x": 1.0000000000000000000000001}\n',
    b'{"v": 12345678901234567890.5, "w": 12345678901234567890e5, "x": 1e0000000000000000001}\n',
    b'{"v": [1.5, 12345678901234567890], "w": "x.1234567890123456789012"}\n',
    b'{"v": 1e16, "w": 1e15, "x": 1e-5, "y": 1e-4, "z": 9.9999e-05}\n',
    b'{"v": 1E2, "w": 1.0e+2, "x": 123456789012345.6, "y": 1.7976931348623157e308}\n',
    b'{"v": 1.5e-7, "w": 2e-10, "x": 3.25e-100, "y": 5e-324}\n',
    b'{"v": 9223372036854775807, "w": -9223372036854775808}\n',
    b'{"v": 9223372036854775808, "w": 18446744073709551615}\n',
    b'{"v": 18446744073709551616}\n',
    b'{"v": -9223372036854775809}\n',
    b'{"v": 123456789012345678901234567890}\n',
    b'{"v": "1234567890123456789 digits in a string"}\n',
    '{"v": "caf\u00e9 \u2028 \U0001f600"}\n'.encode(),
    b'{"v": "caf\\u00e9 \\ud83d\\ude00"}\n',
    b'{"v": "\\ud800 a lone surrogate"}\n',
    b'{"v": "\x7f DEL as is", "w": "\\u007f escaped"}\n',
    b'{"v": "\\b\\f\\n\\r\\t\\"\\\\\\/ \\u0000\\u001f"}\n',
    b'{"a": 1, "a": 2, "b": 0}\n',
    b'{"b": 1, "a": 2, "b": 3}\n',
    b"\xef\xbb\xbf{}\n",
    b'  {"a": 1}\r\n',
    b'{"a": 1} x\n',
    b'{"a": [1,]}\n',
    b'{"a": "\xff"}\n',
    b'{"a": "\x01"}\n',
    b"[" * 2000 + b"]" * 2000 + b"\n",
    b'"a string"\n',
    b"[1, 2]\n",
    b"{}",
]


@pytest.mark.parametrize("raw", EDGE_LINES, ids=range(len(EDGE_LINES)))
def test_a_line_reads_and_encodes_as_json_does(raw: bytes) -> None:
    _same_as_json(raw)


def test_the_fast_route_is_taken_for_plain_lines_and_refused_where_orjson_differs() -> None:
    assert lines.load_line(EDGE_LINES[0])[1] is True
    assert lines.load_line(b'{"v": 0.0007363530621963084}')[1] is True  # a long fraction is exact
    for raw in (b'{"v": NaN}', b'{"v": 1e400}', b'{"v": 18446744073709551616}', b'{"v": "\\ud800"}'):
        assert lines.load_line(raw)[1] is False, raw
    # orjson's own bytes differ from json's here; canonical_text must not take them.
    for value in ({"v": 1e-5}, {"v": 1.5e-7}, {"v": "\x7f"}, {"v": "\u00e9"}):
        assert orjson.dumps(value, option=orjson.OPT_SORT_KEYS).decode() != _json_canonical(value)
        assert lines.canonical_text(value, True) == _json_canonical(value)
    # An integer beyond 64 bits set after the parse (a caller's value): json.dumps's.
    assert lines.canonical_text({"v": 2**70}, True) == _json_canonical({"v": 2**70})


def _floats(count: int) -> list[float]:
    """Finite doubles: random bit patterns, rounded decimals of every size, and each decimal
    exponent with several mantissas (json's and orjson's notations change at 1e-4 and 1e16)."""
    rng = random.Random(20261202)
    out = [struct.unpack("<d", struct.pack("<Q", rng.getrandbits(64)))[0] for _ in range(count)]
    out += [round(rng.uniform(-1, 1) * 10 ** rng.randint(-30, 30), rng.randint(0, 12)) for _ in range(count)]
    out += [
        float(f"{m}e{e}") for e in range(-330, 309) for m in ("1", "-1.5", "9.999999999999999", "2.5", "0.1")
    ]
    out += [0.0, -0.0, 5e-324, 2.2250738585072014e-308, 1e-4, 9.9999e-5, 1e16, 9999999999999998.0, 1e15]
    return [x for x in out if x == x and abs(x) != float("inf")]


def test_every_float_reads_and_encodes_as_json_does() -> None:
    floats = _floats(60_000)
    fast = 0
    for x in floats:
        raw = json.dumps({"v": [x]}).encode()
        value, by_orjson = lines.load_line(raw)
        assert by_orjson and repr(value) == repr(json.loads(raw)), raw
        out = orjson.dumps(value, option=orjson.OPT_SORT_KEYS)
        if lines._orjson_text_is_json(out):
            fast += 1
            assert out.decode() == _json_canonical(value), raw
        assert lines.canonical_text(value, by_orjson) == _json_canonical(value), raw
    # Most floats take orjson's bytes (the test would prove nothing if none did).
    assert fast > len(floats) // 2


def test_every_ascii_character_and_some_others_encode_as_json_does() -> None:
    for code in [*range(0x80), 0xE9, 0x2028, 0xFFFF, 0x1F600]:
        text = chr(code)
        for raw in (json.dumps({"v": text}).encode(), json.dumps({"v": text}, ensure_ascii=False).encode()):
            _same_as_json(raw)


_JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**80), max_value=2**80)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(st.characters(codec=None), max_size=8),
    lambda inner: st.lists(inner, max_size=5) | st.dictionaries(st.text(max_size=5), inner, max_size=5),
    max_leaves=30,
)


@settings(max_examples=400, deadline=None, derandomize=True)
@given(value=_JSON, ascii_only=st.booleans())
def test_any_json_value_reads_and_encodes_as_json_does(value: Any, ascii_only: bool) -> None:
    try:
        raw = json.dumps(value, ensure_ascii=ascii_only).encode()
    except UnicodeEncodeError:  # a lone surrogate written raw: not UTF-8, no line of a file
        raw = json.dumps(value).encode()
    _same_as_json(raw)


def test_an_import_stores_each_line_and_hash_as_json_canonical_text(tmp_path: Path) -> None:
    """The stored line and its hash are json's canonical text of the line (as every database
    already written has them), also for lines only json encodes exactly; importing the file
    again stores nothing new."""
    records = sample_results("r-fast")
    records[0]["failure_note"] = "caf\u00e9"  # unknown fields are kept in the stored line
    records[1]["timings"] = {"tiny_s": 1e-05, "tinier_s": 1.5e-7, "huge": 2**70}
    records[2]["extra"] = "\x7f"
    path = tmp_path / "results.jsonl"
    path.write_bytes(b"".join(json.dumps(r, ensure_ascii=n % 2 == 0).encode() + b"\n"
                              for n, r in enumerate(records)))  # fmt: skip
    conn = results_db.connect(tmp_path / "results.db")
    summary = results_db.import_results_file(conn, path)
    assert summary.added == len(records)
    stored = {
        (row["host"], row["config_id"]): (row["line_json"], row["line_sha256"])
        for row in conn.execute("SELECT host, config_id, line_json, line_sha256 FROM results")
    }
    for record in records:
        text = _json_canonical(record)
        assert stored[(record["host"], record["config_id"])] == (
            text,
            hashlib.sha256(text.encode()).hexdigest(),
        )
    again = results_db.import_results_file(conn, path)
    assert (again.added, again.updated, again.unchanged) == (0, 0, len(records))
    assert conn.execute("SELECT count(*) FROM results").fetchone()[0] == len(records)
    assert conn.execute("SELECT count(*) FROM superseded_results").fetchone()[0] == 0


def _rows(record: dict[str, Any], finite: bool) -> tuple[Any, ...]:
    key = (record["run_id"], record["host"], record["config_id"])
    return (
        lines.result_row(record, "d", 1, "t", finite=finite),
        lines.config_row(record, finite=finite),
        lines.failure_row(key, record, finite=finite),
        lines.values_rows(key, record, finite=finite),
    )


def _odd_records() -> list[dict[str, Any]]:
    """The sample's lines with values only json encodes exactly in their parts' columns."""
    records = sample_results("r-rows")
    odd = [{"tiny": 1e-05, "exp": 1.5e-7, "huge": 2**70, "text": "caf\u00e9\x7f"}, 1e-05, 2**70, "\u00e9"]
    for n, record in enumerate(records):
        record["timings"] = {"startup_s": odd[n % len(odd)]}
        record["point"] = {**record["point"], "p": odd[(n + 1) % len(odd)]}
        for block in record["metrics"].values():
            block["values"]["odd"] = odd[(n + 2) % len(odd)]
        if record.get("failure"):
            record["failure"]["log_tail"] = ["caf\u00e9", "\x7f", "plain"]
    return records


def test_a_lines_rows_are_the_same_whichever_encoder_writes_them() -> None:
    records = [*sample_results("r-rows"), *_odd_records()]
    assert all(lines.finite_line(lines.dumps(r)) for r in records)
    for record in records:
        assert _rows(record, True) == _rows(record, False), record["config_id"]


def test_a_line_with_nan_or_infinity_is_not_finite() -> None:
    record = sample_results("r-rows")[0]
    for bad in (float("nan"), float("inf"), float("-inf")):
        record["timings"] = {"startup_s": bad}
        assert not lines.finite_line(lines.dumps(record))
    assert lines.finite_line(lines.dumps({"v": 1.5, "s": "plain"}))


@settings(max_examples=200, deadline=None, derandomize=True)
@given(value=_JSON)
def test_any_finite_value_in_a_lines_parts_gives_the_same_rows(value: Any) -> None:
    record = sample_results("r-rows")[0]
    record["timings"] = {"v": value}
    record["point"] = {**record["point"], "v": value}
    for block in record["metrics"].values():
        block["values"]["v"] = value
    if lines.finite_line(lines.dumps(record)):
        assert _rows(record, True) == _rows(record, False)
