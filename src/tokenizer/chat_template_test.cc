// Chat template tests: every kind rendered against llama.cpp's format, detection from Jinja.
#include "tokenizer/chat_template.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

namespace shoal {
namespace {

using ::testing::HasSubstr;

// The assistant reply carries spaces at both ends, so the kinds that trim show it.
const std::vector<ChatMessage> kChat = {
    {"system", "You are helpful."},
    {"user", "Hello"},
    {"assistant", " Hi there "},
    {"user", "How are you?"},
};

// Expected renderings of kChat with add_generation_prompt = true, written out from each
// format's definition in llama.cpp's llm_chat_apply_template.
const std::map<std::string, std::string> kExpected = {
    {"chatml",
     "<|im_start|>system\nYou are helpful.<|im_end|>\n<|im_start|>user\nHello<|im_end|>\n"
     "<|im_start|>assistant\n Hi there <|im_end|>\n<|im_start|>user\nHow are you?<|im_end|>\n"
     "<|im_start|>assistant\n"},
    {"llama2", "[INST] You are helpful.\nHello [/INST] Hi there </s>[INST] How are you? [/INST]"},
    {"llama2-sys",
     "[INST] <<SYS>>\nYou are helpful.\n<</SYS>>\n\nHello [/INST] Hi there </s>"
     "[INST] How are you? [/INST]"},
    {"llama2-sys-bos",
     "[INST] <<SYS>>\nYou are helpful.\n<</SYS>>\n\nHello [/INST] Hi there </s>"
     "<s>[INST] How are you? [/INST]"},
    {"llama2-sys-strip",
     "[INST] <<SYS>>\nYou are helpful.\n<</SYS>>\n\nHello [/INST]Hi there</s>"
     "[INST] How are you? [/INST]"},
    {"mistral-v1",
     " [INST] You are helpful.\n\nHello [/INST]  Hi there </s> [INST] How are you? [/INST]"},
    {"mistral-v3",
     "[INST] You are helpful.\n\nHello[/INST] Hi there</s>[INST] How are you?[/INST]"},
    {"mistral-v3-tekken",
     "[INST]You are helpful.\n\nHello[/INST] Hi there </s>[INST]How are you?[/INST]"},
    {"mistral-v7",
     "[SYSTEM_PROMPT] You are helpful.[/SYSTEM_PROMPT][INST] Hello[/INST]  Hi there </s>"
     "[INST] How are you?[/INST]"},
    {"mistral-v7-tekken",
     "[SYSTEM_PROMPT]You are helpful.[/SYSTEM_PROMPT][INST]Hello[/INST] Hi there </s>"
     "[INST]How are you?[/INST]"},
    {"phi3",
     "<|system|>\nYou are helpful.<|end|>\n<|user|>\nHello<|end|>\n<|assistant|>\n Hi there "
     "<|end|>\n<|user|>\nHow are you?<|end|>\n<|assistant|>\n"},
    {"phi4",
     "<|im_start|>system<|im_sep|>You are helpful.<|im_end|><|im_start|>user<|im_sep|>Hello"
     "<|im_end|><|im_start|>assistant<|im_sep|> Hi there <|im_end|><|im_start|>user<|im_sep|>"
     "How are you?<|im_end|><|im_start|>assistant<|im_sep|>"},
    {"falcon3",
     "<|system|>\nYou are helpful.\n<|user|>\nHello\n<|assistant|>\n Hi there \n<|user|>\n"
     "How are you?\n<|assistant|>\n"},
    {"zephyr",
     "<|system|>\nYou are helpful.<|endoftext|>\n<|user|>\nHello<|endoftext|>\n<|assistant|>\n"
     " Hi there <|endoftext|>\n<|user|>\nHow are you?<|endoftext|>\n<|assistant|>\n"},
    {"monarch",
     "system\nYou are helpful.</s>\n<s>user\nHello</s>\n<s>assistant\n Hi there </s>\n"
     "<s>user\nHow are you?</s>\n<s>assistant\n"},
    {"gemma",
     "<start_of_turn>user\nYou are helpful.\n\nHello<end_of_turn>\n<start_of_turn>model\n"
     "Hi there<end_of_turn>\n<start_of_turn>user\nHow are you?<end_of_turn>\n"
     "<start_of_turn>model\n"},
    {"openchat",
     "You are helpful.<|end_of_turn|>GPT4 Correct User: Hello<|end_of_turn|>"
     "GPT4 Correct Assistant:  Hi there <|end_of_turn|>GPT4 Correct User: How are you?"
     "<|end_of_turn|>GPT4 Correct Assistant:"},
    {"vicuna",
     "You are helpful.\n\nUSER: Hello\nASSISTANT:  Hi there </s>\nUSER: How are you?\n"
     "ASSISTANT:"},
    {"vicuna-orca",
     "SYSTEM: You are helpful.\nUSER: Hello\nASSISTANT:  Hi there </s>\nUSER: How are you?\n"
     "ASSISTANT:"},
    {"deepseek",
     "You are helpful.### Instruction:\nHello\n### Response:\n Hi there \n<|EOT|>\n"
     "### Instruction:\nHow are you?\n### Response:\n"},
    {"deepseek2",
     "You are helpful.\n\nUser: Hello\n\nAssistant:  Hi there <｜end▁of▁sentence｜>"
     "User: How are you?\n\nAssistant:"},
    {"deepseek3",
     "You are helpful.\n\n<｜User｜>Hello<｜Assistant｜> Hi there <｜end▁of▁sentence｜>"
     "<｜User｜>How are you?<｜Assistant｜>"},
    {"command-r",
     "<|START_OF_TURN_TOKEN|><|SYSTEM_TOKEN|>You are helpful.<|END_OF_TURN_TOKEN|>"
     "<|START_OF_TURN_TOKEN|><|USER_TOKEN|>Hello<|END_OF_TURN_TOKEN|>"
     "<|START_OF_TURN_TOKEN|><|CHATBOT_TOKEN|>Hi there<|END_OF_TURN_TOKEN|>"
     "<|START_OF_TURN_TOKEN|><|USER_TOKEN|>How are you?<|END_OF_TURN_TOKEN|>"
     "<|START_OF_TURN_TOKEN|><|CHATBOT_TOKEN|>"},
    {"llama3",
     "<|start_header_id|>system<|end_header_id|>\n\nYou are helpful.<|eot_id|>"
     "<|start_header_id|>user<|end_header_id|>\n\nHello<|eot_id|>"
     "<|start_header_id|>assistant<|end_header_id|>\n\nHi there<|eot_id|>"
     "<|start_header_id|>user<|end_header_id|>\n\nHow are you?<|eot_id|>"
     "<|start_header_id|>assistant<|end_header_id|>\n\n"},
    {"exaone3",
     "[|system|]You are helpful.[|endofturn|]\n[|user|]Hello\n[|assistant|]Hi there"
     "[|endofturn|]\n[|user|]How are you?\n[|assistant|]"},
    {"llama4",
     "<|header_start|>system<|header_end|>\n\nYou are helpful.<|eot|>"
     "<|header_start|>user<|header_end|>\n\nHello<|eot|>"
     "<|header_start|>assistant<|header_end|>\n\nHi there<|eot|>"
     "<|header_start|>user<|header_end|>\n\nHow are you?<|eot|>"
     "<|header_start|>assistant<|header_end|>\n\n"},
    {"smolvlm",
     "<|im_start|>You are helpful.\n\nUser: Hello<end_of_utterance>\nAssistant:  Hi there "
     "<end_of_utterance>\nUser: How are you?<end_of_utterance>\nAssistant:"},
    {"gpt-oss",
     "<|start|>system<|message|>You are helpful.<|end|><|start|>user<|message|>Hello<|end|>"
     "<|start|>assistant<|message|> Hi there <|return|><|start|>user<|message|>How are you?"
     "<|end|><|start|>assistant"},
    {"kimi-k2",
     "<|im_system|>system<|im_middle|>You are helpful.<|im_end|><|im_user|>user<|im_middle|>"
     "Hello<|im_end|><|im_assistant|>assistant<|im_middle|> Hi there <|im_end|>"
     "<|im_user|>user<|im_middle|>How are you?<|im_end|><|im_assistant|>assistant<|im_middle|>"},
    {"seed_oss",
     "<seed:bos>system\nYou are helpful.<seed:eos><seed:bos>user\nHello<seed:eos>"
     "<seed:bos>assistant\nHi there<seed:eos><seed:bos>user\nHow are you?<seed:eos>"
     "<seed:bos>assistant\n"},
};

TEST(ChatTemplateTest, EveryKindRendersLikeLlamaCpp) {
  const std::vector<std::string> names = ChatTemplateNames();
  EXPECT_EQ(names.size(), kExpected.size());
  for (const std::string& name : names) {
    SCOPED_TRACE(name);
    Result<ChatTemplateKind> kind = ChatTemplateFromName(name);
    ASSERT_TRUE(kind.ok()) << kind.status().message();
    EXPECT_EQ(ChatTemplateName(*kind), name);
    auto it = kExpected.find(name);
    ASSERT_NE(it, kExpected.end()) << "no expected rendering for " << name;
    EXPECT_EQ(ApplyChatTemplate(*kind, kChat, true), it->second);
  }
}

TEST(ChatTemplateTest, WithoutGenerationPrompt) {
  EXPECT_EQ(ApplyChatTemplate(ChatTemplateKind::kChatML, {{"user", "Hi"}}, false),
            "<|im_start|>user\nHi<|im_end|>\n");
  EXPECT_EQ(ApplyChatTemplate(ChatTemplateKind::kLlama3, {{"user", "Hi"}}, false),
            "<|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>");
  EXPECT_EQ(ApplyChatTemplate(ChatTemplateKind::kKimiK2, {{"user", "Hi"}}, false),
            "<|im_user|>user<|im_middle|>Hi<|im_end|>");
  // The [INST] kinds have no assistant opener: the flag changes nothing.
  EXPECT_EQ(ApplyChatTemplate(ChatTemplateKind::kMistralV7, kChat, false),
            kExpected.at("mistral-v7"));
  EXPECT_EQ(ApplyChatTemplate(ChatTemplateKind::kLlama2Sys, kChat, false),
            kExpected.at("llama2-sys"));
  EXPECT_EQ(ApplyChatTemplate(ChatTemplateKind::kGemma, {}, true), "<start_of_turn>model\n");
}

TEST(ChatTemplateTest, GemmaSystemWithoutUserAndKimiToolRole) {
  // Gemma holds the system text until a non-model turn arrives.
  EXPECT_EQ(ApplyChatTemplate(ChatTemplateKind::kGemma,
                              {{"system", " S "}, {"assistant", "A"}, {"user", "U"}}, false),
            "<start_of_turn>model\nA<end_of_turn>\n<start_of_turn>user\nS\n\nU<end_of_turn>\n");
  EXPECT_EQ(ApplyChatTemplate(ChatTemplateKind::kKimiK2, {{"tool", "42"}}, false),
            "<|im_system|>tool<|im_middle|>42<|im_end|>");
}

// Short but realistic tokenizer.chat_template snippets, one per family.
struct DetectCase {
  const char* jinja;
  const char* kind;
};
const DetectCase kDetect[] = {
    {"{%- for message in messages %}{{- '<|im_start|>' + message.role + '\\n' + message.content "
     "+ '<|im_end|>' + '\\n' }}{%- endfor %}{%- if add_generation_prompt %}{{- "
     "'<|im_start|>assistant\\n' }}{%- endif %}",
     "chatml"},
    {"{% for message in messages %}{{'<|im_start|>' + message['role'] + '<|im_sep|>' + "
     "message['content'] + '<|im_end|>'}}{% endfor %}",
     "phi4"},
    {"<|im_start|>{% for message in messages %}{{ message['role'] | capitalize }}: "
     "{{ message['content'] }}<end_of_utterance>\n{% endfor %}",
     "smolvlm"},
    {"{{- bos_token }}{%- for message in messages %}{{- '<|start_header_id|>' + message['role'] "
     "+ '<|end_header_id|>\\n\\n' + message['content'] | trim + '<|eot_id|>' }}{%- endfor %}"
     "{%- if add_generation_prompt %}{{- '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}"
     "{%- endif %}",
     "llama3"},
    {"{{ bos_token }}{% for message in messages %}{% if message['role'] == 'user' %}"
     "{{ '[INST] ' + message['content'] + ' [/INST]' }}{% elif message['role'] == 'assistant' %}"
     "{{ message['content'] + eos_token }}{% endif %}{% endfor %}",
     "llama2"},
    {"{% if messages[0]['role'] == 'system' %}{% set system_message = messages[0]['content'] %}"
     "{% endif %}{% for message in loop_messages %}{% if loop.index0 == 0 %}{% set content = "
     "'<<SYS>>\\n' + system_message + '\\n<</SYS>>\\n\\n' + message['content'] %}{% endif %}"
     "{{ '[INST] ' + content + ' [/INST]' }}{% endfor %}",
     "llama2-sys"},
    {"{% for message in loop_messages %}{{ bos_token + '[INST] ' + '<<SYS>>\\n' + "
     "message['content'] + ' [/INST]' }}{% endfor %}",
     "llama2-sys-bos"},
    {"{% if message['role'] == 'user' %}{{ bos_token + '[INST] ' + content.strip() + "
     "' [/INST]' }}{% elif message['role'] == 'assistant' %}{{ ' ' + content.strip() + ' ' + "
     "eos_token }}{% endif %}",
     "llama2-sys-strip"},
    {"{%- if loop.first and system_message is defined %}{{- ' [INST] ' + system_message + "
     "'\\n\\n' + message['content'] + ' [/INST]' }}{%- endif %}",
     "mistral-v1"},
    {"{%- if tools is not none %}{{- '[AVAILABLE_TOOLS] [' }}{%- endif %}{%- if "
     "message['role'] == 'user' %}{{- '[INST] ' + message['content'] + '[/INST]' }}{%- endif %}",
     "mistral-v3"},
    {"{%- if tools is not none %}{{- \"[AVAILABLE_TOOLS]\" }}{%- endif %}{%- if "
     "message[\"role\"] == \"user\" %}{{- \"[INST]\" + message[\"content\"] + \"[/INST]\" }}"
     "{%- endif %}",
     "mistral-v3-tekken"},
    {"{%- if message['role'] == 'system' %}{{- '[SYSTEM_PROMPT]' + message['content'] + "
     "'[/SYSTEM_PROMPT]' }}{%- elif message['role'] == 'user' %}{{- '[INST]' + "
     "message['content'] + '[/INST]' }}{%- endif %}",
     "mistral-v7"},
    {"{{ bos_token }}{% for message in messages %}{% if (message['role'] == 'user') %}"
     "{{'<|user|>' + '\n' + message['content'] + '<|end|>' + '\n' + '<|assistant|>' + '\n'}}"
     "{% elif (message['role'] == 'assistant') %}{{message['content'] + '<|end|>' + '\n'}}"
     "{% endif %}{% endfor %}",
     "phi3"},
    {"{% for message in messages %}{% if message['role'] == 'user' %}{{ '<|user|>\\n' + "
     "message['content'] + '\\n' }}{% elif message['role'] == 'assistant' %}{{ "
     "'<|assistant|>\\n' + message['content'] + '</s>' }}{% endif %}{% endfor %}",
     "falcon3"},
    {"{% for message in messages %}{% if message['role'] == 'user' %}{{ '<|user|>\\n' + "
     "message['content'] + '<|endoftext|>\\n' }}{% else %}{{ '<|' + message['role'] + '|>\\n' "
     "+ message['content'] + '<|endoftext|>\\n' }}{% endif %}{% endfor %}",
     "zephyr"},
    {"{% for message in messages %}{{bos_token + message['role'] + '\\n' + message['content'] + "
     "eos_token + '\\n'}}{% endfor %}{% if add_generation_prompt %}{{ bos_token + "
     "'assistant\\n' }}{% endif %}",
     "monarch"},
    {"{{ bos_token }}{% for message in messages %}{% if (message['role'] == 'assistant') %}"
     "{% set role = 'model' %}{% else %}{% set role = message['role'] %}{% endif %}"
     "{{ '<start_of_turn>' + role + '\\n' + message['content'] | trim + '<end_of_turn>\\n' }}"
     "{% endfor %}{% if add_generation_prompt %}{{'<start_of_turn>model\\n'}}{% endif %}",
     "gemma"},
    {"{{ bos_token }}{% for message in messages %}{{ 'GPT4 Correct ' + message['role'].title() "
     "+ ': ' + message['content'] + '<|end_of_turn|>'}}{% endfor %}",
     "openchat"},
    {"{% if message['role'] == 'user' %}{{ 'USER: ' + message['content'] + '\\n' }}{% else %}"
     "{{ 'ASSISTANT: ' + message['content'] + '</s>\\n' }}{% endif %}",
     "vicuna"},
    {"{% if message['role'] == 'system' %}{{ 'SYSTEM: ' + message['content'] + '\\n' }}{% elif "
     "message['role'] == 'user' %}{{ 'USER: ' + message['content'] + '\\n' }}{% else %}"
     "{{ 'ASSISTANT: ' + message['content'] + '</s>\\n' }}{% endif %}",
     "vicuna-orca"},
    {"{%- if message['role'] == 'user' %}{{'### Instruction:\\n' + message['content'] + '\\n'}}"
     "{%- else %}{{'### Response:\\n' + message['content'] + '\\n<|EOT|>\\n'}}{%- endif %}",
     "deepseek"},
    {"{% if message['role'] == 'user' %}{{ 'User: ' + message['content'] + '\\n\\n' }}"
     "{% elif message['role'] == 'assistant' %}{{ 'Assistant: ' + message['content'] + "
     "eos_token }}{% endif %}",
     "deepseek2"},
    {"{%- if message['role'] == 'user' %}{{'<｜User｜>' + message['content']}}{%- endif %}"
     "{%- if message['role'] == 'assistant' %}{{'<｜Assistant｜>' + message['content'] + "
     "'<｜end▁of▁sentence｜>'}}{%- endif %}{% if add_generation_prompt %}{{'<｜Assistant｜>'}}"
     "{% endif %}",
     "deepseek3"},
    {"{{ '<|START_OF_TURN_TOKEN|><|USER_TOKEN|>' + message['content'] | trim + "
     "'<|END_OF_TURN_TOKEN|>' }}",
     "command-r"},
    {"{% if message['role'] == 'system' %}{{ '[|system|]' + message['content'] + "
     "'[|endofturn|]\\n' }}{% elif message['role'] == 'assistant' %}{{ '[|assistant|]' + "
     "message['content'] + '[|endofturn|]\\n' }}{% endif %}",
     "exaone3"},
    {"{{- '<|header_start|>' + message['role'] + '<|header_end|>\\n\\n' }}{{- "
     "message['content'] | trim + '<|eot|>' }}",
     "llama4"},
    {"{%- for message in messages -%}<|start|>{{ message.role }}<|channel|>final<|message|>"
     "{{ message.content }}<|end|>{%- endfor -%}",
     "gpt-oss"},
    {"{%- for message in messages -%}{%- if message['role'] == 'user' -%}<|im_user|>user"
     "<|im_middle|>{%- endif -%}{{ message['content'] }}<|im_end|>{%- endfor -%}{%- if "
     "add_generation_prompt -%}<|im_assistant|>assistant<|im_middle|>{%- endif -%}",
     "kimi-k2"},
    {"{{ '<seed:bos>' + message.role + '\\n' + message.content + '<seed:eos>' }}", "seed_oss"},
    {"llama3", "llama3"},  // a built-in name is accepted as is
    {"mistral-v7-tekken", "mistral-v7-tekken"},
};

TEST(ChatTemplateTest, DetectsFamiliesFromJinja) {
  for (const DetectCase& c : kDetect) {
    SCOPED_TRACE(c.kind);
    Result<ChatTemplateKind> kind = DetectChatTemplate(c.jinja);
    ASSERT_TRUE(kind.ok()) << kind.status().message();
    EXPECT_EQ(ChatTemplateName(*kind), c.kind);
  }
}

TEST(ChatTemplateTest, DetectionOrderFollowsLlamaCpp) {
  // <|im_start|> is checked before [INST]; <|assistant|> + <|end|> (phi3) before zephyr.
  EXPECT_EQ(ChatTemplateName(*DetectChatTemplate("<|im_start|> [INST]")), "chatml");
  EXPECT_EQ(ChatTemplateName(*DetectChatTemplate("<|user|><|assistant|><|end|><|endoftext|>")),
            "phi3");
  // A template starting with "mistral" is a mistral/llama2 one even without [INST].
  EXPECT_EQ(ChatTemplateName(*DetectChatTemplate("mistral-custom")), "llama2");
}

TEST(ChatTemplateTest, UnknownAndUnsupportedTemplatesAreErrors) {
  Result<ChatTemplateKind> r = DetectChatTemplate("{% for m in messages %}{{ m.content }}");
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr("unrecognized chat template"));
  EXPECT_THAT(r.status().message(), HasSubstr("--chat-template"));
  for (const std::string& name : ChatTemplateNames()) {
    EXPECT_THAT(r.status().message(), HasSubstr(name));
  }
  r = DetectChatTemplate("{{ '<|start_of_role|>' + message['role'] + '<|end_of_role|>' }}");
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr("'granite'"));
  EXPECT_THAT(r.status().message(), HasSubstr("llama3"));
  r = DetectChatTemplate("");
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr("no chat template"));
  r = ChatTemplateFromName("llama-3");
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr("'llama-3'"));
  EXPECT_THAT(r.status().message(), HasSubstr("chatml, command-r"));
}

}  // namespace
}  // namespace shoal
