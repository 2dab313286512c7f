"""The writer of ``publish`` (Python objects to JSON bytes) and the check fused into it, against
``json.dumps`` and the detailed validator, on seeded random records, valid and not: the bytes
are ``json.dumps``'s, the fused verdict and upsert key are the careful path's, problems are
reported as before; values with no JSON form (NaN, infinity, non-string keys, cycles, nesting
past the limit) are clear errors naming the field, and keep only their own record back."""

from __future__ import annotations

import collections
import datetime as dt
import decimal
import enum
import json
import math
import random
import struct
import types
from pathlib import Path

import pytest
import surveillance as sv
from surveillance import _core
from surveillance._time import to_ms

from conftest import T0
from conftest import retail as conftest_retail

SEEDS = range(4)
PER_SEED = 1_000

#: The tests that call `_core._check`, which only a test build has (`--features test-seams`:
#: `build-wheels --test-build`, as run-tests builds it); a release wheel leaves it out.
needs_seams = pytest.mark.skipif(
    not hasattr(_core, "_check"), reason="a release build: no `_core._check` (test-seams)"
)


class Str(str):
    """A str subclass (as enums with a str mixin, pandas' and numpy's strings are)."""


class Dict(dict):
    """A dict subclass."""


class Color(enum.IntEnum):
    RED = 7


class Kind(str, enum.Enum):
    SALE = "SALE"


# --- random values ----------------------------------------------------------------------------
CHARS = (
    list("abcXYZ019 -_.:/")
    + ['"', "\\", "\n", "\r", "\t", "\b", "\f", "\x00", "\x01", "\x1f", "\x7f"]
    + ["é", "ß", "\u0301", "e\u0301", "中", "\u2028", "\ufeff", "😀", "\U0010fffd", "𝄞"]
)


def text(rng: random.Random, most: int = 12) -> str:
    return "".join(rng.choice(CHARS) for _ in range(rng.randrange(most + 1)))


def finite_float(rng: random.Random) -> float:
    while True:
        x = rng.choice(
            [
                lambda: rng.uniform(-1e6, 1e6),
                lambda: 5e-324,
                lambda: -2.2250738585072014e-308,
                lambda: rng.uniform(1e-5, 1e-4),
                lambda: -rng.uniform(1e-5, 1e-4),
                lambda: 1.7976931348623157e308,
                lambda: float(rng.randrange(10**13)),
                lambda: -0.0,
                lambda: 0.0,
                lambda: 1e16,
                lambda: 0.1,
                lambda: struct.unpack("<d", rng.getrandbits(64).to_bytes(8, "little"))[0],
            ]
        )()
        if math.isfinite(x):
            return x


def integer(rng: random.Random) -> int:
    return rng.choice(
        [
            rng.randrange(-1000, 1000),
            T0 + rng.randrange(10**9),
            2**63 - 1,
            2**63,
            -(2**63),
            -(2**63) - 1,
            2**64 - 1,
            2**64,
            -(2**64),
            2**70 + rng.randrange(1000),
            -(10**30),
            10**308,
        ]
    )


def scalar(rng: random.Random):
    return rng.choice(
        [
            lambda: None,
            lambda: True,
            lambda: False,
            lambda: integer(rng),
            lambda: finite_float(rng),
            lambda: text(rng),
            lambda: "",
            lambda: Str(text(rng)),
            lambda: Color.RED,
            lambda: Kind.SALE,
            lambda: dt.datetime(2026, 11, 17, 5, rng.randrange(60), tzinfo=dt.timezone.utc),
            lambda: dt.datetime(2026, 11, 17, 5, 0, 0, rng.randrange(10**6)),
            lambda: dt.date(2026, 11, rng.randrange(1, 28)),
            lambda: "2026-11-17T05:00:00.000Z",
            lambda: "2026-11-17T00:00:00-0500",
            lambda: "17/11/2026",
        ]
    )()


def garbage(rng: random.Random, depth: int = 0):
    """Any value: a scalar, or (not too deep) a dict, list or tuple of garbage."""
    roll = rng.random()
    if depth > 3 or roll < 0.6:
        return scalar(rng)
    n = rng.randrange(4)
    if roll < 0.75:
        return {text(rng, 6): garbage(rng, depth + 1) for _ in range(n)}
    if roll < 0.8:
        return Dict({text(rng, 6): garbage(rng, depth + 1) for _ in range(n)})
    if roll < 0.95:
        return [garbage(rng, depth + 1) for _ in range(n)]
    return tuple(garbage(rng, depth + 1) for _ in range(n))


