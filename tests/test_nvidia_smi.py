"""ingest/nvidia_smi.py against real nvidia-smi captures (tests/data/samples/nvidia_smi,
sources in SOURCES-p3.md), and the GPU table entries it relies on."""

import pytest
from conftest import DATA

from ingest.nvidia_smi import (
    PARSERS,
    NvidiaSmiCsv,
    NvidiaSmiQ,
    NvidiaSmiTopo,
    hardware_from_string,
    interconnect,
    merge_hardware,
    parse_lines,
)
from kb.hardware import lookup_gpu

SAMPLES = DATA / "samples" / "nvidia_smi"
FILES = sorted(SAMPLES.glob("*.txt"))


def read(name: str):
    path = SAMPLES / name
    return merge_hardware(parse_lines(path.read_text().splitlines(), str(path)))


def run(parser_cls, text: str, path: str = "capture.txt"):
    p = parser_cls(path)
    for n, line in enumerate(text.splitlines(), 1):
        p.feed(n, line)
    return p.results()


# ------------------------------------------------------------ every sample file


def test_samples_are_present():
    assert len(FILES) >= 15


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_every_sample_yields_hardware(path):
    hw = merge_hardware(parse_lines(path.read_text().splitlines(), str(path)))
    assert hw is not None and hw.count >= 1 and str(path) in hw.source
    if hw.gpu != "unknown":
        assert hw.known == (lookup_gpu(hw.gpu) is not None)
        assert hw.memory_gb or not hw.known
    if hw.interconnect:
        assert hw.links and all(k.count("GPU") in (1, 2) for k in hw.links)


@pytest.mark.parametrize("name,gpu,arch,count,memory_gb,driver,cuda", [
    ("p3_H100SXMx8_nvidia-smi-q.txt", "NVIDIA H100 80GB HBM3", "SM90", 8, 79.6, "565.57.01", "12.7"),
    ("p3_H100NVLx2_nvidia-smi-q.txt", "NVIDIA H100 NVL", "SM90", 2, 93.6, "550.54.14", "12.4"),
    ("p3_A100SXMx4_nvidia-smi-q.txt", "NVIDIA A100-SXM4-80GB", "SM80", 4, 80.0, "555.42.02", "12.5"),
    ("p3_L4_nvidia-smi-q.txt", "NVIDIA L4", "SM89", 1, 22.5, "550.90.07", "12.4"),
    ("p3_RTX3090_nvidia-smi-q.txt", "NVIDIA GeForce RTX 3090", "SM86", 2, 24.0, "560.35.03", "12.6"),
    ("p3_H100SXMx8_nvidia-smi.txt", "NVIDIA H100 80GB HBM3", "SM90", 8, 79.6, "565.57.01", "12.7"),
])
def test_nvidia_smi_q_and_table(name, gpu, arch, count, memory_gb, driver, cuda):
    hw = read(name)
    assert (hw.gpu, hw.arch, hw.count, hw.memory_gb, hw.driver, hw.cuda) == (gpu, arch, count, memory_gb, driver, cuda)
    assert hw.known and hw.interconnect is None  # no topology in these files


@pytest.mark.parametrize("name,gpu,count,memory_gb,driver", [
    ("p3_h200x4_query_csv.txt", "NVIDIA H200", 4, 140.4, None),  # "143771 MiB" with header
    ("p3_a100x8_list_and_query_csv.txt", "NVIDIA A100-SXM4-80GB", 8, 80.0, "570.133.20"),
    ("p3_rtxa6000x2_query_csv.txt", "NVIDIA RTX A6000", 2, 48.0, None),
    ("p3_rtx4060laptop_query_csv.txt", "NVIDIA GeForce RTX 4060 Laptop GPU", 1, 8.0, "576.02"),
    ("p3_rtx5090_noheader_nounits.txt", "NVIDIA GeForce RTX 5090", 1, 31.8, None),  # noheader,nounits
    ("p3_gb10_noheader_nounits.txt", "NVIDIA GB10", 1, 128, None),  # no memory column: the table's
])
def test_query_gpu_csv(name, gpu, count, memory_gb, driver):
    hw = read(name)
    assert (hw.gpu, hw.count, hw.memory_gb, hw.driver) == (gpu, count, memory_gb, driver)


