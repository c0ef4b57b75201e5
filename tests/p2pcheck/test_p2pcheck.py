"""tests/p2pcheck: tools/p2pcheck over the simulated runtime (fakecuda), a
simulated topology (FAKECUDA_PEER_MATRIX), captured `nvidia-smi topo -m`
texts (fake-nvidia-smi) and a sysfs tree made here (P2PCHECK_ROOT).

Run: python3 -m unittest discover -s tests/p2pcheck   (BUILD, default build:
needs BUILD/p2pcheck/fake/probe and BUILD/libunstall.so, made by make check)
"""
import importlib.machinery
import importlib.util
import json
import os
import shutil
import subprocess
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
TOOL = os.path.join(ROOT, "tools", "p2pcheck")
BUILD = os.path.abspath(os.environ.get("BUILD", os.path.join(ROOT, "build")))
PROBE = os.path.join(BUILD, "p2pcheck", "fake", "probe")

_loader = importlib.machinery.SourceFileLoader("p2pcheck", TOOL)
_spec = importlib.util.spec_from_loader("p2pcheck", _loader)
p2p = importlib.util.module_from_spec(_spec)
_loader.exec_module(p2p)


def read(name):
    with open(os.path.join(HERE, name)) as f:
        return f.read()


def config_space(acs_control=None):
    """A 4 KiB PCI config space: an AER capability at 0x100, then ACS at 0x140
    with the given control register (None: no ACS capability)."""
    b = bytearray(4096)
    nxt = 0x140 if acs_control is not None else 0
    b[0x100:0x104] = (0x0001 | 1 << 16 | nxt << 20).to_bytes(4, "little")
    if acs_control is not None:
        b[0x140:0x144] = (0x000D | 1 << 16).to_bytes(4, "little")
        b[0x146:0x148] = acs_control.to_bytes(2, "little")
    return bytes(b)


def make_sysfs(root):
    """Four GPUs (fakecuda's buses 01-04): 0 and 1 under root complex
    pci0000:00, NUMA node 0, IOMMU translating (DMA-FQ), ACS redirect on the
    bridge above GPU 0; 2 and 3 under pci0000:80, NUMA node 1, IOMMU
    passthrough (identity), bridges without ACS. The root ports give only 64
    bytes, as sysfs does to a user who is not root."""
    layout = {
        "0000:01:00.0": ("pci0000:00", ["0000:00:01.0", "0000:00:10.0"], 0, "10", "DMA-FQ"),
        "0000:02:00.0": ("pci0000:00", ["0000:00:01.0", "0000:00:11.0"], 0, "11", "DMA-FQ"),
        "0000:03:00.0": ("pci0000:80", ["0000:80:01.0"], 1, "12", "identity"),
        "0000:04:00.0": ("pci0000:80", ["0000:80:02.0"], 1, "13", "identity"),
    }
    configs = {"0000:00:01.0": bytes(64), "0000:00:10.0": config_space(0x1D), "0000:00:11.0": config_space(0),
               "0000:80:01.0": config_space(None), "0000:80:02.0": config_space(None)}
    os.makedirs(os.path.join(root, "sys/bus/pci/devices"))
    for bus, (rc, bridges, numa, group, gtype) in layout.items():
        path = os.path.join(root, "sys/devices", rc)
        for br in bridges:
            path = os.path.join(path, br)
            os.makedirs(path, exist_ok=True)
            with open(os.path.join(path, "config"), "wb") as f:
                f.write(configs[br])
        dev = os.path.join(path, bus)
        os.makedirs(dev)
        with open(os.path.join(dev, "numa_node"), "w") as f:
            f.write(f"{numa}\n")
        gdir = os.path.join(root, "sys/kernel/iommu_groups", group)
        os.makedirs(os.path.join(gdir, "devices"))
        with open(os.path.join(gdir, "type"), "w") as f:
            f.write(gtype + "\n")
        os.symlink(gdir, os.path.join(dev, "iommu_group"))
        os.symlink(dev, os.path.join(root, "sys/bus/pci/devices", bus))
    for unit in ("dmar0", "dmar1"):
        os.makedirs(os.path.join(root, "sys/class/iommu", unit))
    os.makedirs(os.path.join(root, "proc"))
    with open(os.path.join(root, "proc/cmdline"), "w") as f:
        f.write("BOOT_IMAGE=/vmlinuz root=/dev/sda1 intel_iommu=on quiet\n")


