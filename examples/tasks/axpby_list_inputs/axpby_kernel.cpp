// y = alpha * x + beta * w for two float32 CPU tensors of one shape, built as a torch C++ extension (module
// axpby_kernel). The EVOLVE block is what an optimiser rewrites.
#include <torch/extension.h>

// [EVOLVE_START]
torch::Tensor axpby(torch::Tensor x, torch::Tensor w, double alpha, double beta) {
    TORCH_CHECK(x.device().is_cpu() && x.scalar_type() == torch::kFloat32, "float32 CPU tensors expected");
    TORCH_CHECK(w.sizes() == x.sizes() && w.scalar_type() == torch::kFloat32, "x and w: the same shape, float32");
    const torch::Tensor xc = x.contiguous(), wc = w.contiguous();
    torch::Tensor out = torch::empty_like(xc);
    const float* __restrict__ a = xc.data_ptr<float>();
    const float* __restrict__ b = wc.data_ptr<float>();
    float* __restrict__ y = out.data_ptr<float>();
    const float fa = static_cast<float>(alpha), fb = static_cast<float>(beta);
    const int64_t n = xc.numel();
    // One fused, vectorised pass (the reference makes two temporaries and three passes over memory).
#pragma omp parallel for simd schedule(static) if (n > (1 << 16))
    for (int64_t i = 0; i < n; ++i) y[i] = fa * a[i] + fb * b[i];
    return out;
}
// [EVOLVE_END]

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
    m.def("axpby", &axpby, "alpha * x + beta * w (CPU, float32)");
}
