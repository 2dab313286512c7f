"""The results a client hands back, each defined once: the plan (``EventPlan``), the cost
(``Cost``), the quota (``Quota``), the stats (``Stats``) and the cache's contents
(``CacheInfo``, ``CacheEntry``) are classes of the native module, built from the core's structs,
with no Python class restating their fields. Each is frozen, has typed attributes, a repr, a
table for Jupyter, ``to_dict()``, equality and pickling; the quota, the stats and the cache's
contents, which were dicts, read as read-only mappings still."""

from __future__ import annotations

import ast
import copy
import datetime as dt
import inspect
import json
import os
import pathlib
import pickle
import subprocess
import sys
from collections.abc import Mapping

import pytest
import result_stubs
import surveillance as sv
from surveillance import _core

from conftest import emulator_fixture

emu = emulator_fixture(seed=5, sites=2, days=1, events_per_day=60)

RESULTS = ("EventPlan", "Cost", "Quota", "Stats", "CacheInfo", "CacheEntry")
MAPPINGS = ("Quota", "Stats", "CacheInfo", "CacheEntry")
UTC = dt.timezone.utc
T0 = dt.datetime(2026, 1, 5, tzinfo=UTC)
T1 = dt.datetime(2026, 1, 6, 0, 0, 0, 250_000, tzinfo=UTC)


def samples() -> dict:
    """One of each result, built by its constructor."""
    quota = sv.Quota(limit=2400, used=570, remaining=1830, resets_at=T1)
    entry = sv.CacheEntry(
        account="a" * 32,
        base_url="http://127.0.0.1:1",
        endpoint="GET /v2/events",
        report_id=None,
        ranges=[(T0, T1)],
        events=14_799,
        requests=150,
        bytes=1_000_000,
        files=2,
    )
    return {
        "EventPlan": sv.EventPlan(41_000, 415, 415.0, 0.17, 5),
        "Cost": sv.Cost(requests=12, quota=quota),
        "Quota": quota,
        "Stats": sv.Stats(
            requests={"GET /v2/events": 3, "POST /v2/oauth/token": 1},
            retries=1,
            rate_limited=0,
            tokens=1,
            bytes_received=123_456,
            requests_saved=2,
            quota=quota,
        ),
        "CacheInfo": sv.CacheInfo(
            path="/tmp/c", bytes=1_000_000, files=2, requests_saved=7, entries=[entry]
        ),
        "CacheEntry": entry,
    }


@pytest.mark.parametrize("name", RESULTS)
def test_each_result_is_one_native_class(name):
    cls = getattr(sv, name)
    assert cls.__module__ == "surveillance._core" and cls is getattr(_core, name)
    assert name in sv.__all__ and cls.__doc__
    if name in MAPPINGS:
        assert getattr(sv.types, name) is cls
    else:
        assert getattr(sv.client, name) is cls
    # No module of the package states the result's fields again (a dataclass, a TypedDict).
    package = pathlib.Path(sv.__file__).parent
    restated = [
        f"{path.relative_to(package)}:{node.lineno}"
        for path in package.rglob("*.py")
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
        if isinstance(node, ast.ClassDef) and node.name == name
    ]
    assert restated == []


def test_the_quota_is_told_by_one_class():
    # The stats and a call's cost hold a `Quota`; no other result restates its figures.
    s = samples()
    assert type(s["Stats"].quota) is type(s["Cost"].quota) is sv.Quota
    assert s["Stats"].quota == s["Cost"].quota == s["Quota"]
    figures = {"limit", "used", "remaining", "resets_at"}
    assert [n for n in RESULTS if n != "Quota" and figures & set(dir(getattr(sv, n)))] == []


@pytest.mark.parametrize("name", RESULTS)
def test_results_are_frozen(name):
    result = samples()[name]
    attributes = [n for n, v in vars(type(result)).items() if inspect.isgetsetdescriptor(v)]
    assert attributes
    for attribute in attributes:
        with pytest.raises(AttributeError):
            setattr(result, attribute, 0)
    with pytest.raises(AttributeError):
        result.anything = 1
    if name in MAPPINGS:
        key = next(iter(result))
        with pytest.raises(TypeError):
            result[key] = 0
        with pytest.raises(TypeError):
            del result[key]
        with pytest.raises(TypeError):
            hash(result)  # unhashable, as the dicts were
    assert samples()[name] == result  # unchanged


