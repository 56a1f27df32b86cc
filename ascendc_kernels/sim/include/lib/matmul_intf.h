// CANN's Matmul high-level API header; on the simulator, sim_matmul.h.
#pragma once
#include "../sim_matmul.h"
