"""A notebook's view of a running deployment (engine.json's `deployment`, written by the runner):
where each replica and the router answer, which processes are theirs, and the readings taken
around each sweep point, from which routing.figures makes the point's routing evidence."""
from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass

import psutil

from stackbook.engines import adapter_for
from stackbook.measure.prefix_cache import prepare_point
from stackbook.measure.telemetry import group_usage, scrape_metrics
from stackbook.measure.shared_prefix_reuse import implied_shared_prefix, reported_hit_rate
from stackbook.routing.figures import counter_delta, replica_figures, summed
from stackbook.routing.registry import router_class


@dataclass
class Reading:
    """One reading of the deployment: each replica's exposition and CPU seconds, the router's."""
    replicas: list[dict]
    cpu_s: list[float | None]
    router: dict
    unix: float

    @property
    def engines(self) -> dict:
        """The replicas' series summed: the deployment read as one engine."""
        return summed(self.replicas)


def _alive(pid: int | None) -> bool:
    try:
        return bool(pid) and psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


@dataclass
class RoutedDeployment:
    record: dict  # engine.json's `deployment`
    adapters: list  # one engine adapter per replica, attached to its address
    prefix_tokens: int | None = None  # the workload's shared prefix, for the reuse it implies

    @classmethod
    def from_engine_record(cls, engine: dict, campaign, arm) -> "RoutedDeployment | None":
        """The deployment the runner started for this arm; None for an arm of one engine."""
        deployment = (engine or {}).get("deployment")
        if not deployment:
            return None
        adapters = []
        for replica in deployment["replicas"]:
            adapter = adapter_for(campaign, arm)
            adapter.attach(replica["base_url"])
            adapter.restore(engine)
            adapters.append(adapter)
        prefix = getattr(campaign.protocol_for(arm).workload, "shared_prefix", None)
        return cls(deployment, adapters, prefix.tokens if prefix else None)

    @property
    def kind(self):
        return router_class(self.record["router"]["kind"])

    @property
    def replica_urls(self) -> list[str]:
        return [r["base_url"] for r in self.record["replicas"]]

    @property
    def process_roles(self) -> tuple:
        return self.kind.process_roles

    def pids(self) -> list[int]:
        """Every process of the deployment: the replicas' and the router's."""
        return [p for p in [*(r["pid"] for r in self.record["replicas"]), self.record["router"]["pid"]] if p]

    def alive(self) -> bool:
        """Still able to answer: the router (where there is one) and at least one replica run."""
        router_pid = self.record["router"]["pid"]
        return (router_pid is None or _alive(router_pid)) and any(_alive(r["pid"]) for r in self.record["replicas"])

    def route(self, target):
        """The load generator's target: through the router, or each replica in turn."""
        return self.kind.route(target, self.replica_urls)

    def prepare_point(self, state: str, target, workload, tokenizer) -> dict:
        """Each replica's cache flushed (and primed, when warm) on its own address; what was done."""
        done = []
        for url, adapter in zip(self.replica_urls, self.adapters):
            direct = dataclasses.replace(target, base_url=url, replica_urls=())
            done.append(prepare_point(state, adapter, direct, workload, tokenizer))
        errors = [d["prime_error"] for d in done if "prime_error" in d]
        return {"state": state, "flush": "; ".join(f"replica {i}: {d['flush']}" for i, d in enumerate(done)),
                "primed_requests": sum(d["primed_requests"] for d in done),
                **({"prime_error": errors[0]} if errors else {})}

    def read(self, headers: dict | None = None) -> Reading:
        a = self.adapters[0]
        replicas = [scrape_metrics(url, a.metrics_path, headers) for url in self.replica_urls]
        cpu = [(group_usage(r["pid"]) or {}).get("cpu_s") if r["pid"] else None for r in self.record["replicas"]]
        metrics_url = self.record["router"].get("metrics_url")
        router = scrape_metrics(metrics_url, "/metrics") if metrics_url else {}
        return Reading(replicas, cpu, router, time.time())

    def point_evidence(self, before: Reading, after: Reading, records: list) -> dict:
        """The point's routing evidence: per replica and for the router (routing.figures)."""
        done = [r for r in records if r.ok]  # every phase: the router and the replicas count them all
        prompt_sent = sum(r.prompt_tokens_server for r in done) if done and all(
            r.prompt_tokens_server is not None for r in done) else None
        router_delta = counter_delta(before.router, after.router)
        cpu = [None if b is None or e is None else round(e - b, 3) for b, e in zip(before.cpu_s, after.cpu_s)]
        figures = replica_figures([counter_delta(b, e) for b, e in zip(before.replicas, after.replicas)], cpu,
                                  after.unix - before.unix, self.record.get("threads_per_replica") or 1,
                                  self.adapters[0].metric_series, self.kind.served_by_worker(router_delta,
                                                                                             self.replica_urls),
                                  self.kind.shares_source, len(done), prompt_sent)
        return {"router": self.record["router"]["kind"], "policy": self.record["router"]["policy"],
                "replica_count": len(self.replica_urls), **figures,
                "router_counts": self.kind.router_counts(router_delta),
                "realized_hit_rate_reported": reported_hit_rate(records),
                "implied_hit_rate": implied_shared_prefix(records, self.prefix_tokens) if self.prefix_tokens else None,
                "router_added_latency": self.record.get("router_added_latency")}
