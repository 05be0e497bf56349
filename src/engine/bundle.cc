// LoadBundle.
#include "engine/bundle.h"

namespace shoal {

Result<Bundle> LoadBundle(const std::string& path, bool with_model) {
  Bundle b;
  SHOAL_ASSIGN_OR_RETURN(b.file, gguf::File::Open(path));
  auto tok = Tokenizer::FromGguf(*b.file);
  if (!tok.ok()) return tok.status().Annotate(path);
  b.tokenizer = std::move(tok).value();
  if (with_model) {
    SHOAL_ASSIGN_OR_RETURN(b.model, Model::Load(*b.file, LoadOptions{}));
  }
  return b;
}

}  // namespace shoal
