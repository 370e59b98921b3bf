"""CPU profiles as figures per roundtrip: parsing py-spy and V8 output, self and total, differences by round,
speedscope and folded exports, and the flame graph's HTML."""

import html
import json
import re

import pytest

from pingpong.harness.analysis.profiles import (SPEEDSCOPE_SCHEMA, Profile, difference, function_costs,
                                                parse_collapsed, parse_cpuprofile, python_frame_label,
                                                read_profile_file, sampled_cpu_us_per_roundtrip, to_collapsed,
                                                to_speedscope, top, write_speedscope_file)
from pingpong.harness.analysis.stats import RANGE
from pingpong.harness.report.flamegraph import SVG_NAMESPACE, WIDTH_PX, fitted_label, flame_graph_html

PY_SPY_RAW = """\
<module> (server.py:40);run (asyncio/base_events.py:600);select (selectors.py:468) 6
<module> (server.py:40);run (asyncio/base_events.py:612);select (selectors.py:470) 4
<module> (server.py:40);run (asyncio/base_events.py:600);_read_ready (asyncio/selector_events.py:860) 3

<module> (server.py:40);run (asyncio/base_events.py:600);epoll_wait (libc.so.6) 2
<module> (server.py:40);_PyEval_EvalFrameDefault (ceval.c:1200) 1
process 4242:"python -m servers.aiohttp_server --port 1";<module> (server.py:40);0x7f6985e4524a (libc.so.6) 4
process 4343:"python -m servers.aiohttp_server --port 2";<module> (server.py:41);0x7f0000000001 (libc.so.6) 1
"""


def profile_of(stacks, roundtrips=1000, side="server", wall_s=1.0):
    return Profile(side=side, runtime="python", profiler="test", interval_s=0.001, stacks=stacks,
                   roundtrips=roundtrips, wall_s=wall_s)


def test_collapsed_stacks_merge_line_numbers_and_count_samples_times_interval():
    """Samples of one function on different lines add up; native frames keep their text, unresolved ones add up by
    library; the process frame of --subprocesses goes; a native wait at the leaf is off CPU; seconds = count ×
    interval."""
    profile = parse_collapsed(PY_SPY_RAW, 0.01, side="server", roundtrips=100, wall_s=2.0)
    run = ("<module> (server.py)", "run (asyncio/base_events.py)")
    assert profile.stacks == {run + ("select (selectors.py)",): 10 * 0.01,
                              run + ("_read_ready (asyncio/selector_events.py)",): 3 * 0.01,
                              ("<module> (server.py)", "_PyEval_EvalFrameDefault (ceval.c:1200)"): 1 * 0.01,
                              ("<module> (server.py)", "? (libc.so.6)"): 5 * 0.01}
    assert (profile.side, profile.runtime, profile.profiler, profile.interval_s, profile.wall_s) == (
        "server", "python", "py-spy", 0.01, 2.0)
    assert python_frame_label("f (dir (1)/a.py:12)") == "f (dir (1)/a.py)"
    assert python_frame_label("thread (0x7F3A)") == "thread (0x7F3A)"


def test_collapsed_lines_that_are_not_stacks_are_refused_and_idle_samples_dropped():
    """A line without a count is an error, not a silent zero; '(idle)' samples are off CPU; '(root)' is no frame."""
    with pytest.raises(ValueError, match="line 2"):
        parse_collapsed("a (a.py:1) 3\na (a.py:1)\n", 0.01, side="client", roundtrips=1, wall_s=1.0)
    profile = parse_collapsed("(root);a (a.py:1) 3\n(root);(idle) 5\n", 0.5, side="client", roundtrips=1, wall_s=4)
    assert profile.stacks == {("a (a.py)",): 1.5}


def cpuprofile():
    """(root) → main → anonymous handler, (root) → (garbage collector), (root) → (idle): 5 samples."""
    return {
        "nodes": [
            {"id": 1, "callFrame": {"functionName": "(root)", "url": "", "lineNumber": -1}, "hitCount": 0,
             "children": [2, 4, 5]},
            {"id": 2, "callFrame": {"functionName": "main", "url": "file:///app/node/ws_server.js", "lineNumber": 3},
             "hitCount": 1, "children": [3]},
            {"id": 3, "callFrame": {"functionName": "", "url": "file:///app/node/lib/handler.js", "lineNumber": 9},
             "hitCount": 2},
            {"id": 4, "callFrame": {"functionName": "(garbage collector)", "url": "", "lineNumber": -1},
             "hitCount": 1},
            {"id": 5, "callFrame": {"functionName": "(idle)", "url": "", "lineNumber": -1}, "hitCount": 1},
        ],
        "samples": [2, 3, 3, 5, 4],
        "timeDeltas": [100, 200, 300, 400, 500],  # samples at 1100, 1300, 1600, 2000, 2500 µs
        "startTime": 1000,
        "endTime": 3100,
    }


