// main.cpp — the splitzip command-line tool: argument parsing (CLI11) and error reporting. Every failure ends as
// "splitzip: error: <message>" on stderr with a non-zero exit code; output files are never left half written
// (common.h, OutputFile).
#include "commands.h"
#include "common.h"

#include <splitzip/splitzip.h>

#include <cstdio>
#include <exception>
#include <new>
#include <vector>

#ifdef SPLITZIP_CLI_TRANSFER
#include "cmd_transfer.h"
#endif

int main(int argc, char** argv) {
  using namespace splitzip_cli;
  install_signal_handlers();

  CLI::App app{"splitzip — bit-exact lossless compression of LLM KV caches (format v1, docs/FORMAT.md).\n"
               "Inputs are kept unless --rm; outputs are never overwritten without -f.",
               "splitzip"};
  app.require_subcommand(1);
  app.set_version_flag("-V,--version", std::string("splitzip ") + sz_version_string());
  std::vector<Command> commands;
  commands.push_back(add_compress_command(app));
  commands.push_back(add_decompress_command(app));
  commands.push_back(add_info_command(app));
  commands.push_back(add_calibrate_command(app));
  commands.push_back(add_bench_command(app));
#ifdef SPLITZIP_CLI_TRANSFER
  add_transfer_commands(app);
#endif

  // CLI11 would call an unknown command a missing one; name it instead.
  if (argc > 1 && argv[1][0] != '-') {
    bool known = false;
    for (const CLI::App* sub : app.get_subcommands([](CLI::App*) { return true; }))
      known = known || sub->check_name(argv[1]);
    if (!known) {
      std::fprintf(stderr, "splitzip: error: unknown command '%s'\n", argv[1]);
      std::fprintf(stderr, "Run 'splitzip --help' for the list of commands.\n");
      return 2;
    }
  }

  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::fprintf(stderr, "splitzip: error: %s\n", e.what());
    std::fprintf(stderr, "Run 'splitzip --help' (or 'splitzip COMMAND --help') for usage.\n");
    return 2;
  }

  try {
#ifdef SPLITZIP_CLI_TRANSFER
    int rc = 0;
    if (run_transfer_command(app, &rc)) return rc;
#endif
    for (const Command& c : commands)
      if (c.app->parsed()) return c.run();
  } catch (const CliError& e) {
    std::fflush(stdout);
    std::fprintf(stderr, "splitzip: error: %s\n", e.what());
    return e.exit_code();
  } catch (const std::bad_alloc&) {
    std::fprintf(stderr, "splitzip: error: out of memory\n");
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "splitzip: error: %s\n", e.what());
    return 1;
  }
  std::fprintf(stderr, "splitzip: error: no command given (run 'splitzip --help')\n");
  return 2;
}
