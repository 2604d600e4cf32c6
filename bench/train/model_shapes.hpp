#pragma once

// Parameter tensors of real transformer models, in registration (forward) order, so the gradient
// synchronisation benchmark sees the size mix an engine sees: a few huge embeddings, many
// mid-size matrices, many tiny biases and norms.

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace cohort::bench {

struct ModelShape {
  std::string name;
  std::vector<std::size_t> parameter_counts;  // elements per tensor, forward order
  /// GPT-2 ties the output projection to the token embedding (tensor 0): backward starts with
  /// that projection's large matmul, but the embedding's gradient is final only at the very end,
  /// after the embedding lookup's backward. Its allreduce can never overlap with compute.
  bool tied_embedding = false;

  std::size_t total() const {
    std::size_t sum = 0;
    for (std::size_t n : parameter_counts) sum += n;
    return sum;
  }
};

/// A GPT-2-style decoder: token and position embeddings, `layers` blocks (layer norm, fused QKV,
/// attention projection, layer norm, MLP up and down, each with biases), a final layer norm. The
/// output projection shares the token embedding, as in GPT-2.
inline ModelShape gpt_decoder(std::string name, std::size_t vocab, std::size_t context,
                              std::size_t hidden, std::size_t layers) {
  ModelShape m{std::move(name), {}, true};
  auto& p = m.parameter_counts;
  p.push_back(vocab * hidden);
  p.push_back(context * hidden);
  for (std::size_t l = 0; l < layers; ++l) {
    p.insert(p.end(), {hidden, hidden});                   // ln_1 weight, bias
    p.insert(p.end(), {hidden * 3 * hidden, 3 * hidden});  // qkv
    p.insert(p.end(), {hidden * hidden, hidden});          // attention projection
    p.insert(p.end(), {hidden, hidden});                   // ln_2
    p.insert(p.end(), {hidden * 4 * hidden, 4 * hidden});  // mlp up
    p.insert(p.end(), {4 * hidden * hidden, hidden});      // mlp down
  }
  p.insert(p.end(), {hidden, hidden});  // ln_f
  return m;
}

/// A ViT for 224x224 images in 16x16 patches: patch embedding (a convolution), class token,
/// position embedding, `layers` pre-norm blocks as above, final norm, a 1000-class head. Its
/// embeddings are small, so almost every gradient can overlap with the rest of backward.
inline ModelShape vision_transformer(std::string name, std::size_t hidden, std::size_t layers) {
  ModelShape m{std::move(name), {}, false};
  auto& p = m.parameter_counts;
  p.insert(p.end(), {hidden * 3 * 16 * 16, hidden, hidden, 197 * hidden});
  for (std::size_t l = 0; l < layers; ++l) {
    p.insert(p.end(), {hidden, hidden, hidden * 3 * hidden, 3 * hidden, hidden * hidden, hidden});
    p.insert(p.end(),
             {hidden, hidden, hidden * 4 * hidden, 4 * hidden, 4 * hidden * hidden, hidden});
  }
  p.insert(p.end(), {hidden, hidden, hidden * 1000, 1000});
  return m;
}

/// The models the benchmark knows, by name:
///   vit-s16   ViT-S/16 (hidden 384, 12 layers): 22.1M parameters
///   vit-b16   ViT-B/16 (hidden 768, 12 layers): 86.6M parameters
///   gpt-25m   GPT-2 style, hidden 384, 8 layers, 32k vocabulary: 26.9M parameters
///   gpt-125m  GPT-2 small (hidden 768, 12 layers, 50257 vocabulary): 124.4M parameters
inline std::optional<ModelShape> model_by_name(std::string_view name) {
  if (name == "vit-s16") return vision_transformer("vit-s16", 384, 12);
  if (name == "vit-b16") return vision_transformer("vit-b16", 768, 12);
  if (name == "gpt-25m") return gpt_decoder("gpt-25m", 32000, 1024, 384, 8);
  if (name == "gpt-125m") return gpt_decoder("gpt-125m", 50257, 1024, 768, 12);
  return std::nullopt;
}

}  // namespace cohort::bench
