// Writing a judge package into a folder that may hold an earlier one and a problem setter's work.
// `package` records what it wrote (path, size and a content hash) in its marker file, and on the
// next run replaces only files it wrote itself that nobody has changed since; a file the setter
// changed or added is kept and listed, problem.yaml keys the setter added or changed are kept.
// With `force`, changed files are replaced (and listed) too; files the setter added, and anything
// behind a symbolic link, are never touched.
#pragma once

#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "result.hpp"

namespace attn::cli {

/// A 64-bit FNV-1a hash of the bytes, as 16 hex digits: change detection, not security.
[[nodiscard]] std::string content_hash(std::string_view bytes);

/// What an earlier run wrote: path (relative, '/'-separated) -> content hash.
using Manifest = std::map<std::string, std::string>;

/// The "files" section of a marker text (lines "  HASH PATH" after "Files written"); an older
/// marker without one gives an empty manifest.
[[nodiscard]] Manifest read_manifest(std::string_view marker_text);

/// The section read_manifest reads back.
[[nodiscard]] std::string manifest_text(const Manifest& manifest);

/// The problem.yaml keys attncheck wrote last time, from the marker's "problem.yaml keys written"
/// section (empty for an older marker), and that section for `ours`.
[[nodiscard]] std::map<std::string, std::string> read_yaml_record(std::string_view marker_text);
[[nodiscard]] std::string yaml_record_text(std::string_view ours);

/// problem.yaml: `ours` (top-level `key: value` lines) merged into the setter's `existing` text.
/// Every line of `existing` stays, in order, except a top-level key of ours whose value is the one
/// attncheck wrote last time (`previous`, from the marker) or is missing: that one takes our value,
/// and keys of ours not in `existing` are appended. A key of ours the setter changed keeps the
/// setter's value unless `force`; `kept` lists those.
[[nodiscard]] std::string merge_problem_yaml(std::string_view existing, std::string_view ours,
                                             const std::map<std::string, std::string>& previous, bool force,
                                             std::vector<std::string>& kept);

/// The top-level scalar keys of a problem.yaml text (`key: value`, value trimmed).
[[nodiscard]] std::map<std::string, std::string> yaml_top_level(std::string_view text);

/// Does writing `relative` under `out` go through a symbolic link (the file itself or a folder on
/// the way)? attncheck never writes through one: its target may be anywhere, and is the setter's.
[[nodiscard]] bool through_symlink(const std::string& out, const std::string& relative);

/// What a write did, for the report printed afterwards.
struct WriteReport {
  std::vector<std::string> written, replaced, removed;
  std::vector<std::string> forced;  ///< the setter's changes to attncheck's files replaced or removed (--force)
  std::vector<std::string> kept;  ///< "PATH (why)": changed or added by the setter
  Manifest manifest;              ///< what is attncheck's afterwards (a kept changed file keeps its old hash)
  std::optional<Error> error;     ///< set when the run stopped; `manifest` still describes the folder
};

/// Writes `files` (relative path -> text) into `out`, which is new, empty, or holds an earlier
/// package whose `manifest` says what it wrote: files of ours unchanged since are replaced, or
/// removed when no longer part of the package; changed files of ours and files the setter added
/// are kept (with `force`, changed files of ours are replaced, or removed when no longer in the
/// package). The setter's own files, even at a path of ours, and anything reached through a
/// symbolic link are never written. `marker` (relative) is attncheck's record, written by the
/// caller afterwards (from `manifest`, also when `error` says the run stopped halfway); `merged`
/// paths hold text that already keeps the setter's work (problem.yaml) and are written whatever
/// their state. Every write is checked.
[[nodiscard]] WriteReport write_package(const std::string& out, const std::map<std::string, std::string>& files,
                                        const Manifest& manifest, bool force, const std::string& marker,
                                        const std::set<std::string>& merged);

}  // namespace attn::cli
