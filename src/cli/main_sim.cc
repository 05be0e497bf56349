// Entry point of `shoal-sim`, the SimGrid half of the CLI: `shoal sim ...` runs it, so that the
// `shoal` binary every node runs does not load SimGrid (~8 MiB of RSS per process, measured on
// a 256 MiB node's budget).
#include "cli/commands.h"

int main(int argc, char** argv) {
  CLI::App app{"Shoal's cluster simulator (run as `shoal sim`)."};
  app.require_subcommand(1, 1);
  shoal::cli::Runner runner;
  shoal::cli::AddSimCommand(app, &runner);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  return runner ? runner() : 0;
}
