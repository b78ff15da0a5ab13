#include "package_files.hpp"

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <set>
#include <system_error>

#include "common.hpp"

namespace attn::cli {
namespace {

namespace fs = std::filesystem;

constexpr std::string_view kFilesHeading = "Files written (FNV-1a 64 of the content as written, path):";
constexpr std::string_view kYamlHeading = "problem.yaml keys written:";


std::string_view trim(std::string_view text) {
  while (!text.empty() && (text.front() == ' ' || text.front() == '\t' || text.front() == '\r')) text.remove_prefix(1);
  while (!text.empty() && (text.back() == ' ' || text.back() == '\t' || text.back() == '\r')) text.remove_suffix(1);
  return text;
}

std::vector<std::string_view> lines_of(std::string_view text) {
  std::vector<std::string_view> lines;
  while (!text.empty()) {
    const std::size_t end = text.find('\n');
    lines.push_back(text.substr(0, end));
    if (end == std::string_view::npos) break;
    text.remove_prefix(end + 1);
  }
  return lines;
}

// The indented lines of the section under `heading`.
std::vector<std::string_view> section(std::string_view marker, std::string_view heading) {
  std::vector<std::string_view> out;
  bool inside = false;
  for (std::string_view line : lines_of(marker)) {
    if (line == heading) {
      inside = true;
    } else if (inside) {
      if (line.size() < 2 || line.substr(0, 2) != "  ") break;
      out.push_back(line.substr(2));
    }
  }
  return out;
}

// "key" of a top-level `key: value` line (not indented, not a comment, not a list item); "" else.
std::string_view top_level_key(std::string_view line) {
  if (line.empty() || line[0] == ' ' || line[0] == '\t' || line[0] == '#' || line[0] == '-') return {};
  const std::size_t colon = line.find(':');
  if (colon == std::string_view::npos || colon == 0) return {};
  if (colon + 1 < line.size() && line[colon + 1] != ' ' && line[colon + 1] != '\t' && line[colon + 1] != '\r')
    return {};  // "a:b" is a value
  return line.substr(0, colon);
}

std::string_view value_of(std::string_view line) {
  const std::size_t colon = line.find(':');
  return trim(line.substr(colon + 1));
}

Result<std::string, Error> read_file(const fs::path& path) { return read_input(path.string()); }

}  // namespace

std::string content_hash(std::string_view bytes) {
  std::uint64_t hash = 0xcbf29ce484222325ull;
  for (const char c : bytes) hash = (hash ^ static_cast<unsigned char>(c)) * 0x100000001b3ull;
  char text[17];
  std::snprintf(text, sizeof text, "%016llx", static_cast<unsigned long long>(hash));
  return text;
}

Manifest read_manifest(std::string_view marker_text) {
  Manifest manifest;
  for (std::string_view line : section(marker_text, kFilesHeading)) {  // "HASH PATH", PATH to the line's end
    if (line.size() > 17 && line[16] == ' ') manifest[std::string(line.substr(17))] = std::string(line.substr(0, 16));
  }
  return manifest;
}

std::string manifest_text(const Manifest& manifest) {
  std::string text = std::string(kFilesHeading) + "\n";
  for (const auto& [path, hash] : manifest) text += "  " + hash + " " + path + "\n";
  return text;
}

std::map<std::string, std::string> read_yaml_record(std::string_view marker_text) {
  std::map<std::string, std::string> keys;
  for (std::string_view line : section(marker_text, kYamlHeading)) {
    const std::string_view key = top_level_key(line);
    if (!key.empty()) keys[std::string(key)] = std::string(value_of(line));
  }
  return keys;
}

std::string yaml_record_text(std::string_view ours) {
  std::string text = std::string(kYamlHeading) + "\n";
  for (const auto& [key, value] : yaml_top_level(ours)) text += "  " + key + ": " + value + "\n";
  return text;
}

std::map<std::string, std::string> yaml_top_level(std::string_view text) {
  std::map<std::string, std::string> keys;
  for (std::string_view line : lines_of(text)) {
    const std::string_view key = top_level_key(line);
    if (!key.empty()) keys[std::string(key)] = std::string(value_of(line));
  }
  return keys;
}

std::string merge_problem_yaml(std::string_view existing, std::string_view ours,
                               const std::map<std::string, std::string>& previous, bool force,
                               std::vector<std::string>& kept) {
  const std::map<std::string, std::string> our_keys = yaml_top_level(ours);
  std::set<std::string> seen;
  std::string merged;
  for (std::string_view line : lines_of(existing)) {
    const std::string key(top_level_key(line));
    const auto mine = our_keys.find(key);
    if (key.empty() || mine == our_keys.end()) {
      merged += std::string(line) + "\n";
      continue;
    }
    seen.insert(key);
    const std::string value(value_of(line));
    const auto before = previous.find(key);
    const bool untouched = before != previous.end() && before->second == value;
    if (value.empty()) {  // a block (mapping or list) follows: the setter's, never replaced
      kept.push_back("problem.yaml key '" + key + "' (yours, a block value)");
      merged += std::string(line) + "\n";
      continue;
    }
    if (value == mine->second || untouched || force) {
      if (value != mine->second && !untouched) kept.push_back("problem.yaml key '" + key + "' replaced (--force)");
      merged += key + ": " + mine->second + "\n";
    } else {
      kept.push_back("problem.yaml key '" + key + "' (yours: " + value + "; attncheck's: " + mine->second +
                     "; --force replaces it)");
      merged += std::string(line) + "\n";
    }
  }
  for (std::string_view line : lines_of(ours)) {
    const std::string key(top_level_key(line));
    if (!key.empty() && !seen.count(key)) merged += std::string(line) + "\n";
  }
  return merged;
}

bool through_symlink(const std::string& out_text, const std::string& relative) {
  fs::path at(out_text);
  std::error_code error;
  for (const fs::path& part : fs::path(relative)) {
    at /= part;
    if (fs::is_symlink(fs::symlink_status(at, error))) return true;
  }
  return false;
}

WriteReport write_package(const std::string& out_text, const std::map<std::string, std::string>& files,
                          const Manifest& manifest, bool force, const std::string& marker,
                          const std::set<std::string>& merged) {
  const fs::path out(out_text);
  WriteReport report;
  // Until a file is handled, the earlier record stands: a run that stops halfway leaves a manifest
  // that still describes the folder (written files with their new hash, the rest as before).
  report.manifest = manifest;
  const auto fail = [&](Error error) {
    report.error = std::move(error);
    return report;
  };
  if (through_symlink(out, marker)) return fail(Error{"'" + (out / marker).string() + "' is a symbolic link: attncheck "
                                                       "never writes through one (replace it by a plain file)"});
  // What is in the folder now: regular files (symbolic links are the setter's and never followed).
  std::map<std::string, std::string> present;  // path -> hash
  std::error_code error;
  for (auto it = fs::recursive_directory_iterator(out, fs::directory_options::none, error);
       !error && it != fs::recursive_directory_iterator(); it.increment(error)) {
    if (it->is_symlink(error) || !it->is_regular_file(error)) continue;
    const std::string relative = fs::relative(it->path(), out, error).generic_string();
    if (relative == marker) continue;  // attncheck's own record, rewritten on every run
    auto text = read_file(it->path());
    if (!text) return fail(text.error());
    present[relative] = content_hash(*text);
  }
  if (error) return fail(Error{"cannot list '" + out.string() + "': " + error.message()});
  for (const auto& [path, text] : files) {
    if (path.find('\n') != std::string::npos || path.find('\r') != std::string::npos)
      return fail(Error{"cannot package a file whose name holds a line break: " + path});
  }
  for (const auto& [path, text] : files) {
    const fs::path target = out / path;
    const auto now = present.find(path);
    const auto ours = manifest.find(path);
    const bool exists = now != present.end();
    const std::string hash = content_hash(text);
    if (through_symlink(out, path)) {
      report.kept.push_back(path + " (a symbolic link, or inside one: attncheck never writes through one)");
      continue;
    }
    if (exists && now->second == hash) {
      report.written.push_back(path);  // already what it would be
      report.manifest[path] = hash;
      continue;
    }
    if (exists && !merged.count(path)) {
      if (ours == manifest.end()) {  // the setter's own file at a path of ours: never replaced
        report.kept.push_back(path + " (not written by attncheck; move it away for attncheck to write this path)");
        continue;
      }
      if (ours->second != now->second && !force) {
        report.kept.push_back(path + " (changed since attncheck wrote it; --force replaces it)");
        continue;  // still ours, still changed next time: its manifest entry stays
      }
    }
    const bool forced = exists && ours != manifest.end() && ours->second != now->second && !merged.count(path);
    if (auto made = make_directories(target.parent_path().string()); !made) return fail(made.error());
    if (auto written = write_file(target.string(), text); !written) return fail(written.error());
    (forced ? report.forced : exists ? report.replaced : report.written).push_back(path);
    report.manifest[path] = hash;
  }
  for (const auto& [path, hash] : manifest) {
    if (files.count(path)) continue;
    const auto now = present.find(path);
    if (now == present.end() || through_symlink(out, path)) {  // already gone, or not a file of ours any more
      report.manifest.erase(path);
      continue;
    }
    const bool changed = now->second != hash;
    if (changed && !force) {
      report.kept.push_back(path + " (changed since attncheck wrote it, no longer part of the package; --force "
                                   "removes it)");
      continue;
    }
    fs::remove(out / path, error);
    if (error) return fail(Error{"cannot remove '" + (out / path).string() + "': " + error.message()});
    report.manifest.erase(path);
    (changed ? report.forced : report.removed).push_back(path + (changed ? " (removed)" : ""));
  }
  for (const auto& [path, hash] : present) {
    if (!files.count(path) && !manifest.count(path)) report.kept.push_back(path + " (added by you)");
  }
  return report;
}

}  // namespace attn::cli
