"""`stackbook size`: the sizing arithmetic on the command line, with exit codes a script can
act on (0 fits, 3 does not fit, 2 bad input) and every error as JSON under --json."""
from __future__ import annotations

import json
from typing import Optional

import typer
from typer.core import TyperCommand

try:  # typer vendors its own click
    from typer._click.exceptions import UsageError
except ImportError:  # an older typer on click itself
    from click import UsageError

from stackbook.cli_common import fail as _fail
from stackbook.cli_common import name_values
from stackbook.engines.registry import ADAPTERS

# The kinds whose own accounting of the pool `size --engine` can add: those sizing applies to.
SIZED_KINDS = ", ".join(k for k, a in ADAPTERS.items() if a.spec_model.sizing_skip_reason is None)


def _engine_accounting(kind: str, fields: list[str], g, verdict: dict, hw, context: int, weights: str, kv_dtype: str,
                       state_dtype: str | None, artifact_bytes: int | None, pool_gib: float | None,
                       activations_gib: float) -> dict:
    """The engine kind's own capacity rule (the one its arms use) applied to this sizing."""
    import dataclasses

    from pydantic import ValidationError

    from stackbook import sizing
    from stackbook.config.protocol import Precision, Protocol
    from stackbook.engines.registry import adapter_class
    from stackbook.engines.spec import CapacityBasis

    if not verdict["fits"]:
        return {"name": kind, "note": "not computed: the model does not fit at this tensor-parallel degree"}
    values = name_values(fields, "--engine-field", "gpu_memory_utilization=0.85")
    try:
        spec = adapter_class(kind).spec_model.model_validate({"kind": kind, **values})
        protocol = Protocol(precision=Precision(weights=weights, kv_cache=kv_dtype, state=state_dtype or "none"),
                            context_length=context, stages=["sizing"])
    except ValidationError as err:
        raise ValueError(f"--engine {kind} with --engine-field: {err.errors()[0]['loc']}: "
                         f"{err.errors()[0]['msg']}") from None
    basis = CapacityBasis(geometry=g, protocol=protocol, device_memory_bytes=hw.memory_bytes,
                          activations_bytes=activations_gib * sizing.GiB, artifact_bytes=artifact_bytes,
                          pool_bytes=pool_gib * sizing.GiB if pool_gib else None)
    try:
        return {"name": kind, **spec.predicted_capacity(basis)}
    except ValueError:
        if pool_gib:
            raise
    # A rule that splits a known pool (SGLang's) gets the pool the arithmetic above derived.
    derived = dataclasses.replace(basis, pool_bytes=verdict["cache_pool_bytes"])
    return {"name": kind, **spec.predicted_capacity(derived),
            "pool_basis": "the pool derived above (give the engine's own with --pool-gib)"}


SIZE_DOES_NOT_FIT = 3  # exit code of `stackbook size` when weights and one sequence do not fit


class JsonUsageErrors(TyperCommand):
    """A command whose usage errors (a value that is not a number, a missing option) come as a
    JSON object on stdout too when --json is among its arguments."""

    def make_context(self, info_name, args, parent=None, **extra):
        json_wanted = "--json" in args
        try:
            ctx = super().make_context(info_name, list(args), parent=parent, **extra)
        except UsageError as err:
            if not json_wanted:
                raise
            _usage_error_json(err)
        ctx.meta["json_usage_errors"] = json_wanted
        return ctx

    def invoke(self, ctx):
        try:
            return super().invoke(ctx)
        except UsageError as err:
            if not ctx.meta.get("json_usage_errors"):
                raise
            _usage_error_json(err)


def _usage_error_json(err: UsageError) -> None:
    param = getattr(err, "param", None)
    option = param.opts[0] if param is not None and param.opts else getattr(err, "option_name", None)
    typer.echo(json.dumps({"error": err.format_message(), "option": option, "exit_code": 2}, indent=2))
    raise typer.Exit(2)