def test_mixed_gpus_keep_each_name_and_the_smallest_memory():
    hw = read("p3_rtx3060_5060ti_noheader_nounits.txt")
    assert hw.count == 2 and hw.memory_gb == 12.0  # 12288 MiB, the smaller card
    assert hw.links == {"GPU0": "NVIDIA GeForce RTX 3060", "GPU1": "NVIDIA GeForce RTX 5060 Ti"}
    assert not hw.known and hw.arch is None  # neither card is in the table: kept as given


# --------------------------------------------------------------------- topology


def test_topo_all_nvlink_two_numa_nodes_nic_columns_ignored():
    hw = read("p3_h100x8_dgx_smi_topo.txt")  # plain nvidia-smi box + topo -m
    assert hw.gpu == "NVIDIA H100 80GB HBM3" and hw.count == 8  # the box shows 6, the matrix 8
    assert hw.interconnect == "NVLink" and hw.numa_nodes == 2
    assert len([k for k in hw.links if "-" in k]) == 28 and set(hw.links.values()) == {"NV18"}
    assert (hw.driver, hw.cuda) == ("580.126.20", "13.0")


def test_topo_mixed_nvlink_pairs_over_sys_four_numa_nodes():
    hw = read("p3_a100pcie_x4_nv12_sys_topo.txt")
    assert hw.interconnect == "mixed" and hw.count == 4 and hw.numa_nodes == 4
    assert hw.links["GPU0-GPU1"] == "NV12" and hw.links["GPU2-GPU3"] == "NV12"
    assert hw.links["GPU0-GPU2"] == "SYS" and hw.links["GPU1-GPU3"] == "SYS"
    assert hw.gpu == "unknown" and not hw.known  # topo -m alone does not name the GPU


def test_topo_pcie_only():
    pix = read("p3_2gpu_pix_topo.txt")
    assert (pix.interconnect, pix.count, pix.numa_nodes, pix.links) == ("PCIe", 2, 1, {"GPU0-GPU1": "PIX"})
    sys4 = read("p3_4gpu_sys_topo_indented.txt")  # indented inside a markdown list
    assert sys4.interconnect == "PCIe" and sys4.count == 4 and set(sys4.links.values()) == {"SYS"}


def test_env_dump_with_ansi_header_names_the_gpu():
    # sglang's environment report: "GPU 0,...,7: NVIDIA B300 SXM6 AC" and a topo
    # matrix whose header still carries the terminal's underline codes
    hw = read("p3_b300x8_sglang_env_topo.txt")
    assert (hw.gpu, hw.arch, hw.count, hw.interconnect, hw.numa_nodes) == ("NVIDIA B300 SXM6 AC", "SM103", 8,
                                                                           "NVLink", 2)
    assert hw.driver == "590.44.01" and hw.memory_gb == 288  # from the GPU table


def test_interconnect_rule():
    assert interconnect(["NV18", "NV12"]) == "NVLink"
    assert interconnect(["PIX", "PXB", "PHB", "NODE", "SYS"]) == "PCIe"
    assert interconnect(["NV4", "SYS"]) == "mixed"
    assert interconnect([]) is None


def test_topo_with_spaces_instead_of_tabs():
    text = ("        GPU0    GPU1    CPU Affinity    NUMA Affinity\n"
            "GPU0     X      NV4     0-15            0\n"
            "GPU1    NV4      X      0-15            0\n")
    [hw] = run(NvidiaSmiTopo, text)
    assert hw.links == {"GPU0-GPU1": "NV4"} and hw.interconnect == "NVLink" and hw.numa_nodes == 1


# ------------------------------------------------------------- mixed captures