@pytest.mark.parametrize("name", RESULTS)
def test_results_have_a_repr_a_table_and_a_dict(name):
    result = samples()[name]
    assert repr(result).startswith(f"{name}(") and "datetime" not in repr(result)
    page = result._repr_html_()
    assert page.startswith(f"<b>{name}</b><table>")
    plain = result.to_dict()
    assert type(plain) is dict

    def natives(value: object) -> list:
        if isinstance(value, dict):
            return [n for v in value.values() for n in natives(v)]
        if isinstance(value, (list, tuple)):
            return [n for v in value for n in natives(v)]
        return [value] if type(value).__module__ == "surveillance._core" else []

    assert natives(plain) == []  # plain values all the way down


def test_the_reprs_keep_their_look():
    s = samples()
    assert repr(s["Quota"]) == (
        "Quota(limit=2400, used=570, remaining=1830, resets_at=2026-01-06T00:00:00.250Z)"
    )
    assert repr(s["Stats"]).startswith(
        "Stats(requests={GET /v2/events: 3, POST /v2/oauth/token: 1}, retries=1, "
    )
    assert repr(s["Stats"]).endswith(f"quota={s['Quota']!r})")
    assert "ranges=[2026-01-05T00:00:00Z .. 2026-01-06T00:00:00.250Z]" in repr(s["CacheInfo"])
    assert repr(s["Cost"]) == (
        f"Cost(requests=12, quota={s['Quota']!r}, retries=0, rate_limited=0, waited=0.00, "
        "outage=0.00)"
    )
    assert str(s["Cost"]) == "12 requests, 0.5% of the day's 2,400 (1,830 left)"
    troubled = sv.Cost(12, s["Quota"], retries=1, rate_limited=1, waited=2.0, outage=0.0)
    assert str(troubled) == (
        "12 requests, 0.5% of the day's 2,400 (1,830 left); 1 retry, 1 answered 429 (2.0 s waited)"
    )
    assert s["Cost"].share == 0.005 and sv.Cost(requests=3).share is None
    assert str(sv.Cost(requests=1)) == "1 request"
    no_budget = sv.Quota(limit=0, used=5, remaining=None, resets_at=T1)
    assert str(sv.Cost(2, no_budget)) == "2 requests" and sv.Cost(2, no_budget).share is None
    assert str(s["EventPlan"]) == (
        "about 41,000 events, 415 requests, 7 min at the read limit, 0.2 days of quota "
        "(plan: 5 requests)"
    )
    assert "<th style='text-align:left'>bytes_received</th><td>123,456</td>" in (
        s["Stats"]._repr_html_()
    )
    page = s["CacheInfo"]._repr_html_()
    assert "<p>entries</p><table><tr><th>account</th>" in page and "<td>14,799</td>" in page


@pytest.mark.parametrize("name", RESULTS)
def test_results_pickle_copy_and_compare_by_value(name):
    result = samples()[name]
    for again in (pickle.loads(pickle.dumps(result)), copy.copy(result), copy.deepcopy(result)):
        assert type(again) is type(result) and again == result and not again != result
    assert result != object() and result == samples()[name]
    if name == "EventPlan":
        assert hash(result) == hash(samples()[name])  # as a frozen dataclass's
        assert len({result, samples()[name]}) == 1
    else:
        with pytest.raises(TypeError):
            hash(result)  # a mapping, or a cost (it holds its quota, a mapping)


