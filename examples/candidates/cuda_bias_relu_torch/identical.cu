// Identical to the reference (the same three torch ops): its speedup interval must cover 1.
torch::Tensor bias_relu(torch::Tensor x, torch::Tensor bias, double scale) {
  return torch::relu(x + bias) * scale;
}
