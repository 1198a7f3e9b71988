// Correct and faster than the reference: one fused pass over memory (the reference's three torch ops read and
// write the matrix three times and allocate two temporaries), vectorised (restrict pointers, branch-free
// max), rows split over the OpenMP threads.
torch::Tensor bias_relu(torch::Tensor x, torch::Tensor bias, double scale) {
    TORCH_CHECK(x.device().is_cpu() && x.scalar_type() == torch::kFloat32, "float32 CPU tensor expected");
    TORCH_CHECK(x.dim() == 2 && bias.dim() == 1 && bias.size(0) == x.size(1), "x: (rows, cols), bias: (cols)");
    const auto in = x.contiguous();
    const auto b = bias.contiguous();
    auto out = torch::empty_like(in);
    const float* __restrict__ src = in.data_ptr<float>();
    const float* __restrict__ bp = b.data_ptr<float>();
    float* __restrict__ dst = out.data_ptr<float>();
    const int64_t rows = in.size(0), cols = in.size(1);
    const float s = static_cast<float>(scale);
    #pragma omp parallel for schedule(static) if (rows * cols > (1 << 16))
    for (int64_t r = 0; r < rows; ++r) {
        const float* __restrict__ xr = src + r * cols;
        float* __restrict__ yr = dst + r * cols;
        #pragma omp simd
        for (int64_t c = 0; c < cols; ++c) {
            yr[c] = std::max(xr[c] + bp[c], 0.0f) * s;
        }
    }
    return out;
}
