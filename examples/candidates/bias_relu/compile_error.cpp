// Does not compile: a missing semicolon and an undeclared identifier.
torch::Tensor bias_relu(torch::Tensor x, torch::Tensor bias, double scale) {
    auto out = torch::relu(x + bias)
    return out_of_scope * scale;
}
