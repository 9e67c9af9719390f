import pytest

from kb.hardware import gpu_arch, lookup_gpu, parse_gpu_string


@pytest.mark.parametrize("name,arch", [
    ("H100", "SM90"), ("NVIDIA H100 80GB HBM3", "SM90"), ("H200", "SM90"), ("NVIDIA H200", "SM90"),
    ("B200", "SM100"), ("NVIDIA B200", "SM100"),
    ("RTX PRO 6000 Blackwell", "SM120"), ("NVIDIA RTX PRO 6000 Blackwell Server Edition", "SM120"),
    ("RTX 5090", "SM120"), ("NVIDIA GeForce RTX 5090", "SM120"),
    ("L40", "SM89"), ("L40S", "SM89"), ("NVIDIA L4", "SM89"), ("RTX 6000 Ada", "SM89"),
    ("A100", "SM80"), ("NVIDIA A100-SXM4-80GB", "SM80"), ("A10G", "SM86"), ("RTX A6000", "SM86"),
    ("MI300X", "gfx942"), ("AMD Instinct MI300X", "gfx942"), ("MI355X", "gfx950"),
    ("GB200", "SM100"), ("B300", "SM103"), ("V100", "SM70"),
])
def test_gpu_name_maps_to_architecture(name, arch):
    assert gpu_arch(name) == arch


def test_unknown_gpu_is_none_not_error():
    assert lookup_gpu("Voodoo 5 6000") is None
    assert gpu_arch(None) is None


def test_rtx_pro_6000_memory_and_a100_40gb_variant():
    assert lookup_gpu("RTX PRO 6000").memory_gb == 96
    assert lookup_gpu("A100 40GB").memory_gb == 40


@pytest.mark.parametrize("text,expected", [
    ("8x RTX PRO 6000", (8, "RTX PRO 6000", None)),
    ("8xH100", (8, "H100", None)),
    ("H200 x 8", (8, "H200", None)),
    ("4x H100 PCIe", (4, "H100 PCIe", "PCIe")),
    ("2x RTX 5090 nvlink", (2, "RTX 5090", "NVLink")),
    ("L40", (1, "L40", None)),
])
def test_gpu_string(text, expected):
    assert parse_gpu_string(text) == expected
