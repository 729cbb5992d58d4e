"""The one label rule: each label, and which wins when several apply."""
import pytest
from stackbook.evidence.label import Label, arm_label


@pytest.mark.parametrize("verdict, discarded, kwargs, label", [
    ("PASS", [False, False], {}, Label.ACCEPTED),
    ("PASS", [True, False], {}, Label.ACCEPTED),              # one point discarded: the rest still ranks
    ("HOLD", [False], {}, Label.HOLD),
    (None, [False], {}, Label.NOT_GATED),                     # measured, but the canaries never ran
    ("HOLD", None, {}, Label.HOLD),                           # the sweep was skipped on HOLD
    ("PASS", [False], {"comparable": False}, Label.NOT_COMPARABLE),
    ("PASS", [True, True], {}, Label.DISCARDED),
    ("PASS", [False], {"engine_died": True}, Label.ENGINE_DIED),
    (None, None, {}, Label.NOT_MEASURED),                     # sizing only
    ("PASS", None, {}, Label.NOT_MEASURED),
])
def test_each_label(verdict, discarded, kwargs, label):
    assert arm_label(verdict, discarded, **kwargs) is label


def test_precedence_when_several_apply():
    assert arm_label("HOLD", [True], engine_died=True, comparable=False) is Label.ENGINE_DIED
    assert arm_label("HOLD", [True], comparable=False) is Label.HOLD
    assert arm_label("PASS", [True], comparable=False) is Label.NOT_COMPARABLE


def test_labels_read_as_the_files_write_them():
    assert Label.HOLD == "HOLD" and f"{Label.NOT_COMPARABLE}" == "not comparable"
    assert [label.ranked for label in Label] == [True, False, False, False, False, False, False]
    assert Label.NOT_GATED.reason == "measured without the canaries (stages without canaries)"
    assert Label.HOLD.reason == "canaries HOLD"
