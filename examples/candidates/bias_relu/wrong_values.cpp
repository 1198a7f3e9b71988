// Wrong values: forgets the bias (shapes right, values wrong).
torch::Tensor bias_relu(torch::Tensor x, torch::Tensor bias, double scale) {
    return torch::relu(x) * scale;
}
