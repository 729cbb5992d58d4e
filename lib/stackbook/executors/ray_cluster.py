"""The ray executor: each arm is one Ray task on a node holding the arm's `resources`.

The task stages a run directory in the node's temporary directory, runs `stackbook.arm_run.run_arm`
there (engine started, notebooks executed and engine stopped on that node; the passport reads
that node's host), and ships the arm folder home as a tar archive: at every notebook boundary and
every SHIP_EVERY_S to a small inbox actor on this machine (so what a lost node recorded is kept),
and at the end as the task's return value. Ray's resource accounting places the arms: arms on different nodes
run at the same time, arms whose requests do not fit a node together run one after another."""
from __future__ import annotations

import os
import signal
import socket
import threading
import time
from dataclasses import dataclass

import ray
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from stackbook.arm_run import ArmSlot, RunInterrupted, run_arm
from stackbook.evidence.rundir import ARM_NOTEBOOKS
from stackbook.executors.shipping import PackedArm, StagedRun, pack_arm, unpack_arm
from stackbook.locations import symbolic

# Ray names these resources as task options rather than custom resources.
_OPTION_OF = {"CPU": "num_cpus", "GPU": "num_gpus", "memory": "memory"}
CANCEL_GRACE_S = 60  # how long a cancelled arm gets to stop its engine and send its folder home
NODE_DEATH_WAIT_S = 20  # how long the cluster gets to mark a node dead after its task failed
SHIP_EVERY_S = 10  # how often the arm folder also goes home while the arm runs


@dataclass(frozen=True)
class ResourceRequest:
    """What one arm asks of a node: its declared resources, with Ray's default of one CPU when it
    names none, so every arm holds something and arms on a node are counted."""
    amounts: dict[str, float]

    @classmethod
    def for_arm(cls, arm) -> ResourceRequest:
        return cls({"CPU": 1.0, **{k: float(v) for k, v in arm.resources.items()}})

    def task_options(self) -> dict:
        opts: dict = {"resources": {}}
        for name, amount in self.amounts.items():
            if name in _OPTION_OF:
                opts[_OPTION_OF[name]] = int(amount) if name == "memory" else amount
            else:
                opts["resources"][name] = amount
        return opts

    def unsatisfiable(self, nodes: list[dict]) -> str | None:
        """Why no live node can ever run this request (naming the resource), or None."""
        held = [n.get("Resources", {}) for n in nodes if n.get("Alive")]
        for name, amount in self.amounts.items():
            most = max((r.get(name, 0.0) for r in held), default=0.0)
            if most == 0:
                known = sorted({k for r in held for k in r if not k.startswith("node:") and k != "object_store_memory"})
                flag = (f"--{_OPTION_OF[name].replace('num_', 'num-')} {amount:g}" if name in _OPTION_OF
                        else f"--resources '{{\"{name}\": {max(amount, 1):g}}}'")
                return (f"no node of the cluster holds resource {name!r} (requested {amount:g}); the cluster's "
                        f"resources are {', '.join(known) or 'none'}: start a node with it (ray start ... {flag}) "
                        "or change the arm's resources")
            if most < amount:
                return (f"no node of the cluster holds {amount:g} of resource {name!r} (the most on one node is "
                        f"{most:g}); lower the arm's request or add a larger node")
        if not any(all(r.get(k, 0.0) >= v for k, v in self.amounts.items()) for r in held):
            return (f"no single node holds all of {self.amounts} together; split the arm's resources "
                    "differently or add a node that has them all")
        return None


@dataclass
class ArmJob:
    """What travels to the node: the run's relative path, the resolved campaign, the arm, its
    manifest record and its folder as it stands (for --resume)."""
    run_path: str
    campaign_text: str
    arm: str
    entry: dict
    prior: PackedArm | None


@dataclass
class ArmShipment:
    """What comes home: the arm's manifest record and its folder."""
    arm: str
    entry: dict
    folder: PackedArm | None
    final: bool = False