def size(model: str = typer.Option(...,
                                   help="a catalog name (e.g. qwen3.8-27b) or a path to "
                                        "config.json, a model directory or a .gguf"),
         hardware: str = typer.Option("this-cpu", help="an accelerator from the catalog (e.g. a100-80gb), or this-cpu"),
         context: int = typer.Option(8192, help="tokens per sequence"),
         weights: Optional[str] = typer.Option(None,
                                               help="weight precision: bf16, fp8, int8, int4, q4_k_m, q8_0, ...; "
                                                    "default: the checkpoint's own (quantization_config), else bf16"),
         artifact_bytes: Optional[int] = typer.Option(None,
                                                      help="exact size of the weights "
                                                           "artifact (beats bits-per-weight rules)"),
         kv_dtype: str = typer.Option("bf16", help="KV cache precision"),
         state_dtype: Optional[str] = typer.Option(None,
                                                   help="recurrent state precision (fp32, "
                                                        "bf16); default: the model's config"),
         pool_gib: Optional[float] = typer.Option(None, help="the cache pool in GiB, when known; else derived"),
         workspace_gib: float = typer.Option(0.5, help="workspace (when the pool is derived)"),
         activations_gib: float = typer.Option(0.5, help="activation peak (when the pool is derived)"),
         tp: int = typer.Option(1, help="tensor-parallel ranks"),
         engine: Optional[str] = typer.Option(None,
                                              help=f"add an engine kind's own accounting of the pool ({SIZED_KINDS})"),
         engine_field: list[str] = typer.Option([],
                                                help="a field of that engine's campaign mapping, NAME=VALUE (repeat), "
                                                     "e.g. gpu_memory_utilization=0.85"),
         as_json: bool = typer.Option(False, "--json")) -> None:
    """Memory arithmetic for one model on one device: parameters, weights, KV, state, pool, live
    sequences. Exit 0 when it fits, 3 when it does not (with the shortfall), 2 for input refused."""
    from stackbook import sizing
    from stackbook.model.geometry import geometry_for

    step = "--model"  # the option an error belongs to, unless the error names its own
    try:
        g = geometry_for(model)
        step = "--hardware"
        hw = sizing.accelerator(hardware)
        step = None
        precision, artifact, precision_source = sizing.default_weights(g, weights, artifact_bytes)
        out = sizing.size_verdict(g, memory_bytes=hw.usable_bytes, context_tokens=context, weights_precision=precision,
                                  kv_precision=kv_dtype, state_precision=state_dtype, artifact_bytes=artifact,
                                  pool_bytes=pool_gib * sizing.GiB if pool_gib is not None else None,
                                  workspace_bytes=workspace_gib * sizing.GiB,
                                  activations_bytes=activations_gib * sizing.GiB, tensor_parallel=tp,
                                  bandwidth=hw.bandwidth or None)
        out["weights_precision_source"] = precision_source
        out["hardware"] = hw.name
        if engine is not None:
            out["engine"] = _engine_accounting(engine, engine_field, g, out, hw, context, precision, kv_dtype,
                                               state_dtype, artifact, pool_gib, activations_gib)
            if "max_concurrency" in out["engine"]:
                out["max_concurrency"] = out["engine"]["max_concurrency"]
    except (KeyError, FileNotFoundError, ValueError, OverflowError) as err:
        message = str(err).strip("'\"")
        if as_json:
            typer.echo(json.dumps({"error": message, "option": getattr(err, "option", None) or step, "exit_code": 2},
                                  indent=2))
            raise typer.Exit(2)
        _fail(message)
    code = 0 if out["fits"] else SIZE_DOES_NOT_FIT
    if as_json:
        typer.echo(json.dumps(out, indent=2))
        raise typer.Exit(code)
    for k, v in out.items():
        if isinstance(v, dict):
            v = ", ".join(f"{a}={b}" for a, b in v.items() if a != "source")
        typer.echo(f"{k:>34}: {v:,.1f}" if isinstance(v, float) else
                   f"{k:>34}: {v:,}" if isinstance(v, int) and not isinstance(v, bool) else f"{k:>34}: {v}")
    if code:
        typer.secho(f"does not fit: {out['shortfall_bytes'] / sizing.GiB:,.2f} GiB short on one card; "
                    f"cards needed: {out['cards_needed'] or 'more than ' + str(sizing.TENSOR_PARALLEL_DEGREES[-1])}",
                    fg=typer.colors.RED, err=True)
    raise typer.Exit(code)