def test_mixed_terminal_capture_merges_q_csv_and_topo():
    q = (SAMPLES / "p3_H100SXMx8_nvidia-smi-q.txt").read_text()
    topo = (SAMPLES / "p3_h100x8_dgx_smi_topo.txt").read_text()
    capture = ("$ python -m sglang.launch_server --model-path deepseek-ai/DeepSeek-V3 --tp 8\n"
               "[2025-01-01 10:00:00 TP0] Load weight end. mem usage=80.1 GB, avail mem=0.5 GB\n"
               "We used NVIDIA H100, then checked the topology, twice.\n"
               + q + "\n$ nvidia-smi topo -m\n" + topo)
    found = parse_lines(capture.splitlines(), "session.log")
    kinds = {h.gpu for h in found}
    assert "We used NVIDIA H100" not in kinds  # prose with commas is not a CSV row
    hw = merge_hardware(found)
    assert (hw.gpu, hw.count, hw.memory_gb, hw.interconnect, hw.numa_nodes) == (
        "NVIDIA H100 80GB HBM3", 8, 79.6, "NVLink", 2)
    assert hw.driver == "565.57.01" and hw.source == "session.log"


def test_looping_query_keeps_one_row_per_gpu():
    block = (SAMPLES / "p3_rtxa6000x2_query_csv.txt").read_text()
    rows = block.splitlines()[1:]
    [hw] = run(NvidiaSmiCsv, block + "\n".join(rows) + "\n")  # `-l 5` prints the rows again
    assert hw.count == 2


def test_repeated_q_output_counts_each_gpu_once():
    text = (SAMPLES / "p3_RTX3090_nvidia-smi-q.txt").read_text()
    [hw] = run(NvidiaSmiQ, text + text)  # `nvidia-smi -q -l 1` prints the whole report again
    assert hw.count == 2


def test_q_section_without_every_gpu_shown_uses_attached_count():
    text = ("Timestamp                                 : Wed Jun  7 19:32:16 2023\n"
            "Driver Version                            : 510.73.08\n"
            "CUDA Version                              : 11.6\n\n"
            "Attached GPUs                             : 8\n"
            "GPU 00000000:10:1C.0\n"
            "    Product Name                          : NVIDIA A100-SXM4-80GB\n"
            "    [...]\n")  # the excerpt stas00/ml-engineering quotes
    [hw] = run(NvidiaSmiQ, text)
    assert (hw.count, hw.arch, hw.driver, hw.memory_gb) == (8, "SM80", "510.73.08", 80)


def test_parsers_follow_the_line_parser_shape():
    kinds = {cls.kind for cls in PARSERS}
    assert {"nvidia-smi-q", "nvidia-smi-csv", "nvidia-smi-topo"} <= kinds
    for cls in PARSERS:
        p = cls("empty.txt")
        p.feed(1, "nothing to see here")
        assert p.results() == []
    assert merge_hardware([]) is None


# ------------------------------------------------------------------ --gpu text


@pytest.mark.parametrize("text,gpu,count,arch,memory_gb,ic", [
    ("8x RTX PRO 6000", "RTX PRO 6000 Blackwell", 8, "SM120", 96, "PCIe"),
    ("8xH100", "H100", 8, "SM90", 80, "NVLink"),
    ("1x H100", "H100", 1, "SM90", 80, "PCIe"),  # one GPU: no GPU-to-GPU link
    ("4x H100 PCIe", "H100 PCIe", 4, "SM90", 80, "PCIe"),
    ("H200 x 8", "H200", 8, "SM90", 141, "NVLink"),
    ("2x RTX 5090 nvlink", "RTX 5090", 2, "SM120", 32, "NVLink"),
    ("8x MI300X", "MI300X", 8, "gfx942", 192, "NVLink"),  # Infinity Fabric boards, same role
])
def test_hardware_from_string(text, gpu, count, arch, memory_gb, ic):
    hw, warnings = hardware_from_string(text)
    assert (hw.gpu, hw.count, hw.arch, hw.memory_gb, hw.interconnect) == (gpu, count, arch, memory_gb, ic)
    assert hw.known and warnings == []


