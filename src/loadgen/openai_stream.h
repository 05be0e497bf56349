// OpenAI-compatible streaming requests: the JSON body sent and the meaning of each SSE event.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace shoal::loadgen {

enum class ApiKind { kCompletions, kChat };

// /v1/chat/completions (or any endpoint ending in "chat/completions") takes messages; every
// other endpoint is treated as the legacy /v1/completions taking a prompt.
ApiKind ApiKindOf(std::string_view endpoint);

// The body of one streaming request: greedy (temperature 0), max_tokens = output_len and
// ignore_eos so the output length is what the benchmark asked for, and usage in the last chunk.
// An empty model omits the field.
std::string RequestBody(ApiKind kind, const std::string& model, const std::string& prompt,
                        int64_t output_len);

// What one SSE event of a stream says.
struct StreamEvent {
  enum Kind { kOther, kContent, kDone, kError } kind = kOther;
  bool has_usage = false;
  int64_t prompt_tokens = 0;      // usage.prompt_tokens when has_usage
  int64_t completion_tokens = 0;  // usage.completion_tokens when has_usage
  std::string error;              // kError: what went wrong
};

// Interprets the data of one event: "[DONE]"; a chunk whose first choice carries non-empty text
// (completions) or delta.content / delta.reasoning_content (chat) is content; a usage object may
// ride on any chunk; {"error": ...} or data that is not JSON is an error.
StreamEvent ParseStreamEvent(std::string_view data);

}  // namespace shoal::loadgen
