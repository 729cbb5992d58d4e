"""The host a run measured, in the words its answer needs: the CPU, the widest vector extension
it has (which decides the kernels a CPU engine may use: AMX, AVX-512 BF16, AVX-512, AVX2), and the
kernels each engine reports it ran, from the passports."""
from __future__ import annotations

from stackbook.analysis.answer_facts import RunFacts

# The vector extensions that decide which CPU kernels an engine may use, widest first.
ISA_WORDS = (("amx_bf16", "AMX"), ("amx_tile", "AMX"), ("avx512_bf16", "AVX-512 BF16"),
             ("avx512f", "AVX-512 (no BF16)"), ("avx2", "AVX2 only (no AVX-512)"), ("asimd", "NEON"), ("neon", "NEON"))
GGML_WORDS = (("AMX_INT8", "AMX"), ("AMX_BF16", "AMX"), ("AVX512_BF16", "AVX-512 BF16"), ("AVX512", "AVX-512"),
              ("AVX2", "AVX2"), ("NEON", "NEON"))


def host_of(passports: dict) -> dict:
    """The host the first passport names (a run sized for other hardware: the one its arithmetic ran on)."""
    for p in passports.values():
        h = ((p or {}).get("identity") or {}).get("host") or {}
        h = h.get("arithmetic_done_on", h)
        if h.get("cpu"):
            return h
    return {}


def sized_for(passports: dict) -> str:
    """A run sized for other hardware than it ran on says which."""
    for p in passports.values():
        target = (((p or {}).get("identity") or {}).get("host") or {}).get("sized_for")
        if target:
            return f" (the arithmetic ran here; sized for {target})"
    return ""


def isa_words(host: dict) -> str:
    flags = host.get("isa_flags") or host.get("instruction_sets") or host.get("isa")
    if not flags:
        return "instruction sets not recorded in its passports"
    have = set(flags.split() if isinstance(flags, str) else flags)
    return next((name for flag, name in ISA_WORDS if flag in have), "none of AVX2, AVX-512, AMX, NEON")


def host_words(host: dict) -> str:
    if not host:
        return "host not recorded"
    cpus = f", {host['logical_cpus']} CPUs" if host.get("logical_cpus") else ""
    return f"{host['cpu']}{cpus}, {isa_words(host)}"


def kernel_words(passport: dict) -> str | None:
    """The kernels the engine ran, as its passport records them; None where it does not."""
    identity = (passport or {}).get("identity") or {}
    k = identity.get("kernel_choice") or {}
    if k.get("kernel_library"):
        return str(k["kernel_library"])
    if k.get("cpu_features"):
        have = set(k["cpu_features"])
        widest = next((name for flag, name in GGML_WORDS if flag in have), None)
        return f"{k.get('backend', 'CPU')}{' with ' + widest if widest else ''}"
    return None


def precision_words(passports: dict) -> str:
    """The weights' precision the run's arms served ("fp32 weights"), each arm's where they differ:
    on one host the precision alone can reverse a verdict, so every run names it."""
    by_arm = {n: (((p or {}).get("identity") or {}).get("formats") or {}).get("weights") for n, p in passports.items()}
    named = {w for w in by_arm.values() if w}
    if not named:
        return "precision not recorded"
    if len(named) == 1:
        return f"{named.pop()} weights"
    return ", ".join(f"{n} {w or 'not recorded'}" for n, w in by_arm.items()) + " weights"


def host_sentence(facts: RunFacts, others: list[str]) -> str:
    """The host (CPU, the ISA that decides the kernels), each engine's kernels, and the other runs
    of this campaign (`others`: one line each, its host and its verdict)."""
    kernels = {n: kernel_words(p) for n, p in facts.passports.items()}
    missing = [n for n, k in kernels.items() if not k]
    by_kernel: dict[str, list[str]] = {}
    for n, k in kernels.items():
        if k:
            by_kernel.setdefault(k, []).append(n)
    ran = [f"{', '.join(names)} ran {k}" for k, names in by_kernel.items()] + (
        [f"kernels not recorded for {', '.join(missing)}"] if missing else [])
    text = "; ".join([host_words(host_of(facts.passports)) + sized_for(facts.passports)
                      + f", {precision_words(facts.passports)}", *ran])
    if not others:
        return f"{text}. No other run of this campaign under outputs/."
    return f"{text}. Other runs of this campaign: {' | '.join(others)}."