def run_tool(args, env_extra, timeout=120):
    env = dict(os.environ)
    env.pop("LD_PRELOAD", None)
    env.update({"P2PCHECK_NVIDIA_SMI": os.path.join(HERE, "fake-nvidia-smi"), "FAKECUDA_TIME_SCALE": "0.1"})
    env.update(env_extra)
    return subprocess.run([TOOL, "--probe", PROBE, "--build", BUILD] + args, env=env, capture_output=True,
                          text=True, timeout=timeout)


def by_pair(report):
    return {(p["src"], p["dst"]): p for p in report["pairs"]}


class Parsing(unittest.TestCase):
    def test_topo_h200_nvlink(self):
        m = p2p.parse_topo(read("topo-h200x2.txt"))
        self.assertEqual(m, {0: {0: "X", 1: "NV18"}, 1: {0: "NV18", 1: "X"}})  # NIC column and legend left out
        self.assertEqual(p2p.describe_link("NV18"), ("nvlink", "NVLink, 18 bonded links"))

    def test_topo_four_gpus_and_link_kinds(self):
        m = p2p.parse_topo(read("topo-mixed4.txt"))
        self.assertEqual(m[0][1], "NV4")
        self.assertEqual(m[2][3], "PIX")
        self.assertEqual(m[1][3], "SYS")
        for cell in ("PIX", "PXB", "PHB", "NODE", "SYS"):
            self.assertEqual(p2p.describe_link(cell)[0], "pcie")
        self.assertEqual(p2p.describe_link(None)[0], "unknown")
        self.assertEqual(p2p.describe_link("XYZ")[0], "unknown")

    def test_topo_without_a_matrix(self):
        self.assertIsNone(p2p.parse_topo("NVIDIA-SMI has failed because it couldn't communicate\n"))
        self.assertIsNone(p2p.parse_topo(""))

    def test_bus_ids(self):
        self.assertEqual(p2p.norm_bus_id("00000000:1B:00.0"), "0000:1b:00.0")
        self.assertEqual(p2p.norm_bus_id("0000:19:00.0"), "0000:19:00.0")
        self.assertIsNone(p2p.norm_bus_id("GPU-1234"))

    def test_acs(self):
        self.assertIsNone(p2p.acs_control(bytes(64)))  # not root: 64 bytes
        self.assertEqual(p2p.acs_control(config_space(None)), -1)
        self.assertEqual(p2p.acs_control(config_space(0x1D)), 0x1D)
        self.assertEqual(p2p.acs_text(0x1D),
                         "SrcValid+ TransBlk- ReqRedir+ CmpltRedir+ UpstreamFwd+ EgressCtrl- DirectTrans-")
        self.assertIn("not readable", p2p.acs_text(None))

    def test_sizes(self):
        self.assertEqual(p2p.parse_size("256M"), 256 << 20)
        self.assertEqual(p2p.parse_size("4k"), 4096)
        self.assertEqual(p2p.size_text(256 << 20), "256 MiB")


