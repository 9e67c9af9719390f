"""Gains as people read them: the unit that suits the magnitude and three significant
figures, from the one formatter (kb/units.py) every renderer uses."""

import pytest

from kb import units
from kb.records import Gain


@pytest.mark.parametrize("value, unit, shown", [
    (0.0194, "ms", "19.4 µs"),      # the all-reduce latency of par-pcie-custom-allreduce-disabled
    (0.0040, "ms", "4.00 µs"),
    (19.4, "us", "19.4 µs"),
    (999.96, "ms", "1.00 s"),       # rounding carries into the next unit
    (2500, "ms", "2.50 s"),
    (0.5, "s", "500 ms"),
    (12, "ms", "12.0 ms"),
    (880, "tok/s", "880 tok/s"),
    (3740, "tok/s", "3.74 k tok/s"),
    (12345, "tok/s", "12.3 k tok/s"),
    (8424.86, "tok/s", "8.42 k tok/s"),
    (1.234, "req/s", "1.23 req/s"),  # a unit without steps keeps its name, three figures
    (131072, "tokens", "131,000 tokens"),
    (0.0, "ms", "0 ms"),
])
def test_quantity_picks_the_unit_and_three_figures(value, unit, shown):
    assert units.quantity(value, unit) == shown


def test_a_change_names_one_unit_when_both_sides_share_it():
    assert units.change(0.0194, 0.0040, "ms") == "19.4 → 4.00 µs"
    assert units.change(880, 3740, "tok/s") == "880 tok/s → 3.74 k tok/s"
    assert units.change(3100, 12345, "tok/s") == "3.10 → 12.3 k tok/s"


def test_gain_description_of_the_shipped_all_reduce_row():
    g = Gain(metric="all-reduce latency 4 KB", before=0.0194, after=0.0040, unit="ms")
    assert g.describe() == "all-reduce latency 4 KB: 19.4 → 4.00 µs (4.85x)"
    assert Gain(metric="TPOT", after=0.0123, unit="s").describe() == "TPOT: 12.3 ms"


def test_kb_ask_shows_the_shipped_gain_in_microseconds(kb):
    proc = kb("ask", "custom allreduce disabled on more than two PCIe-only GPUs", "-n", "1")
    assert proc.returncode == 0, proc.stderr
    assert "par-pcie-custom-allreduce-disabled" in proc.stdout
    assert "gain     all-reduce latency 4 KB: 19.4 → 4.00 µs (4.85x)" in proc.stdout
    assert "0.02 → 0 ms" not in proc.stdout
