"""cpu_info's /proc/cpuinfo parser on recorded texts of both architectures (tests/cpuinfo/):
this machine's AMD EPYC (x86_64), qemu's Neoverse N1 model as an arm64 kernel shows it
(../shared/tools/aarch64), and a Kunpeng 920's as that kernel prints it (MIDR fields per
Linux's arch/arm64/include/asm/cputype.h: HiSilicon 0x48, TSV110 0xd01)."""

import pathlib
import platform

import pytest

from ascend_ops.cpu_info import GemmEngineReport, cpu_info, parse_cpuinfo

RECORDED = pathlib.Path(__file__).parent / "cpuinfo"


def recorded(name: str) -> str:
    return (RECORDED / name).read_text()


def test_x86_model_name_and_flags():
    info = parse_cpuinfo(recorded("amd_epyc_zen4_x86_64.txt"))
    assert (info.model, info.arch, info.amx_bf16, info.avx512_bf16) == ("AMD EPYC", "x86_64", False, True)
    assert info.describe() == "AMD EPYC (amx_bf16 no, avx512_bf16 yes)"


def test_kunpeng_920_is_named_from_its_midr():
    info = parse_cpuinfo(recorded("kunpeng_920_aarch64.txt"))
    assert info.model == "HiSilicon Kunpeng 920 (TaiShan v110)"
    assert info.arch == "aarch64" and not info.amx_bf16 and not info.avx512_bf16
    # Armv8.2: NEON and fp16 arithmetic, no SVE, no BF16.
    assert dict(info.flags) == {"asimd": True, "asimdhp": True, "sve": False, "bf16": False}
    assert info.describe() == ("HiSilicon Kunpeng 920 (TaiShan v110) "
                               "(aarch64: asimd yes, asimdhp yes, sve no, bf16 no)")


def test_qemu_neoverse_n1():
    info = parse_cpuinfo(recorded("qemu_neoverse_n1_aarch64.txt"))
    assert info.model == "Arm Neoverse N1" and info.arch == "aarch64"
    assert dict(info.flags) == {"asimd": True, "asimdhp": True, "sve": False, "bf16": False}


def test_only_the_first_processor_counts():
    two = recorded("kunpeng_920_aarch64.txt").replace("CPU part\t: 0xd01\nCPU revision\t: 0\n\nprocessor\t: 1",
                                                      "CPU part\t: 0xd01\nCPU revision\t: 0\n\nprocessor\t: 1\nCPU part\t: 0xd0c", 1)
    assert parse_cpuinfo(two).model == "HiSilicon Kunpeng 920 (TaiShan v110)"


@pytest.mark.parametrize("implementer, part, model", [
    ("0x48", "0xd99", "HiSilicon aarch64 CPU (part 0xd99)"),  # a vendor we know, a new part
    ("0x99", "0x123", "implementer 0x99 aarch64 CPU (part 0x123)"),
])
def test_unknown_arm_parts_are_named_by_their_fields(implementer, part, model):
    text = recorded("kunpeng_920_aarch64.txt").replace("0x48", implementer).replace("0xd01", part)
    assert parse_cpuinfo(text).model == model


def test_sve_and_bf16_features_are_read():
    text = recorded("qemu_neoverse_n1_aarch64.txt").replace("asimddp", "asimddp sve bf16")
    assert dict(parse_cpuinfo(text).flags) == {"asimd": True, "asimdhp": True, "sve": True, "bf16": True}


def test_this_machine_is_named_by_its_architecture():
    info = cpu_info()
    assert info.model and info.arch == {"AMD64": "x86_64", "arm64": "aarch64"}.get(platform.machine(),
                                                                                  platform.machine())
    assert info.model not in ("unknown CPU", "unknown aarch64 CPU")


def test_engine_speeds_keep_three_significant_digits():
    """An emulated aarch64 CPU (CI's) measures ~0.0002 TFLOP/s, which 3 decimals showed as 0.000."""
    report = GemmEngineReport({"fp32_out": "portable", "rounded": "onednn"},
                              {"fp32_out": False, "rounded": False},
                              {"fp32_out": {"portable": 0.000213}, "rounded": {"onednn": 0.148, "portable": 1.2345}})
    assert report.describe() == (
        "fp32_out: portable (fastest measured); measured TFLOP/s: portable 0.000213\n"
        "  rounded: onednn (fastest measured); measured TFLOP/s: onednn 0.148, portable 1.23")
