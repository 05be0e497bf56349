// /tokenize and /detokenize: whole answers computed from the request body, meant to run on a
// work thread (an 8 MiB body takes seconds to tokenize).
#pragma once

#include <string>

#include "server/openai_request.h"

namespace shoal::server {

struct RouteReply {
  int status = 200;
  std::string body;  // JSON: the answer, or an ApiError
};

// vLLM's {"prompt" | "messages", "add_special_tokens"} and llama.cpp's {"content",
// "add_special", "with_pieces"}. More tokens than the model's length is a 400, as in vLLM.
RouteReply TokenizeReply(const std::string& body, const ModelInfo& model);
// {"tokens": [ids]} -> {"prompt": text, "content": text}.
RouteReply DetokenizeReply(const std::string& body, const ModelInfo& model);

}  // namespace shoal::server