# --- random records ---------------------------------------------------------------------------
def item(rng: random.Random, data_type: str, i: int) -> dict:
    t = T0 + i
    if data_type == "other":
        full = {"type": text(rng), "description": text(rng), "quantity": 1, "time": t}
        return {k: v for k, v in full.items() if rng.random() < 0.7}
    return {
        "time": rng.choice([t, float(t), "2026-11-17T05:00:00.000Z"]),
        "quantity": rng.choice([1, 2.5, -1, 0]),
        "description": text(rng),
        "unitPrice": rng.choice([3.5, 2, -0.4, 1e-7, 0.0]),
        "type": rng.choice(["SALE", "MODIFIER", "PAYMENT", Kind.SALE, text(rng)]),
    }


def valid(rng: random.Random, i: int) -> dict:
    data_type = rng.choice(["retail", "restaurant", "other"])
    t = T0 + i
    if data_type == "other":
        r = {
            "dataType": "other",
            "schemaVersion": "1",
            "startTime": t,
            "locationId": "store-" + text(rng, 3) + "x",
            "dataSourceId": "door-1",
            "eventUniqueId": f"e-{i}" + text(rng, 3),
            "eventType": text(rng),
        }
        for name in ("endTime", "eventDetails", "employeeId", "employeeName", "status", "items"):
            if rng.random() < 0.3:
                r[name] = {
                    "endTime": t + 1000,
                    "eventDetails": text(rng),
                    "items": [item(rng, "other", i) for _ in range(rng.randrange(3))],
                }.get(name, text(rng))
        return r
    r = {
        "dataType": data_type,
        "schemaVersion": "1",
        "startTime": rng.choice([t, "2026-11-17T05:00:00.000Z", "2026-11-17T00:00:00.000-05:00"]),
        "endTime": t + 60_000,
        "locationId": "store-" + text(rng, 3) + "x",
        "dataSourceId": "pos-" + text(rng, 3) + "y",
        "transactionId": f"tx-{i}-" + text(rng, 4),
        "status": rng.choice(["sale", "void", "SALE", text(rng)]),
        "items": [item(rng, data_type, i) for _ in range(rng.randrange(4))],
    }
    for name in ("employeeId", "employeeName", "customerId", "salesAssociateId"):
        if rng.random() < 0.3:
            r[name] = text(rng)
    if data_type == "restaurant":
        r["tableNumber"] = "T" + text(rng, 3)
        r["guestCount"] = rng.choice([2, 4.0, 0])
    return r


FIELDS = [
    "dataType",
    "schemaVersion",
    "startTime",
    "endTime",
    "locationId",
    "dataSourceId",
    "transactionId",
    "status",
    "items",
    "employeeId",
    "tableNumber",
    "guestCount",
    "eventUniqueId",
    "eventType",
    "eventDetails",
]


def mutate(rng: random.Random, r: dict) -> dict:
    """One to three changes that may or may not break the record."""
    for _ in range(rng.randrange(1, 4)):
        name = rng.choice(FIELDS)
        how = rng.randrange(13)
        if how == 0:
            r.pop(name, None)
        elif how == 1:
            r[name] = None
        elif how == 2:
            r[name] = ""
        elif how == 3:
            r[name] = rng.choice([True, False])
        elif how == 4:
            r[name] = garbage(rng)
        elif how == 5:
            r[rng.choice(["storeId", "registerId", "transactionID", text(rng, 5)])] = scalar(rng)
        elif how == 6:
            r["dataType"] = rng.choice(["retial", "Retail", "", 3, None, "other", "retail"])
        elif how == 7 and isinstance(r.get("items"), list) and r["items"]:
            it = r["items"][rng.randrange(len(r["items"]))]
            if isinstance(it, dict):
                key = rng.choice(["time", "quantity", "description", "unitPrice", "type", "x"])
                it[key] = rng.choice([scalar(rng), garbage(rng)])
        elif how == 8 and isinstance(r.get("items"), list):
            r["items"] = tuple(r["items"]) if rng.random() < 0.5 else r["items"] + [garbage(rng)]
        elif how == 9:
            r[name] = scalar(rng)
        elif how == 10:
            keys = list(r)
            rng.shuffle(keys)
            r = {k: r[k] for k in keys}
        elif how == 11:
            r = Dict(r) if rng.random() < 0.5 else collections.OrderedDict(r)
        elif how == 12 and isinstance(r.get("items"), list) and r["items"]:
            r["items"] = [Dict(x) if isinstance(x, dict) else x for x in r["items"]]
    return r


