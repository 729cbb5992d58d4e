"""protocol.precision `native`: the precision every engine of the campaign runs natively on this
host, from its ISA flags and each kind's native_precisions; one choice for every arm, kept with
its reason in the resolved campaign, the manifest and the passport. A named precision is kept,
with a warning when an engine emulates it here. No engine starts."""
import json

import pytest
import yaml

from stackbook.config import precision as precision_module
from stackbook.config.errors import CampaignError
from stackbook.config.loading import parse_campaign
from stackbook.config.precision import choose_native, named_precision, precision_lines
from stackbook.engines.registry import adapter_class
from stackbook.evidence.files import read_json
from stackbook.run_checks.passport import write_passport
from stackbook.evidence.rundir import RunDir

AVX2 = ["avx2", "f16c", "fma"]  # the AMD EPYC the quickstart took 42 minutes on
SAPPHIRE_RAPIDS = AVX2 + ["amx_bf16", "amx_fp16", "amx_tile", "avx512_bf16", "avx512_fp16", "avx512f"]
ZEN4 = AVX2 + ["avx512_bf16", "avx512f", "avx512bw"]  # bf16 natively, no fp16 arithmetic
FP16_ONLY = AVX2 + ["avx512_fp16", "avx512f"]  # a host with fp16 arithmetic and no bf16

CPU_RULE = {"bf16": ("avx512_bf16", "amx_bf16"), "fp16": ("avx512_fp16", "amx_fp16"), "fp32": ()}


def campaign(precision, arms=None, **protocol):
    return {"name": "p", "model": {"name": "m", "source": "path", "hf_path": "."},
            "protocol": {"precision": precision, **protocol},
            "arms": arms or [{"name": "a", "engine": {"kind": "llama_cpp"}},
                             {"name": "b", "engine": {"kind": "vllm_cpu"}}]}


@pytest.fixture
def host_flags(monkeypatch):
    """Set the ISA flags the campaign's precision is chosen from."""
    def use(flags):
        monkeypatch.setattr(precision_module, "isa_flags", lambda: list(flags))
    return use


@pytest.mark.parametrize("flags, chosen", [(AVX2, "fp32"), (ZEN4, "bf16"), (SAPPHIRE_RAPIDS, "bf16"),
                                           (FP16_ONLY, "fp16"), ([], "fp32")])
def test_the_narrowest_precision_every_kind_runs_natively(flags, chosen):
    kinds = {"one": CPU_RULE, "other": CPU_RULE}
    assert choose_native(kinds, flags).chosen == chosen


def test_a_kind_without_native_kernels_holds_every_arm_to_fp32_and_the_reason_names_it():
    kinds = {"gpu_kind": {"bf16": (), "fp16": (), "fp32": ()}, "cpu_kind": CPU_RULE}
    c = choose_native(kinds, AVX2)
    assert c.chosen == "fp32" and c.asked == "native"
    assert c.reason == ("fp32: cpu_kind would emulate bf16 (no avx512_bf16 or amx_bf16); cpu_kind would emulate "
                        "fp16 (no avx512_fp16 or amx_fp16); every engine runs fp32 natively on any host, and fp32 "
                        "holds the bf16 checkpoint exactly")
    assert c.native_by_kind == {"gpu_kind": ["bf16", "fp16", "fp32"], "cpu_kind": ["fp32"]}
    assert c.host_isa == ["avx2", "f16c", "fma"]
    assert choose_native(kinds, ZEN4).reason == (
        "bf16: every engine runs bf16 natively (gpu_kind: every host, cpu_kind: avx512_bf16)")


def test_a_named_precision_an_engine_emulates_is_kept_with_a_warning():
    kinds = {"llama_cpp": CPU_RULE, "vllm_cpu": CPU_RULE}
    kept = named_precision("bf16", kinds, AVX2)
    assert kept.chosen == "bf16" and kept.reason == "named by the campaign"
    assert kept.warning.startswith("protocol.precision.weights 'bf16': llama_cpp, vllm_cpu would emulate bf16 "
                                   "(no avx512_bf16 or amx_bf16) on this host")
    assert "Fix: precision: native" in kept.warning
    assert named_precision("bf16", kinds, ZEN4).warning is None
    assert named_precision("fp32", kinds, AVX2).warning is None
    assert named_precision("q8_0", kinds, AVX2).warning is None  # not a float format the host computes in


def test_the_quickstart_runs_natively_on_each_host_type(host_flags):
    quickstart = yaml.safe_load(open("campaigns/quickstart.yaml"))
    assert quickstart["protocol"]["precision"] == "native"
    for flags, chosen in ((AVX2, "fp32"), (ZEN4, "bf16")):
        host_flags(flags)
        c = parse_campaign(quickstart)
        assert (c.protocol.precision.weights, c.protocol.precision.kv_cache) == (chosen, chosen)
        assert {c.protocol_for(arm).precision.weights for arm in c.arms} == {chosen}
        assert set(c.protocol.precision.choice.native_by_kind) == {"llama_cpp", "vllm_cpu"}


def test_each_engine_kind_states_its_native_precisions():
    for kind in ("llama_cpp", "vllm_cpu", "transformers", "mlx"):
        assert adapter_class(kind).native_precisions["fp32"] == ()  # fp32 everywhere: native always has an answer
    assert adapter_class("vllm").native_precisions == {"bf16": (), "fp16": (), "fp32": ()}  # its GPU, not this CPU


