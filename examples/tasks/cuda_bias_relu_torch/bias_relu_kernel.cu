// cuda_bias_relu_torch kernel: y = relu(x + bias) * scale (CUDA torch extension, module cuda_bias_relu_kernel).
// Contract: bias_relu(x, bias, scale) takes a contiguous float32 CUDA matrix x (rows, cols) and bias (cols) and
// returns a new tensor; work is enqueued on torch's current stream.
#include <torch/extension.h>

// [EVOLVE_START]
// Starting point: the reference's three torch ops (speedup about 1).
torch::Tensor bias_relu(torch::Tensor x, torch::Tensor bias, double scale) {
  return torch::relu(x + bias) * scale;
}
// [EVOLVE_END]

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) { m.def("bias_relu", &bias_relu, "relu(x + bias) * scale"); }
