// OpenAI request parsing: fields, ranges, prompts and chat messages, the context-length rule.
#include "server/openai_request.h"

#include <random>

namespace shoal::server {

namespace {

#define API_TRY(expr)                                                 \
  ({                                                                  \
    auto _r = (expr);                                                 \
    if (!_r.ok()) return ApiError::BadRequest(_r.status().message()); \
    std::move(_r).value();                                            \
  })

std::optional<ApiError> ParseMessages(const Json& body, const ModelInfo& model,
                                      GenerationRequest* out) {
  auto it = body.find("messages");
  if (it == body.end() || !it->is_array() || it->empty())
    return ApiError::BadRequest("'messages' must be a non-empty list", "messages");
  if (!model.chat_template)
    return ApiError::BadRequest(
        "this model has no chat template; start the server with --chat-template NAME or use "
        "/v1/completions",
        "messages");
  std::vector<ChatMessage> msgs;
  for (const Json& m : *it) {
    if (!m.is_object()) return ApiError::BadRequest("each message must be an object", "messages");
    auto role = m.find("role");
    if (role == m.end() || !role->is_string())
      return ApiError::BadRequest("each message needs a string 'role'", "messages");
    std::string r = role->get<std::string>();
    if (r == "developer") r = "system";  // OpenAI's newer name for the system role
    if (r != "system" && r != "user" && r != "assistant" && r != "tool")
      return ApiError::BadRequest("unknown message role '" + r + "'", "messages");
    std::string text;
    auto content = m.find("content");
    if (content == m.end() || content->is_null()) {
      // An assistant turn with only tool calls has no content.
    } else if (content->is_string()) {
      text = content->get<std::string>();
    } else if (content->is_array()) {
      for (const Json& part : *content) {
        auto type = part.is_object() ? part.find("type") : part.end();
        if (type == part.end() || !type->is_string() || type->get<std::string>() != "text")
          return ApiError::BadRequest("only content parts of type 'text' are supported",
                                      "messages");
        auto t = part.find("text");
        if (t == part.end() || !t->is_string())
          return ApiError::BadRequest("a text content part needs a string 'text'", "messages");
        text += t->get<std::string>();
      }
    } else {
      return ApiError::BadRequest("message 'content' must be a string or a list of parts",
                                  "messages");
    }
    msgs.push_back(ChatMessage{r, std::move(text)});
  }
  std::string rendered = ApplyChatTemplate(*model.chat_template, msgs, true);
  out->prompts.push_back(model.tokenizer->Encode(rendered, true, true));
  out->prompt_texts.push_back(std::move(rendered));
  return std::nullopt;
}

std::optional<ApiError> ParsePrompt(const Json& body, const ModelInfo& model,
                                    GenerationRequest* out) {
  auto it = body.find("prompt");
  if (it == body.end() || it->is_null())
    return ApiError::BadRequest("'prompt' is required", "prompt");
  const int32_t n_vocab = model.tokenizer->n_vocab();
  auto add_text = [&](const std::string& s) -> std::optional<ApiError> {
    if (s.empty()) return ApiError::BadRequest("'prompt' must not be empty", "prompt");
    out->prompts.push_back(model.tokenizer->Encode(s, true, true));
    out->prompt_texts.push_back(s);
    return std::nullopt;
  };
  auto add_ids = [&](const Json& arr) -> std::optional<ApiError> {
    std::vector<int32_t> ids;
    for (const Json& e : arr) {
      if (!e.is_number_integer())
        return ApiError::BadRequest("token ids must be integers", "prompt");
      if (!IsTokenId(e, n_vocab))
        return ApiError::BadRequest(
            "token id " + e.dump() + " is out of range [0, " + std::to_string(n_vocab) + ")",
            "prompt");
      ids.push_back(static_cast<int32_t>(e.get<int64_t>()));
    }
    out->prompt_texts.push_back(model.tokenizer->Decode(ids, false));
    out->prompts.push_back(std::move(ids));
    return std::nullopt;
  };
  if (it->is_string()) {
    if (auto e = add_text(it->get<std::string>())) return e;
  } else if (it->is_array() && !it->empty()) {
    if (it->size() > kMaxPromptsPerRequest && !(*it)[0].is_number())
      return ApiError::BadRequest("too many prompts in one request", "prompt");
    if ((*it)[0].is_number()) {
      if (auto e = add_ids(*it)) return e;
    } else {
      for (const Json& p : *it) {
        if (p.is_string()) {
          if (auto e = add_text(p.get<std::string>())) return e;
        } else if (p.is_array()) {
          if (auto e = add_ids(p)) return e;
        } else {
          return ApiError::BadRequest("'prompt' must be a string, a list of strings, or token ids",
                                      "prompt");
        }
      }
    }
  } else {
    return ApiError::BadRequest("'prompt' must be a string, a list of strings, or token ids",
                                "prompt");
  }
  return std::nullopt;
}

}  // namespace

bool IsTokenId(const Json& v, int64_t n_vocab) {
  if (v.is_number_unsigned()) return v.get<uint64_t>() < static_cast<uint64_t>(n_vocab);
  return v.is_number_integer() && v.get<int64_t>() >= 0 && v.get<int64_t>() < n_vocab;
}

namespace {

// "resume": {"token_ids": [...], "text_bytes": N} (generation_job.cc checks the text).
std::optional<ApiError> ParseResume(const Json& body, const ModelInfo& model,
                                    GenerationRequest* out) {
  auto it = body.find("resume");
  if (it == body.end() || it->is_null()) return std::nullopt;
  if (!it->is_object()) return ApiError::BadRequest("'resume' must be an object", "resume");
  if (out->n != 1 || out->prompts.size() != 1)
    return ApiError::BadRequest("'resume' needs one prompt and n = 1", "resume");
  auto ids = it->find("token_ids");
  if (ids == it->end() || !ids->is_array() ||
      ids->size() > static_cast<size_t>(model.max_model_len))
    return ApiError::BadRequest("'resume.token_ids' must be a list of at most max_model_len ids",
                                "resume");
  for (const Json& e : *ids) {
    if (!IsTokenId(e, model.tokenizer->n_vocab()))
      return ApiError::BadRequest("'resume.token_ids' holds an invalid token id", "resume");
    out->resume_ids.push_back(static_cast<int32_t>(e.get<int64_t>()));
  }
  // 64 bytes a token is past any vocabulary's longest piece.
  auto bytes = it->find("text_bytes");
  if (bytes == it->end() || !bytes->is_number_integer() || bytes->get<int64_t>() < 0 ||
      bytes->get<int64_t>() > 64 * static_cast<int64_t>(out->resume_ids.size()))
    return ApiError::BadRequest("'resume.text_bytes' must be an integer in [0, 64 x tokens]",
                                "resume");
  out->resume_text_bytes = bytes->get<int64_t>();
  return std::nullopt;
}

}  // namespace

std::optional<ApiError> ParseGenerationRequest(const Json& body, bool chat, const ModelInfo& model,
                                               GenerationRequest* out) {
  *out = GenerationRequest{};
  out->chat = chat;
  auto model_name = API_TRY(GetString(body, "model"));
  if (model_name && !model_name->empty() && *model_name != model.name)
    return ApiError::ModelNotFound(*model_name);
  out->model = model.name;

  SamplingParams& sp = out->sampling;
  // OpenAI's defaults (not llama.cpp's): plain sampling at temperature 1, no truncation.
  sp.temperature = 1.0f;
  sp.top_k = 0;
  sp.top_p = 1.0f;
  sp.min_p = 0.0f;
  sp.repeat_penalty = 1.0f;
  sp.repeat_last_n = -1;  // penalties see the whole history, as in vLLM
  if (auto v = API_TRY(GetNumber(body, "temperature", 0.0, 2.0)))
    sp.temperature = static_cast<float>(*v);
  if (auto v = API_TRY(GetNumber(body, "top_p", 0.0, 1.0))) {
    if (*v <= 0.0) return ApiError::BadRequest("'top_p' must be in (0, 1]", "top_p");
    sp.top_p = static_cast<float>(*v);
  }
  if (auto v = API_TRY(GetInt(body, "top_k", -1, 1 << 24)))
    sp.top_k = static_cast<int>(*v <= 0 ? 0 : *v);
  if (auto v = API_TRY(GetNumber(body, "min_p", 0.0, 1.0))) sp.min_p = static_cast<float>(*v);
  if (auto v = API_TRY(GetNumber(body, "presence_penalty", -2.0, 2.0)))
    sp.presence_penalty = static_cast<float>(*v);
  if (auto v = API_TRY(GetNumber(body, "frequency_penalty", -2.0, 2.0)))
    sp.frequency_penalty = static_cast<float>(*v);
  if (auto v = API_TRY(GetNumber(body, "repetition_penalty", 0.0, 100.0))) {
    if (*v <= 0.0)
      return ApiError::BadRequest("'repetition_penalty' must be > 0", "repetition_penalty");
    sp.repeat_penalty = static_cast<float>(*v);
  }
  if (auto v = API_TRY(GetInt(body, "seed", INT64_MIN, INT64_MAX))) {
    sp.seed = static_cast<uint64_t>(*v);
  } else {
    sp.seed = std::random_device{}() | (static_cast<uint64_t>(std::random_device{}()) << 32);
  }
  if (auto v = API_TRY(GetBool(body, "ignore_eos"))) sp.ignore_eos = *v;
  sp.stop = API_TRY(GetStringOrList(body, "stop", kMaxStopStrings));
  if (auto v = API_TRY(GetInt(body, "n", 1, kMaxChoices))) out->n = static_cast<int32_t>(*v);
  if (auto v = API_TRY(GetBool(body, "stream"))) out->stream = *v;
  if (auto so = body.find("stream_options"); so != body.end() && !so->is_null()) {
    if (!so->is_object()) return ApiError::BadRequest("'stream_options' must be an object");
    if (auto v = API_TRY(GetBool(*so, "include_usage"))) out->include_usage = *v;
  }
  (void)API_TRY(GetString(body, "user"));  // accepted for logging compatibility, unused

  std::optional<int64_t> max_tokens = API_TRY(GetInt(body, "max_tokens", 1, INT32_MAX));
  if (chat) {
    if (auto v = API_TRY(GetInt(body, "max_completion_tokens", 1, INT32_MAX))) max_tokens = v;
    const auto lp = API_TRY(GetBool(body, "logprobs"));
    const auto top = API_TRY(GetInt(body, "top_logprobs", 0, kMaxTopLogprobs));
    if (lp.value_or(false))
      out->logprobs = static_cast<int32_t>(top.value_or(0));
    else if (top)
      return ApiError::BadRequest("'top_logprobs' needs 'logprobs': true", "top_logprobs");
    if (auto e = ParseMessages(body, model, out)) return e;
  } else {
    if (auto v = API_TRY(GetInt(body, "logprobs", 0, kMaxTopLogprobs)))
      out->logprobs = static_cast<int32_t>(*v);
    if (auto v = API_TRY(GetBool(body, "echo"))) out->echo = *v;
    if (auto e = ParsePrompt(body, model, out)) return e;
  }
  if (auto v = API_TRY(GetBool(body, "return_token_ids"))) out->return_token_ids = *v;
  if (auto e = ParseResume(body, model, out)) return e;
  if (auto e = sp.Validate(); !e.ok()) return ApiError::BadRequest(e.message());
  if (static_cast<int64_t>(out->prompts.size()) * out->n > kMaxSequencesPerRequest) {
    return ApiError::BadRequest(
        "prompts x n is " + std::to_string(out->prompts.size()) + " x " + std::to_string(out->n) +
            "; at most " + std::to_string(kMaxSequencesPerRequest) + " sequences per request",
        "n");
  }

  // The context rule: prompt + max_tokens must fit the model length.
  size_t longest = 0;
  for (const auto& p : out->prompts) {
    if (p.empty()) return ApiError::BadRequest("the prompt is empty after tokenization", "prompt");
    longest = std::max(longest, p.size());
  }
  const int64_t room = static_cast<int64_t>(model.max_model_len) - static_cast<int64_t>(longest);
  const int64_t want = max_tokens.value_or(std::max<int64_t>(room, 1));
  if (static_cast<int64_t>(longest) + want > model.max_model_len) {
    return ApiError::BadRequest(
        "This model's maximum context length is " + std::to_string(model.max_model_len) +
            " tokens. However, you requested " +
            std::to_string(static_cast<int64_t>(longest) + want) + " tokens (" +
            std::to_string(longest) + " in the " + (chat ? "messages" : "prompt") + ", " +
            std::to_string(want) + " in the completion). Please reduce the length.",
        chat ? "messages" : "prompt", "context_length_exceeded");
  }
  const auto resumed = static_cast<int64_t>(out->resume_ids.size());
  if (resumed >= want)
    return ApiError::BadRequest("'resume' holds all " + std::to_string(want) + " tokens", "resume");
  sp.max_tokens = static_cast<int>(want - resumed);
  return std::nullopt;
}

}  // namespace shoal::server
