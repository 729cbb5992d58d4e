"""The managed endpoint against owned cards, in money per day."""
from __future__ import annotations


def managed_vs_owned(tokens_per_day: float, price_per_million_tokens: float, card_hour_price: float,
                     cards: int = 1, hours_per_day: float = 24.0, ops_hours_per_day: float = 0.0,
                     engineer_hour_price: float = 0.0) -> dict:
    """Daily cost of a metered endpoint against owning cards (plus the people who run them),
    and the token volume at which the two cost the same."""
    managed = tokens_per_day / 1e6 * price_per_million_tokens
    owned = cards * card_hour_price * hours_per_day + ops_hours_per_day * engineer_hour_price
    break_even = owned / price_per_million_tokens * 1e6 if price_per_million_tokens > 0 else float("inf")
    return {"managed_per_day": managed, "owned_per_day": owned, "break_even_tokens_per_day": break_even,
            "cheaper": "managed endpoint" if managed < owned else "owned cards"}


def cost_by_volume(volumes, price_per_million_tokens: float, card_hour_price: float, **owned) -> list[dict]:
    """managed_vs_owned at each daily token volume, to show where the cheaper option flips.
    `owned` takes managed_vs_owned's keywords (cards, hours_per_day, ops and engineer prices)."""
    rows = []
    for v in volumes:
        c = managed_vs_owned(v, price_per_million_tokens, card_hour_price, **owned)
        rows.append({"tokens per day": f"{v:,.0f}", "managed per day": round(c["managed_per_day"], 2),
                     "owned per day": round(c["owned_per_day"], 2), "cheaper": c["cheaper"]})
    return rows


def cost_summary(cost: dict, tokens_per_day: float) -> str:
    """managed_vs_owned's answer in one Markdown paragraph."""
    return (f"Managed: **{cost['managed_per_day']:,.2f} per day** for {tokens_per_day:,.0f} tokens. "
            f"Owned: **{cost['owned_per_day']:,.2f} per day** (card and operations). "
            f"Break-even at **{cost['break_even_tokens_per_day']:,.0f} tokens per day**; "
            f"at this volume the cheaper option is the **{cost['cheaper']}**.")
