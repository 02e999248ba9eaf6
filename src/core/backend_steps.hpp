// The seconds of a backend's own steps inside the phases (a GPU's start, its upload, the numeric
// phase's parts and each numeric path's predicted time), as typed fields: the backends fill them,
// the distribution reads them (multiply/), the console writes them (--stats=json's
// "backend_seconds", each under the name `named_steps()` gives it). A step that did not happen
// is not measured, and is left out of the JSON.
#pragma once

#include <algorithm>
#include <array>

namespace blockmm {

struct StepSeconds {
  double seconds = 0;
  bool measured = false;
  void add(double s) {
    seconds += s;
    measured = true;
  }
};

struct BackendSteps {
  // The GPU's start (kernels/cuda_start.hpp), taken by the first backend made on it.
  StepSeconds setup_context;            // the context's creation and warm-up
  StepSeconds setup_wait_for_context;   // what the backend's maker waited for it
  StepSeconds setup_wait_for_staging;   // the staging memory's population, waited for
  StepSeconds setup_staging_populated;  // the same population, beside the context's start
  StepSeconds setup_staging_registered;
  StepSeconds setup_peer_access;
  // Builds of operands.
  StepSeconds build_read_upload;  // reading the records and uploading them
  StepSeconds build_pin_staging;
  StepSeconds build_on_device;
  // The numeric phase's parts.
  StepSeconds numeric_pin_copy_back;
  StepSeconds numeric_to_dense_plan;
  StepSeconds numeric_dense_buffers;
  StepSeconds numeric_load_cublas;
  StepSeconds numeric_first_issue;  // host time to issue the first chunk
  StepSeconds numeric_last_drain;   // host time to drain the last chunk
  StepSeconds numeric_device_span;  // first kernel to last copy, on the device
  // Each numeric path's predicted seconds (the cuda backend's cost model: the faster one runs).
  StepSeconds predicted_sparse;
  StepSeconds predicted_dense;
};

using StepField = StepSeconds BackendSteps::*;

struct NamedStep {
  const char* name;
  StepField field;
};

// Every step with its name in --stats=json (the names predate the fields: readers such as
// bench/blockmm_bench look them up).
inline const std::array<NamedStep, 18>& named_steps() {
  static const std::array<NamedStep, 18> steps{{
      {"setup: context (warm-up)", &BackendSteps::setup_context},
      {"setup: wait for the context", &BackendSteps::setup_wait_for_context},
      {"setup: wait for the staging memory", &BackendSteps::setup_wait_for_staging},
      {"setup: staging memory populated (beside the context)", &BackendSteps::setup_staging_populated},
      {"setup: staging registered", &BackendSteps::setup_staging_registered},
      {"setup: peer access", &BackendSteps::setup_peer_access},
      {"build: read + upload", &BackendSteps::build_read_upload},
      {"build: pin staging slots", &BackendSteps::build_pin_staging},
      {"build: on the device", &BackendSteps::build_on_device},
      {"numeric: pin copy-back slots", &BackendSteps::numeric_pin_copy_back},
      {"numeric: to the dense plan", &BackendSteps::numeric_to_dense_plan},
      {"numeric: dense buffers and units", &BackendSteps::numeric_dense_buffers},
      {"numeric: load cuBLAS (wait)", &BackendSteps::numeric_load_cublas},
      {"numeric: issue the first chunk (host)", &BackendSteps::numeric_first_issue},
      {"numeric: drain the last chunk (host)", &BackendSteps::numeric_last_drain},
      {"numeric: first kernel to last copy (device)", &BackendSteps::numeric_device_span},
      {"numeric: predicted sparse path", &BackendSteps::predicted_sparse},
      {"numeric: predicted dense path", &BackendSteps::predicted_dense},
  }};
  return steps;
}

// Backends that ran side by side (a team): each step's longest.
inline void keep_longest(BackendSteps& into, const BackendSteps& from) {
  for (const NamedStep& step : named_steps()) {
    StepSeconds& to = into.*step.field;
    const StepSeconds& other = from.*step.field;
    to.seconds = std::max(to.seconds, other.seconds);
    to.measured = to.measured || other.measured;
  }
}

}  // namespace blockmm
