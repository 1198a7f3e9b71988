// y = relu(x)^2 for a float32 CPU tensor, built as a torch C++ extension (module squared_relu_kernel).
// The EVOLVE block is what an optimiser rewrites.
#include <torch/extension.h>

#include <cmath>

// [EVOLVE_START]
torch::Tensor squared_relu(torch::Tensor x) {
    TORCH_CHECK(x.device().is_cpu() && x.scalar_type() == torch::kFloat32, "float32 CPU tensor expected");
    const torch::Tensor in = x.contiguous();
    torch::Tensor out = torch::empty_like(in);
    const float* __restrict__ src = in.data_ptr<float>();
    float* __restrict__ dst = out.data_ptr<float>();
    const int64_t n = in.numel();
    // One fused pass (the reference reads and writes memory twice and allocates a temporary), branch-free so that
    // GCC vectorises it: relu(v) = (v + |v|) / 2 exactly.
#pragma omp parallel for simd schedule(static) if (n > (1 << 16))
    for (int64_t i = 0; i < n; ++i) {
        const float r = (src[i] + std::fabs(src[i])) * 0.5f;
        dst[i] = r * r;
    }
    return out;
}
// [EVOLVE_END]

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
    m.def("squared_relu", &squared_relu, "relu(x)^2 (CPU, float32)");
}
