__version__ = "0.1.0"  # the project version: CMake checks it against project(blockmm VERSION ...)
