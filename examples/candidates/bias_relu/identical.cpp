// Exactly what the reference computes, with the same torch ops and the same temporaries alive at each step: a
// paired measurement must give 1.00x. `x + bias` dies at the end of the first statement (as the Python
// temporary does once relu returned), so at most two 16 MB buffers are alive, as in the reference.
// The one-expression form `return torch::relu(x + bias) * scale;` is NOT the same program: C++ keeps every
// temporary of a full expression until its end, so three buffers are alive, and on the 2-core machine that
// measurably more per call with no page fault (three_temporaries.cpp; bench/noise_bench shows its ratio).
torch::Tensor bias_relu(torch::Tensor x, torch::Tensor bias, double scale) {
    auto t = torch::relu(x + bias);
    return t * scale;
}
