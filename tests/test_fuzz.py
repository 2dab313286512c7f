"""Property test of the binding's JSON → Python conversion (every list and event the client
returns as dicts goes through it): random documents, seeded and bounded in time, give exactly
what ``json.loads`` gives, and malformed text a clear ``ValueError``, never a crash.
``SURVEILLANCE_FUZZ_CASES`` runs more (the Rust side: ``PROPTEST_CASES``)."""

from __future__ import annotations

import json
import os
import random

import pytest
from surveillance import _core

CASES = int(os.environ.get("SURVEILLANCE_FUZZ_CASES", "3000"))
ALPHABET = [chr(c) for c in range(0x20, 0x7F)] + list('\n\t"\\/\x00\x1féßüç€日本語😀\u2028')

# `_core._loads` is a test seam: only a test build has it (`--features test-seams`, as run-tests
# builds the wheel); a release wheel leaves it out.
pytestmark = pytest.mark.skipif(
    not hasattr(_core, "_loads"), reason="a release build: no `_core._loads` (test-seams)"
)


def text(rng: random.Random) -> str:
    n = rng.choice([0, 1, 3, 8, 30])
    return "".join(rng.choice(ALPHABET) for _ in range(n))


def number(rng: random.Random):
    kind = rng.randrange(6)
    if kind == 0:
        return rng.randint(-(2**63), 2**63 - 1)
    if kind == 1:
        return rng.randint(0, 2**64 - 1)
    if kind == 2:
        return rng.randint(-1000, 1000)
    if kind == 3:
        return rng.uniform(-1e6, 1e6)
    if kind == 4:
        return rng.choice([0.0, -0.0, 1e-300, 1.7976931348623157e308, 5e-324, 0.1, 1 / 3])
    return float(rng.randint(-(2**53), 2**53))


def document(rng: random.Random, depth: int = 0):
    kind = rng.randrange(8 if depth < 6 else 5)
    if kind == 0:
        return None
    if kind == 1:
        return rng.random() < 0.5
    if kind == 2:
        return number(rng)
    if kind in (3, 4):
        return text(rng)
    if kind in (5, 6):
        return {text(rng): document(rng, depth + 1) for _ in range(rng.randrange(5))}
    return [document(rng, depth + 1) for _ in range(rng.randrange(5))]


def same(a, b) -> bool:
    """Equal, and of the same types all the way down (1 == 1.0 == True in Python)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return list(a) == list(b) and all(same(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    if isinstance(a, float) and a != a:
        return b != b
    return a == b


def test_random_documents_convert_as_json_loads_does():
    rng = random.Random(20261122)
    for i in range(CASES):
        doc = document(rng)
        raw = json.dumps(doc, ensure_ascii=rng.random() < 0.5, allow_nan=False)
        want = json.loads(raw)
        got = _core._loads(raw)
        assert same(got, want), (i, raw)


@pytest.mark.parametrize(
    "raw",
    [
        "",
        "[",
        '{"a": 1',
        '{"a" 1}',
        "[1,]",
        "[1] trailing",
        "NaN",
        '"\\ud800"',  # a lone surrogate: not UTF-8
        '"unterminated',
        "[" * 200 + "]" * 200,  # deeper than the converter goes
        "01",
        "tru",
    ],
)
def test_malformed_text_is_a_value_error(raw):
    with pytest.raises(ValueError, match="invalid JSON"):
        _core._loads(raw)


def test_random_bytes_never_crash():
    rng = random.Random(7)
    pieces = ['{"', '":', "[", "]", "}", ",", '"', "1", "-", "e", "null", "true", "\\u00", " "]
    for _ in range(CASES):
        raw = "".join(rng.choice(pieces) for _ in range(rng.randrange(1, 20)))
        try:
            want = json.loads(raw)
        except ValueError:
            with pytest.raises(ValueError):
                _core._loads(raw)
            continue
        assert same(_core._loads(raw), want), raw


def test_floats_are_read_exactly():
    """Found by the random documents: serde_json's default float parser can be one unit in the
    last place off; the client reads every float as Python does (``float_roundtrip``)."""
    for raw in ("7225682116495305.0", "0.30000000000000004", "2.2250738585072014e-308"):
        assert _core._loads(raw) == json.loads(raw) == float(raw)


def test_duplicate_keys_keep_the_last_as_json_loads_does():
    raw = '{"a": 1, "b": 2, "a": 3}'
    assert _core._loads(raw) == json.loads(raw) == {"a": 3, "b": 2}
