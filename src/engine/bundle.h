// A model file opened for serving: the GGUF file, its tokenizer and (optionally) all its layers.
#pragma once

#include <memory>
#include <string>

#include "base/status.h"
#include "gguf/gguf.h"
#include "model/model.h"
#include "tokenizer/tokenizer.h"

namespace shoal {

struct Bundle {
  std::unique_ptr<gguf::File> file;
  std::unique_ptr<Tokenizer> tokenizer;
  std::unique_ptr<Model> model;  // null when only the tokenizer was asked for
};

// Opens a GGUF file, its tokenizer and (if with_model) the whole model.
Result<Bundle> LoadBundle(const std::string& path, bool with_model);

}  // namespace shoal
