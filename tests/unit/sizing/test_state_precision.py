"""One fallback for the recurrent-state precision, wherever it is needed."""
from types import SimpleNamespace

from stackbook import sizing


def test_state_precision_asked_else_the_models_own_else_fp32():
    declares_bf16, declares_nothing = SimpleNamespace(state_dtype="bf16"), SimpleNamespace(state_dtype=None)
    assert sizing.resolve_state_precision(declares_bf16, "fp32") == "fp32"
    assert sizing.resolve_state_precision(declares_bf16, "none") == "bf16"   # the protocol's `state: none`
    assert sizing.resolve_state_precision(declares_bf16, None) == "bf16"
    assert sizing.resolve_state_precision(declares_nothing, "none") == "fp32"
