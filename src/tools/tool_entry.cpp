// The main() of each tool executable: CMake compiles this file once a tool, with
// BLOCKMM_TOOL_COMMAND naming that tool's command (tools/command_lines.hpp).
#include "tools/command_lines.hpp"

#ifndef BLOCKMM_TOOL_COMMAND
#error "BLOCKMM_TOOL_COMMAND names the tool's command, e.g. gen_command"
#endif

int main(int argc, char** argv) { return blockmm::tools::BLOCKMM_TOOL_COMMAND(argc, argv); }