@ray.remote(num_cpus=0, max_restarts=0)
class ShipmentInbox:
    """Keeps the latest shipment of each arm on the machine that started the campaign, so what a
    node sent before it was lost is still here."""

    def __init__(self):
        self.latest: dict[str, ArmShipment] = {}

    def put(self, shipment: ArmShipment) -> None:
        self.latest[shipment.arm] = shipment

    def take(self) -> dict[str, ArmShipment]:
        out, self.latest = self.latest, {}
        return out


class _Sender:
    """The arm's `save`: every change of its record goes home; the folder goes with it when a
    notebook changed state (a notebook boundary), and every SHIP_EVERY_S while the arm runs, so
    a lost node's records come home up to its last shipment."""

    def __init__(self, job: ArmJob, staged: StagedRun, entry: dict, inbox):
        self.job, self.staged, self.entry, self.inbox = job, staged, entry, inbox
        self._last = None
        self._stop = threading.Event()
        self._ticker = threading.Thread(target=self._tick, daemon=True)

    def shipment(self, final: bool = False) -> ArmShipment:
        arm_dir = self.staged.run.arm(self.job.arm)
        folder = pack_arm(arm_dir, self.staged.relocation) if arm_dir.exists() else None
        entry = _relocated_entry(self.entry, self.staged, folder)
        return ArmShipment(self.job.arm, entry, folder, final)

    def __call__(self) -> None:
        state = tuple(sorted((k, v.get("status")) for k, v in self.entry.get("notebooks", {}).items()))
        if state != self._last:
            self._last = state
            self.inbox.put.remote(self.shipment())
        else:
            self.inbox.put.remote(ArmShipment(self.job.arm, _relocated_entry(self.entry, self.staged, None), None))

    def _tick(self) -> None:
        while not self._stop.wait(SHIP_EVERY_S):
            try:
                self.inbox.put.remote(self.shipment())
            except (RuntimeError, OSError):  # the record or a file changed while packed: next time
                pass

    def __enter__(self) -> _Sender:
        self._ticker.start()
        return self

    def __exit__(self, *exc) -> None:
        """Stop shipping in the background before the last shipment, which must come last."""
        self._stop.set()
        self._ticker.join()


def _relocated_entry(entry: dict, staged: StagedRun, folder: PackedArm | None) -> dict:
    """The record as the run directory holds it: staging paths rewritten, notebook hashes those of
    the files as shipped."""
    import json

    out = json.loads(staged.relocation.apply(json.dumps(entry)))
    if folder is not None:
        for name, nb in out.get("notebooks", {}).items():
            if nb.get("status") == "ok" and f"{name}.ipynb" in folder.sha256:
                nb["sha256"] = folder.sha256[f"{name}.ipynb"]
    return out


def _node_placement() -> dict:
    ctx = ray.get_runtime_context()
    return {"executor": "ray", "node_id": ctx.get_node_id(), "host": socket.gethostname(),
            "node_ip": ray.util.get_node_ip_address(),
            "resources": {k: float(v) for k, v in ctx.get_assigned_resources().items()},
            "started_unix": time.time()}


def run_arm_on_node(job: ArmJob, inbox) -> ArmShipment:
    """The Ray task: the same `run_arm` the local executor calls, in a staged run directory."""
    from tqdm import tqdm

    from stackbook.config.loading import load_campaign
    from stackbook.locations import REPO_ROOT

    os.chdir(REPO_ROOT)
    staged = StagedRun.create(job.run_path, job.campaign_text, job.arm, job.prior)
    entry = {**job.entry, "status": "running", "placement": _node_placement()}
    send = _Sender(job, staged, entry, inbox)
    try:
        send()
        campaign = load_campaign(staged.run.campaign_resolved)
        with send:
            run_arm(ArmSlot(campaign, campaign.arm(job.arm), staged.run, staged.run.campaign_resolved, entry, send,
                            tqdm(disable=True), False, print))
        entry["placement"]["finished_unix"] = time.time()
        return send.shipment(final=True)
    except KeyboardInterrupt:  # ray.cancel: run_arm has stopped the engine; send what there is
        entry["status"] = "interrupted"
        entry["placement"]["finished_unix"] = time.time()
        ray.get(inbox.put.remote(send.shipment(final=True)))
        raise
    finally:
        staged.remove()


