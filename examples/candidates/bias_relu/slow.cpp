// Correct but slower: element-wise through tensor accessors on one thread, with a redundant clone.
torch::Tensor bias_relu(torch::Tensor x, torch::Tensor bias, double scale) {
    auto out = x.clone();
    auto o = out.accessor<float, 2>();
    auto b = bias.accessor<float, 1>();
    for (int64_t c = 0; c < o.size(1); ++c) {        // column-major walk: cache-unfriendly on purpose
        for (int64_t r = 0; r < o.size(0); ++r) {
            const float v = o[r][c] + b[c];
            o[r][c] = v > 0.0f ? v * static_cast<float>(scale) : 0.0f;
        }
    }
    return out;
}
