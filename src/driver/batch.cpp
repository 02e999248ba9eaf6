#include "driver/batch.hpp"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <iostream>

#include "core/error.hpp"

namespace blockmm::driver {

std::vector<std::string> split_words(const std::string& line, const std::string& origin) {
  std::vector<std::string> words;
  std::string word;
  bool in_word = false;
  for (std::size_t i = 0; i < line.size(); ++i) {
    const char c = line[i];
    if (c == ' ' || c == '\t' || c == '\r') {
      if (in_word) words.push_back(word);
      word.clear();
      in_word = false;
      continue;
    }
    in_word = true;
    if (c == '\'') {
      const std::size_t end = line.find('\'', i + 1);
      if (end == std::string::npos) throw UsageError(origin + ": a quote (') is not closed");
      word += line.substr(i + 1, end - i - 1);
      i = end;
    } else if (c == '"') {
      std::size_t j = i + 1;
      for (; j < line.size() && line[j] != '"'; ++j) {
        if (line[j] == '\\' && j + 1 < line.size() && (line[j + 1] == '"' || line[j + 1] == '\\')) ++j;
        word += line[j];
      }
      if (j >= line.size()) throw UsageError(origin + ": a quote (\") is not closed");
      i = j;
    } else if (c == '\\') {
      if (i + 1 >= line.size()) throw UsageError(origin + ": the line ends in a backslash");
      word += line[++i];
    } else {
      word += c;
    }
  }
  if (in_word) words.push_back(word);
  return words;
}

void read_batch_file(const std::string& path, const std::function<void(BatchLine&&)>& take) {
  std::ifstream file;
  std::istream* in = &std::cin;
  if (path != "-") {
    file.open(path);
    if (!file) throw UsageError("--batch " + path + ": cannot read it (" + std::strerror(errno) + ")");
    in = &file;
  }
  std::size_t products = 0;
  std::string text;
  for (int number = 1; std::getline(*in, text); ++number) {
    const std::string origin = (path == "-" ? std::string("standard input") : path) + ":" + std::to_string(number);
    std::vector<std::string> words = split_words(text, origin);
    if (words.empty() || words.front().rfind('#', 0) == 0) continue;
    ++products;
    take({std::move(words), origin});
  }
  if (in->bad()) throw UsageError("--batch " + path + ": reading it failed");
  if (products == 0) throw UsageError("--batch " + path + ": no product in it (a line is [options] A B OUT)");
}

std::vector<BatchLine> read_batch_file(const std::string& path) {
  std::vector<BatchLine> lines;
  read_batch_file(path, [&](BatchLine&& line) { lines.push_back(std::move(line)); });
  return lines;
}

std::string joined(const std::vector<std::string>& words) {
  std::string text;
  for (const std::string& w : words) text += (text.empty() ? "" : " ") + w;
  return quoted_value(text);
}

std::vector<std::string> arguments_without_batch(int argc, char** argv) {
  std::vector<std::string> kept;
  for (int a = 1; a < argc; ++a) {
    const std::string arg = argv[a];
    if (arg == "--batch" || arg == "--product") {
      ++a;  // its value
      continue;
    }
    if (arg.rfind("--batch=", 0) == 0 || arg.rfind("--product=", 0) == 0) continue;
    kept.push_back(arg);
  }
  return kept;
}

}  // namespace blockmm::driver