def test_unknown_gpu_string_is_kept_with_a_warning():
    hw, warnings = hardware_from_string("4x Voodoo 5 6000")
    assert (hw.gpu, hw.count, hw.known, hw.arch, hw.interconnect) == ("Voodoo 5 6000", 4, False, None, "PCIe")
    assert warnings and "Voodoo 5 6000" in warnings[0]


# ------------------------------------------------------------------- GPU table


@pytest.mark.parametrize("name,canonical,arch,memory_gb,nvlink", [
    ("Tesla V100-SXM2-32GB", "V100", "SM70", 32, True),
    ("Tesla V100-SXM2-16GB", "V100 16GB", "SM70", 16, True),
    ("Tesla V100-PCIE-32GB", "V100 PCIe", "SM70", 32, False),
    ("NVIDIA A100-SXM4-80GB", "A100", "SM80", 80, True),
    ("NVIDIA A100-SXM4-40GB", "A100 40GB", "SM80", 40, True),
    ("NVIDIA A100 80GB PCIe", "A100 PCIe", "SM80", 80, False),
    ("NVIDIA A10", "A10", "SM86", 24, False),
    ("NVIDIA RTX A6000", "RTX A6000", "SM86", 48, False),
    ("NVIDIA RTX A4000", "RTX A4000", "SM86", 16, False),  # not the A40
    ("NVIDIA L4", "L4", "SM89", 24, False),
    ("NVIDIA L40S", "L40S", "SM89", 48, False),
    ("NVIDIA H20", "H20", "SM90", 96, True),
    ("NVIDIA H100 80GB HBM3", "H100", "SM90", 80, True),
    ("NVIDIA H100 NVL", "H100 NVL", "SM90", 94, False),
    ("NVIDIA H200", "H200", "SM90", 141, True),
    ("NVIDIA GH200 480GB", "GH200", "SM90", 96, True),
    ("NVIDIA B200", "B200", "SM100", 180, True),
    ("NVIDIA B300 SXM6 AC", "B300", "SM103", 288, True),
    ("NVIDIA GB200", "GB200", "SM100", 186, True),
    ("NVIDIA GB10", "GB10", "SM121", 128, False),
    ("NVIDIA GeForce RTX 3090", "RTX 3090", "SM86", 24, False),
    ("NVIDIA GeForce RTX 4090", "RTX 4090", "SM89", 24, False),
    ("NVIDIA GeForce RTX 5090", "RTX 5090", "SM120", 32, False),
    ("NVIDIA RTX PRO 6000 Blackwell Server Edition", "RTX PRO 6000 Blackwell", "SM120", 96, False),
    ("AMD Instinct MI300X", "MI300X", "gfx942", 192, True),
    ("AMD Instinct MI325X", "MI325X", "gfx942", 256, True),
    ("AMD Instinct MI355X", "MI355X", "gfx950", 288, True),
    ("Tesla T4", "T4", "SM75", 16, False),
])
def test_gpu_table_entries(name, canonical, arch, memory_gb, nvlink):
    spec = lookup_gpu(name)
    assert (spec.name, spec.arch, spec.memory_gb, spec.nvlink) == (canonical, arch, memory_gb, nvlink)


# ------------------------------------------------------------------- robustness

from hypothesis import (  # noqa: E402
    HealthCheck,
    given,
    settings,
    strategies as st,  # noqa: E402
)

SAMPLE_LINES = [line for p in FILES for line in p.read_text().splitlines()]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.sampled_from(SAMPLE_LINES) | st.text(max_size=60), max_size=80))
def test_parsers_never_crash_on_shuffled_captures(lines):
    found = parse_lines(lines, "fuzz.txt")
    hw = merge_hardware(found)
    assert hw is None or (hw.count >= 1 and hw.source == "fuzz.txt")
