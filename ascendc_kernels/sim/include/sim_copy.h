// DataCopy and DataCopyPad between GM and UB, counting GM bytes, checking alignment,
// bounds and which pipe owns the UB tensor.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>
#include <sstream>

#include "sim_tensor.h"

namespace AscendC {

// The fields at their A2 widths (asc-devkit include/basic_api/kernel_struct_data_copy.h:205-213:
// blockCount uint16_t, blockLen, srcStride, dstStride uint32_t). CANN's constructor takes
// them at those widths, so a wider value the kernel passes is truncated without a word;
// this one takes the kernel's value whole and refuses what the field would truncate.
struct DataCopyExtParams {
  uint16_t blockCount = 1;
  uint32_t blockLen = 0;   // bytes
  uint32_t srcStride = 0;  // GM side: bytes; UB side: 32-byte blocks
  uint32_t dstStride = 0;
  uint32_t rsv = 0;
  DataCopyExtParams() = default;
  DataCopyExtParams(uint64_t count, uint64_t len, uint64_t src_stride, uint64_t dst_stride, uint64_t reserved)
      : blockCount(Fit<uint16_t>(count, "blockCount", 205)), blockLen(Fit<uint32_t>(len, "blockLen", 206)),
        srcStride(Fit<uint32_t>(src_stride, "srcStride", 211)), dstStride(Fit<uint32_t>(dst_stride, "dstStride", 212)),
        rsv(Fit<uint32_t>(reserved, "rsv", 213)) {}

 private:
  template <typename F>
  static F Fit(uint64_t value, const char* field, int line) {
    if (value > uint64_t(F(~F(0))))
      sim::Fail(std::string("DataCopyExtParams.") + field + " = " + std::to_string(value) + " (or a negative value) "
                "does not fit its " + std::to_string(8 * sizeof(F)) + "-bit field on A2 (asc-devkit "
                "include/basic_api/kernel_struct_data_copy.h:" + std::to_string(line) + "): the device would use " +
                std::to_string(F(value)) + ", silently");
    return F(value);
  }
};

template <typename T>
struct DataCopyPadExtParams {
  bool isPad = false;
  uint8_t leftPadding = 0;   // elements
  uint8_t rightPadding = 0;  // elements
  T paddingValue = T(0);
  DataCopyPadExtParams() = default;
  DataCopyPadExtParams(bool pad, uint8_t left, uint8_t right, T value)
      : isPad(pad), leftPadding(left), rightPadding(right), paddingValue(value) {}
};

}  // namespace AscendC

namespace sim {

// UB offsets of operands must be 32-byte aligned (DataCopy, DataCopyPad, vector ops).
template <typename T>
void CheckUbAligned(const AscendC::LocalTensor<T>& t, const char* what) {
  const uint64_t off = reinterpret_cast<const uint8_t*>(t.Raw()) - Ctx().ub.data();
  if (off % Ctx().launch->soc->blockBytes != 0)
    Fail(std::string(what) + " UB address (offset " + std::to_string(off) + ") is not 32-byte aligned");
}

template <typename T>
void CheckDataCopyCount(uint64_t count) {
  const uint64_t bytes = count * sizeof(T);
  if (count == 0 || bytes % Ctx().launch->soc->blockBytes != 0)
    Fail("DataCopy of " + std::to_string(count) + " elements (" + std::to_string(bytes) +
         " bytes) is not a positive multiple of 32 bytes (use DataCopyPad for unaligned lengths)");
  // CANN takes calCount as uint32_t and issues one burst of calCount / (32 bytes' elements)
  // blocks (asc-devkit impl/basic_api/kernel_operator_data_copy_base_impl.h:60) into
  // DataCopyParams::blockLen, a uint16_t (include/basic_api/kernel_struct_data_copy.h:60).
  if (count > UINT32_MAX || bytes / Ctx().launch->soc->blockBytes > 65535)
    Fail("DataCopy of " + std::to_string(count) + " elements is " + std::to_string(bytes / 32) +
         " blocks of 32 bytes, past DataCopyParams.blockLen's 16 bits (65535 blocks, 2 MiB - 32 bytes) on A2: the "
         "device would copy " + std::to_string((bytes / 32) & 0xFFFF) + " blocks, silently");
}

inline uint32_t RoundUp(uint32_t x, uint32_t to) { return (x + to - 1) / to * to; }

template <typename T>
void CheckPadParams(const AscendC::DataCopyExtParams& p) {
  if (p.blockCount < 1 || p.blockCount > 4095)
    Fail("blockCount " + std::to_string(p.blockCount) + " outside [1, 4095]");
  if (p.blockLen < 1 || p.blockLen > 2097151)
    Fail("blockLen " + std::to_string(p.blockLen) + " outside [1, 2097151] bytes");
  if (p.blockLen % sizeof(T) != 0)
    Fail("blockLen " + std::to_string(p.blockLen) + " bytes is not a whole number of elements");
}

}  // namespace sim

