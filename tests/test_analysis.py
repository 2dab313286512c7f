"""surveillance.analysis on the emulator's data: tags, local time, dwell summary."""

from __future__ import annotations

import datetime as dt
import random

import pytest
import surveillance as sv
from surveillance import analysis
from surveillance.analysis import dwell_summary, location_tags, with_local_time

pd = pytest.importorskip("pandas")
pytest.importorskip("pyarrow")


@pytest.fixture(scope="module")
def data():
    with sv.Emulator(seed=4, sites=6, days=3, events_per_day=400) as emu:
        client = emu.client()
        yield {
            "dicts": client.events(emu.start, emu.end),
            "events": client.events(emu.start, emu.end, output="pandas"),
            "sites": client.sites(output="pandas"),
            "site_dicts": client.sites(),
        }


def test_location_tags_become_columns(data):
    sites = data["sites"]
    before = sites.copy()
    out = location_tags(sites)
    pd.testing.assert_frame_equal(sites, before)  # the input is left alone
    for record, brand, city in zip(data["site_dicts"], out["brand"], out["city"]):
        tags = dict(t.split(":", 1) for t in record["locationTags"])
        assert (brand, city) == (tags["Brand"], tags["City"])
    events = location_tags(data["events"])
    assert events["brand"].notna().all() and set(events["brand"]) <= set(out["brand"])


def test_location_tags_missing_and_odd_values():
    df = pd.DataFrame({"locationTags": [["Brand:A", "Brand:B", "plain", "City: Oslo "], None, []]})
    out = location_tags(df)
    assert out["brand"].tolist() == ["A", None, None]  # the first tag of a key wins
    assert out["city"].tolist() == ["Oslo", None, None]
    with pytest.raises(ValueError, match="tags"):
        location_tags(pd.DataFrame({"x": [1]}), column="tags")


def test_local_time_is_the_wall_clock_of_the_site(data):
    out = with_local_time(data["events"], data["sites"])
    zones = dict(zip(data["sites"]["id"], data["sites"]["timezone"]))
    assert out["timezone"].tolist() == [zones[s] for s in out["siteId"]]
    assert len(set(out["timezone"])) > 1
    # The service writes each startTime with its site's UTC offset: its wall clock is the
    # local time, computed here independently of the time zone database.
    by_id = {e["id"]: e["startTime"] for e in data["dicts"]}
    for event_id, local in zip(out["id"], out["localStartTime"]):
        wall = dt.datetime.fromisoformat(by_id[event_id]).replace(tzinfo=None)
        assert local.to_pydatetime() == wall


def test_local_time_from_dicts_and_unknown_sites(data):
    events = pd.json_normalize(data["dicts"])  # startTime as the service's ISO strings
    sites = pd.DataFrame(data["site_dicts"])
    out = with_local_time(events, sites.iloc[1:])
    unknown = events["siteId"] == data["site_dicts"][0]["id"]
    assert unknown.any()
    assert out.loc[unknown, "localStartTime"].isna().all()
    assert out.loc[unknown, "timezone"].isna().all()
    typed = with_local_time(data["events"], data["sites"])
    known = ~unknown.to_numpy()
    assert (
        out.loc[known, "localStartTime"].to_numpy() == typed.loc[known, "localStartTime"].to_numpy()
    ).all()
    with pytest.raises(ValueError, match="timezone"):
        with_local_time(events, sites.drop(columns="timezone"))


def test_dwell_summary_matches_a_manual_count(data):
    df = location_tags(with_local_time(data["events"], data["sites"]))
    summary = dwell_summary(df)
    assert list(summary.columns) == ["events", "median_sec", "p90_sec", "busiest_local_hour"]
    assert summary["events"].is_monotonic_decreasing
    assert summary["events"].sum() == len(df)
    for site, group in df.groupby("siteId"):
        seconds = group["details.duration_sec"]
        row = summary.loc[site]
        assert row["events"] == len(group)
        assert row["median_sec"] == seconds.median()
        assert row["p90_sec"] == pytest.approx(seconds.quantile(0.9))
        counts = group["localStartTime"].dt.hour.value_counts()
        assert row["busiest_local_hour"] == min(h for h, n in counts.items() if n == counts.max())
    two = dwell_summary(df, by=["brand", "city"])
    assert two.index.names == ["brand", "city"] and two["events"].sum() == len(df)
    plain = dwell_summary(pd.json_normalize(data["dicts"]), by="siteId")
    assert "busiest_local_hour" not in plain.columns  # no local time: no busiest hour
    assert plain["events"].to_dict() == summary["events"].to_dict()
    with pytest.raises(ValueError, match="brand"):
        dwell_summary(data["events"], by="brand")


def test_demo_quantile_agrees_with_pandas():
    rng = random.Random(1)
    for n in (1, 2, 3, 10, 101):
        values = [rng.randint(1, 3000) for _ in range(n)]
        assert analysis.quantile(values, 0.9) == pytest.approx(pd.Series(values).quantile(0.9))


def test_the_plain_site_rows_are_dwell_summary(data):
    """The demo's statistics (``site_rows``, without pandas) are ``dwell_summary``'s."""
    df = with_local_time(data["events"], data["sites"])
    df = df[df[analysis.DURATION].notna()]
    rows = analysis.site_rows(
        list(df["siteId"]), list(df[analysis.DURATION]), list(df["localStartTime"].dt.hour)
    )
    summary = dwell_summary(df, by="siteId")
    assert [r[0] for r in rows] == list(summary.index)
    for site, events, median, p90, busiest in rows:
        got = summary.loc[site]
        assert (events, busiest) == (got["events"], got["busiest_local_hour"])
        assert median == pytest.approx(got["median_sec"]) and p90 == pytest.approx(got["p90_sec"])
