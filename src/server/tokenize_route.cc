// Tokenize and detokenize answers (work thread): parse, validate, encode or decode, render.
#include "server/tokenize_route.h"

namespace shoal::server {

namespace {

RouteReply Error(const ApiError& e) { return {e.status, e.ToJson()}; }

}  // namespace

RouteReply TokenizeReply(const std::string& raw, const ModelInfo& model) {
  auto body = ParseJsonObject(raw);
  if (!body.ok()) return Error(ApiError::BadRequest(body.status().message()));
  std::string text;
  auto add_special = GetBool(*body, "add_special_tokens");
  if (!add_special.ok()) return Error(ApiError::BadRequest(add_special.status().message()));
  bool special = add_special->value_or(true);
  if (body->contains("messages")) {
    GenerationRequest g;
    Json copy = *body;
    copy.erase("model");
    if (auto e = ParseGenerationRequest(copy, true, model, &g)) return Error(*e);
    text = g.prompt_texts[0];
  } else {
    auto p = GetString(*body, body->contains("content") ? "content" : "prompt");
    if (!p.ok()) return Error(ApiError::BadRequest(p.status().message()));
    if (!p->has_value()) return Error(ApiError::BadRequest("'prompt' is required", "prompt"));
    text = std::move(**p);
    // llama.cpp's form ({"content", "add_special"}) defaults to no BOS, vLLM's to BOS.
    if (body->contains("content")) special = false;
    auto as = GetBool(*body, "add_special");
    if (as.ok() && as->has_value()) special = **as;
  }
  auto pieces = GetBool(*body, "with_pieces");
  if (!pieces.ok()) return Error(ApiError::BadRequest(pieces.status().message(), "with_pieces"));
  const std::vector<int32_t> ids = model.tokenizer->Encode(text, special, true);
  // The answer is bounded by the model length, like every prompt (vLLM refuses the same way).
  if (static_cast<int64_t>(ids.size()) > model.max_model_len) {
    return Error(ApiError::BadRequest(
        "This model's maximum context length is " + std::to_string(model.max_model_len) +
            " tokens. However, the text has " + std::to_string(ids.size()) + " tokens.",
        body->contains("messages") ? "messages" : "prompt", "context_length_exceeded"));
  }
  Json out = {{"tokens", ids}, {"count", ids.size()}, {"max_model_len", model.max_model_len}};
  if (pieces->value_or(false)) {
    Json ps = Json::array();
    for (int32_t id : ids)
      ps.push_back({{"id", id}, {"piece", model.tokenizer->TokenToPiece(id, true)}});
    out["pieces"] = std::move(ps);
  }
  return {200, DumpJson(out)};
}

RouteReply DetokenizeReply(const std::string& raw, const ModelInfo& model) {
  auto body = ParseJsonObject(raw);
  if (!body.ok()) return Error(ApiError::BadRequest(body.status().message()));
  auto it = body->find("tokens");
  if (it == body->end() || !it->is_array())
    return Error(ApiError::BadRequest("'tokens' must be a list of token ids", "tokens"));
  const int64_t n_vocab = model.tokenizer->n_vocab();
  std::vector<int32_t> ids;
  ids.reserve(it->size());
  for (const Json& t : *it) {
    if (!IsTokenId(t, n_vocab)) {
      return Error(ApiError::BadRequest(
          "token id " + t.dump() + " is not an integer in [0, " + std::to_string(n_vocab) + ")",
          "tokens"));
    }
    ids.push_back(static_cast<int32_t>(t.get<int64_t>()));
  }
  const std::string text = model.tokenizer->Decode(ids, false);
  return {200, DumpJson(Json{{"prompt", text}, {"content", text}})};
}

}  // namespace shoal::server
