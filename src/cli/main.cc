// Entry point of the `shoal` command.
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>

#include "cli/commands.h"
#include "cli_version.h"

namespace {

// `shoal sim ...` runs the shoal-sim binary beside this one with the same arguments.
int ExecSim(char** argv) {
  char self[4096];
  const ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
  std::string path = "shoal-sim";
  if (n > 0) {
    self[n] = 0;
    std::string dir(self);
    dir.resize(dir.rfind('/') + 1);
    path = dir + "shoal-sim";
  }
  execv(path.c_str(), argv);
  std::fprintf(stderr, "error: cannot run %s (%s): shoal was built without SimGrid?\n",
               path.c_str(), std::strerror(errno));
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc > 1 && std::strcmp(argv[1], "sim") == 0) return ExecSim(argv);
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
  shoal::cli::AddRouterCommand(app, &runner);
#ifdef SHOAL_HAVE_SIM
  // Listed for --help; `shoal sim` never gets here (ExecSim above).
  app.add_subcommand("sim",
                     "Simulate serving on a cluster (SimGrid): placement, scheduler, "
                     "failures (runs shoal-sim)");
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