def test_to_dict_gives_the_shapes_the_results_had():
    s = samples()
    assert s["EventPlan"].to_dict() == {
        "events": 41_000,
        "requests": 415,
        "seconds": 415.0,
        "days": 0.17,
        "probes": 5,
        "exact": False,
    }
    quota = {"limit": 2400, "used": 570, "remaining": 1830, "resets_at": T1}
    assert s["Cost"].to_dict() == {
        "requests": 12,
        "quota": quota,
        "retries": 0,
        "rate_limited": 0,
        "waited": 0.0,
        "outage": 0.0,
    }
    assert s["Quota"].to_dict() == quota
    stats = s["Stats"].to_dict()
    assert stats == {
        "requests": {"GET /v2/events": 3, "POST /v2/oauth/token": 1},
        "retries": 1,
        "rate_limited": 0,
        "tokens": 1,
        "bytes_received": 123_456,
        "requests_saved": 2,
        "quota": quota,
    }
    assert type(stats["quota"]) is dict
    info = s["CacheInfo"].to_dict()
    assert [type(e) for e in info["entries"]] == [dict]
    assert info["entries"][0]["ranges"] == [(T0, T1)]
    assert info == {
        "path": "/tmp/c",
        "bytes": 1_000_000,
        "files": 2,
        "requests_saved": 7,
        "entries": [s["CacheEntry"].to_dict()],
    }
    # Each result is built again from its dict (nested results from theirs).
    for name in ("EventPlan", "Quota", "CacheEntry"):
        assert getattr(sv, name)(**s[name].to_dict()) == s[name]
    assert sv.Stats(**{**stats, "quota": sv.Quota(**stats["quota"])}) == s["Stats"]
    assert sv.Cost(12, sv.Quota(**quota)) == s["Cost"]
    entries = [sv.CacheEntry(**e) for e in info["entries"]]
    assert sv.CacheInfo(**{**info, "entries": entries}) == s["CacheInfo"]


def test_the_quota_stats_and_cache_read_as_the_dicts_they_were(emu, tmp_path):
    client = emu.client(cache=str(tmp_path))
    for _ in range(2):
        client.events(emu.start, emu.end, progress=False)
    quota, stats, info = client.quota(), client.stats(), client.cache_info()
    assert info is not None
    for result, keys in (
        (quota, ["limit", "used", "remaining", "resets_at"]),
        (stats, ["requests", "retries", "rate_limited", "tokens", "bytes_received"]),
        (info, ["path", "bytes", "files", "requests_saved", "entries"]),
        (info["entries"][0], ["account", "base_url", "endpoint", "report_id", "ranges"]),
    ):
        assert isinstance(result, Mapping)
        assert list(result)[: len(keys)] == keys and len(result) == len(list(result))
        assert list(result.keys()) == list(result) and len(result.values()) == len(result)
        plain = dict(result)
        assert type(plain) is dict and list(plain) == list(result)
        assert plain == result and result == plain and not result != plain
        assert dict(result.items()) == plain
        for key in keys:
            assert key in result and result[key] == getattr(result, key) == result.get(key)
        assert "nothing" not in result and 3 not in result
        assert result.get("nothing") is None and result.get("nothing", 0) == 0
        with pytest.raises(KeyError):
            result["nothing"]
        assert result != {**plain, keys[0]: "other"}
    assert quota == {"limit": None, **{k: quota[k] for k in ("used", "remaining", "resets_at")}}
    assert quota["remaining"] is None and quota["used"] == sum(stats["requests"].values())
    resets = quota["resets_at"]
    assert isinstance(resets, dt.datetime) and resets.utcoffset() == dt.timedelta(0)
    assert resets.tzinfo is UTC
    assert type(stats["requests"]) is dict and stats["requests"]["GET /v2/events"] >= 1
    assert stats["quota"] == quota and type(stats["quota"]) is sv.Quota
    assert stats["requests_saved"] >= 1 and info["requests_saved"] == stats["requests_saved"]
    [entry] = info["entries"]
    assert type(entry) is sv.CacheEntry and entry["events"] == 60
    [(lo, hi)] = entry["ranges"]
    assert (lo, hi) == (emu.start, emu.end) and lo.tzinfo is UTC
    # The directory's contents without a client: the same class, no reads to count.
    at = _core.cache_info_at(info["path"])
    assert type(at) is sv.CacheInfo and at["requests_saved"] == 0
    assert at["entries"] == info["entries"]