def test_cpuprofile_gives_each_sample_the_gap_to_the_next_and_drops_idle():
    """Sample i lasts timeDeltas[i+1] µs, the last until endTime; (idle) is dropped, (garbage collector) kept."""
    profile = parse_cpuprofile(cpuprofile(), side="client", roundtrips=7)
    main = "main (ws_server.js)"
    assert profile.stacks == {(main,): 200 / 1e6, (main, "(anonymous) (handler.js)"): 700 / 1e6,
                              ("(garbage collector)",): 600 / 1e6}
    assert profile.wall_s == 2100 / 1e6 and profile.interval_s == 300 / 1e6
    assert (profile.side, profile.runtime, profile.profiler, profile.roundtrips) == (
        "client", "node", "v8 cpu profiler", 7)


def test_cpuprofile_with_mismatched_samples_and_deltas_is_refused():
    """One time delta per sample, or the file is not one V8 wrote."""
    broken = cpuprofile() | {"timeDeltas": [100, 200]}
    with pytest.raises(ValueError, match="5 samples but 2 timeDeltas"):
        parse_cpuprofile(broken, side="server", roundtrips=1)


def test_recursion_counts_once_in_total_and_self_is_the_leafs():
    """f calling itself appears once per stack in its total; self time belongs to each stack's last frame."""
    profile = profile_of({("main", "f", "f", "g"): 0.5, ("main", "f"): 0.25, ("main",): 0.125})
    costs = {cost.label: cost for cost in function_costs(profile)}
    assert [cost.label for cost in function_costs(profile)] == ["g", "f", "main"]
    assert (costs["f"].self_us_per_roundtrip, costs["f"].total_us_per_roundtrip) == (250.0, 750.0)
    assert (costs["g"].self_us_per_roundtrip, costs["g"].total_us_per_roundtrip) == (500.0, 500.0)
    assert (costs["main"].self_us_per_roundtrip, costs["main"].total_us_per_roundtrip) == (125.0, 875.0)
    assert (costs["f"].self_s, costs["f"].total_s) == (0.25, 0.75)
    assert [cost.label for cost in top(profile, 2, by="total")] == ["main", "f"]
    assert [cost.label for cost in top(profile, 1)] == ["g"]


def test_cpu_per_roundtrip_is_sampled_seconds_over_roundtrips():
    """100 samples of 10 ms over 1000 roundtrips are 1000 µs per roundtrip; no roundtrip, no figure."""
    profile = parse_collapsed("main (a.py:1) 60\nmain (a.py:1);f (a.py:9) 40\n", 0.01, side="server",
                              roundtrips=1000, wall_s=1.0)
    assert sampled_cpu_us_per_roundtrip(profile) == 1000.0
    assert [(cost.label, cost.self_us_per_roundtrip) for cost in function_costs(profile)] == [
        ("main (a.py)", 600.0), ("f (a.py)", 400.0)]
    with pytest.raises(ValueError, match="no roundtrip"):
        sampled_cpu_us_per_roundtrip(profile_of({("main",): 1.0}, roundtrips=0))


def test_difference_takes_the_median_of_per_round_differences_with_its_interval():
    """Five rounds: f costs 2, 5, 1, 20, 3 µs more than in the reference (median 3, range [1, 20] at 93.75%); g,
    only in the reference, 4 µs less every round; sorted by the absolute median self difference."""
    million = 1_000_000  # roundtrips, so that one second is one µs per roundtrip
    f_in_cell = [12.0, 15.0, 11.0, 30.0, 13.0]
    cell = [profile_of({("main", "f"): seconds, ("main", "h"): 1.0}, roundtrips=million) for seconds in f_in_cell]
    reference = [profile_of({("main", "f"): 10.0, ("main", "g"): 4.0}, roundtrips=million) for _ in range(5)]
    found = difference(cell, reference)
    assert [entry.label for entry in found] == ["g", "f", "h", "main"]
    g, f, h, main = found
    assert (g.self_difference_us, g.self_interval.low, g.self_interval.high) == (-4.0, -4.0, -4.0)
    assert (f.self_difference_us, f.self_us_a, f.self_us_b, f.rounds) == (3.0, 13.0, 10.0, 5)
    assert (f.self_interval.low, f.self_interval.high, f.self_interval.kind) == (1.0, 20.0, RANGE)
    assert f.self_interval.coverage == 0.9375
    assert f.interval_label() == "range of 5 (covers the median 93.8%)"
    assert h.self_difference_us == 1.0
    assert (main.self_difference_us, main.total_difference_us) == (0.0, 0.0)  # totals: 13, 16, 12, 31, 14 vs 14
    assert (main.total_interval.low, main.total_interval.high) == (-2.0, 17.0)


def test_difference_of_one_round_has_no_interval_and_rounds_must_pair():
    """One round is a difference without spread; unequal round counts or sides are refused."""
    (only,) = difference([profile_of({("f",): 0.5})], [profile_of({("f",): 0.25})])
    assert (only.self_difference_us, only.self_interval, only.total_interval) == (250.0, None, None)
    assert only.interval_label() == "no interval (1 value)"
    with pytest.raises(ValueError, match="one profile per round"):
        difference([profile_of({("f",): 0.5})] * 2, [profile_of({("f",): 0.5})])
    with pytest.raises(ValueError, match="server profile with a client"):
        difference([profile_of({("f",): 0.5})], [profile_of({("f",): 0.5}, side="client")])


