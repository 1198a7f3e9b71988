// Crashes the test process: writes through a null pointer (SIGSEGV).
torch::Tensor bias_relu(torch::Tensor x, torch::Tensor bias, double scale) {
    volatile float* p = nullptr;
    *p = static_cast<float>(scale);
    return torch::relu(x + bias) * scale;
}
