"""The host's topology: sockets, cores and NUMA nodes from sysfs (this host's and a fake tree),
accelerator links from nvidia-smi topo -m (a recorded output) or "no accelerator", and the line
the passport shows."""
import os
import shutil
import subprocess

from stackbook.config.loading import parse_campaign
from stackbook.evidence.files import read_json
from stackbook.run_checks.passport import write_passport
from stackbook.evidence.rundir import RunDir
from stackbook.host import (
    accelerator_links,
    host_identity,
    host_topology,
    numa_nodes,
    parse_nvidia_topology,
    topology_line,
)

# Two GPUs on NVLink, as nvidia-smi prints it: an underlined header, tabs that also pad columns.
TOPO = ("\t\x1b[4mGPU0\tGPU1\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID\x1b[0m\n"
        "GPU0\t X \tNV18\t0-47\t0\t\tN/A\n"
        "GPU1\tNV18\t X \t48-95\t1\t\tN/A\n"
        "\nLegend:\n\n  X    = Self\n  NV#  = Connection traversing a bonded set of # NVLinks\n")


def fake_sysfs(root, cpus, nodes):
    """cpus: (package, core) per logical CPU; nodes: (cpulist, MemTotal kB) per node number."""
    for i, (package, core) in enumerate(cpus):
        top = root / "cpu" / f"cpu{i}" / "topology"
        top.mkdir(parents=True)
        (top / "physical_package_id").write_text(f"{package}\n")
        (top / "core_id").write_text(f"{core}\n")
    (root / "cpu" / "cpufreq").mkdir()   # not a CPU
    for n, (cpulist, kb) in nodes.items():
        d = root / "node" / f"node{n}"
        d.mkdir(parents=True)
        (d / "cpulist").write_text(f"{cpulist}\n")
        (d / "meminfo").write_text(f"Node {n} MemTotal:       {kb} kB\nNode {n} MemFree:        1 kB\n")
    return root


def no_gpu(_name):
    return None


def test_fake_tree_two_sockets_hyperthreads_and_three_nodes(tmp_path):
    root = fake_sysfs(tmp_path, [(0, 0), (0, 1), (1, 0), (1, 1), (0, 0), (0, 1)],
                      {0: ("0-1,4-5", 16777216), 1: ("2-3", 8388608), 10: ("", 1048576)})
    t = host_topology(root, which=no_gpu)
    assert (t["sockets"], t["physical_cores"], t["logical_cpus"]) == (2, 4, 6)
    assert t["numa_nodes"] == [{"node": 0, "cpus": "0-1,4-5", "memory_gib": 16.0},
                               {"node": 1, "cpus": "2-3", "memory_gib": 8.0},
                               {"node": 10, "cpus": "none (memory only)",
                                "memory_gib": 1.0}]       # numeric order, not 0, 10, 1
    assert t["accelerator_links"] == "no accelerator: nvidia-smi is not on PATH"
    assert topology_line(t) == ("2 socket(s), 4 physical cores, 6 logical CPUs; NUMA node 0: CPUs 0-1,4-5, 16.0 GiB; "
                                "NUMA node 1: CPUs 2-3, 8.0 GiB; NUMA node 10: CPUs none (memory only), 1.0 GiB; "
                                "no accelerator: nvidia-smi is not on PATH")


def test_a_tree_without_nodes_says_so(tmp_path):
    (tmp_path / "cpu").mkdir()
    assert numa_nodes(tmp_path) == f"not exposed: no node* under {tmp_path / 'node'}"
    t = host_topology(tmp_path, which=no_gpu)
    assert t["cpu_topology"] == f"not exposed: no cpu*/topology under {tmp_path / 'cpu'}"


def test_this_hosts_sysfs():
    t = host_topology()
    assert t["logical_cpus"] == os.cpu_count() and 1 <= t["sockets"] <= t["physical_cores"] <= t["logical_cpus"]
    nodes = t["numa_nodes"]
    assert nodes and nodes[0]["node"] == 0 and nodes[0]["memory_gib"] > 0 and nodes[0]["cpus"]
    if shutil.which("nvidia-smi") is None:
        assert t["accelerator_links"] == "no accelerator: nvidia-smi is not on PATH"
    else:
        assert "matrix" in t["accelerator_links"]
    assert host_identity()["topology"]["numa_nodes"] == nodes


def test_nvidia_smi_topology_is_parsed_into_links_and_affinity():
    t = parse_nvidia_topology(TOPO)
    assert t["links"] == {"GPU0-GPU1": "NV18"}
    assert t["affinity"] == {"GPU0": {"CPU Affinity": "0-47", "NUMA Affinity": "0", "GPU NUMA ID": "N/A"},
                             "GPU1": {"CPU Affinity": "48-95", "NUMA Affinity": "1", "GPU NUMA ID": "N/A"}}
    assert len(t["matrix"]) == 3 and "\x1b" not in "".join(t["matrix"])

    def run(cmd, **_):
        assert cmd == ["nvidia-smi", "topo", "-m"]
        return subprocess.CompletedProcess(cmd, 0, TOPO, "")
    links = accelerator_links(run, which=lambda _: "/usr/bin/nvidia-smi")
    assert links["links"] == {"GPU0-GPU1": "NV18"}
    assert topology_line({"sockets": 2, "physical_cores": 96, "logical_cpus": 192, "numa_nodes": [],
                          "accelerator_links": links}).endswith(
        "accelerator links: GPU0-GPU1 NV18; GPU0 CPUs 0-47 NUMA 0, GPU1 CPUs 48-95 NUMA 1")

    def failing(cmd, **_):
        return subprocess.CompletedProcess(cmd, 9, "", "NVIDIA-SMI has failed because it couldn't communicate")
    assert accelerator_links(failing, which=lambda _: "/usr/bin/nvidia-smi") == (
        "no accelerator: nvidia-smi topo -m exited 9 (NVIDIA-SMI has failed because it couldn't communicate)")


def test_the_passport_identity_shows_the_topology(tmp_path):
    c = parse_campaign({"name": "t", "hardware": {"accelerator": "this-cpu"},
                        "model": {"source": "catalog", "catalog": "qwen3.8-27b"},
                        "protocol": {"stages": ["sizing"]}, "arms": [{"name": "a", "engine": {"kind": "vllm"}}]})
    arm = RunDir(tmp_path).arm("a").create()
    write_passport(c, c.arms[0], arm)
    host = read_json(arm.passport_json)["identity"]["host"]
    assert host["topology"]["logical_cpus"] == os.cpu_count()
    assert f"| host.topology | {topology_line(host['topology'])} |" in arm.passport_md.read_text()
