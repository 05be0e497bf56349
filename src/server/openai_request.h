// Parsing and validating OpenAI /v1/completions and /v1/chat/completions bodies into one
// GenerationRequest (token ids + sampling), with OpenAI-shaped errors.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "sampling/sampling_params.h"
#include "server/api_error.h"
#include "server/json_fields.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/tokenizer.h"

namespace shoal::server {

// What request parsing needs to know about the served model.
struct ModelInfo {
  std::string name;           // --served-model-name (or the file name)
  int32_t max_model_len = 0;  // prompt + generated tokens per sequence
  const Tokenizer* tokenizer = nullptr;
  std::optional<ChatTemplateKind> chat_template;  // nullopt: chat requests get a 400
};

// Limits on request fields (OpenAI's documented ranges where it has them).
inline constexpr int32_t kMaxChoices = 16;      // n: each choice holds its own KV blocks
inline constexpr int32_t kMaxTopLogprobs = 20;  // OpenAI's limit
inline constexpr size_t kMaxStopStrings = 16;   // OpenAI allows 4; vLLM more
inline constexpr size_t kMaxPromptsPerRequest = 256;
// prompts x n: each sequence holds KV blocks and a scheduler slot; 256 is 4 full batches of the
// default --max-num-seqs 64, and one request can no longer queue 4,096 sequences.
inline constexpr int64_t kMaxSequencesPerRequest = 256;

struct GenerationRequest {
  bool chat = false;
  std::string model;
  std::vector<std::vector<int32_t>> prompts;  // one engine request per prompt, each with n choices
  std::vector<std::string> prompt_texts;      // the text of each prompt (for echo)
  SamplingParams sampling;
  int32_t n = 1;
  int32_t logprobs = -1;  // top alternatives per token; -1: no logprobs
  bool stream = false;
  bool include_usage = false;
  bool echo = false;
  // Extensions for `shoal router` (docs/API.md): every streamed token's id in its chunk
  // ("token_ids"), and a request resumed after its replica failed: these tokens, already
  // generated (their text, resume_text_bytes bytes, already sent), continue the prompt's one
  // choice; max_tokens still counts them.
  bool return_token_ids = false;
  std::vector<int32_t> resume_ids;
  int64_t resume_text_bytes = 0;
};

// True when `v` is an integer token id in [0, n_vocab); an unsigned value above INT64_MAX is out
// of range (never wrapped to a negative id).
bool IsTokenId(const Json& v, int64_t n_vocab);

// Parses a body already known to be a JSON object. `chat` selects the endpoint's rules.
// On failure returns the ApiError to send (400 / 404).
std::optional<ApiError> ParseGenerationRequest(const Json& body, bool chat, const ModelInfo& model,
                                               GenerationRequest* out);

}  // namespace shoal::server