def records(seed: int) -> list:
    rng = random.Random(seed)
    out = []
    for i in range(PER_SEED):
        r = valid(rng, i)
        if rng.random() < 0.7:
            r = mutate(rng, r)
        out.append(r)
    return out


def plain(x):
    """What json.dumps needs to write `x` as publish does: datetimes and dates as epoch ms."""
    if isinstance(x, (dt.date, dt.datetime)):
        return to_ms(x)
    if isinstance(x, dict):
        return {k: plain(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [plain(v) for v in x]
    return x


def dumps(x) -> str:
    return json.dumps(plain(x), separators=(",", ":"), ensure_ascii=False)


def same(a, b) -> bool:
    """Equal as JSON values, float signs (-0.0) and int-versus-float included."""
    if isinstance(a, dict):
        return isinstance(b, dict) and list(a) == list(b) and all(same(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return isinstance(b, list) and len(a) == len(b) and all(map(same, a, b))
    if isinstance(a, float):
        return isinstance(b, float) and struct.pack("<d", a) == struct.pack("<d", b)
    return type(a) is type(b) and a == b


def errors(problems: list) -> bool:
    return any(p["severity"] == "error" for p in problems)


# --- the writer -------------------------------------------------------------------------------
@pytest.mark.parametrize("seed", SEEDS)
def test_the_bytes_are_json_dumps_bytes(seed):
    for r in records(seed):
        text = _core.to_json(r)
        want = dumps(r)
        assert text == want, (r, text, want)
        assert same(json.loads(text), json.loads(json.dumps(plain(r))))


def test_floats_are_written_as_repr_writes_them():
    rng = random.Random(7)
    values = [finite_float(rng) for _ in range(20_000)]
    for bits in range(0, 2**64, 2**64 // 50_000):
        v = struct.unpack("<d", bits.to_bytes(8, "little"))[0]
        if math.isfinite(v):
            values.append(v)
            values.append(-v)
    text = _core.to_json(values)
    assert text == json.dumps(values, separators=(",", ":"))
    bits = [struct.pack("<d", v) for v in values]
    assert [struct.pack("<d", v) for v in json.loads(text)] == bits


def test_strings_and_keys_are_escaped_as_json_dumps_does():
    every = "".join(chr(c) for c in range(0x80)) + "é\u0301中😀\U0010ffff\u2028"
    record = {every: every, "k\x00": ["\\", '"', "\x1f" * 9, every * 3]}
    assert _core.to_json(record) == json.dumps(record, separators=(",", ":"), ensure_ascii=False)


def test_odd_types_are_written_as_their_json_values():
    import numpy as np

    record = {
        "a": (1, [2.5, (None,)]),
        "b": Str("s"),
        "c": Color.RED,
        "d": Kind.SALE,
        "e": decimal.Decimal("12.50"),
        "f": dt.datetime(2026, 11, 17, 5, tzinfo=dt.timezone.utc),
        "g": dt.date(2026, 11, 17),
        "h": np.int64(-3),
        "i": np.float32(0.5),
        "j": np.array([1, 2]),
        "k": types.MappingProxyType({"x": 1}),
        "l": collections.OrderedDict(y=[True, False]),
        "m": 2**100,
        "n": -(2**64),
    }
    assert json.loads(_core.to_json(record)) == {
        "a": [1, [2.5, [None]]],
        "b": "s",
        "c": 7,
        "d": "SALE",
        "e": 12.5,
        "f": T0,
        "g": T0 - 5 * 3_600_000,
        "h": -3,
        "i": 0.5,
        "j": [1, 2],
        "k": {"x": 1},
        "l": {"y": [True, False]},
        "m": 2**100,
        "n": -(2**64),
    }


# --- values with no JSON form -----------------------------------------------------------------
def retail(i: int) -> dict:
    item = {"time": T0 + i, "quantity": 1, "description": "tea", "unitPrice": 2.5, "type": "SALE"}
    return conftest_retail(i, items=[dict(item) for _ in range(3)])


def nested(depth: int) -> list:
    x: list = []
    for _ in range(depth - 1):
        x = [x]
    return x


def broken() -> dict:
    """Records that have no JSON form, by index, with the path and a part of the message."""
    nan = retail(1)
    nan["items"][2]["unitPrice"] = float("nan")
    inf = retail(2)
    inf["items"][0]["quantity"] = -math.inf
    key = retail(3)
    key["items"][1][3] = "x"
    cycle = retail(4)
    cycle["items"][1]["self"] = cycle
    deep = retail(5)
    deep["employeeId"] = nested(70)
    loop: list = []
    loop.append(loop)
    listed = retail(6)
    listed["eventDetails"] = {"a": [0, loop]}
    surrogate = retail(7)
    surrogate["transactionId"] = "t-\ud800"
    return {
        1: (nan, "items[2].unitPrice", "`NaN` has no JSON form"),
        2: (inf, "items[0].quantity", "`-inf` has no JSON form"),
        3: (key, "items[1]", "keys must be strings, found the `int` key `3`"),
        4: (cycle, "items[1].self", "contains itself"),
        5: (deep, "employeeId" + "[0]" * 63, "nested more than 64 levels deep"),
        6: (listed, "eventDetails.a[1][0]", "contains itself"),
        7: (surrogate, "transactionId", "not valid Unicode"),
    }


@needs_seams
def test_values_with_no_json_form_are_errors_naming_the_field():
    for record, path, message in broken().values():
        with pytest.raises(ValueError) as e:
            _core.to_json(record)
        assert str(e.value).startswith(f"{path}: ") and message in str(e.value), str(e.value)
        (p,) = sv.validate(record)
        assert (p.path, p.severity) == (path, "error") and message in p.message
        text, verdict, _, _, problems = _core._check(record)
        assert text is None and verdict is False and problems[0]["path"] == path
    # 64 levels are allowed.
    assert _core.to_json(nested(64)) == "[" * 64 + "]" * 64


def test_a_record_with_no_json_form_is_reported_and_the_others_published(emu):
    emu.clear_published()
    bad = broken()
    rows = [retail(100 + i) for i in range(300)]
    for i, (record, _, _) in bad.items():
        rows[i * 37] = record
    with emu.client() as client:
        for check in (True, False):
            report = client.publish(rows, batch_size=100, validate=check, progress=False)
            assert report.accepted == 300 - len(bad) and report.total == 300
            assert [f.index for f in report.rejected] == [i * 37 for i in bad]
            for f, (_, path, message) in zip(report.rejected, bad.values()):
                assert f.kind == "invalid" and f.status is None
                assert f.problems[0].path == path and message in f.problems[0].message
                assert f.message.startswith(f"{path}: ")
    refused = {i * 37 for i in bad}
    stored = {r["transactionId"] for r in emu.published()}
    assert stored == {r["transactionId"] for i, r in enumerate(rows) if i not in refused}
    emu.clear_published()


class _Clearing:
    """A numpy-like value whose conversion empties the container that holds it."""

    dtype = "object"

    def __init__(self, victim) -> None:
        self.victim = victim

    def tolist(self) -> int:
        self.victim.clear()
        return 1


def test_python_code_that_changes_the_record_under_the_walk_is_an_error_not_a_crash():
    record = retail(0)
    record["employeeId"] = _Clearing(record)
    with pytest.raises(ValueError, match="changed size while it was being written"):
        _core.to_json(record)
    record = retail(1)
    items = record["items"]
    items.insert(1, _Clearing(items))
    # The list is read again after each element, as json.dumps reads it.
    assert json.loads(_core.to_json(record))["items"] == [retail(1)["items"][0], 1]


# --- the fused check --------------------------------------------------------------------------
@needs_seams
@pytest.mark.parametrize("seed", SEEDS)
def test_the_fused_verdict_and_key_are_the_careful_paths(seed):
    judged = conforming = 0
    for r in records(seed):
        text, verdict, key, text_key, problems = _core._check(r)
        assert text == dumps(r)
        assert problems == _core.validate(r)
        if verdict is None:
            continue
        judged += 1
        conforming += verdict
        assert verdict == (not errors(problems)), (r, problems)
        assert key == text_key, r
        if verdict:
            assert key != 0
    # The fast path decides nearly every record (not those holding ints beyond 64 bits, ...),
    # and the records are a mix of conforming and not.
    assert judged > 0.9 * PER_SEED
    assert 0.2 * judged < conforming < 0.8 * judged


@pytest.mark.parametrize("seed", SEEDS)
def test_problems_are_those_of_the_json_text(seed):
    # An odd type (datetime, tuple, subclass, enum) is reported as its JSON value would be.
    for r in records(seed)[:300]:
        assert sv.validate(r) == sv.validate(json.loads(dumps(r)))


def test_problems_are_reported_as_before():
    """`sv.validate` gives what it gave before the writer was rewritten, recorded for records
    of every kind (tests/data/validate_before.jsonl: each line a record and its problems)."""
    path = Path(__file__).parent / "data" / "validate_before.jsonl"
    # Split on newlines only: records hold U+2028 and the like, which splitlines() splits on.
    lines = path.read_text(encoding="utf-8").rstrip("\n").split("\n")
    assert len(lines) >= 200
    for line in lines:
        case = json.loads(line)
        got = [list(p) for p in sv.validate(case["record"])]
        assert got == case["problems"], case["record"]


@needs_seams
def test_keys_follow_the_upsert_key_whatever_the_check():
    base = retail(0)
    other = {
        "dataType": "other",
        "schemaVersion": "1",
        "startTime": T0,
        "locationId": "l",
        "dataSourceId": "d",
        "eventUniqueId": "e",
        "eventType": "t",
    }
    cases = [
        base,
        {**base, "transactionId": ""},
        {**base, "transactionId": 5},
        {**base, "transactionId": Str("t-0")},
        {**base, "storeId": "s"},
        {**base, "dataType": "restaurant"},
        {k: v for k, v in base.items() if k != "transactionId"},
        other,
        {**other, "locationId": ""},
        {**other, "eventUniqueId": None},
        {**other, "transactionId": "t"},
        {**other, "dataType": "Other"},
        [base],
    ]
    keys = []
    for r in cases:
        _, verdict, key, text_key, _ = _core._check(r)
        assert verdict is not None and key == text_key, r
        keys.append(key)
    assert keys[0] == keys[3] != 0 and keys[1] == keys[2] == keys[6] == 0
    assert keys[4] == keys[0] and keys[5] == keys[0]
    assert keys[7] not in (0, keys[0]) and keys[8] == keys[9] == keys[11] == keys[12] == 0
    assert keys[10] == keys[7]


@needs_seams
def test_what_the_walk_cannot_judge_goes_the_careful_way(emu):
    emu.clear_published()
    odd = [
        {**retail(0), "startTime": 2**70},  # an int beyond 64 bits
        {**retail(1), "guestCount": decimal.Decimal("2")},
        types.MappingProxyType(retail(2)),
        {**retail(3), Str("storeId"): "s"},
        {**retail(4), "items": [types.MappingProxyType(retail(4)["items"][0])]},
        {**retail(5), "startTime": 10**400},  # not a number serde_json reads
    ]
    for r in odd:
        assert _core._check(r)[1] is None
    with emu.client() as client:
        report = client.publish(odd, progress=False)
    assert [f.index for f in report.rejected] == [0, 1, 3, 5]
    assert report.rejected[0].problems[0].path == "startTime"
    assert report.rejected[1].problems[0].path == "guestCount"
    assert "legacy name" in report.rejected[2].problems[0].message
    assert report.rejected[3].problems[0].message.startswith("not valid JSON")
    assert sorted(r["transactionId"] for r in emu.published()) == ["t-2", "t-4"]
    emu.clear_published()


@pytest.mark.parametrize("seed", SEEDS[:2])
def test_publish_accepts_what_the_detailed_validator_accepts(emu, seed):
    emu.clear_published()
    rows = records(seed)
    with emu.client() as client:
        report = client.publish(rows, batch_size=100, progress=False)
    bad = [i for i, r in enumerate(rows) if errors(_core.validate(r))]
    assert [f.index for f in report.rejected] == bad
    assert report.accepted == len(rows) - len(bad)
    for f in report.rejected:
        assert [tuple(p) for p in f.problems] == [
            tuple(p.values()) for p in _core.validate(rows[f.index])
        ]
    emu.clear_published()
