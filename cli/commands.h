// commands.h — the subcommands of the splitzip tool. Each add_* registers a CLI11 subcommand and returns the
// function that runs it once parsing is done (its return value is the exit code).
#pragma once

#include <CLI/CLI.hpp>

#include <functional>

namespace splitzip_cli {

struct Command {
  CLI::App* app;
  std::function<int()> run;
};

Command add_compress_command(CLI::App& app);
Command add_decompress_command(CLI::App& app);
Command add_info_command(CLI::App& app);
Command add_calibrate_command(CLI::App& app);
Command add_bench_command(CLI::App& app);

}  // namespace splitzip_cli