def test_the_plan_and_the_cost_are_the_native_classes(emu):
    client = emu.client()
    assert type(client.last_cost) is sv.Cost is _core.Cost
    assert client.last_cost == sv.Cost(requests=0)
    plan = client.plan_events(emu.start, emu.end, progress=False)
    assert type(plan) is sv.EventPlan is _core.EventPlan and plan.events > 0 and plan.probes >= 1
    assert isinstance(plan.seconds, float) and isinstance(plan.exact, bool)
    cost = client.last_cost
    assert type(cost) is sv.Cost and cost.requests >= plan.probes
    assert cost.quota == client.quota() and type(cost.quota) is sv.Quota


# What the native module may import of the package: the exceptions it raises.
BINDING_NEEDS = {"surveillance", "surveillance._core", "surveillance._core_results"}
BINDING_NEEDS |= {"surveillance.errors"}

# Every result used as a program would, with the package's `__init__` left out: which of its
# modules does the native module import?
ALONE = """
import json, pathlib, sys, types, datetime as dt

package = types.ModuleType("surveillance")
package.__path__ = [sys.argv[1]]
sys.modules["surveillance"] = package
from surveillance import _core as c

t = dt.datetime(2026, 1, 5, 10, tzinfo=dt.timezone(dt.timedelta(hours=1)))
quota = c.Quota(2400, 570, 1830, resets_at="2026-01-06")
entry = c.CacheEntry("a", None, "GET /v2/events", None, [(t, "2026-01-06")], 1, 2, 3, 4)
failure = c.Failure(3, "t-3", 400, [("a", "bad", "error")], "refused", 4, "{}", "refused")
report = c.PublishReport(total=4, accepted=3, rejected=[failure])
shown = [quota.resets_at, entry["ranges"], failure.problems, report.to_pandas()]
for result in (quota, entry, c.CacheInfo("/c", 1, 2, 3, [entry]), c.Cost(3, quota),
               c.Stats({"GET /v2/events": 3}, 0, 0, 1, 2, 0, quota),
               c.EventPlan(1, 2, 3.0, 0.1, 1), report, failure):
    shown += [repr(result), str(result), result.to_dict()]
    shown += [result._repr_html_()] if hasattr(result, "_repr_html_") else []
try:
    report.raise_on_failure()
except Exception as e:
    shown.append(type(e).__module__)
c.to_json({"startTime": t, "day": t.date()})
print(json.dumps(sorted(m for m in sys.modules if m.split(".")[0] == "surveillance")))
"""


def test_the_native_module_imports_nothing_of_the_package_but_its_exceptions():
    package = pathlib.Path(sv.__file__).parent
    pytest.importorskip("pandas")
    run = subprocess.run(
        [sys.executable, "-c", ALONE, str(package)],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "PYTHONPATH": str(package.parent)},
    )
    assert run.returncode == 0, run.stderr
    assert set(json.loads(run.stdout)) == BINDING_NEEDS


def test_the_stubs_say_what_each_results_field_list_says(tmp_path):
    # Each result is made from one field list (`result_class!`): its constructor and
    # attributes in the stub are written from it by tests/result_stubs.py, and checked here.
    for name in result_stubs.RESULTS:
        cls = getattr(_core, name)
        names = [f for f, _ in cls._fields]
        assert names == [a for a, _ in cls._arguments] == list(inspect.signature(cls).parameters)
    assert result_stubs.mismatches(_core) == []
    # A stub that says otherwise fails: a field's annotation changed, another left out.
    stub = tmp_path / "_core_results.pyi"
    text = result_stubs.STUB.read_text(encoding="utf-8")
    text = text.replace("    def seconds(self) -> float:", "    def seconds(self) -> int:")
    stub.write_text(text.replace("        quota: Optional[Quota] = None,\n", ""))
    assert result_stubs.mismatches(_core, stub) == [
        "EventPlan.seconds: the stub says int, the field float",
        "Cost.__new__ takes [('requests', 'int'), ('retries', 'int'), ('rate_limited', 'int'), "
        "('waited', 'float'), ('outage', 'float')], its fields are [('requests', 'int'), "
        "('quota', 'Optional[Quota]'), ('retries', 'int'), ('rate_limited', 'int'), "
        "('waited', 'float'), ('outage', 'float')]",
    ]
