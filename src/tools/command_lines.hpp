// The command lines of the tools (src/tools/command_lines.cpp): each parses argv, runs the tool
// and returns its exit code (0 success, 2 usage; the rest per tool, in its --help).
#pragma once

namespace blockmm::tools {

int gen_command(int argc, char** argv);      // blockmm-gen: random COL380 input matrices
int cmp_command(int argc, char** argv);      // blockmm-cmp: are two matrix files the same matrix?
int info_command(int argc, char** argv);     // blockmm-info: what a matrix file holds
int convert_command(int argc, char** argv);  // blockmm-convert: COL380 binary <-> HDF5 (BSR)

}  // namespace blockmm::tools
