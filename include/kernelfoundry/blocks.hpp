// Blocks — the [KEY_START]…[KEY_END] regions of kernel sources that candidates replace.
//
// Contract (reference spec §1.7, with the fixes of issue #2):
//  * Keys scanned by tasks: REFERENCE, EVOLVE, USER_INSTRUCTIONS (kBlockKeys, in that order).
//  * Only files whose name ends with an allow-listed extension are scanned (kBlockExtensions), in sorted
//    key order. A scanned file that is not valid UTF-8 is kf::Error(kParse) naming the file.
//  * A marker is the substring "[KEY_START]" / "[KEY_END]" anywhere in a line (normally inside a comment);
//    the marker line itself is not content. Nested START, stray END and (our fix) an unclosed START are
//    kf::Error(kParse) naming the file and line.
//  * Content: the lines between the markers with leading/trailing whitespace-only lines removed; it keeps
//    the final newline of its last line; may be "". CRLF is normalised to LF in extracted content (the
//    reference reads through universal newlines), but UpdateBlock keeps the file's CRLF line endings.
#pragma once

#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "kernelfoundry/memory_file_map.hpp"

namespace kf {

/// {relative_path: [content_0, content_1, …]} for one key, sorted by path.
using BlockMap = std::map<std::string, std::vector<std::string>>;
/// {KEY: BlockMap}; a key is present only when some file has a block for it.
using TaskBlocks = std::map<std::string, BlockMap>;

inline constexpr const char* kBlockKeys[] = {"REFERENCE", "EVOLVE", "USER_INSTRUCTIONS"};

/// True iff `path` is scanned for blocks (case-sensitive suffix match on the reference's list).
bool IsBlockFile(std::string_view path);

/// Extracts the blocks of one key from one file's text. Throws kf::Error(kParse) (file = path).
std::vector<std::string> ParseBlocks(std::string_view text, std::string_view key, const std::string& path);

/// Extracts all blocks of `key` from every allow-listed file (reference get_block).
BlockMap GetBlock(const MemoryFileMap& files, std::string_view key);

/// Extracts all three keys; keys without blocks are absent.
TaskBlocks GetAllBlocks(const MemoryFileMap& files);

/// Replaces block `block_index` of `key` in file `path` with `content` (a newline is appended when
/// content does not end with one). Keeps the file's mode; sets mtime to now; keeps CRLF endings.
/// Throws kf::Error(kNotFound) for a missing file or block index, kParse for malformed markers.
void UpdateBlock(MemoryFileMap& files, std::string_view key, const std::string& path,
                 std::string_view content, size_t block_index = 0);

/// Returns the single file holding blocks of `key` in `blocks`; kf::Error(kInvalidArgument) if there is
/// not exactly one file with exactly one block (the reference's "Multiple blocks exist…").
std::string FindPath(const TaskBlocks& blocks, std::string_view key);

/// Flattens one key's blocks: one block -> its content; several -> "### Block: <path> ###\n<content>"
/// parts joined by "\n"; none -> "" (reference blocks_to_str).
std::string BlocksToStr(const BlockMap& blocks);

/// JSON form {path: [contents]} / {KEY: {...}} (wire format).
Json BlocksToJson(const TaskBlocks& blocks);
TaskBlocks BlocksFromJson(const Json& j, const std::string& source);

}  // namespace kf
