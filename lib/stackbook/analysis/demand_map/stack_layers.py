"""The measured map read by the second seed's five layers: each measured centre assigned to exactly
one layer before demands are summed (host execution, runtime, kernels, orchestration), silicon
as the memory wall's ratio (the single-stream decode rate over the bandwidth bound), and for each
layer this engine's counters cannot split out, the reason, in words.

Why: the seed ranks its next experiment by layer ("improve kernels", "move the scheduler"), and a
map of processes (client, front end, scheduler, compute) answers that only once each process is
named for the layer it serves; the assignment is one table here, not a judgement per report."""
from __future__ import annotations

import pandas as pd

from stackbook.analysis.demand_map.measured import ArmDemandMap
from stackbook.analysis.demand_map.orchestration import ROUTER_CENTRE

STACK_LAYERS = ("silicon", "kernels", "host execution", "runtime", "orchestration")
LAYER_OF = {  # each measured centre's one layer
    "client": "host execution",            # HTTP, JSON, tokenizing what it sends, the event loop
    "engine front end": "host execution",  # the API server: parsing, tokenization, detokenization
    "engine scheduler": "runtime",         # the step loop: batch, queue, KV blocks
    "engine compute": "kernels",           # the model's operators, step by step
    ROUTER_CENTRE: "orchestration",        # routing, its own time per request
}
NOT_SPLIT = {
    "runtime": "not split out: the engine schedules inside its compute process (no scheduler process of its "
               "own), so its time is in the kernels row",
    "orchestration": "none here: one engine process, no router in front of it",
    "host execution": "client side only: the engine serves HTTP inside its compute process, so that time is in "
                      "the kernels row",
}


def layer_rows(dmap: ArmDemandMap, silicon: dict | None = None) -> list[dict]:
    """One row per seed layer: its measured demand (ms a request, the sum over the centres it owns),
    those centres, and where nothing of it was measured apart, why."""
    owned: dict[str, list] = {layer: [] for layer in STACK_LAYERS}
    for c in dmap.centres:
        owned[LAYER_OF.get(c.centre, "host execution" if c.centre.startswith("engine process") else "kernels")
              ].append(c)
    front = any(c.centre == "engine front end" for c in dmap.centres)
    loop = dmap.slot_loop
    rows = []
    for layer in STACK_LAYERS:
        if layer == "silicon":
            rows.append(_silicon(silicon))
            continue
        cs = owned[layer]
        if loop and layer in ("runtime", "kernels") and not owned["runtime"] and owned["kernels"]:
            rows.append(_loop_share(layer, loop, owned["kernels"], dmap.bottleneck))
            continue
        note = NOT_SPLIT.get(layer) if not cs or (layer == "host execution" and not front) else None
        if layer == "runtime" and not cs and dmap.batch_size_mean:
            note += (f"; its own gauge read {dmap.batch_size_mean:.2f} requests in progress on average (its batch) at "
                     f"{dmap.point}")
        kernels = layer == "kernels" and dmap.engine_time_ms
        if kernels:
            t = dmap.engine_time_ms
            note = (f"prefill {t.get('prefill') or 0:,.0f} ms and decode {t.get('decode') or 0:,.0f} ms a request "
                    f"by the engine's own clock ({t.get('source')})")
        rows.append({"layer": layer, "D (ms/request)": round(sum(c.demand_ms for c in cs), 3) if cs else None,
                     "D/m (ms)": round(max(c.adjusted_ms for c in cs), 3) if cs else None,
                     "centres": ", ".join(c.centre for c in cs) or "-",
                     "bottleneck": any(c.centre == dmap.bottleneck for c in cs), "note": note or ""})
    return rows


def loop_runtime_ms(loop: dict) -> float:
    """The runtime's demand (ms a request) the engine's clock gives inside its compute centre."""
    return 1000.0 * loop["runtime_s"] / loop["requests"]


def _loop_share(layer: str, loop: dict, compute: list, bottleneck: str | None) -> dict:
    """The runtime or kernels row of an engine whose loop and kernels share one thread, split by the
    engine's own clock (measure.slot_loop): the loop's share outside decode is the runtime's, the
    rest of the compute centre's demand the kernels'. One thread serves both, so the network keeps
    them one centre: the split says where its time goes, not two queues."""
    runtime = loop_runtime_ms(loop)
    whole = sum(c.demand_ms for c in compute)
    d = runtime if layer == "runtime" else whole - runtime
    phases = (f"{loop['runtime_share']:.1%} of its slot loop by the engine's own clock (building the batch "
              f"{loop['pre_decode_ms']:,.0f} ms, sampling and sending {loop['post_decode_ms']:,.0f} ms, "
              f"decode {loop['decode_ms']:,.0f} ms over {loop['passes']:,} passes)")
    note = (f"measured inside the compute centre: {phases}, of its main thread's CPU seconds; one thread runs the "
            "loop and the kernels, so the network keeps them one centre" if layer == "runtime" else
            "the compute centre's demand less the runtime's share of its loop (the runtime row): the model's "
            "operators, ggml's threads included")
    m = 1.0 if layer == "runtime" else compute[0].capacity  # the loop runs on one thread; decode on all
    part = "its loop outside decode" if layer == "runtime" else "decode"
    return {"layer": layer, "D (ms/request)": round(d, 3), "D/m (ms)": round(d / m, 3),
            "centres": f"{', '.join(c.centre for c in compute)} ({part})",
            "bottleneck": any(c.centre == bottleneck for c in compute), "note": note}


def _silicon(silicon: dict | None) -> dict:
    row = {"layer": "silicon", "D (ms/request)": None, "D/m (ms)": None, "centres": "-", "bottleneck": False}
    if not silicon:
        return row | {"note": "not measured: no single-stream point or no bandwidth bound in sizing"}
    return row | {"note": f"single-stream decode at {silicon['% of bound']:.0f}% of the memory-bandwidth bound "
                          f"({silicon['decode tok/s (c=1)']:.1f} of {silicon['bandwidth bound tok/s']:.1f} tok/s): "
                          "the memory wall as a ratio"}


def layers_by_arm(maps: dict[str, ArmDemandMap], silicon: pd.DataFrame | None = None) -> pd.DataFrame:
    """Every measured arm's layer rows, indexed by arm and layer (analysis.comparison.roofline_efficiency
    gives `silicon`)."""
    rows = []
    for arm, d in maps.items():
        if not d.measured:
            continue
        s = silicon.loc[arm].to_dict() if silicon is not None and not silicon.empty and arm in silicon.index else None
        rows += [{"arm": arm, **r} for r in layer_rows(d, s)]
    return pd.DataFrame(rows).set_index(["arm", "layer"]) if rows else pd.DataFrame()
