// Placeholder until the HDF5 writer lands.
#include "core/error.hpp"
#include "io/input_file.hpp"
#include "io/product_writer.hpp"

namespace blockmm::io {

std::unique_ptr<ProductWriter> make_hdf5_product_writer(const std::string& target, const comm::Communicator&) {
  throw UsageError(target + ": HDF5 output is not implemented yet");
}

std::unique_ptr<InputFile> open_hdf5_input(const std::string& path, const comm::Communicator&) {
  throw InputError(path + ": HDF5 input is not implemented yet");
}

}  // namespace blockmm::io
