// Chat templates: detect a model's template family and render messages as llama.cpp does.
#include "tokenizer/chat_template.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <utility>

namespace shoal {
namespace {

using Kind = ChatTemplateKind;

// Sorted by name, like llama.cpp's table of built-in templates.
constexpr std::array<std::pair<std::string_view, Kind>, 30> kNames = {{
    {"chatml", Kind::kChatML},
    {"command-r", Kind::kCommandR},
    {"deepseek", Kind::kDeepSeek},
    {"deepseek2", Kind::kDeepSeek2},
    {"deepseek3", Kind::kDeepSeek3},
    {"exaone3", Kind::kExaone3},
    {"falcon3", Kind::kFalcon3},
    {"gemma", Kind::kGemma},
    {"gpt-oss", Kind::kGptOss},
    {"kimi-k2", Kind::kKimiK2},
    {"llama2", Kind::kLlama2},
    {"llama2-sys", Kind::kLlama2Sys},
    {"llama2-sys-bos", Kind::kLlama2SysBos},
    {"llama2-sys-strip", Kind::kLlama2SysStrip},
    {"llama3", Kind::kLlama3},
    {"llama4", Kind::kLlama4},
    {"mistral-v1", Kind::kMistralV1},
    {"mistral-v3", Kind::kMistralV3},
    {"mistral-v3-tekken", Kind::kMistralV3Tekken},
    {"mistral-v7", Kind::kMistralV7},
    {"mistral-v7-tekken", Kind::kMistralV7Tekken},
    {"monarch", Kind::kMonarch},
    {"openchat", Kind::kOpenChat},
    {"phi3", Kind::kPhi3},
    {"phi4", Kind::kPhi4},
    {"seed_oss", Kind::kSeedOss},
    {"smolvlm", Kind::kSmolVLM},
    {"vicuna", Kind::kVicuna},
    {"vicuna-orca", Kind::kVicunaOrca},
    {"zephyr", Kind::kZephyr},
}};

std::string NameList() {
  std::string out;
  for (const auto& [name, kind] : kNames) {
    if (!out.empty()) out += ", ";
    out += name;
  }
  return out;
}

// The outcome of the marker checks: a kind we render, or a family llama.cpp knows that we don't.
struct Detection {
  bool found = false;
  Kind kind = Kind::kChatML;
  std::string_view unsupported;  // llama.cpp's name for a family Shoal does not render
};

Detection Found(Kind k) { return {true, k, {}}; }
Detection Unsupported(std::string_view name) { return {false, Kind::kChatML, name}; }

// llama.cpp's llm_chat_detect_template checks, in the same order (first match wins).
Detection DetectByMarkers(std::string_view t) {
  auto has = [t](std::string_view s) { return t.find(s) != std::string_view::npos; };
  if (has("<|im_start|>")) {
    if (has("<|im_sep|>")) return Found(Kind::kPhi4);
    if (has("<end_of_utterance>")) return Found(Kind::kSmolVLM);  // <|im_start|> is its BOS
    return Found(Kind::kChatML);
  }
  if (t.starts_with("mistral") || has("[INST]")) {
    if (has("[SYSTEM_PROMPT]")) return Found(Kind::kMistralV7);
    // Official mistral v1 / v3 / v3-tekken templates.
    if (has("' [INST] ' + system_message") || has("[AVAILABLE_TOOLS]")) {
      if (has(" [INST]")) return Found(Kind::kMistralV1);
      if (has("\"[INST]\"")) return Found(Kind::kMistralV3Tekken);
      return Found(Kind::kMistralV3);
    }
    if (has("content.strip()")) return Found(Kind::kLlama2SysStrip);
    if (has("bos_token + '[INST]")) return Found(Kind::kLlama2SysBos);
    if (has("<<SYS>>")) return Found(Kind::kLlama2Sys);
    return Found(Kind::kLlama2);
  }
  if (has("<|assistant|>") && has("<|end|>")) return Found(Kind::kPhi3);
  if (has("[gMASK]<sop>")) return Unsupported("chatglm4");
  if (has("<|assistant|>") && has("<|user|>")) {
    return has("</s>") ? Found(Kind::kFalcon3) : Unsupported("glmedge");
  }
  if (has("<|{{ item['role'] }}|>") && has("<|begin_of_image|>")) return Unsupported("glmedge");
  if (has("<|user|>") && has("<|endoftext|>")) return Found(Kind::kZephyr);
  if (has("bos_token + message['role']")) return Found(Kind::kMonarch);
  if (has("<start_of_turn>")) return Found(Kind::kGemma);
  if (has("'\\n\\nAssistant: ' + eos_token")) return Unsupported("orion");
  if (has("GPT4 Correct ")) return Found(Kind::kOpenChat);
  if (has("USER: ") && has("ASSISTANT: ")) {
    return Found(has("SYSTEM: ") ? Kind::kVicunaOrca : Kind::kVicuna);
  }
  if (has("### Instruction:") && has("<|EOT|>")) return Found(Kind::kDeepSeek);
  if (has("<|START_OF_TURN_TOKEN|>") && has("<|USER_TOKEN|>")) return Found(Kind::kCommandR);
  if (has("<|start_header_id|>") && has("<|end_header_id|>")) return Found(Kind::kLlama3);
  if (has("[gMASK]sop")) return Unsupported("chatglm3");
  if (has("<用户>")) return Unsupported("minicpm");
  if (has("'Assistant: ' + message['content'] + eos_token")) return Found(Kind::kDeepSeek2);
  if (has("<｜Assistant｜>") && has("<｜User｜>") && has("<｜end▁of▁sentence｜>")) {
    return Found(Kind::kDeepSeek3);
  }
  if (has("[|system|]") && has("[|assistant|]") && has("[|endofturn|]")) {
    return has("[|tool|]") ? Unsupported("exaone4") : Found(Kind::kExaone3);
  }
  if (has("rwkv-world") || has("{{- 'User: ' + message['content']|trim + '\\n\\n' -}}")) {
    return Unsupported("rwkv-world");
  }
  if (has("<|start_of_role|>")) return Unsupported("granite");
  if (has("message['role'] + additional_special_tokens[0] + message['content'] + "
          "additional_special_tokens[1]")) {
    return Unsupported("gigachat");
  }
  if (has("<|role_start|>")) return Unsupported("megrez");
  if (has(" Ассистент:")) return Unsupported("yandex");
  if (has("<role>ASSISTANT</role>") && has("'HUMAN'")) return Unsupported("bailing");
  if (has("<|header_start|>") && has("<|header_end|>")) return Found(Kind::kLlama4);
  if (has("<|endofuserprompt|>")) return Unsupported("dots1");
  if (has("<|extra_0|>") && has("<|extra_4|>")) return Unsupported("hunyuan-moe");
  if (has("<|start|>") && has("<|channel|>")) return Found(Kind::kGptOss);
  if (has("<｜hy_Assistant｜>") && has("<｜hy_place▁holder▁no▁3｜>")) {
    return Unsupported("hunyuan-dense");
  }
  if (has("<|im_assistant|>assistant<|im_middle|>")) return Found(Kind::kKimiK2);
  if (has("<seed:bos>")) return Found(Kind::kSeedOss);
  return {};
}

// llama.cpp's trim: C-locale isspace at both ends.
std::string_view Trim(std::string_view s) {
  auto space = [](char c) { return std::isspace(static_cast<unsigned char>(c)) != 0; };
  while (!s.empty() && space(s.front())) s.remove_prefix(1);
  while (!s.empty() && space(s.back())) s.remove_suffix(1);
  return s;
}

using Messages = std::vector<ChatMessage>;

// Kinds where every message is prefix + role + middle + content + suffix.
struct RoleFormat {
  std::string_view prefix, middle, suffix, generation;
  bool trim;
};

void RenderRoles(const RoleFormat& f, const Messages& msgs, bool gen, std::string& out) {
  for (const ChatMessage& m : msgs) {
    out.append(f.prefix).append(m.role).append(f.middle);
    out.append(f.trim ? Trim(m.content) : std::string_view(m.content)).append(f.suffix);
  }
  if (gen) out.append(f.generation);
}

constexpr RoleFormat kChatMLRoles{"<|im_start|>", "\n", "<|im_end|>\n", "<|im_start|>assistant\n",
                                  false};
constexpr RoleFormat kPhi3Roles{"<|", "|>\n", "<|end|>\n", "<|assistant|>\n", false};
constexpr RoleFormat kPhi4Roles{"<|im_start|>", "<|im_sep|>", "<|im_end|>",
                                "<|im_start|>assistant<|im_sep|>", false};
constexpr RoleFormat kFalcon3Roles{"<|", "|>\n", "\n", "<|assistant|>\n", false};
constexpr RoleFormat kZephyrRoles{"<|", "|>\n", "<|endoftext|>\n", "<|assistant|>\n", false};
constexpr RoleFormat kLlama3Roles{"<|start_header_id|>", "<|end_header_id|>\n\n", "<|eot_id|>",
                                  "<|start_header_id|>assistant<|end_header_id|>\n\n", true};
constexpr RoleFormat kLlama4Roles{"<|header_start|>", "<|header_end|>\n\n", "<|eot|>",
                                  "<|header_start|>assistant<|header_end|>\n\n", true};

void RenderMistral(Kind kind, const Messages& msgs, std::string& out) {
  if (kind == Kind::kMistralV7 || kind == Kind::kMistralV7Tekken) {
    const std::string_view sp = kind == Kind::kMistralV7 ? " " : "";
    for (const ChatMessage& m : msgs) {
      if (m.role == "system") {
        out.append("[SYSTEM_PROMPT]").append(sp).append(m.content).append("[/SYSTEM_PROMPT]");
      } else if (m.role == "user") {
        out.append("[INST]").append(sp).append(m.content).append("[/INST]");
      } else {
        out.append(sp).append(m.content).append("</s>");
      }
    }
    return;
  }
  const std::string_view lead = kind == Kind::kMistralV1 ? " " : "";
  const std::string_view trail = kind == Kind::kMistralV3Tekken ? "" : " ";
  bool in_turn = false;
  for (const ChatMessage& m : msgs) {
    if (!in_turn) {
      out.append(lead).append("[INST]").append(trail);
      in_turn = true;
    }
    if (m.role == "system") {
      out.append(m.content).append("\n\n");
    } else if (m.role == "user") {
      out.append(m.content).append(lead).append("[/INST]");
    } else {
      out.append(trail);
      out.append(kind == Kind::kMistralV3 ? Trim(m.content) : std::string_view(m.content));
      out.append("</s>");
      in_turn = false;
    }
  }
}

void RenderLlama2(Kind kind, const Messages& msgs, std::string& out) {
  const bool system_block = kind != Kind::kLlama2;
  const bool strip = kind == Kind::kLlama2SysStrip;
  bool in_turn = true;  // the first [INST] is written up front; BOS comes from the tokenizer
  out.append("[INST] ");
  for (const ChatMessage& m : msgs) {
    const std::string_view content = strip ? Trim(m.content) : std::string_view(m.content);
    if (!in_turn) {
      out.append(kind == Kind::kLlama2SysBos ? "<s>[INST] " : "[INST] ");
      in_turn = true;
    }
    if (m.role == "system") {
      if (system_block) {
        out.append("<<SYS>>\n").append(content).append("\n<</SYS>>\n\n");
      } else {
        out.append(content).append("\n");
      }
    } else if (m.role == "user") {
      out.append(content).append(" [/INST]");
    } else {
      out.append(content).append("</s>");
      in_turn = false;
    }
  }
}

void RenderGemma(const Messages& msgs, bool gen, std::string& out) {
  std::string system;  // Gemma has no system turn: prepend it to the next user turn
  for (const ChatMessage& m : msgs) {
    if (m.role == "system") {
      system.append(Trim(m.content));
      continue;
    }
    const std::string_view role = m.role == "assistant" ? "model" : std::string_view(m.role);
    out.append("<start_of_turn>").append(role).append("\n");
    if (!system.empty() && role != "model") {
      out.append(system).append("\n\n");
      system.clear();
    }
    out.append(Trim(m.content)).append("<end_of_turn>\n");
  }
  if (gen) out.append("<start_of_turn>model\n");
}

// Kinds that map each of system / user / assistant to fixed text around the content; other
// roles are skipped.
struct TurnFormat {
  std::string_view system_prefix, system_suffix, user_prefix, user_suffix, assistant_prefix,
      assistant_suffix, generation;
  bool trim;
};

void RenderTurns(const TurnFormat& f, const Messages& msgs, bool gen, std::string& out) {
  for (const ChatMessage& m : msgs) {
    const std::string_view c = f.trim ? Trim(m.content) : std::string_view(m.content);
    if (m.role == "system") {
      out.append(f.system_prefix).append(c).append(f.system_suffix);
    } else if (m.role == "user") {
      out.append(f.user_prefix).append(c).append(f.user_suffix);
    } else if (m.role == "assistant") {
      out.append(f.assistant_prefix).append(c).append(f.assistant_suffix);
    }
  }
  if (gen) out.append(f.generation);
}

constexpr TurnFormat kVicunaTurns{
    "", "\n\n", "USER: ", "\n", "ASSISTANT: ", "</s>\n", "ASSISTANT:", false};
constexpr TurnFormat kVicunaOrcaTurns{"SYSTEM: ",    "\n",     "USER: ",     "\n",
                                      "ASSISTANT: ", "</s>\n", "ASSISTANT:", false};
constexpr TurnFormat kDeepSeekTurns{
    "", "", "### Instruction:\n", "\n", "### Response:\n", "\n<|EOT|>\n", "### Response:\n", false};
constexpr TurnFormat kDeepSeek2Turns{
    "", "\n\n", "User: ", "\n\n", "Assistant: ", "<｜end▁of▁sentence｜>", "Assistant:", false};
constexpr TurnFormat kDeepSeek3Turns{
    "",   "\n\n", "<｜User｜>", "", "<｜Assistant｜>", "<｜end▁of▁sentence｜>", "<｜Assistant｜>",
    false};
constexpr TurnFormat kCommandRTurns{
    "<|START_OF_TURN_TOKEN|><|SYSTEM_TOKEN|>",  "<|END_OF_TURN_TOKEN|>",
    "<|START_OF_TURN_TOKEN|><|USER_TOKEN|>",    "<|END_OF_TURN_TOKEN|>",
    "<|START_OF_TURN_TOKEN|><|CHATBOT_TOKEN|>", "<|END_OF_TURN_TOKEN|>",
    "<|START_OF_TURN_TOKEN|><|CHATBOT_TOKEN|>", true};
constexpr TurnFormat kExaone3Turns{"[|system|]",    "[|endofturn|]\n", "[|user|]",      "\n",
                                   "[|assistant|]", "[|endofturn|]\n", "[|assistant|]", true};

void RenderMonarch(const Messages& msgs, bool gen, std::string& out) {
  for (size_t i = 0; i < msgs.size(); ++i) {
    if (i > 0) out.append("<s>");  // BOS between turns; the first comes from the tokenizer
    out.append(msgs[i].role).append("\n").append(msgs[i].content).append("</s>\n");
  }
  if (gen) out.append("<s>assistant\n");
}

void RenderOpenChat(const Messages& msgs, bool gen, std::string& out) {
  for (const ChatMessage& m : msgs) {
    if (m.role == "system") {
      out.append(m.content).append("<|end_of_turn|>");
    } else {
      std::string role = m.role;
      if (!role.empty()) role[0] = static_cast<char>(std::toupper(role[0]));
      out.append("GPT4 Correct ").append(role).append(": ").append(m.content);
      out.append("<|end_of_turn|>");
    }
  }
  if (gen) out.append("GPT4 Correct Assistant:");
}

void RenderSmolVLM(const Messages& msgs, bool gen, std::string& out) {
  out.append("<|im_start|>");  // SmolVLM's BOS, written as text as llama.cpp does
  for (const ChatMessage& m : msgs) {
    if (m.role == "system") {
      out.append(m.content).append("\n\n");
    } else {
      out.append(m.role == "user" ? "User: " : "Assistant: ");
      out.append(m.content).append("<end_of_utterance>\n");
    }
  }
  if (gen) out.append("Assistant:");
}

void RenderGptOss(const Messages& msgs, bool gen, std::string& out) {
  for (const ChatMessage& m : msgs) {
    out.append("<|start|>").append(m.role).append("<|message|>").append(m.content);
    out.append(m.role == "assistant" ? "<|return|>" : "<|end|>");
  }
  if (gen) out.append("<|start|>assistant");
}

void RenderKimiK2(const Messages& msgs, bool gen, std::string& out) {
  for (const ChatMessage& m : msgs) {
    if (m.role == "system") {
      out.append("<|im_system|>system<|im_middle|>");
    } else if (m.role == "user") {
      out.append("<|im_user|>user<|im_middle|>");
    } else if (m.role == "assistant") {
      out.append("<|im_assistant|>assistant<|im_middle|>");
    } else if (m.role == "tool") {
      out.append("<|im_system|>tool<|im_middle|>");
    }
    out.append(m.content).append("<|im_end|>");
  }
  if (gen) out.append("<|im_assistant|>assistant<|im_middle|>");
}

void RenderSeedOss(const Messages& msgs, bool gen, std::string& out) {
  for (const ChatMessage& m : msgs) {
    out.append("<seed:bos>").append(m.role).append("\n");
    out.append(m.role == "assistant" ? Trim(m.content) : std::string_view(m.content));
    out.append("<seed:eos>");
  }
  if (gen) out.append("<seed:bos>assistant\n");
}

}  // namespace

Result<ChatTemplateKind> ChatTemplateFromName(std::string_view name) {
  for (const auto& [n, kind] : kNames) {
    if (n == name) return kind;
  }
  return Errorf("unknown chat template name '{}'; the built-in templates are: {}", name,
                NameList());
}

std::string_view ChatTemplateName(ChatTemplateKind kind) {
  for (const auto& [n, k] : kNames) {
    if (k == kind) return n;
  }
  return "unknown";
}

std::vector<std::string> ChatTemplateNames() {
  std::vector<std::string> names;
  names.reserve(kNames.size());
  for (const auto& [n, kind] : kNames) names.emplace_back(n);
  return names;
}

Result<ChatTemplateKind> DetectChatTemplate(std::string_view jinja_template) {
  if (jinja_template.empty()) {
    return Errorf("the model has no chat template; choose one with --chat-template ({})",
                  NameList());
  }
  Result<ChatTemplateKind> by_name = ChatTemplateFromName(jinja_template);
  if (by_name.ok()) return by_name;
  const Detection d = DetectByMarkers(jinja_template);
  if (d.found) return d.kind;
  if (!d.unsupported.empty()) {
    return Errorf(
        "the model's chat template looks like llama.cpp's '{}', which Shoal does not render; "
        "choose one with --chat-template ({})",
        d.unsupported, NameList());
  }
  return Errorf(
      "unrecognized chat template ({} bytes, no known marker such as <|im_start|>, [INST] or "
      "<|start_header_id|>); choose one with --chat-template ({})",
      jinja_template.size(), NameList());
}

// One case per kind (the compiler checks that none is missing): a format for the families that
// differ only in their text, a renderer of its own for the others.
std::string ApplyChatTemplate(ChatTemplateKind kind, const std::vector<ChatMessage>& messages,
                              bool add_generation_prompt) {
  const bool gen = add_generation_prompt;
  std::string out;
  switch (kind) {
    case Kind::kChatML:
      RenderRoles(kChatMLRoles, messages, gen, out);
      break;
    case Kind::kPhi3:
      RenderRoles(kPhi3Roles, messages, gen, out);
      break;
    case Kind::kPhi4:
      RenderRoles(kPhi4Roles, messages, gen, out);
      break;
    case Kind::kFalcon3:
      RenderRoles(kFalcon3Roles, messages, gen, out);
      break;
    case Kind::kZephyr:
      RenderRoles(kZephyrRoles, messages, gen, out);
      break;
    case Kind::kLlama3:
      RenderRoles(kLlama3Roles, messages, gen, out);
      break;
    case Kind::kLlama4:
      RenderRoles(kLlama4Roles, messages, gen, out);
      break;
    case Kind::kVicuna:
      RenderTurns(kVicunaTurns, messages, gen, out);
      break;
    case Kind::kVicunaOrca:
      RenderTurns(kVicunaOrcaTurns, messages, gen, out);
      break;
    case Kind::kDeepSeek:
      RenderTurns(kDeepSeekTurns, messages, gen, out);
      break;
    case Kind::kDeepSeek2:
      RenderTurns(kDeepSeek2Turns, messages, gen, out);
      break;
    case Kind::kDeepSeek3:
      RenderTurns(kDeepSeek3Turns, messages, gen, out);
      break;
    case Kind::kCommandR:
      RenderTurns(kCommandRTurns, messages, gen, out);
      break;
    case Kind::kExaone3:
      RenderTurns(kExaone3Turns, messages, gen, out);
      break;
    case Kind::kMistralV1:
    case Kind::kMistralV3:
    case Kind::kMistralV3Tekken:
    case Kind::kMistralV7:
    case Kind::kMistralV7Tekken:
      RenderMistral(kind, messages, out);
      break;
    case Kind::kLlama2:
    case Kind::kLlama2Sys:
    case Kind::kLlama2SysBos:
    case Kind::kLlama2SysStrip:
      RenderLlama2(kind, messages, out);
      break;
    case Kind::kGemma:
      RenderGemma(messages, gen, out);
      break;
    case Kind::kMonarch:
      RenderMonarch(messages, gen, out);
      break;
    case Kind::kOpenChat:
      RenderOpenChat(messages, gen, out);
      break;
    case Kind::kSmolVLM:
      RenderSmolVLM(messages, gen, out);
      break;
    case Kind::kGptOss:
      RenderGptOss(messages, gen, out);
      break;
    case Kind::kKimiK2:
      RenderKimiK2(messages, gen, out);
      break;
    case Kind::kSeedOss:
      RenderSeedOss(messages, gen, out);
      break;
  }
  return out;
}

}  // namespace shoal
