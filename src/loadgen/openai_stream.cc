// OpenAI-compatible request bodies and stream events (see openai_stream.h).
#include "loadgen/openai_stream.h"

#include <fmt/format.h>

#include <nlohmann/json.hpp>

namespace shoal::loadgen {

using nlohmann::json;

ApiKind ApiKindOf(std::string_view endpoint) {
  constexpr std::string_view kChat = "chat/completions";
  while (!endpoint.empty() && endpoint.back() == '/') endpoint.remove_suffix(1);
  return endpoint.size() >= kChat.size() && endpoint.substr(endpoint.size() - kChat.size()) == kChat
             ? ApiKind::kChat
             : ApiKind::kCompletions;
}

std::string RequestBody(ApiKind kind, const std::string& model, const std::string& prompt,
                        int64_t output_len) {
  json j;
  if (!model.empty()) j["model"] = model;
  if (kind == ApiKind::kChat) {
    j["messages"] = json::array({{{"role", "user"}, {"content", prompt}}});
  } else {
    j["prompt"] = prompt;
  }
  j["max_tokens"] = output_len;
  j["temperature"] = 0.0;
  j["ignore_eos"] = true;
  j["stream"] = true;
  j["stream_options"] = {{"include_usage", true}};
  return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

namespace {

bool NonEmptyString(const json& j, const char* key) {
  auto it = j.find(key);
  return it != j.end() && it->is_string() && !it->get_ref<const std::string&>().empty();
}

std::string ErrorText(const json& e) {
  if (e.is_object()) {
    auto m = e.find("message");
    if (m != e.end() && m->is_string()) return m->get<std::string>();
  }
  if (e.is_string()) return e.get<std::string>();
  return e.dump(-1, ' ', false, json::error_handler_t::replace);
}

StreamEvent Parse(std::string_view data) {
  StreamEvent ev;
  while (!data.empty() && (data.back() == ' ' || data.back() == '\r')) data.remove_suffix(1);
  if (data == "[DONE]") {
    ev.kind = StreamEvent::kDone;
    return ev;
  }
  const json j = json::parse(data.begin(), data.end(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) {
    ev.kind = StreamEvent::kError;
    ev.error = fmt::format("stream event is not a JSON object: {:.80}", data);
    return ev;
  }
  if (auto e = j.find("error"); e != j.end() && !e->is_null()) {
    ev.kind = StreamEvent::kError;
    ev.error = "server error in stream: " + ErrorText(*e);
    return ev;
  }
  if (auto u = j.find("usage"); u != j.end() && u->is_object()) {
    ev.has_usage = true;
    ev.prompt_tokens = u->value("prompt_tokens", int64_t{0});
    ev.completion_tokens = u->value("completion_tokens", int64_t{0});
  }
  auto choices = j.find("choices");
  if (choices != j.end() && choices->is_array() && !choices->empty()) {
    const json& c = choices->front();
    if (!c.is_object()) return ev;
    bool content = NonEmptyString(c, "text");
    if (auto d = c.find("delta"); d != c.end() && d->is_object())
      content = content || NonEmptyString(*d, "content") || NonEmptyString(*d, "reasoning_content");
    if (content) ev.kind = StreamEvent::kContent;
  }
  return ev;
}

}  // namespace

StreamEvent ParseStreamEvent(std::string_view data) {
  try {
    return Parse(data);
  } catch (const nlohmann::json::exception& e) {  // a field of an unexpected type
    StreamEvent ev;
    ev.kind = StreamEvent::kError;
    ev.error = fmt::format("unexpected stream event {:.80}: {}", data, e.what());
    return ev;
  }
}

}  // namespace shoal::loadgen
