// Shared CLI plumbing.
#include "cli/common.h"

#include <sys/resource.h>

#include <cstdio>

#include "io/mapped_file.h"
#include "threading/thread_pool.h"

namespace shoal::cli {

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

int Fail(const Status& s) {
  std::fprintf(stderr, "error: %s\n", s.message().c_str());
  return 1;
}

Result<std::string> PromptText(const std::string& prompt, const std::string& file, bool p_set,
                               bool f_set) {
  if (p_set == f_set) return Errorf("give exactly one of -p PROMPT or -f PROMPT_FILE");
  if (p_set) return prompt;
  return ReadFileToString(file);
}

Result<DType> ParseKvType(const std::string& name) {
  const auto t = DTypeFromName(name);
  if (!t || (*t != DType::kF16 && *t != DType::kF32))
    return Errorf("--kv-type must be f16 or f32, got '{}'", name);
  return *t;
}

int ResolveThreads(int threads) { return threads > 0 ? threads : HardwareThreads(); }

void RaiseFileLimit() {
  rlimit lim;
  if (getrlimit(RLIMIT_NOFILE, &lim) == 0 && lim.rlim_cur < lim.rlim_max) {
    lim.rlim_cur = lim.rlim_max;
    setrlimit(RLIMIT_NOFILE, &lim);
  }
}

}  // namespace shoal::cli
