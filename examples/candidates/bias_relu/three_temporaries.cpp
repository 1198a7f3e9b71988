// The reference's ops in one C++ expression: the same values, but every temporary lives until the end of the
// full expression, so three 16 MB buffers are alive where the reference keeps two. Measured on the 2-core
// machine (allocator steady, 0 page faults per call): slower than the reference — 0.94-0.95x in five processes
// of a plain Python ABBA loop, 0.84-1.01x from one kf run to the next (2026-11-30; README, speed signal).
// bench/noise_bench prints its ratio beside identical.cpp's: the row shows how much it moves between runs.
torch::Tensor bias_relu(torch::Tensor x, torch::Tensor bias, double scale) {
    return torch::relu(x + bias) * scale;
}
