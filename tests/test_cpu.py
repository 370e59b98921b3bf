"""CPU time of process trees: the parsers on fixed text, the delta's rules, and the sources on this process."""

import os
import threading
import time

import pytest

from pingpong.harness.system import cpu

# /proc/PID/stat of a process whose name holds a space and a parenthesis; utime 1234 and stime 56 ticks.
STAT = (b"4242 (odd) name) S 1 4242 4242 0 -1 4194560 900 0 0 0 1234 56 0 0 20 0 11 0 777 1000000 2000 "
        b"18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0\n")


def test_stat_ticks_are_utime_plus_stime_after_the_name():
    """Fields 14 and 15 are found however many spaces and parentheses the process name holds."""
    assert cpu.parse_stat_ticks(STAT) == 1234 + 56


def test_schedstat_gives_the_runtime_in_nanoseconds():
    assert cpu.parse_schedstat_ns(b"124075692 41035725 157\n") == 124075692


def test_delta_counts_survivors_and_new_threads_and_drops_what_exited():
    """A thread that exited drops out, one born in between counts whole, a whole process counts its difference."""
    before = {(10, 10): 1_000, (10, 11): 5_000, (20, 0): 7_000}
    after = {(10, 10): 3_000, (10, 12): 400, (20, 0): 9_000, (30, 0): 50_000}
    assert cpu.cpu_delta(before, after) == pytest.approx((2_000 + 400 + 2_000) / 1e9)


def test_a_side_whose_processes_all_exited_before_the_windows_end_has_no_cpu_figure():
    """Every process of the start sample gone from the end one: unknown (None), not 0.0; one of two still there
    counts alone; a side with nothing at the start used nothing."""
    before = {(10, 0): 1_000, (20, 0): 7_000}
    assert cpu.window_cpu_s(before, {}) is None
    assert cpu.window_cpu_s({(10, 10): 1_000, (10, 11): 5_000}, {(30, 30): 9_000}) is None
    assert cpu.window_cpu_s(before, {(20, 0): 9_500}) == pytest.approx(2_500 / 1e9)
    assert cpu.window_cpu_s({(10, 10): 1_000}, {(10, 10): 1_000, (10, 12): 400}) == pytest.approx(400 / 1e9)
    assert cpu.window_cpu_s({}, {}) == 0.0
    # the process is still there, its thread of the start gone: a process, not a thread, must remain
    assert cpu.window_cpu_s({(10, 10): 1_000}, {(10, 12): 400}) == pytest.approx(400 / 1e9)


def test_the_process_clock_id_is_the_kernels_for_a_pid():
    """MAKE_PROCESS_CPUCLOCK(pid, CPUCLOCK_SCHED): ~pid shifted by 3, low bits 2; it reads our own CPU time."""
    assert cpu.process_clock_id(1) == -14
    own = time.clock_gettime_ns(cpu.process_clock_id(os.getpid()))
    assert abs(own - time.process_time_ns()) < 50_000_000


def test_every_source_sees_a_busy_thread_and_only_schedstat_loses_it_when_it_exits():
    """0.2 s spun in a second thread shows as ~0.2 s in every source while the thread lives; once it has exited,
    the process clock and stat ticks still count it, schedstat (per live thread) no longer does."""
    finish = threading.Event()

    def spin():
        deadline = time.thread_time() + 0.2
        while time.thread_time() < deadline:
            pass
        spun.set()
        finish.wait(10)

    spun = threading.Event()
    pid = os.getpid()
    sources = (cpu.PROCESS_CLOCK, cpu.SCHEDSTAT, cpu.STAT_TICKS)
    before = {source: cpu.sample([pid], source) for source in sources}
    thread = threading.Thread(target=spin)
    thread.start()
    assert spun.wait(10)
    for source in sources:
        seconds = cpu.cpu_delta(before[source], cpu.sample([pid], source))
        assert 0.19 <= seconds < 0.25 + source.resolution_s, (source, seconds)
    finish.set()
    thread.join()
    # join() returns once the Python thread is done; the kernel's task may outlive it a moment (longer on a busy CPU)
    deadline = time.monotonic() + 10
    while os.path.exists(f"/proc/{pid}/task/{thread.native_id}") and time.monotonic() < deadline:
        time.sleep(0.001)
    assert cpu.cpu_delta(before[cpu.PROCESS_CLOCK], cpu.sample([pid], cpu.PROCESS_CLOCK)) >= 0.19
    assert cpu.cpu_delta(before[cpu.SCHEDSTAT], cpu.sample([pid], cpu.SCHEDSTAT)) < 0.1
    assert cpu.cpu_source() == cpu.PROCESS_CLOCK  # on Linux; the fallbacks are for kernels without it
    assert cpu.sample([2**22 + 12345]) == {}  # no such process: nothing, no error


def test_minor_faults_are_field_10_after_the_name():
    """minflt (900 in STAT) is counted after the name's last ')', like the ticks."""
    assert cpu.parse_minor_faults(STAT) == 900


def test_fault_deltas_count_processes_in_both_samples_only():
    assert cpu.faults_delta({1: 10, 2: 5}, {1: 14, 3: 99}) == 4
    assert cpu.faults_delta({1: 10}, {2: 3}) is None


def test_touching_fresh_pages_shows_as_minor_faults_of_this_process():
    """1,000 newly mapped pages, each written once, are at least 1,000 minor faults in /proc/self/stat."""
    import mmap

    before = cpu.minor_faults([os.getpid()])
    region = mmap.mmap(-1, 1000 * mmap.PAGESIZE)
    for page in range(1000):
        region[page * mmap.PAGESIZE] = 1
    after = cpu.minor_faults([os.getpid()])
    region.close()
    assert cpu.faults_delta(before, after) >= 1000


def test_steal_time_is_the_eighth_number_of_each_cpu_line():
    from pingpong.harness.system import kernel_signals

    text = ("cpu  2021632 951 562291 3486095 3676 0 194723 1855 0 0\n"
            "cpu0 809708 510 244773 1979247 759 0 98044 872 0 0\n"
            "cpu1 1211924 440 317517 1506848 2916 0 96679 983 0 0\nintr 1 2 3\n")
    assert kernel_signals.parse_cpu_steal(text) == {"cpu0": 872, "cpu1": 983}
    later = {"cpu0": 872 + kernel_signals.CLOCK_TICKS_PER_S, "cpu1": 983}
    assert kernel_signals.steal_seconds({"cpu0": 872, "cpu1": 983}, later) == {"cpu0": 1.0, "cpu1": 0.0}
    assert kernel_signals.steal_seconds({"cpu0": 872, "cpu1": 983}, later, {"cpu1"}) == {"cpu1": 0.0}
    assert set(kernel_signals.read_cpu_steal()) >= {"cpu0"}


def test_a_client_waited_for_without_reaping_still_shows_its_cpu_until_it_is_reaped():
    """processes.wait_exited sees the exit and leaves a zombie, whose CPU every source still reads: what lets the
    window's end sample count a client that exits as its window ends (measure/local.py reaps after the window)."""
    import subprocess
    import sys

    from pingpong.harness.system import processes
    child = subprocess.Popen([sys.executable, "-c", "sum(range(3 * 10**6))"])
    try:
        assert processes.wait_exited(child, 30) is True
        assert child.returncode is None  # not reaped
        for name, read in cpu.READERS.items():
            assert sum(read(child.pid).values()) > 0, name
    finally:
        assert processes.wait(child, 30) == 0
    with pytest.raises(OSError):
        cpu.READERS["process-clock"](child.pid)  # reaped: its clock is gone with it
