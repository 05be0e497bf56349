// `shoal serve`: the OpenAI-compatible HTTP server over one local engine.
#include <cmath>
#include <cstdio>
#include <fstream>
#include <thread>

#include "cli/commands.h"
#include "cli/common.h"
#include "io/mapped_file.h"
#include "server/server.h"

namespace shoal::cli {
namespace {

struct ServeArgs {
  std::string model, host = "127.0.0.1", api_key, api_key_file, served_name, chat_template;
  std::string kv_mem, swap_space, kv_type = "f16";
  int port = 8080, threads = 0, block_size = 16, max_num_seqs = 64, max_batched = 2048;
  int max_model_len = 0, drain_timeout = 30;
  int64_t max_queued = 4096;
  uint64_t max_body = 8 << 20;
  bool no_prefix_caching = false;
};

// Bytes in /proc/meminfo's MemAvailable (0 when unknown).
uint64_t MemAvailable() {
  std::ifstream f("/proc/meminfo");
  std::string key;
  uint64_t kb = 0;
  std::string unit;
  while (f >> key >> kb >> unit)
    if (key == "MemAvailable:") return kb * 1024;
  return 0;
}

// "2G", "512M", "1.5GiB", "1073741824", or a fraction of available memory such as "0.3".
Result<uint64_t> ParseMemSize(const std::string& s, const char* flag) {
  size_t used = 0;
  double v = 0;
  try {
    v = std::stod(s, &used);
  } catch (...) {
    return Errorf("{}: cannot parse '{}' (use e.g. 2G, 512M or a fraction like 0.3)", flag, s);
  }
  std::string unit = s.substr(used);
  for (char& c : unit) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  if (!(v > 0) || !std::isfinite(v)) return Errorf("{} must be positive, got '{}'", flag, s);
  if (unit.empty() && v < 1.0) {
    const uint64_t avail = MemAvailable();
    if (avail == 0) return Errorf("{}: cannot read MemAvailable for a fraction", flag);
    return static_cast<uint64_t>(v * static_cast<double>(avail));
  }
  double mul = 1;
  if (unit == "K" || unit == "KB" || unit == "KIB") mul = 1024.0;
  else if (unit == "M" || unit == "MB" || unit == "MIB") mul = 1024.0 * 1024;
  else if (unit == "G" || unit == "GB" || unit == "GIB") mul = 1024.0 * 1024 * 1024;
  else if (!unit.empty() && unit != "B") return Errorf("{}: unknown unit in '{}'", flag, s);
  return static_cast<uint64_t>(v * mul);
}

int Serve(const ServeArgs& a) {
  server::ServerConfig sc;
  sc.http.host = a.host;
  sc.http.port = a.port;
  sc.http.max_body_bytes = a.max_body;
  sc.api_key = a.api_key;
  if (!a.api_key_file.empty()) {
    auto k = ReadFileToString(a.api_key_file);
    if (!k.ok()) return Fail(k.status().Annotate("--api-key-file"));
    std::string key = *k;
    while (!key.empty() && (key.back() == '\n' || key.back() == '\r' || key.back() == ' '))
      key.pop_back();
    if (key.empty()) return Fail(Errorf("--api-key-file {} is empty", a.api_key_file));
    sc.api_key = key;
  }
  std::string name = a.served_name;
  if (name.empty()) {
    const size_t slash = a.model.find_last_of('/');
    name = slash == std::string::npos ? a.model : a.model.substr(slash + 1);
  }
  sc.served_model_name = name;
  sc.max_queued_requests = a.max_queued;
  sc.drain_timeout_s = a.drain_timeout;

  EngineConfig cfg;
  cfg.n_threads = ResolveThreads(a.threads);
  cfg.block_size = a.block_size;
  cfg.max_num_seqs = a.max_num_seqs;
  cfg.max_num_batched_tokens = a.max_batched;
  cfg.enable_prefix_caching = !a.no_prefix_caching;
  auto kv = ParseKvType(a.kv_type);
  if (!kv.ok()) return Fail(kv.status());
  cfg.kv_dtype = *kv;
  uint64_t swap_bytes = 0;
  if (!a.kv_mem.empty()) {
    auto b = ParseMemSize(a.kv_mem, "--kv-mem");
    if (!b.ok()) return Fail(b.status());
    cfg.kv_mem_bytes = *b;
  }
  if (!a.swap_space.empty()) {
    auto b = ParseMemSize(a.swap_space, "--swap-space");
    if (!b.ok()) return Fail(b.status());
    swap_bytes = *b;
  }

  RaiseFileLimit();
  server::Server srv(sc);
  if (Status s = srv.Listen(); !s.ok()) return Fail(s);
  std::fprintf(stderr, "shoal serve: listening on http://%s:%d (loading %s)\n", a.host.c_str(),
               srv.port(), a.model.c_str());
  // The model loads while /health already answers 503.
  Bundle bundle;
  std::thread loader([&] {
    auto b = LoadBundle(a.model, true);
    if (!b.ok()) return srv.SetFailed(b.status());
    bundle = std::move(*b);
    const HParams& hp = bundle.model->hparams();
    cfg.n_ctx = a.max_model_len > 0 ? a.max_model_len
                                    : static_cast<int32_t>(hp.n_ctx_train > 0 ? hp.n_ctx_train : 4096);
    if (swap_bytes > 0)
      cfg.swap_blocks = static_cast<int32_t>(
          swap_bytes / bundle.model->MakeKvLayout(1, cfg.block_size, cfg.kv_dtype).BytesPerBlock());
    server::ServedModel m;
    m.tokenizer = bundle.tokenizer.get();
    m.eog = bundle.tokenizer->EogTokens();
    auto engine = Engine::Create(bundle.model.get(), cfg, m.eog);
    if (!engine.ok()) return srv.SetFailed(engine.status());
    m.engine = std::move(*engine);
    m.info.name = name;
    m.info.max_model_len = cfg.n_ctx;
    m.info.tokenizer = bundle.tokenizer.get();
    Result<ChatTemplateKind> kind =
        a.chat_template.empty()
            ? DetectChatTemplate(bundle.file->GetStringOr("tokenizer.chat_template", ""))
            : ChatTemplateFromName(a.chat_template);
    if (kind.ok()) {
      m.info.chat_template = *kind;
    } else if (!a.chat_template.empty()) {
      return srv.SetFailed(kind.status().Annotate("--chat-template"));
    } else {
      std::fprintf(stderr, "shoal serve: no usable chat template (%s); chat requests get 400\n",
                   kind.status().message().c_str());
    }
    m.meta = {{"n_vocab", hp.n_vocab},
              {"n_ctx_train", hp.n_ctx_train},
              {"n_embd", hp.n_embd},
              {"n_layer", hp.n_layer},
              {"kv_blocks", m.engine->kv_blocks()},
              {"block_size", cfg.block_size}};
    std::fprintf(stderr, "shoal serve: ready (%d KV blocks of %d tokens, max model len %d)\n",
                 m.engine->kv_blocks(), cfg.block_size, cfg.n_ctx);
    srv.SetReady(std::move(m));
  });
  const Status s = srv.Run();
  loader.join();
  if (!s.ok()) return Fail(s);
  std::fprintf(stderr, "shoal serve: stopped\n");
  return 0;
}

}  // namespace

void AddServeCommand(CLI::App& app, Runner* runner) {
  auto a = std::make_shared<ServeArgs>();
  CLI::App* cmd = app.add_subcommand("serve", "Serve a model over an OpenAI-compatible HTTP API");
  cmd->add_option("-m,--model", a->model, "GGUF model file")->required();
  cmd->add_option("--host", a->host, "Address to listen on")->capture_default_str();
  cmd->add_option("--port", a->port, "TCP port (0: pick a free one)")->capture_default_str();
  cmd->add_option("--api-key", a->api_key, "Require 'Authorization: Bearer KEY' on /v1 paths");
  cmd->add_option("--api-key-file", a->api_key_file, "Read the API key from this file");
  cmd->add_option("--served-model-name", a->served_name,
                  "Model name in the API (default: the file name)");
  cmd->add_option("-t,--threads", a->threads, "Compute threads (0: all)")->capture_default_str();
  cmd->add_option("--max-model-len", a->max_model_len,
                  "Prompt + generated tokens per sequence (default: the model's training context)");
  cmd->add_option("--kv-mem", a->kv_mem,
                  "KV cache budget: bytes with a unit (2G, 512M) or a fraction of free RAM (0.3)");
  cmd->add_option("--kv-type", a->kv_type, "KV cache type: f16 or f32")->capture_default_str();
  cmd->add_option("--block-size", a->block_size, "Tokens per KV block")->capture_default_str();
  cmd->add_option("--max-num-seqs", a->max_num_seqs, "Sequences in one step")
      ->capture_default_str();
  cmd->add_option("--max-num-batched-tokens", a->max_batched, "Tokens in one step")
      ->capture_default_str();
  cmd->add_flag("--no-enable-prefix-caching", a->no_prefix_caching,
                "Disable reuse of cached prompt prefixes");
  cmd->add_option("--swap-space", a->swap_space,
                  "CPU memory for swapped-out KV blocks (e.g. 4G); default: preempt by recompute");
  cmd->add_option("--max-queued-requests", a->max_queued,
                  "Requests waiting for their first token before new ones get 429 (-1: no limit)")
      ->capture_default_str();
  cmd->add_option("--max-body-bytes", a->max_body, "Larger request bodies get 413")
      ->capture_default_str();
  cmd->add_option("--drain-timeout", a->drain_timeout,
                  "Seconds in-flight requests get to finish after SIGTERM")
      ->capture_default_str();
  cmd->add_option("--chat-template", a->chat_template,
                  "Chat template name, overriding the model's (llama3, chatml, ...)");
  cmd->callback([a, runner] { *runner = [a] { return Serve(*a); }; });
}

}  // namespace shoal::cli
