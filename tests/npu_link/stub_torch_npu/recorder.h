// TEST DOUBLE: the record of calls kept by recorder.cpp.
#pragma once
#include <string>
#include <vector>

namespace recorder {
std::vector<std::string>& recorded_events();
int& next_phase1_status();  // what phase 1 answers next (0: success)
void record(const std::string& event);
}  // namespace recorder
