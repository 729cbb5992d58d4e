import json
from pathlib import Path

import pytest


def zero_cache_hits(run: Path) -> Path:
    """The committed AVX2-host run predates per-request cold prompts: llama-server served the chat
    template's opening from its prompt cache (15% of prompt tokens). A copy read as a cold run,
    for tests about other things than the cache."""
    for results in Path(run).glob("arms/*/results.json"):
        data = json.loads(results.read_text())
        for point in data["sweep"]["points"].values():
            pc = point.get("prefix_cache") or {}
            for key in ("engine_hit_rate", "reported_hit_rate"):
                if pc.get(key):
                    pc[key] = 0.0
        results.write_text(json.dumps(data))
    return run


@pytest.fixture
def cold():
    return zero_cache_hits
