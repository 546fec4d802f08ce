"""`common_prefix_len` (C-level block comparisons) equals the page-by-page definition."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from radixgen.radix.tree_node import common_prefix_len


def _page_by_page(key, ids, start, end, page):
    limit = min(len(key), end - start)
    limit -= limit % page
    n = 0
    while n < limit and key[n : n + page] == ids[start + n : start + n + page]:
        n += page
    return n


@st.composite
def _cases(draw):
    page = draw(st.sampled_from([1, 2, 16]))
    shared = draw(st.integers(0, 700))
    base = draw(st.lists(st.integers(0, 3), min_size=shared, max_size=shared))
    key = tuple(base + draw(st.lists(st.integers(0, 3), max_size=300)))
    before = draw(st.lists(st.integers(0, 3), max_size=5))
    ids = tuple(before + base + draw(st.lists(st.integers(0, 3), max_size=300)))
    start = len(before)
    end = draw(st.integers(start, len(ids)))
    return key, ids, start, end, page


@settings(max_examples=400, deadline=None)
@given(_cases())
def test_common_prefix_len_is_the_page_by_page_match(case):
    assert common_prefix_len(*case) == _page_by_page(*case)


def test_a_long_match_and_a_late_difference():
    key = tuple(range(40_000))
    ids = key[:33_001] + (-1,) + key[33_002:]
    assert common_prefix_len(key, key, 0, len(key), 16) == 40_000
    assert common_prefix_len(key, ids, 0, len(ids), 1) == 33_001
    assert common_prefix_len(key, ids, 0, len(ids), 16) == 33_001 - 33_001 % 16
    assert common_prefix_len(key, ids, 0, 20_000, 16) == 20_000
