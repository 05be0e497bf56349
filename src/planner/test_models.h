// Test-only helpers: planner profiles of synthesized model shapes, without writing any file.
#pragma once

#include <string>
#include <vector>

#include "measure/node_info.h"
#include "modelgen/synth.h"
#include "planner/model_profile.h"

namespace shoal::planner::testing {

// Hyper-parameters of a llama-shaped synth preset (what LoadHParams would read from its file).
inline HParams HParamsOf(const SynthPreset& p) {
  HParams hp;
  hp.arch = "llama";
  hp.name = p.name;
  hp.n_vocab = p.n_vocab;
  hp.n_ctx_train = p.n_ctx;
  hp.n_embd = p.n_embd;
  hp.n_layer = p.n_layer;
  hp.n_head = p.n_head;
  hp.n_head_kv = p.n_head_kv;
  hp.head_dim_k = hp.head_dim_v = p.n_embd / p.n_head;
  hp.n_ff = p.n_ff;
  hp.n_rot = hp.head_dim_k;
  hp.rope_freq_base = p.rope_freq_base;
  hp.rms_eps = p.rms_eps;
  return hp;
}

// Tensor entries of a synth preset with matrices of `type`.
inline Result<std::vector<TensorEntry>> SynthEntries(const SynthPreset& p, DType type) {
  SHOAL_ASSIGN_OR_RETURN(std::vector<SynthTensor> list, SynthTensorList(p, type));
  std::vector<TensorEntry> out;
  for (const SynthTensor& t : list) {
    SHOAL_ASSIGN_OR_RETURN(TensorEntry e, TensorEntry::FromShape(t.name, t.type, t.ne));
    out.push_back(std::move(e));
  }
  return out;
}

inline Result<ModelProfile> SynthProfile(const SynthPreset& p, DType type) {
  SHOAL_ASSIGN_OR_RETURN(std::vector<TensorEntry> entries, SynthEntries(p, type));
  return ProfileFromTensors(HParamsOf(p), entries);
}

// 30 layers with a small vocabulary: the output head costs ~0.15 of a layer, so stage times
// follow layer counts.
inline SynthPreset DeepNarrowPreset() {
  SynthPreset p;
  p.name = "deep-narrow";
  p.n_embd = 256;
  p.n_layer = 30;
  p.n_head = 4;
  p.n_head_kv = 4;
  p.n_ff = 768;
  p.n_vocab = 512;
  p.n_ctx = 2048;
  return p;
}

// A node with `speed` times a reference machine's memory bandwidth (10 GB/s) and matmul
// throughput (Q4_0 / Q8_0 50 GFLOP/s, F32 20 GFLOP/s).
inline measure::NodeInfo Node(const std::string& name, uint64_t mem_limit, double speed = 1.0) {
  measure::NodeInfo n;
  n.name = name;
  n.address = name + ":7070";
  n.mem_limit = mem_limit;
  n.mem_bw = 10e9 * speed;
  n.matmul_flops = {
      {DType::kQ4_0, 50e9 * speed}, {DType::kQ8_0, 50e9 * speed}, {DType::kF32, 20e9 * speed}};
  n.isa = "avx2";
  n.n_threads = 4;
  return n;
}

inline constexpr uint64_t kMiB = uint64_t{1} << 20;
inline constexpr uint64_t kGiB = uint64_t{1} << 30;

}  // namespace shoal::planner::testing
