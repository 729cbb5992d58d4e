"""One memory convention for the accelerator catalog: the datasheet's GB in bytes, a source per
entry, and the usable fraction stated once."""
from stackbook import sizing
from stackbook.sizing.hardware import USABLE_FRACTION


def test_every_entry_states_its_memory_in_datasheet_gb_with_a_source():
    for key, hw in sizing.accelerator_catalog().items():
        assert hw.memory_bytes % 1_000_000_000 == 0, key          # a whole number of datasheet GB
        assert hw.source.strip(), key
        assert hw.usable_bytes == hw.memory_bytes * USABLE_FRACTION


def test_the_two_80gb_cards_offer_the_same_memory():
    a100, h100 = sizing.accelerator("a100-80gb"), sizing.accelerator("h100-sxm")
    assert a100.usable_bytes == h100.usable_bytes == 80e9
