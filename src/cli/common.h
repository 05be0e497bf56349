// Shared CLI plumbing: printing errors, reading prompts and keys, parsing sizes.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "base/status.h"
#include "engine/bundle.h"
#include "gguf/gguf.h"
#include "model/model.h"
#include "tokenizer/tokenizer.h"

namespace shoal::cli {

// Prints "error: <message>" to stderr and returns exit code 1.
int Fail(const Status& s);

// The prompt text from -p or from the file of -f (exactly one must be given).
Result<std::string> PromptText(const std::string& prompt, const std::string& file, bool p_set,
                               bool f_set);

// The KV cache type of --kv-type: f16 (llama.cpp's default numerics) or f32.
Result<DType> ParseKvType(const std::string& name);

// Lets 1,000+ concurrent connections open: raises the soft descriptor limit (often 1,024) to
// the hard one. Returns the soft limit now (0 when unknown; RLIM_INFINITY as UINT64_MAX).
uint64_t RaiseFileLimit();

// A key file's text without trailing whitespace (`openssl rand -hex 32 > key` works); errors
// name `flag`, and an empty key is one.
Result<std::string> ReadKeyFile(const std::string& path, const char* flag);

// A memory size: "2G", "512M", "1.5GiB", "1073741824", or a fraction of available memory such
// as "0.3". `flag` names the option in errors.
Result<uint64_t> ParseMemSize(const std::string& s, const char* flag);

// `shoal plan` and `shoal sim`: --parallel tp=T[,pp=S], --tp-mode, --collective-us.
struct SplitArgs {
  std::string parallel, tp_mode = "exact";
  double collective_us = 0;
};

// "a,b,,c" -> {"a", "b", "c"} (empty items dropped).
std::vector<std::string> SplitList(const std::string& s);

// Threads: 0 means every hardware thread.
int ResolveThreads(int threads);

}  // namespace shoal::cli
