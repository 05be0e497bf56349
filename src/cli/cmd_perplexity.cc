// `shoal perplexity`: llama-perplexity's chunked perplexity of a text file.
#include <cstdio>

#include "cli/commands.h"
#include "cli/common.h"
#include "engine/perplexity.h"
#include "io/mapped_file.h"
#include "threading/thread_pool.h"

namespace shoal::cli {

void AddPerplexityCommand(CLI::App& app, Runner* runner) {
  auto* cmd = app.add_subcommand(
      "perplexity", "Perplexity of a text, computed like llama.cpp's llama-perplexity");
  struct Args {
    std::string model, file, kv_type = "f16";
    int ctx = 512, threads = 0;
  };
  auto a = std::make_shared<Args>();
  cmd->add_option("-m,--model", a->model, "GGUF model file")->required();
  cmd->add_option("-f,--file", a->file, "Text file")->required();
  cmd->add_option("-c,--ctx-size", a->ctx, "Tokens per chunk")->capture_default_str();
  cmd->add_option("-t,--threads", a->threads, "Threads (0 = all cores)")->capture_default_str();
  cmd->add_option("--kv-type", a->kv_type, "KV cache type: f16 or f32")->capture_default_str();
  cmd->callback([=] {
    *runner = [=]() -> int {
      auto text = ReadFileToString(a->file);
      if (!text.ok()) return Fail(text.status());
      auto b = LoadBundle(a->model, true);
      if (!b.ok()) return Fail(b.status());
      auto kv = ParseKvType(a->kv_type);
      if (!kv.ok()) return Fail(kv.status());
      const auto ids = b->tokenizer->Encode(*text, true, false);
      std::fprintf(stderr, "tokenized %zu bytes into %zu tokens\n", text->size(), ids.size());
      ThreadPool pool(ResolveThreads(a->threads));
      const int32_t bos = b->tokenizer->add_bos() ? b->tokenizer->bos() : -1;
      auto r =
          ComputePerplexity(*b->model, ids, a->ctx, bos, *kv, &pool, [](int32_t c, double ppl) {
            std::printf("[%d]%.4f,", c + 1, ppl);
            std::fflush(stdout);
          });
      if (!r.ok()) return Fail(r.status());
      std::printf("\nFinal estimate: PPL = %.4f +/- %.5f (%d chunks of %d tokens, %lld scored)\n",
                  r->ppl, r->stderr_ppl, r->n_chunks, r->n_ctx,
                  static_cast<long long>(r->n_scored));
      return 0;
    };
  });
}

}  // namespace shoal::cli
