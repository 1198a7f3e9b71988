// The omp_reduction task's kernel interface: the one entry point the candidate implements. The test program
// (test_reduce.cpp) calls it; the candidate (reduce_kernel.cpp) defines it. KF_REMOTE makes the call cross into
// the task's executor program, so candidate code never runs inside the test program (kernelfoundry/sdk/remote.hpp).
#pragma once

#include <cstddef>

#include "kernelfoundry/sdk/remote.hpp"

/// sum(x[i]^2) for i < n, accumulated in double. `x` points into the shared arena (kf::sdk::SharedVector).
KF_REMOTE(double, kf_sum_squares, const float*, std::size_t)
