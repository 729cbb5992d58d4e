"""The layer above one engine: an arm served by N replicas of its engine kind behind a router.

spec.py        the `router:` mapping's common fields
arm_rules.py   what an arm with replicas must keep (a router for two or more, ports of their own, ...)
registry.py    every router kind, one module each (sglang_router.py, client_round_robin.py)
router_kind.py what a router kind is: its process (or none), readiness, per-replica counts from its metrics
deployment.py  the runner's side: start N replicas, wait for each, start the router, stop what it started
routed.py      a notebook's side: the running deployment read from engine.json, scraped around each point
figures.py     pure arithmetic: shares, imbalance, per-replica prefix hits, the router's added time
install.py     the set-up step that installs a router kind into its own environment in the cache
preflight.py   `stackbook run --check`: a router that is not installed or cannot start is refused
"""
