"""A shared-prefix workload's tenants of unequal popularity: group g drawn with weight 1/g^s,
and no skew drawing exactly as every earlier run drew."""
import random

import pytest
from stackbook.loadgen.workload import draw_group, zipf_weights


def test_zipf_tenants_skew_and_no_skew_draws_as_before():
    assert zipf_weights(3, 1.0) == pytest.approx([6 / 11, 3 / 11, 2 / 11])
    r1, r2 = random.Random(7), random.Random(7)
    assert [draw_group(r1, 5, 0.0) for _ in range(50)] == [r2.randrange(5) for _ in range(50)]
    r = random.Random(3)
    drawn = [draw_group(r, 4, 1.2) for _ in range(4000)]
    assert [drawn.count(g) for g in range(4)] == sorted((drawn.count(g) for g in range(4)), reverse=True)
    assert drawn.count(0) / 4000 == pytest.approx(zipf_weights(4, 1.2)[0], abs=0.03)