_arm_task = ray.remote(run_arm_on_node)


class RayExecutor:
    """Arms as Ray tasks on a cluster: `address` as `ray.init` takes it (None: RAY_ADDRESS, else a
    cluster started here for this run)."""
    name = "ray"
    OPTIONS = ("ray_address",)

    def __init__(self, ray_address: str | None = None):
        self.address = ray_address

    def run_arms(self, run, arms: list) -> None:
        started_here = not ray.is_initialized()
        if started_here:
            # ray.init installs its own SIGTERM handler (exit at once); the runner's stops the
            # arms first and records the interruption, so it is put back.
            on_sigterm = signal.getsignal(signal.SIGTERM)
            ray.init(address=self.address, log_to_driver=False, configure_logging=False)
            if threading.current_thread() is threading.main_thread():
                signal.signal(signal.SIGTERM, on_sigterm)
        # On this machine's node, never on an arm's: a lost arm node must not take the inbox with it.
        inbox = ShipmentInbox.options(scheduling_strategy=NodeAffinitySchedulingStrategy(
            ray.get_runtime_context().get_node_id(), soft=False)).remote()
        try:
            _Campaign(run, inbox).execute(arms)
        finally:
            ray.kill(inbox)
            if started_here:
                ray.shutdown()


class _Campaign:
    """One run's arms on the cluster: submitted together, shipments applied as they arrive."""

    def __init__(self, run, inbox):
        self.run, self.inbox = run, inbox
        self.pending: dict = {}  # task ref -> arm name
        self.finished: set[str] = set()

    def execute(self, arms: list) -> None:
        nodes = ray.nodes()
        for arm in arms:
            entry = self.run.manifest.arm(arm.name)
            if entry["status"] == "complete":
                self.run.steps.update(len(ARM_NOTEBOOKS) + 1)
                continue
            request = ResourceRequest.for_arm(arm)
            why = request.unsatisfiable(nodes)
            if why:
                entry.update(status="failed", error=f"arm {arm.name}: {why}")
                self.run.manifest.save()
                self.run.log(entry["error"])
                self.run.steps.update(len(ARM_NOTEBOOKS) + 1)
                continue
            self.submit(arm, entry, request)
        try:
            while self.pending:
                ready, _ = ray.wait(list(self.pending), num_returns=len(self.pending), timeout=1.0)
                self.apply_shipments()
                for ref in ready:
                    self.collect(ref)
        except BaseException as err:  # RunInterrupted (SIGINT, SIGTERM) or a failure here: stop every arm
            self.cancel()
            # A signal that lands inside Ray's compiled wait surfaces as a SystemError caused by
            # the runner's RunInterrupted: give the runner the interruption it raised.
            if not isinstance(err, RunInterrupted) and isinstance(err.__cause__ or err.__context__, RunInterrupted):
                raise (err.__cause__ or err.__context__) from None
            raise

    def submit(self, arm, entry: dict, request: ResourceRequest) -> None:
        arm_dir = self.run.run_dir.arm(arm.name)
        prior = pack_arm(arm_dir) if arm_dir.exists() else None
        job = ArmJob(str(self.run.run_dir), self.run.resolved.read_text(), arm.name, dict(entry), prior)
        task = _arm_task.options(name=f"stackbook-arm-{arm.name}", max_retries=0,
                                                   retry_exceptions=False, **request.task_options())
        entry.update(status="running", placement={"executor": "ray", "resources": request.amounts})
        entry.pop("error", None)
        self.run.manifest.save()
        self.pending[task.remote(job, self.inbox)] = arm.name
        self.run.log(f"arm {arm.name}: submitted to the Ray cluster, asking for {request.amounts}")

    def apply(self, shipment: ArmShipment) -> None:
        if shipment.arm in self.finished:
            return
        if shipment.folder is not None:
            unpack_arm(shipment.folder, self.run.run_dir.arm(shipment.arm))
        entry = self.run.manifest.arm(shipment.arm)
        entry.clear()
        entry.update(shipment.entry)
        self.run.manifest.save()

    def apply_shipments(self) -> None:
        for shipment in self.take_shipments():
            self.apply(shipment)

    def take_shipments(self) -> list[ArmShipment]:
        """The shipments waiting in the inbox; none when it is unreachable (each arm's last
        shipment still comes as its task's return value)."""
        try:
            return list(ray.get(self.inbox.take.remote(), timeout=30).values())
        except (ray.exceptions.RayActorError, ray.exceptions.GetTimeoutError) as err:
            self.run.log(f"the shipment inbox did not answer ({type(err).__name__}); arms still return their folders")
            return []

    def collect(self, ref) -> None:
        name = self.pending.pop(ref)
        try:
            self.apply(ray.get(ref))
        except ray.exceptions.TaskCancelledError:
            self.apply_shipments()
            self.fail(name, "interrupted", "cancelled")
        except ray.exceptions.RayTaskError as err:  # the arm's own code raised on its node
            self.apply_shipments()
            self.fail(name, "failed", f"the arm's task raised on its node: {symbolic(str(err))[-2000:]}")
        except ray.exceptions.RayError as err:  # the worker or its node went away
            self.apply_shipments()
            entry = self.run.manifest.arm(name)
            node = (entry.get("placement") or {}).get("node_id")
            if self.node_lost(node, err):
                host = (entry.get("placement") or {}).get("host")
                running = [n for n, nb in entry.get("notebooks", {}).items() if nb.get("status") == "running"]
                self.fail(name, "node_lost",
                          f"node {node} ({host}) was lost{' during ' + running[0] if running else ''}; what it "
                          "sent before is kept; --resume re-runs what is missing")
            else:
                self.fail(name, "failed", f"the arm's worker died: {symbolic(str(err))[-2000:]}")
        self.finished.add(name)
        self.run.steps.update(len(ARM_NOTEBOOKS) + 1)
        self.run.log(f"arm {name}: {self.run.manifest.arm(name)['status']}")

    def fail(self, name: str, status: str, error: str) -> None:
        entry = self.run.manifest.arm(name)
        for nb in entry.get("notebooks", {}).values():
            if nb.get("status") == "running":
                nb.update(status="failed", error=error)
        entry.update(status=status, error=error)
        if entry.get("placement"):
            entry["placement"].setdefault("finished_unix", time.time())
        self.run.manifest.save()

    @staticmethod
    def node_lost(node_id: str | None, err: Exception) -> bool:
        """Whether the arm's node is gone (the cluster may take a moment to say so)."""
        if isinstance(err, ray.exceptions.NodeDiedError):
            return True
        if node_id is None:
            return False
        deadline = time.monotonic() + NODE_DEATH_WAIT_S
        while time.monotonic() < deadline:
            if not any(n["NodeID"] == node_id and n["Alive"] for n in ray.nodes()):
                return True
            time.sleep(1)
        return False

    def cancel(self) -> None:
        """Cancel every arm still running: each stops its engine and sends its folder home; one
        that has not within the grace period is killed with its worker (its engine gets SIGTERM
        from the kernel when the worker dies)."""
        for ref in self.pending:
            ray.cancel(ref)
        waiting = dict(self.pending)
        deadline = time.monotonic() + CANCEL_GRACE_S
        while waiting and time.monotonic() < deadline:
            for shipment in self.take_shipments():
                self.apply(shipment)
                if shipment.final:
                    waiting = {ref: name for ref, name in waiting.items() if name != shipment.arm}
            time.sleep(0.5)
        for ref in waiting:
            try:
                ray.cancel(ref, force=True)
            except (ValueError, ray.exceptions.RayError):  # it already ended
                pass
        for name in self.pending.values():
            if self.run.manifest.arm(name)["status"] not in ("complete", "held", "failed", "engine_died"):
                self.fail(name, "interrupted", "the run was interrupted; --resume re-runs what is missing")
        self.pending.clear()
