// TEST DOUBLE: the record of calls kept by recorder.cpp.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace recorder {
std::vector<std::string>& recorded_events();
int& next_phase1_status();  // what phase 1 answers next (0: success)
void record(const std::string& event);
int64_t& npu_format();  // what get_npu_format answers for every tensor (2: ND)
}  // namespace recorder
