"""pip's build of blockmm.multiply's extension, blockmm._native (the package's metadata, modules and
tools are pyproject.toml's). The extension is the project's CMake target blockmm_native (src/python),
built over the C++ core: setuptools and CMake are all it takes, so that Debian 12's packages build
it offline (no scikit-build-core there; docs/python.md says why this form).

Environment:
  BLOCKMM_PYTHON_EXTENSION  auto (default): build it where CMake is found and this folder lies in a
                            blockmm checkout, else install the package without it (multiply then
                            says how to get it); on: build it or fail; off: never build it
  BLOCKMM_SOURCE_DIR        the checkout (default: this folder's parent)
  BLOCKMM_BUILD_DIR         an existing CMake build tree of the checkout: the target is built there
                            (nothing to do where it is up to date) and taken from it, instead of a
                            fresh build of the libraries it needs in pip's build folder
  CMAKE_ARGS                more arguments for a fresh configuration (-DBLOCKMM_ENABLE_CUDA=OFF, ...)
"""
import os
import shlex
import shutil
import subprocess
import sys
import sysconfig

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

HERE = os.path.dirname(os.path.abspath(__file__))


def _say(line):
    print(f"blockmm setup: {line}", file=sys.stderr, flush=True)


class BuildNative(build_ext):
    """build_ext for the one extension, by CMake."""

    def run(self):
        mode = os.environ.get("BLOCKMM_PYTHON_EXTENSION", "auto")
        if mode not in ("auto", "on", "off"):
            raise SystemExit(f"BLOCKMM_PYTHON_EXTENSION={mode!r}: expected auto, on or off")
        source = os.path.abspath(os.environ.get("BLOCKMM_SOURCE_DIR") or os.path.dirname(HERE))
        reuse = os.environ.get("BLOCKMM_BUILD_DIR")
        missing = None
        if mode == "off":
            missing = "BLOCKMM_PYTHON_EXTENSION=off"
        elif shutil.which("cmake") is None:
            missing = "no cmake on the PATH"
        elif not reuse and not os.path.isfile(os.path.join(source, "src", "python", "extension.cpp")):
            missing = f"{source} is not a blockmm checkout (BLOCKMM_SOURCE_DIR names one)"
        if missing:
            if mode == "on":
                raise SystemExit(f"blockmm setup: cannot build blockmm._native: {missing}")
            _say(f"blockmm._native (blockmm.multiply) is left out: {missing}; the rest of the package is installed")
            self.extensions = []
            return
        super().run()

    def build_extension(self, ext):
        source = os.path.abspath(os.environ.get("BLOCKMM_SOURCE_DIR") or os.path.dirname(HERE))
        build = os.environ.get("BLOCKMM_BUILD_DIR")
        if build:
            build = os.path.abspath(build)
            _say(f"building blockmm_native in the existing build tree {build}")
        else:
            build = os.path.abspath(os.path.join(self.build_temp, "cmake"))
            generator = ["-G", "Ninja"] if shutil.which("ninja") else []
            configure = ["cmake", "-S", source, "-B", build, *generator, "-DCMAKE_BUILD_TYPE=Release",
                         "-DBLOCKMM_BUILD_TESTS=OFF", f"-DBLOCKMM_PYTHON={sys.executable}",
                         *shlex.split(os.environ.get("CMAKE_ARGS", ""))]
            _say(" ".join(configure))
            subprocess.run(configure, check=True)
        jobs = os.environ.get("CMAKE_BUILD_PARALLEL_LEVEL") or str(os.cpu_count() or 1)
        subprocess.run(["cmake", "--build", build, "--target", "blockmm_native", "--parallel", jobs], check=True)
        built = os.path.join(build, "python", "blockmm", "_native" + sysconfig.get_config_var("EXT_SUFFIX"))
        if not os.path.isfile(built):
            raise SystemExit(f"blockmm setup: {built} was not built: the build tree's BLOCKMM_PYTHON is another "
                             f"interpreter than {sys.executable}, or it lacks its headers (python3-dev)")
        target = self.get_ext_fullpath(ext.name)
        os.makedirs(os.path.dirname(target), exist_ok=True)
        shutil.copyfile(built, target)


setup(ext_modules=[Extension("blockmm._native", sources=[])], cmdclass={"build_ext": BuildNative})
