// blockmm-convert's conversion between the COL380 binary format and HDF5 (BSR layout), lossless,
// for inputs (uint16) and products (uint32).
#pragma once

#include <string>

#include "io/product_writer.hpp"

namespace blockmm::tools {

// Writes the matrix in `in_path` (binary or HDF5, told apart by its signature) to `out_path` in
// `format`, atomically. `values` is the input's value width: "u16", "u32" or "auto" (a binary
// file's from its size; an empty binary file counts as u16). Bad input: InputError naming the file.
void convert_matrix(const std::string& in_path, const std::string& out_path, io::OutputFormat format,
                    const std::string& values);

}  // namespace blockmm::tools
