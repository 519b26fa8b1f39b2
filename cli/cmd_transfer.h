// cmd_transfer.h — `splitzip serve` and `splitzip send`: tensors over UCX with the transfer library (transfer/).
#pragma once

#include <CLI/CLI.hpp>

namespace splitzip_cli {

/** Registers the subcommands `serve` and `send`. */
void add_transfer_commands(CLI::App& app);
/** If `serve` or `send` was parsed, runs it, sets *exit_code and returns true; otherwise returns false. */
bool run_transfer_command(CLI::App& app, int* exit_code);

}  // namespace splitzip_cli
