#include "builtin_limits.h"

#include <c10/util/Exception.h>

namespace ascend_ops::npu {
namespace {

// --- The Unified Buffer a CANN tiling sees on Atlas A2/A3 ---------------------------
// PlatformAscendC::GetCoreMemSize(UB) takes the SoC table's ub_size (196608 = 192 KiB on
// every 910B / 910_93 model) and subtracts LOCAL_RESERV_SIZE = 256 on ASCEND910B
// (asc-devkit impl/utils/tiling/platform/platform_ascendc.cpp:27, :154-162; 910_93 maps to
// ASCEND910B at :51), and reservedMemSize_ (0 unless an op reserves some, :164, :199).
constexpr uint64_t kSocUbBytes = 196608;
constexpr uint64_t kLocalReservedBytes = 256;
constexpr uint64_t kUbBytes = kSocUbBytes - kLocalReservedBytes;  // 196352

// --- aclnnFusedLinearCrossEntropyLossGrad: HighPerfTilingFunc -----------------------
// hicann/ops-nn v9.0.0 matmul/fused_linear_cross_entropy_loss_grad/op_host/
// fused_linear_cross_entropy_loss_grad_tiling.h:23 BUFFER_NUM, :32 IN_BYTE_SIZE, :34
// TBUF_BYTE_SIZE, :44 SIZE_65535, :49 baseK; its …_tiling.cpp cited at each use below.
constexpr uint64_t kBufferNum = 2;
constexpr uint64_t kInByteSize = 4;  // the float32 softmax
constexpr uint64_t kTbufByteSize = 32;
constexpr uint64_t kSize65535 = 65535;
constexpr uint64_t kBaseK = 64;

// Softmax rows one vector core holds per epoch (tiling.cpp:169, :175): V rounded up to
// 64 bytes of float32 (16 elements), double-buffered in the UB less a 32-byte TBuf.
constexpr uint64_t high_perf_rows_per_epoch(uint64_t v) {
  const uint64_t v64_aligned = ((v * kInByteSize - 1) / 64 + 1) * (64 / kInByteSize);
  return ((kUbBytes - kTbufByteSize) / kBufferNum) / (v64_aligned * kInByteSize);
}

// The largest V with a row per epoch (tiling.cpp:229-232 refuses 0 rows, "softmax.size(1)
// is too large"): (196352 - 32) / 2 = 98160 bytes = 24540 floats, down to a multiple of 16.
constexpr uint64_t high_perf_max_vocab() {
  return ((kUbBytes - kTbufByteSize) / kBufferNum) / kInByteSize / 16 * 16;  // 24528
}
static_assert(high_perf_rows_per_epoch(high_perf_max_vocab()) == 1 &&
                  high_perf_rows_per_epoch(high_perf_max_vocab() + 1) == 0,
              "high_perf_max_vocab must be the last V the tiling formula gives a row");
// tiling.cpp:219 also refuses V > 255 * 256 = 65280; the UB refusal above is the tighter.
static_assert(high_perf_max_vocab() <= 255 * 256);

// tiling.cpp:215 refuses V * IN_BYTE_SIZE < 512 bytes: V >= 128.
constexpr uint64_t kHighPerfMinVocab = 512 / kInByteSize;

// tiling.cpp:210 refuses BT_16ALIGNED - mm2TailK > 65535, with BT_16ALIGNED = BT rounded
// up to 16 (:87) and mm2TailK = BT % baseK, baseK when 0 (:156, :159).
constexpr bool high_perf_rows_refused(uint64_t bt, uint64_t base_k = kBaseK) {
  const uint64_t bt_16_aligned = (bt - 1) / 16 * 16 + 16;
  const uint64_t tail_k = bt % base_k == 0 ? base_k : bt % base_k;
  return bt_16_aligned - tail_k > kSize65535;
}
// The last BT it takes is 65536, whatever power-of-two baseK the matmul tiling settles on
// (a fixed baseK is stored but not imposed: ../shared/tools/cann-matmul-tiling/README.md).
constexpr uint64_t kHighPerfMaxRows = 65536;
static_assert(!high_perf_rows_refused(kHighPerfMaxRows) && high_perf_rows_refused(kHighPerfMaxRows + 1));
static_assert(!high_perf_rows_refused(kHighPerfMaxRows, 128) &&
              high_perf_rows_refused(kHighPerfMaxRows + 1, 128));

// tiling.cpp:224 (high-performance) and :514 (memory-saving) refuse H > 65535.
constexpr int64_t kMaxHidden = static_cast<int64_t>(kSize65535);

// --- aclnnFusedLinearOnlineMaxSum ----------------------------------------------------
// matmul/fused_linear_online_max_sum/op_api/aclnn_fused_linear_online_max_sum.cpp:38
// MAX_INPUT_DIM_ONE_SIZE = 65534 (checked at :125); :120 refuses weight.size(0) == 0.
constexpr int64_t kMaxHiddenForward = 65534;
constexpr int64_t kMinVocabForward = 1;

constexpr const char* kWayOut =
    "; use impl='npu_custom' (the ascend_ops op package, see docs/npu.md) or, for a "
    "vocabulary shard this large, split it over more ranks";
constexpr const char* kMemorySavingHint =
    "; memory-saving mode (softmax=None: LinearCrossEntropyLoss(mode='memory-saving'), "
    "linear_cross_entropy's default) has no V or BT limit";

constexpr const char* kOp = "fused_linear_cross_entropy_loss_grad: CANN's built-in "
                            "aclnnFusedLinearCrossEntropyLossGrad";

std::string str(int64_t x) { return std::to_string(x); }

}  // namespace

const BuiltinLimits& builtin_limits() {
  static const BuiltinLimits limits{kUbBytes,
                                    kMaxHidden,
                                    static_cast<int64_t>(kHighPerfMinVocab),
                                    static_cast<int64_t>(high_perf_max_vocab()),
                                    static_cast<int64_t>(kHighPerfMaxRows),
                                    kMaxHiddenForward,
                                    kMinVocabForward};
  return limits;
}

std::optional<std::string> builtin_flce_grad_refusal(int64_t bt, int64_t h, int64_t v,
                                                     bool high_performance) {
  if (h > kMaxHidden) {
    return std::string(kOp) + " needs H = input.size(1) <= " + str(kMaxHidden) + ", got " +
           str(h) + kWayOut;
  }
  if (!high_performance) {
    return std::nullopt;
  }
  const int64_t max_vocab = builtin_limits().flce_grad_high_perf_max_vocab;
  if (v < static_cast<int64_t>(kHighPerfMinVocab) || v > max_vocab) {
    return std::string(kOp) + " in high-performance mode ('softmax' given) needs " +
           str(kHighPerfMinVocab) + " <= V = weight.size(0) <= " + str(max_vocab) +
           " (the rows of its tiling that fit the " + std::to_string(kUbBytes) +
           "-byte UB), got " + str(v) + kMemorySavingHint + kWayOut;
  }
  if (bt > 0 && high_perf_rows_refused(static_cast<uint64_t>(bt))) {
    return std::string(kOp) + " in high-performance mode ('softmax' given) needs BT = "
           "input.size(0) <= " + str(kHighPerfMaxRows) + ", got " + str(bt) +
           kMemorySavingHint + kWayOut;
  }
  return std::nullopt;
}

void check_builtin_flce_grad_limits(int64_t bt, int64_t h, int64_t v, bool high_performance) {
  const std::optional<std::string> refusal = builtin_flce_grad_refusal(bt, h, v, high_performance);
  TORCH_CHECK_NOT_IMPLEMENTED(!refusal.has_value(), *refusal);
}

void check_builtin_online_max_sum_limits(int64_t h, int64_t v) {
  TORCH_CHECK_NOT_IMPLEMENTED(
      h <= kMaxHiddenForward, "fused_linear_online_max_sum: CANN's built-in "
      "aclnnFusedLinearOnlineMaxSum needs H = input.size(1) <= ", kMaxHiddenForward,
      ", got ", h, "; CPU tensors accept any H");
  TORCH_CHECK_NOT_IMPLEMENTED(
      v >= kMinVocabForward, "fused_linear_online_max_sum: CANN's built-in "
      "aclnnFusedLinearOnlineMaxSum needs V = weight.size(0) >= 1, got ", v,
      "; CPU tensors accept an empty shard");
}

const char* flce_grad_builtin_hint() {
  static const std::string hint =
      "CANN's built-in aclnnFusedLinearCrossEntropyLossGrad refuses H > " + str(kMaxHidden) +
      " and, in high-performance mode, V < " + str(kHighPerfMinVocab) + ", V > " +
      str(high_perf_max_vocab()) + " or BT > " + str(kHighPerfMaxRows) +
      " (all checked before the call); memory-saving mode, impl='npu_custom' (our package) "
      "or CPU tensors accept any shape";
  return hint.c_str();
}

}  // namespace ascend_ops::npu
