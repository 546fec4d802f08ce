"""HeapTrimmer: when the scheduler process hands its free heap pages back to the OS."""

import sys

import pytest

from radixgen.runtime.server.heap_trim import HeapTrimmer, _libc_trim


class FakeClock:
    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now


def make(clock):
    calls = []
    trimmer = HeapTrimmer(idle_interval_s=5, busy_interval_s=60, clock=clock, trim=calls.append)
    return trimmer, calls


def test_trims_when_going_idle_but_not_more_often_than_the_idle_interval():
    clock = FakeClock()
    trimmer, calls = make(clock)
    clock.now = 1
    assert not trimmer.after_step(idle=False)
    assert not trimmer.after_step(idle=True)  # idle again after 1 s: too soon since the start
    clock.now = 7
    assert not trimmer.after_step(idle=True)  # still idle: not a transition
    trimmer.after_step(idle=False)
    assert trimmer.after_step(idle=True)  # went idle, 7 s since the last trim
    clock.now = 8
    trimmer.after_step(idle=False)
    assert not trimmer.after_step(idle=True)  # 1 s after the last trim
    assert calls == [0] and trimmer.num_trims == 1


def test_sustained_load_trims_every_busy_interval():
    clock = FakeClock()
    trimmer, calls = make(clock)
    trims = 0
    for step in range(1, 3001):
        clock.now = step * 0.05  # 150 s of 50 ms steps, never idle
        trims += trimmer.after_step(idle=False)
    assert trims == len(calls) == 2


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's malloc_trim")
def test_glibc_trim_is_found_and_runs():
    trim = _libc_trim()
    assert trim is not None and trim(0) in (0, 1)
    assert HeapTrimmer(idle_interval_s=0).after_step(idle=False) is False