namespace AscendC {

template <typename T>
void DataCopy(const LocalTensor<T>& dst, const GlobalTensor<T>& src, const uint64_t calCount) {
  sim::CallScope scope("DataCopy(GM->UB)");
  sim::CheckDataCopyCount<T>(calCount);
  sim::CheckUbAligned(dst, "destination");
  dst.Check(0, calCount, sim::Owner::Mte2, sim::Access::Write, "DataCopy(GM->UB)");
  src.Check(0, calCount, "DataCopy(GM->UB)");
  std::memcpy(dst.Raw(), src.Raw(), calCount * sizeof(T));
  sim::Ctx().counters.gm_read_bytes += sim::GmSectorBytes(src.Raw(), uint64_t(calCount) * sizeof(T));
}

template <typename T>
void DataCopy(const GlobalTensor<T>& dst, const LocalTensor<T>& src, const uint64_t calCount) {
  sim::CallScope scope("DataCopy(UB->GM)");
  sim::CheckDataCopyCount<T>(calCount);
  sim::CheckUbAligned(src, "source");
  src.Check(0, calCount, sim::Owner::Mte3, sim::Access::Read, "DataCopy(UB->GM)");
  dst.Check(0, calCount, "DataCopy(UB->GM)");
  std::memcpy(dst.Raw(), src.Raw(), calCount * sizeof(T));
  sim::Ctx().counters.gm_write_bytes += sim::GmSectorBytes(dst.Raw(), uint64_t(calCount) * sizeof(T));
}

template <typename T>
void DataCopyPad(const LocalTensor<T>& dst, const GlobalTensor<T>& src, const DataCopyExtParams& dataCopyParams,
                 const DataCopyPadExtParams<T>& padParams) {
  sim::CallScope scope("DataCopyPad(GM->UB)");
  const auto& p = dataCopyParams;
  sim::CheckPadParams<T>(p);
  const uint32_t block = sim::Ctx().launch->soc->blockBytes;
  if (padParams.leftPadding * sizeof(T) > block || padParams.rightPadding * sizeof(T) > block)
    sim::Fail("leftPadding/rightPadding may not exceed 32 bytes");
  sim::CheckUbAligned(dst, "destination");
  const uint32_t left = padParams.leftPadding, right = padParams.rightPadding;
  const uint32_t elems = p.blockLen / sizeof(T);
  const uint32_t row_bytes = sim::RoundUp((left + elems + right) * sizeof(T), block);
  const uint64_t ub_pitch = row_bytes + uint64_t(p.dstStride) * block;
  const uint64_t gm_pitch = uint64_t(p.blockLen) + p.srcStride;
  const uint64_t ub_extent = (p.blockCount - 1) * ub_pitch + row_bytes;
  if (ub_extent % sizeof(T)) sim::Fail("UB layout not a whole number of elements");
  dst.Check(0, ub_extent / sizeof(T), sim::Owner::Mte2, sim::Access::Write, "DataCopyPad(GM->UB)");
  src.CheckBounds(0, ((p.blockCount - 1) * gm_pitch + p.blockLen) / sizeof(T), "DataCopyPad(GM->UB)");
  const uint32_t row_elems = row_bytes / sizeof(T);
  for (uint32_t b = 0; b < p.blockCount; ++b) {
    T* out = reinterpret_cast<T*>(reinterpret_cast<uint8_t*>(dst.Raw()) + b * ub_pitch);
    const T* in = reinterpret_cast<const T*>(reinterpret_cast<const uint8_t*>(src.Raw()) + b * gm_pitch);
    sim::CheckGm(in, p.blockLen, "GM access");  // each burst: the gaps between rows are not read
    // Padding as documented: the pad value when asked for, the block's first element as
    // the dummy when there is no padding, and garbage (NaN-like) otherwise.
    T garbage;
    std::memset(static_cast<void*>(&garbage), 0xff, sizeof(T));
    const T fill = padParams.isPad ? padParams.paddingValue : garbage;
    const T dummy = (left == 0 && right == 0) ? in[0] : fill;
    for (uint32_t i = 0; i < left; ++i) out[i] = fill;
    std::memcpy(out + left, in, p.blockLen);
    sim::Ctx().counters.gm_read_bytes += sim::GmSectorBytes(in, p.blockLen);
    for (uint32_t i = 0; i < right; ++i) out[left + elems + i] = fill;
    for (uint32_t i = left + elems + right; i < row_elems; ++i) out[i] = dummy;
  }
}

template <typename T>
void DataCopyPad(const GlobalTensor<T>& dst, const LocalTensor<T>& src, const DataCopyExtParams& dataCopyParams) {
  sim::CallScope scope("DataCopyPad(UB->GM)");
  const auto& p = dataCopyParams;
  sim::CheckPadParams<T>(p);
  const uint32_t block = sim::Ctx().launch->soc->blockBytes;
  sim::CheckUbAligned(src, "source");
  const uint32_t row_bytes = sim::RoundUp(p.blockLen, block);
  const uint64_t ub_pitch = row_bytes + uint64_t(p.srcStride) * block;
  const uint64_t gm_pitch = uint64_t(p.blockLen) + p.dstStride;
  src.Check(0, ((p.blockCount - 1) * ub_pitch + p.blockLen) / sizeof(T), sim::Owner::Mte3, sim::Access::Read,
            "DataCopyPad(UB->GM)");
  dst.CheckBounds(0, ((p.blockCount - 1) * gm_pitch + p.blockLen) / sizeof(T), "DataCopyPad(UB->GM)");
  for (uint32_t b = 0; b < p.blockCount; ++b) {
    uint8_t* out = reinterpret_cast<uint8_t*>(dst.Raw()) + b * gm_pitch;
    sim::CheckGm(out, p.blockLen, "GM access");  // each burst: the gaps between rows are not written
    std::memcpy(out, reinterpret_cast<const uint8_t*>(src.Raw()) + b * ub_pitch, p.blockLen);
    sim::Ctx().counters.gm_write_bytes += sim::GmSectorBytes(out, p.blockLen);
  }
}

}  // namespace AscendC
