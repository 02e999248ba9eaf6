# Sourced by the GPU test scripts: the build folder ($build), a skip (exit 77) where no NVIDIA
# GPU is visible (CI), and a scratch folder ($work) removed on exit.
build=${BLOCKMM_BUILD_DIR:?}
if ! command -v nvidia-smi >/dev/null 2>&1 || ! nvidia-smi -L >/dev/null 2>&1; then
  echo "SKIP: no NVIDIA GPU visible"; exit 77
fi
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
