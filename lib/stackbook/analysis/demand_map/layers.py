"""The demand map's arithmetic: D_k = V_k x S_k per centre, capacity-adjusted D_k / m_k, the
throughput bound lambda <= min_k m_k / D_k and the bottleneck (the largest D_k / m_k); and the
seed article's illustrative map over five layers (optimization domains, the teaching example)."""
from __future__ import annotations

from dataclasses import asdict, dataclass, replace


@dataclass(frozen=True)
class Layer:
    name: str
    visits: float          # V_k: visits per request
    service_ms: float      # S_k: service time per visit
    capacity: float = 1.0  # m_k: equivalent parallel capacity
    why_m: str = ""        # why m_k is what it is
    source: str = ""       # where V_k and S_k come from

    @property
    def demand_ms(self) -> float:
        return self.visits * self.service_ms

    @property
    def adjusted_ms(self) -> float:
        return self.demand_ms / self.capacity


# Illustrative values (not measurements) chosen to give the capacity-adjusted scores of the
# seed article's demand map: 8, 12, 3, 13 and 2.5 ms.
_ILLUSTRATIVE = "illustrative (the seed's worked example), not a measurement"
SEED_LAYERS = (
    Layer("hardware", visits=1, service_ms=8.0, why_m=_ILLUSTRATIVE, source=_ILLUSTRATIVE),
    Layer("kernels", visits=24, service_ms=0.5, why_m=_ILLUSTRATIVE, source=_ILLUSTRATIVE),
    Layer("host", visits=4, service_ms=0.75, why_m=_ILLUSTRATIVE, source=_ILLUSTRATIVE),
    Layer("runtime", visits=2, service_ms=6.5, why_m=_ILLUSTRATIVE, source=_ILLUSTRATIVE),
    Layer("orchestration", visits=1, service_ms=5.0, capacity=2, why_m=_ILLUSTRATIVE, source=_ILLUSTRATIVE),
)


def demand_map(layers) -> dict:
    """Demands, the ranking by capacity-adjusted demand, the bottleneck and the bound."""
    rows = [{**asdict(layer), "demand_ms": round(layer.demand_ms, 9), "adjusted_ms": round(layer.adjusted_ms, 9)}
            for layer in layers]
    ranked = sorted(rows, key=lambda r: r["adjusted_ms"], reverse=True)
    bottleneck = ranked[0]
    return {
        "layers": rows,
        "ranking": [r["name"] for r in ranked],
        "bottleneck": bottleneck["name"],
        "throughput_bound_rps": 1000.0 / bottleneck["adjusted_ms"],
        "total_demand_ms": sum(r["demand_ms"] for r in rows),
    }


def improve(layers, name: str, fraction: float) -> tuple:
    """The same map with one layer's service time cut by `fraction` (0.1 = 10% faster)."""
    if name not in {layer.name for layer in layers}:
        raise KeyError(f"no layer {name!r}; layers are {[layer.name for layer in layers]}")
    return tuple(replace(layer, service_ms=layer.service_ms * (1 - fraction)) if layer.name == name else layer
                 for layer in layers)


def seed_example() -> dict:
    """The seed's map, and what happens after a 10% runtime improvement."""
    before = demand_map(SEED_LAYERS)
    after = demand_map(improve(SEED_LAYERS, "runtime", 0.10))
    return {"before": before, "after_runtime_10pct": after,
            "note": "illustrative V, S and m chosen to reproduce the article's scores; not measurements"}


def improvement_summary(before: dict, after: dict, layer: str, fraction: float) -> str:
    """Where the bottleneck and the throughput bound went when one layer got faster, in Markdown."""
    return (f"Making **{layer}** {fraction:.0%} faster: bottleneck **{before['bottleneck']}** -> "
            f"**{after['bottleneck']}**; bound {before['throughput_bound_rps']:.1f} -> "
            f"{after['throughput_bound_rps']:.1f} requests/s.")
