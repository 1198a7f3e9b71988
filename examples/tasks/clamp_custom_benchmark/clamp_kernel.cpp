// y = clamp(x, lo, hi) * scale for a float32 CPU tensor, built as a torch C++ extension (module clamp_kernel).
// The EVOLVE block is what an optimiser rewrites.
#include <torch/extension.h>

// [EVOLVE_START]
torch::Tensor clamp_scale(torch::Tensor x, double lo, double hi, double scale) {
    TORCH_CHECK(x.device().is_cpu() && x.scalar_type() == torch::kFloat32, "float32 CPU tensor expected");
    const torch::Tensor in = x.contiguous();
    torch::Tensor out = torch::empty_like(in);
    const float* __restrict__ src = in.data_ptr<float>();
    float* __restrict__ dst = out.data_ptr<float>();
    const float l = static_cast<float>(lo), h = static_cast<float>(hi), s = static_cast<float>(scale);
    const int64_t n = in.numel();
    // One fused, vectorised pass (selects without arithmetic in their arms, which GCC turns into min/max).
#pragma omp parallel for simd schedule(static) if (n > (1 << 16))
    for (int64_t i = 0; i < n; ++i) {
        const float v = src[i];
        const float low = v < l ? l : v;
        dst[i] = (low > h ? h : low) * s;
    }
    return out;
}
// [EVOLVE_END]

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
    m.def("clamp_scale", &clamp_scale, "clamp(x, lo, hi) * scale (CPU, float32)");
}
