// The bfloat16 GEMM engine chosen per kind of product, kept per CPU in a small text file so
// that every process on one machine runs the same engines (and so gives the same bits) and
// a process started on a busy machine does not measure again (gemm.h, gemm_engine()).
//
// Where: $ASCEND_OPS_CPU_GEMM_CACHE if set ("off" or "0": no file: every process measures),
// else $XDG_CACHE_HOME/ascend_ops/cpu_gemm_engines.tsv, else
// ~/.cache/ascend_ops/cpu_gemm_engines.tsv (the XDG base directory convention). One line per
// (CPU, torch version, thread count, kind of product):
//
//   AMD EPYC|avx512_bf16|torch 2.13.0|2 threads <TAB> fp32_out <TAB> avx512bf16 <TAB>
//   avx512bf16=0.412 onednn=0.301 ... <TAB> load 3.10 <TAB> 2026-12-05T18:02:11
//
// The user may read it, edit an engine name, or delete it (the next process measures again).
// A line naming an engine this CPU does not offer is ignored.
#pragma once

#include "engine_switch.h"

#include <optional>
#include <string>
#include <vector>

namespace ascend_ops {
namespace cpu {

struct EngineTiming;

// The file's path, or "" when ASCEND_OPS_CPU_GEMM_CACHE turns it off.
std::string engine_cache_path();

// This process's key: "<CPU model>|<flags>|torch <version>|<threads> threads".
std::string engine_cache_key();

// A decision read from the file.
struct CachedChoice {
  GemmEngine engine;
  std::vector<EngineTiming> timings;  // as measured when it was made
};

// The decision for `kind` under this process's key, if the file holds one naming an engine
// in `available`.
std::optional<CachedChoice> read_cached_choice(GemmKind kind, const std::vector<GemmEngine>& available);

// Records a decision (replacing the key's line for `kind`), with the timings it came from
// and the 1-minute load average. Best effort: a file that cannot be written is left alone.
void store_cached_choice(GemmKind kind, GemmEngine engine, const std::vector<EngineTiming>& timings);

}  // namespace cpu
}  // namespace ascend_ops
