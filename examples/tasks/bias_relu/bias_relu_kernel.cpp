// y = relu(x + bias) * scale for a float32 CPU matrix x (rows x cols) and bias (cols), built as a torch C++
// extension (module name: bias_relu_kernel). The EVOLVE block is what an optimiser rewrites.
#include <torch/extension.h>

// [EVOLVE_START]
torch::Tensor bias_relu(torch::Tensor x, torch::Tensor bias, double scale) {
    TORCH_CHECK(x.device().is_cpu() && x.scalar_type() == torch::kFloat32, "float32 CPU tensor expected");
    TORCH_CHECK(x.dim() == 2 && bias.dim() == 1 && bias.size(0) == x.size(1), "x: (rows, cols), bias: (cols)");
    return torch::relu(x + bias) * scale;
}
// [EVOLVE_END]

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
    m.def("bias_relu", &bias_relu, "relu(x + bias) * scale (CPU, float32)");
}
