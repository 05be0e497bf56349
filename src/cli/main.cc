// Entry point of the `shoal` command.
#include <cstdio>

#include "cli/commands.h"
#include "cli_version.h"

int main(int argc, char** argv) {
  CLI::App app{"Shoal: one large language model served by a shoal of machines."};
  app.require_subcommand(0, 1);
  bool version = false;
  app.add_flag("--version", version, "Print the version and git commit, then exit");
  shoal::cli::Runner runner;
  shoal::cli::AddRunCommand(app, &runner);
  shoal::cli::AddTokenizeCommand(app, &runner);
  shoal::cli::AddInfoCommand(app, &runner);
  shoal::cli::AddPerplexityCommand(app, &runner);
  shoal::cli::AddSynthCommand(app, &runner);
  shoal::cli::AddQuantizeCommand(app, &runner);
  shoal::cli::AddBenchCommand(app, &runner);
  shoal::cli::AddServeCommand(app, &runner);
  shoal::cli::AddNodeCommand(app, &runner);
  shoal::cli::AddStatusCommand(app, &runner);
  shoal::cli::AddClusterCommand(app, &runner);
  shoal::cli::AddPlanCommand(app, &runner);
#ifdef SHOAL_HAVE_SIM
  shoal::cli::AddSimCommand(app, &runner);
#endif
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  if (version) {
    std::printf("shoal %s (commit %s)\n", SHOAL_VERSION, SHOAL_GIT_COMMIT);
    return 0;
  }
  if (!runner) {
    std::fputs(app.help().c_str(), stdout);
    return 0;
  }
  return runner();
}
