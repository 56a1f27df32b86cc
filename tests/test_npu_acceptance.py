"""The first-run acceptance check (ascend_ops/acceptance.py, `python -m ascend_ops` on
an NPU): which paths it covers, and its row logic with injected results. Without an NPU
the rows run here with impl="reference" standing in for the NPU side, on small shapes."""

import dataclasses


from ascend_ops import acceptance as npu_acceptance
from ascend_ops.npu import limits as npu_limits


def small_cases():
    return npu_acceptance.acceptance_cases(vocab=300, rows=40, hidden=16)


def test_the_rows_cover_the_paths_canns_tests_do_not():
    names = [c.name for c in npu_acceptance.acceptance_cases()]
    limit = npu_limits.builtin_limits()["flce_grad_high_perf_max_vocab"]
    assert any("npu memory-saving packed-uint8 int64 bf16 V=32000 BT=2048" in n for n in names)
    assert any("training step npu memory-saving" in n for n in names)
    assert any(f"high-performance packed-uint8 int64 bf16 V={limit} (the limit)" in n for n in names)
    assert any(f"V={limit + 1} refused up front" in n for n in names)
    assert any(n.startswith("online max-sum npu int64") for n in names)
    assert any("npu_custom" in n and "FLCE" in n for n in names)
    assert any("npu_custom" in n and "batch_norm" in n for n in names)
    assert any("SyncBatchNorm" in n for n in names)
    # The default path of the training API stops training when it fails.
    default = [c for c in npu_acceptance.acceptance_cases() if "training step" in c.name][0]
    assert default.blocking == "don't train yet"


def test_agreeing_rows_pass_and_an_unrefused_limit_stops_high_performance():
    cases = [dataclasses.replace(c, impl="reference") for c in small_cases()]
    rows = npu_acceptance.run_acceptance("cpu", cases, available=lambda impl: None)
    by_name = {r.case.name: r for r in rows}
    refusal = [r for r in rows if r.case.expect_refusal]
    assert len(refusal) == 1 and refusal[0].status == "FAIL" and refusal[0].stops_training
    others = [r for r in rows if not r.case.expect_refusal]
    assert all(r.status == "pass" for r in others), [(r.case.name, r.detail) for r in others]
    text = npu_acceptance.verdict(rows)
    assert text.startswith("acceptance: DON'T TRAIN YET")
    assert "mode='high-performance'" in text and refusal[0].case.name in text
    assert len(by_name) == len(rows)


def test_a_five_percent_error_stops_training_and_names_the_row():
    [case] = [c for c in small_cases() if c.name.startswith("FLCE grad npu memory-saving packed-uint8 int64 bf16")]
    honest = dataclasses.replace(case, impl="reference")

    def wrong(impl, device):
        outputs = honest.run(impl, device)
        return (outputs[0], outputs[1] * 1.05) if impl != "cpu" else outputs

    rows = npu_acceptance.run_acceptance("cpu", [dataclasses.replace(honest, run=wrong)],
                                         available=lambda impl: None)
    assert rows[0].status == "FAIL" and rows[0].detail.startswith("output 1:"), rows[0].detail
    assert rows[0].stops_training
    assert "<- don't train yet" in npu_acceptance.format_acceptance(rows)


def test_a_raising_row_fails_and_an_unavailable_one_is_skipped():
    def broken(impl, device):
        raise RuntimeError("aclnnFusedLinearCrossEntropyLossGrad failed: 561103 (ACLNN_ERR_INNER)")

    cases = small_cases()
    raising = dataclasses.replace(cases[0], run=broken)
    custom = [c for c in cases if c.impl == "npu_custom"]
    rows = npu_acceptance.run_acceptance(
        "cpu", [raising, *custom],
        available=lambda impl: "no package" if impl == "npu_custom" else None)
    assert rows[0].status == "FAIL" and "561103" in rows[0].detail and rows[0].stops_training
    assert [r.status for r in rows[1:]] == ["skipped"] * len(custom)
    assert not any(r.stops_training for r in rows[1:])
    only_skipped = npu_acceptance.verdict(rows[1:])
    assert only_skipped.startswith("acceptance: every row that ran agrees") and "skipped" in only_skipped


def test_the_refusal_row_passes_on_the_adapters_message():
    [case] = [c for c in small_cases() if c.expect_refusal]
    message = npu_limits.builtin_flce_grad_refusal(16, 64, case_v(case), True)

    def refused(impl, device):
        raise NotImplementedError(message)

    rows = npu_acceptance.run_acceptance("cpu", [dataclasses.replace(case, run=refused)],
                                         available=lambda impl: None)
    assert rows[0].status == "pass", rows[0].detail


def case_v(case) -> int:
    return int(case.name.split("V=")[1].split()[0])


def test_npu_unavailable_skips_the_section(capsys):
    assert npu_acceptance.report() == 0
    assert "NPU first-run acceptance: not run (npu unavailable:" in capsys.readouterr().out
