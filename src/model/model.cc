// Model::Load: picks the forward implementation for the file's architecture family.
#include "model/model.h"

#include "model/dense_decoder.h"
#include "model/kimi_k3.h"
#include "model/mla_decoder.h"

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
