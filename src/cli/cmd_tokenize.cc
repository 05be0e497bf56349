// `shoal tokenize`: print token ids of a text, space separated on one line.
#include <cstdio>

#include "cli/commands.h"
#include "cli/common.h"

namespace shoal::cli {

void AddTokenizeCommand(CLI::App& app, Runner* runner) {
  auto* cmd = app.add_subcommand("tokenize", "Print the token ids of a text");
  struct Args {
    std::string model, prompt, file;
    bool no_bos = false, no_special = false, pieces = false;
  };
  auto a = std::make_shared<Args>();
  cmd->add_option("-m,--model", a->model, "GGUF model (or vocab-only) file")->required();
  auto* p = cmd->add_option("-p,--prompt", a->prompt, "Text to tokenize");
  auto* f = cmd->add_option("-f,--file", a->file, "Read the text from this file");
  cmd->add_flag("--no-bos", a->no_bos, "Do not add BOS/EOS special tokens");
  cmd->add_flag("--no-parse-special", a->no_special,
                "Treat special-token text (e.g. <s>) as plain text");
  cmd->add_flag("--pieces", a->pieces, "Print id:piece pairs, one per line");
  cmd->callback([=] {
    const bool p_set = p->count() > 0, f_set = f->count() > 0;
    *runner = [=]() -> int {
      auto text = PromptText(a->prompt, a->file, p_set, f_set);
      if (!text.ok()) return Fail(text.status());
      auto b = LoadBundle(a->model, false);
      if (!b.ok()) return Fail(b.status());
      const auto ids = b->tokenizer->Encode(*text, !a->no_bos, !a->no_special);
      if (a->pieces) {
        for (int32_t id : ids)
          std::printf("%d:%s\n", id, b->tokenizer->TokenToPiece(id, true).c_str());
        return 0;
      }
      for (size_t i = 0; i < ids.size(); ++i) std::printf(i ? " %d" : "%d", ids[i]);
      std::printf("\n");
      return 0;
    };
  });
}

}  // namespace shoal::cli
