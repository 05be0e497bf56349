// Chat templates: detect a model's template family and render messages as llama.cpp does.
//
// Like llama.cpp's llm_chat_detect_template / llm_chat_apply_template, this is not a Jinja
// engine: a template is recognized by distinctive substrings and rendered by hand-written code,
// producing byte-for-byte the text llama.cpp produces for the same kind.
//
// BOS: the rendered text does NOT start with BOS; the tokenizer adds it (add_bos) as llama.cpp
// does. (llama2 starts with "[INST] "; only history-internal markers such as llama2-sys-bos's
// and monarch's "<s>" between turns, and the "</s>" that closes assistant turns, appear as text,
// so the prompt must be tokenized with special tokens parsed.)
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace shoal {

struct ChatMessage {
  std::string role;  // "system", "user", "assistant" (some kinds know "tool")
  std::string content;
};

// One value per llama.cpp built-in template this module renders (names in ChatTemplateName).
enum class ChatTemplateKind {
  kChatML,           // chatml: Qwen, Yi, many fine-tunes
  kLlama2,           // llama2: no system support (system text goes in plain)
  kLlama2Sys,        // llama2-sys: <<SYS>> block
  kLlama2SysBos,     // llama2-sys-bos: "<s>" before each later [INST]
  kLlama2SysStrip,   // llama2-sys-strip: contents trimmed
  kMistralV1,        // mistral-v1: " [INST] ... [/INST]"
  kMistralV3,        // mistral-v3: "[INST] ...[/INST]", assistant trimmed
  kMistralV3Tekken,  // mistral-v3-tekken: no spaces
  kMistralV7,        // mistral-v7: [SYSTEM_PROMPT] blocks
  kMistralV7Tekken,  // mistral-v7-tekken
  kPhi3,             // phi3
  kPhi4,             // phi4: <|im_start|>role<|im_sep|>
  kFalcon3,          // falcon3
  kZephyr,           // zephyr
  kMonarch,          // monarch (AlphaMonarch)
  kGemma,            // gemma: system merged into the first user turn
  kOpenChat,         // openchat 3.5
  kVicuna,           // vicuna
  kVicunaOrca,       // vicuna-orca
  kDeepSeek,         // deepseek (coder)
  kDeepSeek2,        // deepseek2 (V2)
  kDeepSeek3,        // deepseek3 (V3, R1)
  kCommandR,         // command-r
  kLlama3,           // llama3 (3.0 - 3.3)
  kExaone3,          // exaone3
  kLlama4,           // llama4
  kSmolVLM,          // smolvlm
  kGptOss,           // gpt-oss (harmony, simplified as llama.cpp does)
  kKimiK2,           // kimi-k2
  kSeedOss,          // seed_oss
};

// Detects the kind from the model's tokenizer.chat_template (a built-in name is accepted too).
// Checks run in llama.cpp's order, so a template resolves to the kind llama.cpp picks. Errors
// (naming the --chat-template options) for an empty or unrecognized template, and for families
// llama.cpp knows but Shoal does not render (e.g. chatglm4, granite).
Result<ChatTemplateKind> DetectChatTemplate(std::string_view jinja_template);

// For --chat-template NAME; the names are llama.cpp's (llama3, chatml, mistral-v7, ...).
Result<ChatTemplateKind> ChatTemplateFromName(std::string_view name);

std::string_view ChatTemplateName(ChatTemplateKind kind);

// All names ChatTemplateFromName accepts, sorted.
std::vector<std::string> ChatTemplateNames();

// Renders the conversation; with add_generation_prompt, appends the opening of an assistant turn
// where the kind has one (the mistral and llama2 kinds end a user turn with [/INST] instead).
std::string ApplyChatTemplate(ChatTemplateKind kind, const std::vector<ChatMessage>& messages,
                              bool add_generation_prompt);

}  // namespace shoal