@unittest.skipUnless(os.access(PROBE, os.X_OK), f"no {PROBE} (make check builds it)")
class OverFakecuda(unittest.TestCase):
    """Four simulated GPUs: 0<->1 capable (PIX), 2->3 capable but enabling
    refused, 3->2 capable but enabling never returns, 0/1 to 2/3 not capable.
    nvidia-smi numbers them in the reverse order (matched by bus id)."""

    @classmethod
    def setUpClass(cls):
        cls.root = tempfile.mkdtemp(prefix="p2pcheck-test-")
        make_sysfs(cls.root)
        cls.env = {"FAKECUDA_DEVICES": "4", "FAKECUDA_PEER_MATRIX": "0100,1000,000r,00h0",
                   "P2PCHECK_ROOT": cls.root, "P2PCHECK_TEST_TOPO": os.path.join(HERE, "topo-mixed4.txt"),
                   "P2PCHECK_TEST_QUERY": os.path.join(HERE, "query-mixed4.txt")}
        r = run_tool(["--json", "--try-enable", "--enable-timeout", "1"], cls.env)
        cls.rc, cls.report, cls.stderr = r.returncode, json.loads(r.stdout), r.stderr

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.root)

    def test_devices_and_system(self):
        self.assertEqual(self.rc, 0, self.stderr)
        d = {x["index"]: x for x in self.report["devices"]}
        self.assertEqual(d[0]["bus_id"], "0000:01:00.0")
        self.assertEqual((d[0]["numa_node"], d[3]["numa_node"]), (0, 1))
        self.assertEqual((d[0]["root_complex"], d[2]["root_complex"]), ("pci0000:00", "pci0000:80"))
        self.assertEqual((d[0]["iommu_group_type"], d[2]["iommu_group_type"]), ("DMA-FQ", "identity"))
        self.assertEqual(d[0]["nvidia_smi_index"], 3)  # matched by bus id, not by position
        self.assertEqual([b["bus_id"] for b in d[0]["bridges"]], ["0000:00:01.0", "0000:00:10.0"])
        self.assertIn("not readable", d[0]["bridges"][0]["acs"])
        self.assertIn("ReqRedir+", d[0]["bridges"][1]["acs"])
        self.assertEqual(d[2]["bridges"][0]["acs"], "no ACS capability")
        self.assertEqual(self.report["iommu"]["units"], ["dmar0", "dmar1"])
        self.assertEqual(self.report["iommu"]["kernel_options"], ["intel_iommu=on"])
        self.assertEqual(self.report["versions"]["driver_release"], "580.65.06")

    def test_links_follow_the_bus_ids(self):
        p = by_pair(self.report)
        self.assertEqual(p[(0, 1)]["link"], "PIX")  # nvidia-smi GPU3 - GPU2
        self.assertEqual(p[(2, 3)]["link"], "NV4")  # nvidia-smi GPU1 - GPU0
        self.assertEqual(p[(0, 2)]["link"], "SYS")

    def test_peer_access_available(self):
        p = by_pair(self.report)[(0, 1)]
        self.assertEqual((p["can_access_peer"], p["access_supported"], p["native_atomics"]), (1, 1, 1))
        self.assertEqual(p["enable"]["result"], "cudaSuccess")
        self.assertTrue(p["enable"]["copy_ok"])
        self.assertEqual(p["verdict"]["status"], "available")
        self.assertIn("leaves those alone", p["verdict"]["unstall"])

    def test_peer_access_refused(self):
        p = by_pair(self.report)[(2, 3)]
        self.assertEqual(p["can_access_peer"], 1)
        self.assertEqual(p["enable"]["result"], "cudaErrorPeerAccessUnsupported")
        v = p["verdict"]
        self.assertEqual(v["status"], "refused")
        self.assertIn("cudaDeviceEnablePeerAccess failed: cudaErrorPeerAccessUnsupported", v["why"][0])
        self.assertIn("staged through host memory", v["unstall"])

    def test_enable_that_never_returns_is_killed(self):
        p = by_pair(self.report)[(3, 2)]
        self.assertEqual(p["enable"]["result"], "timeout")
        self.assertTrue(p["enable"]["killed"])
        self.assertEqual(p["verdict"]["status"], "refused")
        self.assertIn("did not return within 1 s", p["verdict"]["why"][0])

    def test_no_peer_access_and_the_evidence(self):
        p = by_pair(self.report)[(0, 2)]
        self.assertEqual((p["can_access_peer"], p["access_supported"], p["native_atomics"]), (0, 0, 0))
        self.assertEqual(p["enable"], {"tried": False, "why": "not capable"})
        v = p["verdict"]
        self.assertEqual(v["status"], "none")
        why = " ".join(v["why"])
        self.assertIn("different CPU sockets (nvidia-smi: SYS)", why)
        self.assertIn("different PCIe root complexes (pci0000:00, pci0000:80)", why)
        self.assertIn("different NUMA nodes (0, 1)", why)
        self.assertIn("iommu group type DMA-FQ", why)
        self.assertIn("ACS redirects peer requests up to the root complex at 0000:00:10.0", why)
        self.assertTrue(any("iommu=pt" in c for c in v["check"]))
        self.assertIn("staged through host memory", v["unstall"])

    def test_no_measurement_by_default_with_json(self):
        self.assertEqual(self.report["host_bandwidth"], [])
        self.assertNotIn("measure", self.report)


