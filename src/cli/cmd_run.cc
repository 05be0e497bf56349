// `shoal run`: generate text from a prompt, streamed to stdout (or one JSON object).
#include <fmt/format.h>

#include <chrono>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <random>

#include "base/clock.h"
#include "cli/commands.h"
#include "cli/common.h"
#include "engine/engine.h"
#include "engine/text_stream.h"
#include "tokenizer/chat_template.h"

namespace shoal::cli {
namespace {

struct RunArgs {
  std::string model, prompt, prompt_file, chat_template, kv_type = "f16";
  std::vector<std::string> stop;
  int n_predict = 128;
  int threads = 0;
  int ctx = 4096;
  uint64_t seed = 0xFFFFFFFFu;
  bool ignore_eos = false, chat = false, json = false;
  SamplingParams sp;
};

int Run(const RunArgs& a, bool p_set, bool f_set) {
  const double t_load0 = NowSeconds();
  auto text = PromptText(a.prompt, a.prompt_file, p_set, f_set);
  if (!text.ok()) return Fail(text.status());
  auto bundle = LoadBundle(a.model, true);
  if (!bundle.ok()) return Fail(bundle.status());
  Bundle& b = *bundle;
  std::string prompt = *text;
  if (a.chat) {
    Result<ChatTemplateKind> kind =
        a.chat_template.empty()
            ? DetectChatTemplate(b.file->GetStringOr("tokenizer.chat_template", ""))
            : ChatTemplateFromName(a.chat_template);
    if (!kind.ok())
      return Fail(kind.status().Annotate("chat template (override with --chat-template NAME)"));
    prompt = ApplyChatTemplate(*kind, {{"user", prompt}}, true);
  }
  const std::vector<int32_t> prompt_ids = b.tokenizer->Encode(prompt, true, true);
  if (prompt_ids.empty()) return Fail(Errorf("the prompt tokenized to nothing"));

  EngineConfig cfg;
  cfg.n_threads = ResolveThreads(a.threads);
  cfg.n_ctx = a.ctx;
  cfg.max_num_seqs = 1;
  auto kv = ParseKvType(a.kv_type);
  if (!kv.ok()) return Fail(kv.status());
  cfg.kv_dtype = *kv;
  const std::vector<int32_t> eog = b.tokenizer->EogTokens();
  auto engine = Engine::Create(b.model.get(), cfg, eog);
  if (!engine.ok()) return Fail(engine.status());

  Request req;
  req.prompt = prompt_ids;
  req.sampling = a.sp;
  req.sampling.seed = a.seed == 0xFFFFFFFFu ? std::random_device{}() : a.seed;
  req.sampling.max_tokens = a.n_predict;
  req.sampling.ignore_eos = a.ignore_eos;
  req.sampling.stop = a.stop;
  auto id = (*engine)->Add(req);
  if (!id.ok()) return Fail(id.status());
  const double t_load = NowSeconds() - t_load0;

  // A terminal takes the bytes as they are; the JSON output must be valid UTF-8.
  TextStream stream(*b.tokenizer, req.sampling, eog, /*replace_invalid=*/a.json);
  std::vector<int32_t> ids;
  std::string out_text;
  const double t0 = NowSeconds();
  double t_first = 0;
  std::string finish = "length";
  while (!(*engine)->idle()) {
    auto events = (*engine)->Step();
    if (!events.ok()) return Fail(events.status());
    for (const TokenEvent& e : *events) {
      if (ids.empty()) t_first = NowSeconds();
      ids.push_back(e.token);
      const TextUpdate u = stream.Push(e.token, e.finish);
      out_text += u.text;
      if (!a.json) {
        std::fwrite(u.text.data(), 1, u.text.size(), stdout);
        std::fflush(stdout);
      }
      if (!u.finish.empty()) finish = u.finish;
      if (stream.stopped() && e.finish == FinishReason::kNone) (*engine)->Cancel(e.id);
    }
  }
  const double t_end = NowSeconds();
  const double prompt_s = t_first - t0, gen_s = t_end - t_first;
  const double gen_n = ids.size() > 1 ? static_cast<double>(ids.size() - 1) : 0.0;
  if (a.json) {
    nlohmann::json j;
    j["prompt_ids"] = prompt_ids;
    j["ids"] = ids;
    j["text"] = out_text;
    j["finish_reason"] = finish;
    j["timings"] = {{"load_ms", t_load * 1e3},
                    {"prompt_n", prompt_ids.size()},
                    {"prompt_ms", prompt_s * 1e3},
                    {"prompt_per_second", prompt_ids.size() / std::max(prompt_s, 1e-9)},
                    {"predicted_n", ids.size()},
                    {"predicted_ms", gen_s * 1e3},
                    {"predicted_per_second", gen_n / std::max(gen_s, 1e-9)}};
    std::printf("%s\n", j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
  } else {
    std::printf("\n");
    std::fprintf(stderr,
                 "\nprompt: %zu tokens in %.1f ms (%.1f t/s) | generation: %zu tokens, %.1f t/s\n",
                 prompt_ids.size(), prompt_s * 1e3, prompt_ids.size() / std::max(prompt_s, 1e-9),
                 ids.size(), gen_n / std::max(gen_s, 1e-9));
  }
  return 0;
}

}  // namespace

void AddRunCommand(CLI::App& app, Runner* runner) {
  auto* cmd = app.add_subcommand("run", "Generate text from a prompt on this machine");
  auto a = std::make_shared<RunArgs>();
  cmd->add_option("-m,--model", a->model, "GGUF model file")->required();
  auto* p = cmd->add_option("-p,--prompt", a->prompt, "Prompt text");
  auto* f = cmd->add_option("-f,--file", a->prompt_file, "Read the prompt from this file");
  cmd->add_option("-n,--n-predict", a->n_predict,
                  "Tokens to generate (-1: until EOS or context end)")
      ->capture_default_str();
  cmd->add_option("--temp", a->sp.temperature, "Temperature; 0 = greedy")->capture_default_str();
  cmd->add_option("--top-k", a->sp.top_k, "Top-k (0 = off)")->capture_default_str();
  cmd->add_option("--top-p", a->sp.top_p, "Top-p nucleus (1 = off)")->capture_default_str();
  cmd->add_option("--min-p", a->sp.min_p, "Min-p (0 = off)")->capture_default_str();
  cmd->add_option("--repeat-penalty", a->sp.repeat_penalty, "Repetition penalty (1 = off)")
      ->capture_default_str();
  cmd->add_option("--repeat-last-n", a->sp.repeat_last_n, "Penalty window in tokens (-1 = all)")
      ->capture_default_str();
  cmd->add_option("--presence-penalty", a->sp.presence_penalty, "Presence penalty")
      ->capture_default_str();
  cmd->add_option("--frequency-penalty", a->sp.frequency_penalty, "Frequency penalty")
      ->capture_default_str();
  cmd->add_option("-s,--seed", a->seed, "RNG seed (default: random)");
  cmd->add_option("--stop", a->stop, "Stop string (repeatable)");
  cmd->add_option("-t,--threads", a->threads, "Threads (0 = all cores)")->capture_default_str();
  cmd->add_option("-c,--ctx-size", a->ctx, "Context length in tokens")->capture_default_str();
  cmd->add_option("--kv-type", a->kv_type, "KV cache type: f16 (llama.cpp numerics) or f32")
      ->capture_default_str();
  cmd->add_flag("--ignore-eos", a->ignore_eos, "Keep generating after end-of-generation tokens");
  cmd->add_flag("--chat", a->chat, "Wrap the prompt as a user message in the chat template");
  cmd->add_option("--chat-template", a->chat_template,
                  "Chat template name, overriding the model's (llama2, llama3, chatml, ...)");
  cmd->add_flag("--json", a->json,
                "Print one JSON object {prompt_ids, ids, text, finish_reason, timings}");
  cmd->callback([=] {
    const bool p_set = p->count() > 0, f_set = f->count() > 0;
    *runner = [=] { return Run(*a, p_set, f_set); };
  });
}

}  // namespace shoal::cli
