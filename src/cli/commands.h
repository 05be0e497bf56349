// Subcommands of the `shoal` CLI; each file cmd_<name>.cc registers one.
#pragma once

#include <CLI/CLI.hpp>
#include <functional>

namespace shoal::cli {

// A registered subcommand runs after parsing and returns the process exit code.
using Runner = std::function<int()>;

void AddRunCommand(CLI::App& app, Runner* runner);
void AddTokenizeCommand(CLI::App& app, Runner* runner);
void AddInfoCommand(CLI::App& app, Runner* runner);
void AddPerplexityCommand(CLI::App& app, Runner* runner);
void AddSynthCommand(CLI::App& app, Runner* runner);
void AddQuantizeCommand(CLI::App& app, Runner* runner);
void AddBenchCommand(CLI::App& app, Runner* runner);
void AddServeCommand(CLI::App& app, Runner* runner);
void AddNodeCommand(CLI::App& app, Runner* runner);
void AddStatusCommand(CLI::App& app, Runner* runner);
void AddClusterCommand(CLI::App& app, Runner* runner);
void AddPlanCommand(CLI::App& app, Runner* runner);
void AddRouterCommand(CLI::App& app, Runner* runner);
void AddSimCommand(CLI::App& app, Runner* runner);  // built only with SimGrid (SHOAL_HAVE_SIM)
// `shoal bench serve`, a subcommand of `bench` (called by AddBenchCommand).
CLI::App* AddBenchServeCommand(CLI::App& bench, Runner* runner);

}  // namespace shoal::cli
