"""Whether a replayed trace was replayed as recorded, per arm and point: its sessions' order (steps
out of order, steps sent before the reply they act on) and its input lengths against the trace's
(a two-sample KS test, measure.input_lengths), with the finding in words."""
from __future__ import annotations

import pandas as pd


def replay_table(arms: dict) -> pd.DataFrame | None:
    """One row per arm and point of a trace replay; None where no arm replayed a trace."""
    rows = []
    for name, a in arms.items():
        points = (((a.get("results") or {}).get("sweep") or {}).get("points")) or {}
        for point, s in points.items():
            lengths, order = s.get("input_lengths"), s.get("session_order")
            if not lengths and not order:
                continue
            row = {"arm": name, "point": point}
            if order:
                row |= {"sessions": order["sessions"], "steps": order["steps"], "out of order": order["out_of_order"],
                        "before the reply": order["before_previous_reply"]}
                if "subagents" in order:
                    row |= {"subagents": order["subagents"],
                            "before its spawn": order["before_spawning_reply"],
                            "before its subagents": order["before_subagent_end"]}
            if lengths:
                row |= {"trace median": lengths["trace_median"], "realized median": lengths["realized_median"],
                        "KS D": lengths["ks_statistic"], "KS p": lengths["p_value"]}
            row["finding"] = finding(lengths, order)
            rows.append(row)
    return pd.DataFrame(rows).set_index(["arm", "point"]) if rows else None


def finding(lengths: dict | None, order: dict | None) -> str:
    said = []
    if order:
        if order["out_of_order"]:
            said.append(f"{order['out_of_order']} steps sent out of their session's order")
        elif order["before_previous_reply"]:
            said.append(f"order kept, but {order['before_previous_reply']} steps left before the reply they follow "
                        f"(up to {order['before_previous_reply_ms_max']:,.0f} ms early: the engine answered slower "
                        "than the log's think time)")
        else:
            said.append(f"every session in order, each step after its reply ({order['steps']} steps)")
        if order.get("before_spawning_reply") or order.get("before_subagent_end"):
            said.append(f"{order['before_spawning_reply']} subagents started before the reply that spawns them, "
                        f"{order['before_subagent_end']} steps sent before the subagents they wait for had answered")
        elif order.get("subagents"):
            said.append(f"{order['subagents']} subagents each started after the reply that spawns it, "
                        "every step after the subagents it waits for")
    if lengths:
        words = "match" if lengths["matches"] else "differ from"
        said.append(f"input lengths {words} the trace's (KS p = {lengths['p_value']:.2f}, "
                    f"{lengths['realized_requests']} of {lengths['trace_requests']} requests, counted by the "
                    f"{lengths['counted_by']})")
    return "; ".join(said)