def test_speedscope_file_indexes_valid_frames_and_weighs_the_profiles_seconds():
    """Every sample is a list of valid frame indices spelling its stack; weights are the stacks' seconds."""
    stacks = {("main", "f", "g"): 0.5, ("main", "f"): 0.25, ("main", "h"): 0.125}
    document = to_speedscope(profile_of(stacks))
    assert document["$schema"] == SPEEDSCOPE_SCHEMA
    frames = [frame["name"] for frame in document["shared"]["frames"]]
    assert frames == ["main", "f", "g", "h"]
    (profile,) = document["profiles"]
    assert (profile["type"], profile["unit"], profile["startValue"], profile["endValue"]) == (
        "sampled", "seconds", 0, 0.875)
    assert len(profile["samples"]) == len(profile["weights"]) == 3
    assert all(0 <= index < len(frames) for sample in profile["samples"] for index in sample)
    rebuilt = {tuple(frames[index] for index in sample): weight
               for sample, weight in zip(profile["samples"], profile["weights"])}
    assert rebuilt == stacks and sum(profile["weights"]) == 0.875
    json.dumps(document)  # serialisable as it is


def test_folded_output_is_sorted_whole_microseconds_and_reads_back():
    """Brendan Gregg's format: 'a;b N' sorted, N in µs; a ';' inside a label cannot split a frame."""
    profile = profile_of({("main", "f"): 0.0015, ("main",): 0.25, ("main", "x;y"): 0.0000004})
    assert to_collapsed(profile) == "main 250000\nmain;f 1500\n"
    again = parse_collapsed(to_collapsed(profile), 1e-6, side="server", roundtrips=1000, wall_s=1.0)
    assert again.stacks == {("main",): 250000 * 1e-6, ("main", "f"): 1500 * 1e-6}
    assert to_collapsed(profile_of({("a;b",): 1.0})) == "a:b 1000000\n"


def test_files_round_trip_through_the_read_and_write_helpers(tmp_path):
    """A .cpuprofile is read as V8's; other files as collapsed stacks, which need their interval and window."""
    path = tmp_path / "client.cpuprofile"
    path.write_text(json.dumps(cpuprofile()))
    assert read_profile_file(path, side="client", roundtrips=7).stacks[("(garbage collector)",)] == 600 / 1e6
    folded = tmp_path / "server.txt"
    folded.write_text("main (a.py:3) 4\n")
    with pytest.raises(ValueError, match="interval"):
        read_profile_file(folded, side="server", roundtrips=1)
    profile = read_profile_file(folded, side="server", roundtrips=1, interval_s=0.25, wall_s=1.0)
    assert profile.stacks == {("main (a.py)",): 1.0}
    write_speedscope_file(profile, tmp_path / "server.speedscope.json")
    assert json.loads((tmp_path / "server.speedscope.json").read_text()) == to_speedscope(profile)


def titles_of(fragment):
    return re.findall(r"<title>([^\n<]*)\n", fragment)


def test_flame_graph_draws_one_rect_per_stack_position_with_its_figures():
    """'b' under 'a' and 'b' under 'main' are two rects; widths are shares of all the CPU sampled."""
    stacks = {("main", "a", "b"): 0.25, ("main", "b"): 0.5, ("main", "a"): 0.25}
    fragment = flame_graph_html(profile_of(stacks), "py-ws × node-ws")
    assert sorted(titles_of(fragment)) == ["a", "all", "b", "b", "main"]
    assert f'width="{WIDTH_PX:.2f}"' in fragment and 'width="600.00"' in fragment and 'width="300.00"' in fragment
    assert "<title>a\n500 µs per roundtrip total, 250 µs self (50.0% of sampled CPU)</title>" in fragment
    assert ">main</text>" in fragment
    assert "1000 µs of CPU per roundtrip" in fragment and "py-ws × node-ws" in fragment
    reordered = dict(reversed(list(stacks.items())))
    assert flame_graph_html(profile_of(reordered), "py-ws × node-ws") == fragment  # deterministic


def test_flame_graph_escapes_labels_and_fetches_nothing():
    """A label with markup is shown as text, never run; the only URL is the SVG namespace."""
    fragment = flame_graph_html(profile_of({("<script>alert(1)</script> (x.js)",): 1.0}), "<b>title</b>")
    assert "<script" not in fragment and "<b>" not in fragment
    assert html.escape("<script>alert(1)</script> (x.js)") in fragment
    assert re.findall(r"https?://[^\s\"'<>]+", fragment) == [SVG_NAMESPACE]


def test_flame_graph_shortens_labels_and_says_when_nothing_was_sampled():
    """A label too long for its rect ends in '…'; a rect of under 3 characters has none; no CPU, no graph."""
    assert fitted_label("abcdefghij", 6 + 6.6 * 5.5) == "abcd…"
    assert fitted_label("abcdefghij", 6 + 6.6 * 2.5) is None
    assert fitted_label("abc", 6 + 6.6 * 3.5) == "abc"
    empty = flame_graph_html(profile_of({}), "idle")
    assert "<svg" not in empty and "No CPU sampled" in empty
