// y = x > 0 ? x : slope * x for a float32 CPU tensor, built as a torch C++ extension (module leaky_relu_kernel).
// forward_templated<BLOCK> is the kernel for one work-item size; forward(x, slope, block) dispatches to it (its
// trailing arguments are the template parameters, which the tests append through template_args_wrapper).
// The EVOLVE block is what an optimiser rewrites.
#include <torch/extension.h>

#include <cstdint>

// [EVOLVE_START]
// BLOCK: thousands of elements per OpenMP work item (the template parameter a variant tunes).
template <int BLOCK>
torch::Tensor forward_templated(torch::Tensor x, double slope) {
    TORCH_CHECK(x.device().is_cpu() && x.scalar_type() == torch::kFloat32, "float32 CPU tensor expected");
    const torch::Tensor in = x.contiguous();
    torch::Tensor out = torch::empty_like(in);
    const float* __restrict__ src = in.data_ptr<float>();
    float* __restrict__ dst = out.data_ptr<float>();
    const float s = static_cast<float>(slope);
    const int64_t n = in.numel();
    constexpr int64_t chunk = int64_t{BLOCK} * 1024;
    const int64_t chunks = (n + chunk - 1) / chunk;
    // Branch-free and vectorised: max(v, 0) + slope * min(v, 0) (a branch per element mispredicts on signs).
#pragma omp parallel for schedule(static) if (n > (1 << 16))
    for (int64_t c = 0; c < chunks; ++c) {
        const int64_t begin = c * chunk, end = begin + chunk < n ? begin + chunk : n;
#pragma omp simd
        for (int64_t i = begin; i < end; ++i) {
            const float v = src[i];
            dst[i] = (v > 0.0f ? v : 0.0f) + s * (v < 0.0f ? v : 0.0f);
        }
    }
    return out;
}

torch::Tensor forward(torch::Tensor x, double slope, int64_t block) {
    switch (block) {
        case 4: return forward_templated<4>(x, slope);
        case 16: return forward_templated<16>(x, slope);
        default: TORCH_CHECK(false, "block must be 4 or 16, got ", block);
    }
}
// [EVOLVE_END]

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
    m.def("forward", &forward, "leaky_relu(x, slope) in work items of `block` K elements (CPU, float32)",
          pybind11::arg("x"), pybind11::arg("slope"), pybind11::arg("block") = 4);
}