def test_the_choice_stays_with_the_resolved_campaign_on_another_host(host_flags):
    host_flags(AVX2)
    resolved = parse_campaign(campaign("native")).model_dump(mode="json")
    assert resolved["protocol"]["precision"]["weights"] == "fp32"
    host_flags(ZEN4)  # a resumed run, or its report read elsewhere: what ran is what it says
    again = parse_campaign(resolved).protocol.precision
    assert again.weights == "fp32" and again.choice.host_isa == AVX2


def test_native_is_chosen_for_weights_and_kv_together_and_once_for_every_arm(host_flags):
    host_flags(AVX2)
    with pytest.raises(CampaignError, match="native chooses both together; write precision: native"):
        parse_campaign(campaign({"weights": "native", "kv_cache": "bf16"}))
    arms = [{"name": "a", "engine": {"kind": "llama_cpp"}, "protocol_overrides": {"precision": "native"}},
            {"name": "b", "engine": {"kind": "vllm_cpu"}}]
    with pytest.raises(CampaignError, match=r"arms\[0\].protocol_overrides: precision native is chosen once"):
        parse_campaign(campaign("bf16", arms, **{}) | {"variables_under_test": ["precision"]})


def test_the_check_warns_of_a_named_precision_and_notes_the_native_choice(host_flags):
    host_flags(AVX2)
    named = parse_campaign(campaign({"weights": "bf16", "kv_cache": "bf16"}))
    warnings, notes = precision_lines(named.protocol.precision, named.arms)
    assert warnings == ["protocol.precision.weights 'bf16': llama_cpp would emulate bf16 (no avx512_bf16); vllm_cpu "
                        "would emulate bf16 (no avx512_bf16 or amx_bf16) on this host, so the run measures the "
                        "emulation and runs markedly slower. Fix: precision: native, or keep it to compare with a "
                        "host that has those kernels"] and not notes
    native = parse_campaign(campaign("native"))
    warnings, notes = precision_lines(native.protocol.precision, native.arms)
    assert not warnings and notes == [f"protocol.precision native: {native.protocol.precision.choice.reason}"]


def test_the_passport_records_the_choice_and_its_reason(host_flags, tmp_path):
    host_flags(AVX2)  # llama.cpp alone: its fp16 kernels run on F16C, so fp16 here
    c = parse_campaign(campaign("native", [{"name": "a", "engine": {"kind": "llama_cpp"}}], stages=["sizing"]))
    arm = RunDir(tmp_path / "native").arm("a").create()
    write_passport(c, c.arms[0], arm)
    p = read_json(arm.passport_json)
    assert p["identity"]["formats"]["weights"] == "fp16" and p["identity"]["formats"]["kv_cache"] == "fp16"
    reason = ("fp16: llama_cpp would emulate bf16 (no avx512_bf16); every engine runs fp16 natively "
              "(llama_cpp: f16c)")
    assert p["protocol"]["precision"] == {"asked": "native", "chosen": "fp16", "reason": reason, "host_isa": AVX2,
                                          "native_by_kind": {"llama_cpp": ["fp16", "fp32"]}, "warning": None}
    assert f"| precision.reason | {reason} |" in arm.passport_md.read_text()


def test_the_passport_of_a_named_precision_carries_the_runs_warning(host_flags, tmp_path):
    host_flags(AVX2)
    c = parse_campaign(campaign("bf16", [{"name": "a", "engine": {"kind": "llama_cpp"}}], stages=["sizing"]))
    run = RunDir(tmp_path / "named")
    arm = run.arm("a").create()
    record = precision_module.precision_record(c.protocol.precision, c.arms)  # what the runner keeps
    run.manifest.write_text(json.dumps({"precision": record}))
    write_passport(c, c.arms[0], arm)
    p = read_json(arm.passport_json)["protocol"]["precision"]
    assert p["asked"] == p["chosen"] == "bf16" and "llama_cpp would emulate bf16" in p["warning"]


def test_each_kinds_native_precisions_agree_with_the_committed_benchmark():
    """benchmarks/results/native_precision.json, measured on an AVX2 host: for each kind, the
    precision of its fastest request is one its facts call native there, and every precision they
    call emulated was slower than that one in every round."""
    from stackbook.host import native_because

    bench = json.load(open("benchmarks/results/native_precision.json"))
    flags = bench["host"]["isa_flags"]
    assert "avx512_bf16" not in flags and "avx2" in flags
    for kind, by_precision in bench["summary"].items():
        table = adapter_class(kind).native_precisions
        fastest = by_precision["fastest_request"]
        assert native_because(table[fastest], flags), (kind, fastest)
        best = max(by_precision[fastest]["request_s_per_round"])
        for p in ("bf16", "fp16", "fp32"):
            if not native_because(table.get(p, ("-",)), flags):
                assert min(by_precision[p]["request_s_per_round"]) > best, (kind, p)


def test_the_setup_docs_quote_the_committed_benchmark():
    """docs/setup.md's precision table: each engine's seconds a request in each precision, as the
    lowest and highest round of benchmarks/results/native_precision.json."""
    bench = json.load(open("benchmarks/results/native_precision.json"))["summary"]
    docs = open("docs/setup.md").read()
    names = {"llama_cpp": "llama.cpp", "vllm_cpu": "vLLM-CPU", "transformers": "transformers",
             "mlx": "MLX (CPU backend)"}

    def span(rounds):
        return f"{min(rounds):.2f} to {max(rounds):.2f}"

    for kind, name in names.items():
        cells = [span(bench[kind][p]["request_s_per_round"]) for p in ("bf16", "fp16", "fp32")]
        row = f"| {name} | " + " | ".join(cells) + " |"
        assert row in docs, row