@unittest.skipUnless(os.access(PROBE, os.X_OK), f"no {PROBE} (make check builds it)")
class TextAndBandwidth(unittest.TestCase):
    """The 2 x H200 layout (NV18, nvidia-smi cannot map bus ids), text output
    with small measured copies, natively and under the shim."""

    def test_text_report_with_bandwidths(self):
        env = {"P2PCHECK_TEST_TOPO": os.path.join(HERE, "topo-h200x2.txt"), "P2PCHECK_ROOT": tempfile.gettempdir()}
        r = run_tool(["--sizes", "256K", "--reps", "2", "--try-enable"], env)
        self.assertEqual(r.returncode, 0, r.stderr)
        out = r.stdout
        self.assertIn("p2pcheck: 2 CUDA devices", out)
        self.assertIn("pageable D2H  native", out)
        self.assertIn("GPU 0 -> GPU 1: peer access available", out)
        self.assertIn("link: NV18: NVLink, 18 bonded links", out)
        self.assertIn("links: nvidia-smi topo -m (GPUs matched by index)", out)
        for line in ("peer access enabled, 256 KiB:", "driver staging, 256 KiB:", "unstall staging, 256 KiB:"):
            self.assertEqual(out.count(line), 2, line)  # both directions
        for path in ("pinned H2D ", "pinned D2H ", "pageable H2D ", ", unstall "):
            self.assertIn(path, out)
        self.assertNotIn("DATA WRONG", out)

    def test_json_measure_fields(self):
        env = {"P2PCHECK_TEST_TOPO": os.path.join(HERE, "topo-h200x2.txt"), "FAKECUDA_PEER_MATRIX": "00,00"}
        r = run_tool(["--json", "--measure", "--sizes", "64K,128K", "--reps", "1"], env)
        rep = json.loads(r.stdout)
        p = by_pair(rep)[(0, 1)]
        self.assertEqual(p["verdict"]["status"], "none")
        self.assertEqual([x["bytes"] for x in p["bandwidth"]["driver_staging"]], [65536, 131072])
        self.assertEqual(len(p["bandwidth"]["unstall_staging"]), 2)
        self.assertNotIn("peer_enabled", p["bandwidth"])
        self.assertTrue(all(x["ok"] and x["gbps"] > 0 for x in p["bandwidth"]["driver_staging"]))
        paths = {(x["run"], x["path"]) for x in rep["host_bandwidth"] if x["device"] == 1}
        self.assertEqual(len(paths), 8)  # 4 paths, native and unstall
        self.assertIn("measured: driver", p["verdict"]["unstall"])

    def test_enabling_not_tried_without_the_flag(self):
        r = run_tool(["--json"], {"P2PCHECK_NVIDIA_SMI": ""})
        p = by_pair(json.loads(r.stdout))[(1, 0)]
        self.assertIsNone(p["enable"])
        self.assertIsNone(p["link"])
        self.assertEqual(p["link_text"], "unknown (nvidia-smi not available)")
        self.assertIn("was not tried", " ".join(p["verdict"]["why"]))


class Errors(unittest.TestCase):
    def test_missing_probe(self):
        r = subprocess.run([TOOL, "--probe", "/nonexistent/probe", "--no-measure"], capture_output=True, text=True)
        self.assertEqual(r.returncode, 1)
        self.assertIn("make p2pcheck", r.stdout)

    def test_bad_size(self):
        r = subprocess.run([TOOL, "--sizes", "lots"], capture_output=True, text=True)
        self.assertEqual(r.returncode, 2)


if __name__ == "__main__":
    unittest.main()
