// Blocks — the [KEY_START]…[KEY_END] regions of kernel sources that candidates replace.
//
// Contract (reference spec §1.7, with the fixes of issue #2):
//  * Keys scanned by tasks: REFERENCE, EVOLVE, USER_INSTRUCTIONS (kBlockKeys, in that order).
//  * Only files whose name ends with an allow-listed extension are scanned (kBlockExtensions), in sorted
//    key order. A scanned file that is not valid UTF-8 is kf::Error(kParse) naming the file.
//  * A marker is the substring "[KEY_START]" / "[KEY_END]" anywhere in a line (normally inside a comment);
//    the marker line itself is not content. Lines end at LF, CRLF or a lone CR (Python universal newlines).
//    Nested START, stray END, START and END of one key on one line, and an unclosed START are
//    kf::Error(kParse) naming the file and line (field "line N"); the message contains the reference's
//    text, e.g. "[EVOLVE_END] found without matching [EVOLVE_START] in k.cpp". Our fixes: an unclosed START
//    and START+END on one line are errors everywhere (the reference drops / misparses them), and
//    UpdateBlock validates the file exactly like GetBlock (the reference skips nested STARTs and stray ENDs
//    there and writes files its own get_block rejects).
//  * Content: the lines between the markers with leading/trailing whitespace-only lines (Python
//    str.isspace) removed, each line ending in "\n"; may be "". CRLF/CR are normalised to LF in extracted
//    content (the reference reads through universal newlines), but UpdateBlock keeps the file's bytes and
//    line endings (the reference normalises them).
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
/// The reference's list of scanned extensions (allowed_text_file_extensions), in its order: ".sycl", ".cu", ….
std::vector<std::string> BlockExtensions();

/// Extracts the blocks of one key from one file's text, in file order. Throws kf::Error(kParse)
/// (file = path) for invalid UTF-8 or malformed markers of `key` (markers of other keys are content).
std::vector<std::string> ParseBlocks(std::string_view text, std::string_view key, const std::string& path);

/// Extracts all blocks of `key` from every allow-listed file (reference get_block). Every file is checked
/// before throwing: one problem is rethrown as is; several give one kf::Error(kParse) whose message joins
/// them with "; " (file/field of the first), so a stray marker in one file cannot hide another's error.
BlockMap GetBlock(const MemoryFileMap& files, std::string_view key);

/// Extracts all three keys (each file decoded once); keys without blocks are absent. Errors as GetBlock,
/// gathered over all keys.
TaskBlocks GetAllBlocks(const MemoryFileMap& files);

/// Replaces block `block_index` of `key` in file `path` with `content` (spec §1.7 "Replacement": the file's
/// bytes through the START line, content, a newline if content does not end with one, the bytes from the
/// END line on). The newline used is the START line's terminator: in a CRLF file, content's bare "\n"
/// become "\r\n" (in a CR file, "\n"/"\r\n" become "\r"); other bytes are kept verbatim. Keeps the
/// file's mode; sets mtime to now (MemoryFileMap::Set). Throws kf::Error: kNotFound for a missing file
/// ("File not found: <path>"), a key without block ("Block with key 'K' not found in <path>") or an index out
/// of range ("Block index I out of range; only N 'K' block(s) in <path>"); kParse for invalid UTF-8 or
/// malformed markers; kInvalidArgument when `content` itself contains a marker of `key` (the rewritten
/// file would not parse).
void UpdateBlock(MemoryFileMap& files, std::string_view key, const std::string& path,
                 std::string_view content, size_t block_index = 0);

/// Returns the single file holding blocks of `key` in `blocks`. kf::Error(kNotFound) when `key` has no
/// block; kf::Error(kInvalidArgument) when there is more than one block ("Multiple blocks exist for key
/// 'K'. Provide a dict mapping key->file_path->list[content]." as the reference).
std::string FindPath(const TaskBlocks& blocks, std::string_view key);

/// Flattens one key's blocks: one block -> its content; several -> "### Block: <path> ###\n<content>"
/// parts joined by "\n"; none -> "" (reference blocks_to_str).
std::string BlocksToStr(const BlockMap& blocks);

/// JSON form {KEY: {path: [contents]}} (wire format, Task.encode "blocks"). Keys in kBlockKeys order
/// (REFERENCE, EVOLVE, USER_INSTRUCTIONS — the reference's dict order), other keys after them sorted;
/// paths sorted.
Json BlocksToJson(const TaskBlocks& blocks);
/// Inverse of BlocksToJson (any key order). Throws kf::Error(kParse) naming `source` and the JSON path
/// on a wrong shape.
TaskBlocks BlocksFromJson(const Json& j, const std::string& source);

}  // namespace kf
