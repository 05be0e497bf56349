// Model::Load: picks the forward implementation for the file's architecture family.
#include "model/model.h"

#include "kernels/quant.h"
#include "model/dense_decoder.h"
#include "model/kimi_k3.h"
#include "model/mla_decoder.h"
#include "model/weights.h"

namespace shoal {

Result<std::unique_ptr<Model>> Model::Load(const gguf::File& file, const LoadOptions& opt) {
  SHOAL_ASSIGN_OR_RETURN(HParams hp, LoadHParams(file));
  const ArchDef* def = FindArch(hp.arch);
  switch (def->family) {
    case BlockFamily::kDenseDecoder:
      return LoadDenseDecoder(file, hp, opt);
    case BlockFamily::kMlaDecoder:
      return LoadMlaDecoder(file, hp, opt);
    case BlockFamily::kKimiK3:
      return LoadKimiK3(file, hp, opt);
  }
  return Errorf("{}: no forward pass for architecture {}", file.path(), hp.arch);
}

Status Model::SetLayerRange(const HParams& hp, const LoadOptions& opt) {
  hp_ = hp;
  first_ = opt.first_layer;
  last_ = opt.last_layer < 0 ? static_cast<int32_t>(hp.n_layer) : opt.last_layer;
  if (first_ < 0 || first_ >= last_ || last_ > hp.n_layer)
    return Errorf("layer range [{}, {}) is invalid for {} layers", first_, last_, hp.n_layer);
  return Status::Ok();
}

Status Model::EmbedTokens(const Batch& b, const kernels::MatrixView& tok_embd, float* x) const {
  const int64_t n = b.n_rows(), E = hp_.n_embd;
  if (static_cast<int64_t>(b.tokens.size()) != n)
    return Errorf("{} token ids for a batch of {} rows", b.tokens.size(), n);
  for (int64_t r = 0; r < n; ++r) {
    const int32_t id = b.tokens[static_cast<size_t>(r)];
    if (id < 0 || id >= hp_.n_vocab)
      return Errorf("token id {} out of range [0, {})", id, hp_.n_vocab);
    kernels::Dequantize(tok_embd.type,
                        tok_embd.data + static_cast<uint64_t>(id) * tok_embd.row_bytes, x + r * E,
                        E);
  }
  return Status::Ok();
}

Status Model::LoadEndWeights(const gguf::File& f, kernels::MatrixView* tok_embd,
                             std::vector<float>* output_norm, kernels::MatrixView* output) const {
  const int64_t E = hp_.n_embd;
  if (is_first_stage() || (is_last_stage() && hp_.tied_embeddings)) {
    SHOAL_ASSIGN_OR_RETURN(*tok_embd, LoadMatrix(f, "token_embd.weight", E, hp_.n_vocab));
  }
  if (is_last_stage()) {
    SHOAL_ASSIGN_OR_RETURN(*output_norm, LoadVector(f, "output_norm.weight", E));
    if (hp_.tied_embeddings) {
      *output = *tok_embd;
    } else {
      SHOAL_ASSIGN_OR_RETURN(*output, LoadMatrix(f, "output.weight", E, hp_.n_vocab));
    }
  }
  return Status::Ok();
}

KvLayout Model::MakeKvLayout(int32_t n_blocks, int32_t block_size, DType dtype,
                             int32_t n_state_slots) const {
  KvLayout l;
  l.n_layers = last_ - first_;
  l.k_dim = hp_.cache_k_dim();
  l.v_dim = hp_.cache_v_dim();
  l.dtype = dtype;
  l.block_size = block_size;
  l.n_blocks = n_blocks;
  l.state_floats = StateFloatsPerSeq();
  l.n_state_slots = l.state_floats > 0 ? n_state_slots : 0;
  return l;
}

}  // namespace shoal
