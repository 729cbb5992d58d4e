"""The demand map of a serving stack: D_k = V_k x S_k per centre, capacity-adjusted D_k / m_k, the
throughput bound lambda <= min_k m_k / D_k and the bottleneck (the largest D_k / m_k).

Two maps share one table format: the seed article's illustrative map over five *layers*
(optimization domains, not independent resources: the teaching example), and the map measured
from a run over *resource centres*, each measured interval owned by one centre (the client
process, the engine's front end, the engine's compute), with demands from the utilisation law
D_k = busy_k / completed requests. The arithmetic is pure; `measured_demand_maps` reads a run.
"""
from stackbook.analysis.demand_map.centres import (
    client_capacity,
    compute_capacity,
    point_centres,
)
from stackbook.analysis.demand_map.experiments import (
    HELD_TOGETHER,
    LEVERS,
    closed_loop_points,
    closed_response_ms,
    demand_ci,
    mva_check,
    mva_on_centres,
    next_experiments,
    open_response_ms,
    predicted_response_ms,
    series_centres,
    unattributed_ms,
)
from stackbook.analysis.demand_map.layers import (
    SEED_LAYERS,
    Layer,
    demand_map,
    improve,
    improvement_summary,
    seed_example,
)
from stackbook.analysis.demand_map.load_model import (
    OWN_POINT_TOLERANCE,
    PointLoad,
    offered_load,
    point_load,
    session_replay,
)
from stackbook.analysis.demand_map.measured import (
    MAP_TOLERANCE,
    ArmDemandMap,
    CentreRow,
    demand_maps_of,
    measured_demand_map,
    measured_demand_maps,
    saturation,
    why_not_closer,
    window_throughput,
)
from stackbook.analysis.demand_map.stack_layers import STACK_LAYERS, layer_rows, layers_by_arm
from stackbook.analysis.demand_map.tables import (
    bound_table,
    centres_table,
    layers_table,
    mva_check_table,
    next_experiment_table,
)

__all__ = ["HELD_TOGETHER", "LEVERS", "MAP_TOLERANCE", "OWN_POINT_TOLERANCE", "SEED_LAYERS", "STACK_LAYERS",
           "ArmDemandMap", "CentreRow", "Layer", "PointLoad", "bound_table", "centres_table", "client_capacity",
           "closed_loop_points", "closed_response_ms", "compute_capacity", "demand_ci", "demand_map", "demand_maps_of",
           "improve", "improvement_summary", "layer_rows", "layers_by_arm", "layers_table", "measured_demand_map",
           "measured_demand_maps", "mva_check", "mva_check_table", "mva_on_centres", "next_experiment_table",
           "next_experiments", "offered_load", "open_response_ms", "point_centres", "point_load",
           "predicted_response_ms", "saturation", "seed_example", "series_centres", "session_replay",
           "unattributed_ms", "why_not_closer", "window_throughput"]
